#include "metrics/metrics.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace sediment::metrics {
namespace {

[[noreturn]] void Misuse(const std::string& what) {
  spdlog::critical("metrics: {}", what);
  std::abort();
}

std::string_view TypeName(Type t) {
  switch (t) {
    case Type::kCounter:
      return "counter";
    case Type::kGauge:
      return "gauge";
    case Type::kHistogram:
      return "histogram";
  }
  return "untyped";
}

void CheckBounds(const std::vector<double>& bounds) {
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i]) || (i > 0 && bounds[i] <= bounds[i - 1])) {
      Misuse("histogram bounds must be finite and strictly increasing");
    }
  }
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)),
      buckets_(std::make_unique<std::atomic<uint64_t>[]>(bounds_.size() + 1)) {
  CheckBounds(bounds_);
  for (size_t i = 0; i <= bounds_.size(); ++i) buckets_[i].store(0, std::memory_order_relaxed);
}

void Histogram::Observe(double v) {
  // The first bound >= v: Prometheus buckets are "less than or equal" (le).
  const size_t i =
      static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(v, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::Read() const {
  Snapshot s;
  s.bounds = bounds_;
  uint64_t total = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    total += buckets_[i].load(std::memory_order_relaxed);
    s.cumulative.push_back(total);
  }
  s.count = total;
  s.sum = sum_.load(std::memory_order_relaxed);
  return s;
}

std::vector<double> LatencyBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}

