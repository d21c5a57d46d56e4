#include "metrics/metrics.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "metrics/process.h"

namespace sediment::metrics {
namespace {

// A reader of the text exposition format 0.0.4, independent of the writer: every sample line is
// parsed back (name, labels with escapes undone, value) and checked against its family's TYPE.
struct Parsed {
  struct Sample {
    std::string name;
    std::map<std::string, std::string> labels;
    double value = 0;
  };
  std::map<std::string, std::string> help, type;  // family name -> text
  std::vector<Sample> samples;

  // The value of the one sample with this name and labels; NaN when absent.
  double Value(const std::string& name, const std::map<std::string, std::string>& labels = {}) {
    for (const Sample& s : samples) {
      if (s.name == name && s.labels == labels) return s.value;
    }
    return std::nan("");
  }
};

double ParseValue(const std::string& v) {
  if (v == "+Inf") return INFINITY;
  if (v == "-Inf") return -INFINITY;
  if (v == "NaN") return std::nan("");
  size_t used = 0;
  double d = std::stod(v, &used);
  EXPECT_EQ(used, v.size()) << v;
  return d;
}

Parsed Parse(const std::string& text) {
  Parsed p;
  std::istringstream in(text);
  std::string family;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# HELP ", 0) == 0) {
      const size_t sp = line.find(' ', 7);
      std::string help = line.substr(sp + 1), out;
      for (size_t i = 0; i < help.size(); ++i) {
        if (help[i] == '\\' && i + 1 < help.size()) {
          out += help[i + 1] == 'n' ? '\n' : help[i + 1];
          ++i;
        } else {
          out += help[i];
        }
      }
      family = line.substr(7, sp - 7);
      EXPECT_EQ(p.help.count(family), 0u) << "family twice: " << family;
      p.help[family] = out;
      continue;
    }
    if (line.rfind("# TYPE ", 0) == 0) {
      const size_t sp = line.find(' ', 7);
      EXPECT_EQ(line.substr(7, sp - 7), family) << "TYPE must follow its HELP";
      p.type[family] = line.substr(sp + 1);
      continue;
    }
    EXPECT_FALSE(line.empty() || line[0] == '#') << line;
    Parsed::Sample s;
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') s.name += line[i++];
    EXPECT_TRUE(ValidMetricName(s.name)) << line;
    EXPECT_EQ(s.name.rfind(family, 0), 0u) << "sample outside its family: " << line;
    if (line[i] == '{') {
      ++i;
      while (line[i] != '}') {
        std::string k, v;
        while (line[i] != '=') k += line[i++];
        EXPECT_EQ(line[++i], '"') << line;
        ++i;
        while (line[i] != '"') {
          if (line[i] == '\\') {
            ++i;
            EXPECT_TRUE(line[i] == '\\' || line[i] == '"' || line[i] == 'n') << line;
            v += line[i] == 'n' ? '\n' : line[i];
          } else {
            EXPECT_NE(line[i], '\n');
            v += line[i];
          }
          ++i;
        }
        ++i;
        if (line[i] == ',') ++i;
        s.labels[k] = v;
      }
      ++i;
    }
    EXPECT_EQ(line[i], ' ') << line;
    s.value = ParseValue(line.substr(i + 1));
    p.samples.push_back(s);
  }
  return p;
}

TEST(Metrics, CountersRenderWithTotalAndLabels) {
  Registry r;
  CounterFamily& req = r.AddCounter("t_requests", "Requests.", {"endpoint", "status"});
  Counter& ok = req.With({"/a", "200"});
  ok.Inc();
  ok.Inc(4);
  req.With({"/a", "401"}).Inc();
  EXPECT_EQ(&req.With({"/a", "200"}), &ok);  // one instrument per label set
  r.AddCounter("t_plain", "No labels.");
  Parsed p = Parse(r.Render());
  EXPECT_EQ(p.type["t_requests_total"], "counter");
  EXPECT_EQ(p.help["t_requests_total"], "Requests.");
  EXPECT_EQ(p.Value("t_requests_total", {{"endpoint", "/a"}, {"status", "200"}}), 5);
  EXPECT_EQ(p.Value("t_requests_total", {{"endpoint", "/a"}, {"status", "401"}}), 1);
  EXPECT_EQ(p.Value("t_plain_total"), 0);  // a family without labels shows 0 from the start
  EXPECT_EQ(p.samples.size(), 3u);
}

