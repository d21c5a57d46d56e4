// session(function=count(as=_count), maxpause=15m): collects its input into sessions, runs of
// records no more than `maxpause` apart in @timestamp, and outputs one row per session with the
// aggregates `function` over the session's records. A function over the whole sequence of its
// input rows (Stage::Kind::kRows), mostly used nested in groupBy(function=session(...)), where
// it runs per group and each output row also carries the group's key.
//
// The rows are taken in @timestamp order (a stable sort of the input); a record without a
// numeric @timestamp is part of no session. Sessions are output oldest first. The output rows
// hold only the aggregates' fields (LogScale documents no other output field).
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "query/aggregate.h"
#include "query/functions/list.h"
#include "query/functions/transforms.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "function",
     .type = Type::kMetrics,
     .unnamed = true,
     .default_value = "count(as=_count)"},
    {.name = "maxpause", .type = Type::kSpan, .default_value = "15m"},
};

class SessionFunction final : public RowsFunction {
 public:
  SessionFunction(std::shared_ptr<const Stage> metrics, int64_t maxpause_ms)
      : metrics_(std::move(metrics)), maxpause_ms_(maxpause_ms) {}

  std::vector<Row> Run(std::vector<Row> rows, std::vector<std::string>* warnings) const override {
    // (timestamp, input index) of the rows with a timestamp, in time order.
    std::vector<std::pair<double, size_t>> order;
    for (size_t i = 0; i < rows.size(); ++i) {
      for (const auto& [k, v] : rows[i]) {
        if (k != "@timestamp") continue;
        if (std::optional<double> ts = ValueToNumber(v)) order.emplace_back(*ts, i);
        break;
      }
    }
    std::stable_sort(order.begin(), order.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<Row> out;
    std::unique_ptr<Collector> session;
    auto finish = [&]() {
      if (session == nullptr) return;
      for (Row& r : session->Finish(warnings)) out.push_back(std::move(r));
      session.reset();
    };
    for (size_t k = 0; k < order.size(); ++k) {
      if (k > 0 && order[k].first - order[k - 1].first > static_cast<double>(maxpause_ms_)) {
        finish();
      }
      if (session == nullptr) session = NewCollector(*metrics_, CollectorContext{});
      RecordKey key;
      key.offset = static_cast<int64_t>(k);
      session->Add(Record::FromRow(std::move(rows[order[k].second]), key));
    }
    finish();
    return out;
  }

 private:
  std::shared_ptr<const Stage> metrics_;  // a kAggregate stage without grouping
  int64_t maxpause_ms_;
};

bool Build(Call& c, Stage* st) {
  const int64_t maxpause = c.Limit("maxpause");
  if (maxpause <= 0) {
    c.BadParam("maxpause", "a time span such as 15m or 30s");
    return false;
  }
  std::vector<Metric> metrics = c.TakeMetrics("function");
  if (metrics.empty()) metrics.push_back(CountMetric(c.position()));
  if (!CheckMetricNames(metrics, c.name(), c.err())) return false;
  auto agg = std::make_shared<Stage>();
  agg->kind = Stage::Kind::kAggregate;
  agg->grouping = Stage::Grouping::kNone;
  agg->function = c.name();
  agg->metrics = std::move(metrics);
  st->kind = Stage::Kind::kRows;
  st->rows_function = std::make_shared<const SessionFunction>(std::move(agg), maxpause);
  return true;
}

}  // namespace

const Function kSession = {
    .name = "session",
    .kind = Kind::kCollector,
    .params = kParams,
    .doc = "aggregates over sessions of records no more than maxpause apart",
    .stage = &Build,
};

}  // namespace sediment::query::functions