std::string EscapeLabelValue(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string EscapeHelp(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  // Integral values (counts, bytes) print without an exponent up to 2^63.
  if (v == std::trunc(v) && std::fabs(v) < 9.2e18) {
    return fmt::format("{}", static_cast<int64_t>(v));
  }
  return fmt::format("{}", v);  // shortest form that reads back to the same double
}

bool ValidMetricName(std::string_view name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

bool ValidLabelName(std::string_view name) {
  return ValidMetricName(name) && name.find(':') == std::string_view::npos &&
         !name.starts_with("__");
}

void Writer::Begin(std::string_view name, Type type, std::string_view help) {
  name_ = std::string(name);
  if (type == Type::kCounter) name_ += "_total";
  out_ += "# HELP " + name_ + " " + EscapeHelp(help) + "\n";
  out_ += "# TYPE " + name_ + " ";
  out_ += TypeName(type);
  out_ += "\n";
}

void Writer::Line(std::string_view name, const Labels& labels, std::string_view extra_name,
                  std::string_view extra_value, std::string_view value) {
  out_ += name;
  if (!labels.empty() || !extra_name.empty()) {
    out_ += '{';
    bool first = true;
    for (const auto& [k, v] : labels) {
      if (!first) out_ += ',';
      first = false;
      out_ += k + "=\"" + EscapeLabelValue(v) + "\"";
    }
    if (!extra_name.empty()) {
      if (!first) out_ += ',';
      out_ += std::string(extra_name) + "=\"" + std::string(extra_value) + "\"";
    }
    out_ += '}';
  }
  out_ += ' ';
  out_ += value;
  out_ += '\n';
}

void Writer::Sample(const Labels& labels, double value) {
  Line(name_, labels, "", "", FormatValue(value));
}

void Writer::HistogramSamples(const Labels& labels, const Histogram::Snapshot& s) {
  const std::string bucket = name_ + "_bucket";
  for (size_t i = 0; i < s.cumulative.size(); ++i) {
    const std::string le = i < s.bounds.size() ? FormatValue(s.bounds[i]) : "+Inf";
    Line(bucket, labels, "le", le, FormatValue(static_cast<double>(s.cumulative[i])));
  }
  Line(name_ + "_sum", labels, "", "", FormatValue(s.sum));
  Line(name_ + "_count", labels, "", "", FormatValue(static_cast<double>(s.count)));
}

template <typename M>
M& Family<M>::WithVector(std::vector<std::string> values) {
  if (values.size() != label_names_.size()) {
    Misuse(fmt::format("{}: {} label values for {} labels", name_, values.size(),
                       label_names_.size()));
  }
  MutexLock lock(&mu_);
  auto it = instruments_.find(values);
  if (it == instruments_.end()) it = instruments_.emplace(std::move(values), make_()).first;
  return *it->second;
}

namespace {
void RenderOne(const Counter& c, const Labels& l, Writer& w) {
  w.Sample(l, static_cast<double>(c.Value()));
}
void RenderOne(const Gauge& g, const Labels& l, Writer& w) { w.Sample(l, g.Value()); }
void RenderOne(const Histogram& h, const Labels& l, Writer& w) { w.HistogramSamples(l, h.Read()); }
}  // namespace

template <typename M>
void Family<M>::Render(Type type, Writer& w) const {
  w.Begin(name_, type, help_);
  MutexLock lock(&mu_);
  for (const auto& [values, m] : instruments_) {
    Labels labels;
    for (size_t i = 0; i < values.size(); ++i) labels.emplace_back(label_names_[i], values[i]);
    RenderOne(*m, labels, w);
  }
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

void Registry::CheckNew(const std::string& name, const std::vector<std::string>& label_names) {
  if (!ValidMetricName(name)) Misuse("invalid metric name '" + name + "'");
  if (std::find(names_.begin(), names_.end(), name) != names_.end()) {
    Misuse("metric '" + name + "' added twice");
  }
  for (const std::string& l : label_names) {
    if (!ValidLabelName(l) || l == "le") Misuse(name + ": invalid label name '" + l + "'");
  }
  names_.push_back(name);
}

CounterFamily& Registry::AddCounter(std::string name, std::string help,
                                    std::vector<std::string> label_names) {
  if (name.ends_with("_total")) Misuse("counter '" + name + "' is named without _total");
  MutexLock lock(&mu_);
  CheckNew(name, label_names);
  const bool plain = label_names.empty();
  counters_.emplace_back(new CounterFamily(std::move(name), std::move(help), std::move(label_names),
                                           [] { return std::make_unique<Counter>(); }));
  order_.emplace_back(Type::kCounter, counters_.size() - 1);
  if (plain) counters_.back()->With({});
  return *counters_.back();
}

GaugeFamily& Registry::AddGauge(std::string name, std::string help,
                                std::vector<std::string> label_names) {
  MutexLock lock(&mu_);
  CheckNew(name, label_names);
  const bool plain = label_names.empty();
  gauges_.emplace_back(new GaugeFamily(std::move(name), std::move(help), std::move(label_names),
                                       [] { return std::make_unique<Gauge>(); }));
  order_.emplace_back(Type::kGauge, gauges_.size() - 1);
  if (plain) gauges_.back()->With({});
  return *gauges_.back();
}

HistogramFamily& Registry::AddHistogram(std::string name, std::string help,
                                        std::vector<std::string> label_names,
                                        std::vector<double> bounds) {
  CheckBounds(bounds);
  MutexLock lock(&mu_);
  CheckNew(name, label_names);
  const bool plain = label_names.empty();
  histograms_.emplace_back(
      new HistogramFamily(std::move(name), std::move(help), std::move(label_names),
                          [bounds] { return std::make_unique<Histogram>(bounds); }));
  order_.emplace_back(Type::kHistogram, histograms_.size() - 1);
  if (plain) histograms_.back()->With({});
  return *histograms_.back();
}

void Registry::AddCollector(Collector collector) {
  MutexLock lock(&mu_);
  collectors_.push_back(std::move(collector));
}

std::string Registry::Render() const {
  Writer w;
  std::vector<Collector> collectors;
  {
    MutexLock lock(&mu_);
    for (const auto& [type, i] : order_) {
      switch (type) {
        case Type::kCounter:
          counters_[i]->Render(type, w);
          break;
        case Type::kGauge:
          gauges_[i]->Render(type, w);
          break;
        case Type::kHistogram:
          histograms_[i]->Render(type, w);
          break;
      }
    }
    collectors = collectors_;
  }
  for (const Collector& c : collectors) c(w);
  return w.Take();
}

}  // namespace sediment::metrics