TEST(Metrics, LabelValuesAndHelpAreEscaped) {
  Registry r;
  const std::string nasty = "a\"b\\c\nd}e,f=g";
  r.AddGauge("t_g", "line one\nback\\slash", {"repo"}).With({nasty}).Set(-2.5);
  const std::string text = r.Render();
  EXPECT_NE(text.find(R"(repo="a\"b\\c\nd}e,f=g")"), std::string::npos) << text;
  Parsed p = Parse(text);
  EXPECT_EQ(p.help["t_g"], "line one\nback\\slash");
  EXPECT_EQ(p.type["t_g"], "gauge");
  EXPECT_EQ(p.Value("t_g", {{"repo", nasty}}), -2.5);
}

TEST(Metrics, HistogramBucketsAreCumulativeWithSumAndCount) {
  Registry r;
  HistogramFamily& h = r.AddHistogram("t_seconds", "Latency.", {"kind"}, {0.1, 1, 10});
  Histogram& q = h.With({"q"});
  for (double v : {0.05, 0.1, 0.5, 2.0, 20.0, 20.0}) q.Observe(v);
  Parsed p = Parse(r.Render());
  EXPECT_EQ(p.type["t_seconds"], "histogram");
  auto bucket = [&](const std::string& le) {
    return p.Value("t_seconds_bucket", {{"kind", "q"}, {"le", le}});
  };
  EXPECT_EQ(bucket("0.1"), 2);  // le is inclusive
  EXPECT_EQ(bucket("1"), 3);
  EXPECT_EQ(bucket("10"), 4);
  EXPECT_EQ(bucket("+Inf"), 6);
  EXPECT_EQ(p.Value("t_seconds_count", {{"kind", "q"}}), 6);
  EXPECT_DOUBLE_EQ(p.Value("t_seconds_sum", {{"kind", "q"}}), 42.65);
}

TEST(Metrics, ConcurrentUpdatesAreExact) {
  Registry r;
  Counter& c = r.AddCounter("t_c", "c").With({});
  Gauge& g = r.AddGauge("t_g", "g").With({});
  Histogram& h = r.AddHistogram("t_h", "h", {}, {1}).With({});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 100000; ++i) {
        c.Inc();
        g.Inc();
        g.Dec();
        g.Inc();
        h.Observe(0.5);
      }
    });
  }
  for (auto& t : threads) t.join();
  Parsed p = Parse(r.Render());
  EXPECT_EQ(p.Value("t_c_total"), 400000);
  EXPECT_EQ(p.Value("t_g"), 400000);
  EXPECT_EQ(p.Value("t_h_count"), 400000);
  EXPECT_EQ(p.Value("t_h_bucket", {{"le", "1"}}), 400000);
  EXPECT_EQ(p.Value("t_h_sum"), 200000);
}

TEST(Metrics, CollectorsWriteAtRenderTime) {
  Registry r;
  int calls = 0;
  r.AddCollector([&](Writer& w) {
    ++calls;
    w.Begin("t_lag_events", Type::kGauge, "Lag.");
    w.Sample({{"partition", "0"}}, 7);
    w.Sample({{"partition", "1"}}, calls);
    w.Begin("t_fetches", Type::kCounter, "Fetches.");
    w.Sample({}, 3);
  });
  r.Render();
  Parsed p = Parse(r.Render());
  EXPECT_EQ(p.Value("t_lag_events", {{"partition", "0"}}), 7);
  EXPECT_EQ(p.Value("t_lag_events", {{"partition", "1"}}), 2);
  EXPECT_EQ(p.type["t_fetches_total"], "counter");
  EXPECT_EQ(p.Value("t_fetches_total"), 3);
}

TEST(Metrics, ValuesAreFormattedAsPrometheusReadsThem) {
  EXPECT_EQ(FormatValue(0), "0");
  EXPECT_EQ(FormatValue(12345678901234.0), "12345678901234");
  EXPECT_EQ(FormatValue(-3), "-3");
  EXPECT_EQ(FormatValue(0.25), "0.25");
  EXPECT_EQ(FormatValue(INFINITY), "+Inf");
  EXPECT_EQ(FormatValue(-INFINITY), "-Inf");
  EXPECT_EQ(FormatValue(std::nan("")), "NaN");
  EXPECT_EQ(std::stod(FormatValue(0.1 + 0.2)), 0.1 + 0.2);  // round-trips
}

TEST(Metrics, NamesAreChecked) {
  EXPECT_TRUE(ValidMetricName("sediment_x:y_1"));
  EXPECT_FALSE(ValidMetricName("1x"));
  EXPECT_FALSE(ValidMetricName("a-b"));
  EXPECT_FALSE(ValidMetricName(""));
  EXPECT_TRUE(ValidLabelName("repo"));
  EXPECT_FALSE(ValidLabelName("a:b"));
  EXPECT_FALSE(ValidLabelName("__reserved"));
}

TEST(MetricsDeathTest, MisuseAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Registry r;
        r.AddCounter("t_x", "x");
        r.AddGauge("t_x", "again");
      },
      "");
  EXPECT_DEATH(
      {
        Registry r;
        r.AddCounter("t_y", "y", {"a"}).With({"1", "2"});
      },
      "");
  EXPECT_DEATH(
      {
        Registry r;
        r.AddCounter("t_requests_total", "named with _total");
      },
      "");
  EXPECT_DEATH(
      {
        Registry r;
        r.AddHistogram("t_h", "h", {}, {1, 1});
      },
      "");
}

TEST(Metrics, ProcessCollectorReadsProc) {
  Registry r;
  AddProcessCollector(r);
  Parsed p = Parse(r.Render());
  EXPECT_EQ(p.type["process_cpu_seconds_total"], "counter");
  EXPECT_GE(p.Value("process_cpu_seconds_total"), 0);
  EXPECT_GT(p.Value("process_resident_memory_bytes"), 1 << 20);
  EXPECT_GE(p.Value("process_open_fds"), 3);
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const double start = p.Value("process_start_time_seconds");
  EXPECT_LE(start, now + 1);
  EXPECT_GT(start, now - 3600);  // this test process started within the hour
}

}  // namespace
}  // namespace sediment::metrics
