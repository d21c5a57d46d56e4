// Prometheus instruments and their text exposition (format 0.0.4). Contract: metrics/README.md.
//
// A Registry owns metric families; a family hands out one instrument (Counter, Gauge, Histogram)
// per label-value set. Resolve a label set once (With) and keep the reference: updating an
// instrument is one relaxed atomic operation (a Histogram: two, plus a short search of its
// bounds), no lock and no lookup. Instruments live as long as their Registry; references to them
// stay valid.
//
// Values that mirror state the node already keeps (lag, segments, backlogs) are not pushed:
// a Collector writes them at scrape time through a Writer.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/mutex.h"

namespace sediment::metrics {

enum class Type { kCounter, kGauge, kHistogram };

// Label name -> value pairs of one sample, in the order written.
using Labels = std::vector<std::pair<std::string, std::string>>;

// A monotonically increasing count. Thread-safe.
class Counter {
 public:
  void Inc(uint64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

// A value that goes up and down. Thread-safe.
class Gauge {
 public:
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  void Add(double d) { value_.fetch_add(d, std::memory_order_relaxed); }
  void Inc() { Add(1); }
  void Dec() { Add(-1); }
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// Observations counted in fixed buckets (upper bounds, strictly increasing, finite; +Inf is
// implicit), with their sum. Thread-safe; a snapshot read while observations run may show a
// count and a sum from slightly different instants (as every Prometheus client library).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void Observe(double v);

  struct Snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> cumulative;  // per bound, then +Inf (== count)
    uint64_t count = 0;
    double sum = 0;
  };
  Snapshot Read() const;

 private:
  const std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // bounds_.size() + 1, not cumulative
  std::atomic<double> sum_{0};
};

// Bucket bounds for latencies in seconds: 1 ms .. 60 s.
std::vector<double> LatencyBuckets();

// Writes samples in the text exposition format 0.0.4. Families must be written whole (Begin, then
// its samples); a name must not be begun twice in one exposition.
class Writer {
 public:
  // `name`: a metric name ([a-zA-Z_:][a-zA-Z0-9_:]*). A counter's name is given without "_total":
  // HELP, TYPE and its samples carry `name_total`.
  void Begin(std::string_view name, Type type, std::string_view help);
  // A sample of the family begun last (a counter or gauge): `value` as Prometheus prints it.
  void Sample(const Labels& labels, double value);
  // The _bucket, _sum and _count samples of a histogram family begun last.
  void HistogramSamples(const Labels& labels, const Histogram::Snapshot& s);
  std::string Take() { return std::move(out_); }

 private:
  void Line(std::string_view name, const Labels& labels, std::string_view extra_name,
            std::string_view extra_value, std::string_view value);
  std::string out_;
  std::string name_;  // of the family begun last, with "_total" for a counter
};

// Escapes for the format: label values (\\, \", \n) and HELP text (\\, \n).
std::string EscapeLabelValue(std::string_view v);
std::string EscapeHelp(std::string_view v);
// A sample value as the format writes it: integers without a fraction, "+Inf", "-Inf", "NaN".
std::string FormatValue(double v);
bool ValidMetricName(std::string_view name);
bool ValidLabelName(std::string_view name);

// One family: instruments of type M by label values (as many values as label names). Thread-safe.
template <typename M>
class Family {
 public:
  // The instrument of these label values, created on first use. Takes a lock: resolve once and
  // keep the reference on hot paths. The number of values must match the label names (checked:
  // a mismatch is a programming error and aborts).
  M& With(std::initializer_list<std::string_view> values) {
    return WithVector(std::vector<std::string>(values.begin(), values.end()));
  }
  M& WithVector(std::vector<std::string> values);

  const std::string& name() const { return name_; }

 private:
  friend class Registry;
  Family(std::string name, std::string help, std::vector<std::string> label_names,
         std::function<std::unique_ptr<M>()> make)
      : name_(std::move(name)),
        help_(std::move(help)),
        label_names_(std::move(label_names)),
        make_(std::move(make)) {}
  void Render(Type type, Writer& w) const;

  const std::string name_;
  const std::string help_;
  const std::vector<std::string> label_names_;
  const std::function<std::unique_ptr<M>()> make_;
  mutable Mutex mu_;
  std::map<std::vector<std::string>, std::unique_ptr<M>> instruments_ GUARDED_BY(mu_);
};

using CounterFamily = Family<Counter>;
using GaugeFamily = Family<Gauge>;
using HistogramFamily = Family<Histogram>;

// Writes scrape-time families. Called on the scraping thread; must not block for long.
using Collector = std::function<void(Writer&)>;

// The families and collectors of one process (or one test). Adding is thread-safe; names must be
// valid and distinct (a bad or repeated name, or bad label names or bounds, is a programming
// error and aborts). Render is thread-safe and may run while instruments are updated.
class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // `name` without "_total" (rendered as name_total).
  CounterFamily& AddCounter(std::string name, std::string help,
                            std::vector<std::string> label_names = {});
  GaugeFamily& AddGauge(std::string name, std::string help,
                        std::vector<std::string> label_names = {});
  HistogramFamily& AddHistogram(std::string name, std::string help,
                                std::vector<std::string> label_names, std::vector<double> bounds);
  // Runs at every Render, after the families, in the order added.
  void AddCollector(Collector collector);

  // Every family in the order added (HELP and TYPE even before its first instrument; a family
  // without labels has its one instrument from the start), then every collector's output.
  std::string Render() const;

 private:
  void CheckNew(const std::string& name, const std::vector<std::string>& label_names) REQUIRES(mu_);
  mutable Mutex mu_;
  std::vector<std::string> names_ GUARDED_BY(mu_);
  std::vector<std::unique_ptr<CounterFamily>> counters_ GUARDED_BY(mu_);
  std::vector<std::unique_ptr<GaugeFamily>> gauges_ GUARDED_BY(mu_);
  std::vector<std::unique_ptr<HistogramFamily>> histograms_ GUARDED_BY(mu_);
  // Render order: (type, index into its vector).
  std::vector<std::pair<Type, size_t>> order_ GUARDED_BY(mu_);
  std::vector<Collector> collectors_ GUARDED_BY(mu_);
};

}  // namespace sediment::metrics
