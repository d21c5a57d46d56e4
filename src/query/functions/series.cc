// series(collect, separator="\n", startmatch, endmatch, maxpause, maxduration, memlimit=1KiB):
// collects the values of the `collect` fields of a sequence of records into one row per series.
// A function over the whole sequence of its input rows (Stage::Kind::kRows), so it also runs per
// group nested in groupBy(function=series(...)).
//
// The rows are taken in @timestamp order (a stable sort; a row without a numeric @timestamp is
// in no series). Without startmatch a row begins a series when none is open; with it only a row
// passing the startmatch filter does (and it always does, ending the open one), so rows outside
// start..end runs are left out. A row further than maxpause from the series' last row, or than
// maxduration from its first, ends the open series before it. A row passing endmatch ends its
// series after joining it. Each series gives @timestamp (its first row's), _duration (last minus
// first, ms) and per collect field its values in order joined by the separator (rows lacking the
// field add nothing; no value: no field). memlimit bounds the bytes of collected values over the
// whole input: from the first value that does not fit on, no value is collected (a warning says
// so).
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "query/functions/list.h"
#include "query/functions/transforms.h"
#include "query/record.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "collect", .type = Type::kFields, .unnamed = true, .required = true},
    {.name = "separator", .type = Type::kString},
    {.name = "startmatch", .type = Type::kRaw},
    {.name = "endmatch", .type = Type::kRaw},
    {.name = "maxpause", .type = Type::kSpan},
    {.name = "maxduration", .type = Type::kSpan},
    {.name = "memlimit", .type = Type::kString, .default_value = "\"1KiB\""},
};

constexpr int64_t kMaxMemlimit = int64_t{16} << 20;

struct Options {
  std::vector<std::string> collect;
  std::string separator = "\n";
  std::vector<Stage> start, end;  // empty: not given
  int64_t maxpause_ms = 0;        // 0: none
  int64_t maxduration_ms = 0;     // 0: none
  int64_t memlimit = 1024;
};

class Series final : public RowsFunction {
 public:
  explicit Series(Options opt) : opt_(std::move(opt)) {}

  std::vector<Row> Run(std::vector<Row> rows, std::vector<std::string>* warnings) const override {
    std::vector<std::pair<double, size_t>> order;  // (timestamp, input index)
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
    bool open = false;
    double first = 0, last = 0;
    std::vector<std::optional<std::string>> values(opt_.collect.size());
    int64_t bytes = 0;
    bool cut = false;
    auto close = [&]() {
      if (!open) return;
      Row r;
      r.emplace_back("@timestamp", static_cast<int64_t>(first));
      r.emplace_back("_duration", static_cast<int64_t>(last - first));
      for (size_t f = 0; f < opt_.collect.size(); ++f) {
        if (values[f]) r.emplace_back(opt_.collect[f], std::move(*values[f]));
        values[f].reset();
      }
      out.push_back(std::move(r));
      open = false;
    };
    for (size_t k = 0; k < order.size(); ++k) {
      const double ts = order[k].first;
      const Row& row = rows[order[k].second];
      if (open &&
          ((opt_.maxpause_ms > 0 && ts - last > static_cast<double>(opt_.maxpause_ms)) ||
           (opt_.maxduration_ms > 0 && ts - first > static_cast<double>(opt_.maxduration_ms)))) {
        close();
      }
      if (!opt_.start.empty() && Passes(opt_.start, row, k)) {
        close();
      } else if (!opt_.start.empty() && !open) {
        continue;  // outside a start..end run
      }
      if (!open) {
        open = true;
        first = ts;
      }
      last = ts;
      for (size_t f = 0; f < opt_.collect.size(); ++f) {
        for (const auto& [name, v] : row) {
          if (name != opt_.collect[f]) continue;
          std::string text = ValueToString(v);
          const int64_t add =
              static_cast<int64_t>(text.size() + (values[f] ? opt_.separator.size() : 0));
          if (cut || bytes + add > opt_.memlimit) {
            cut = true;
            break;
          }
          bytes += add;
          if (values[f]) {
            *values[f] += opt_.separator;
            *values[f] += text;
          } else {
            values[f] = std::move(text);
          }
          break;
        }
      }
      if (!opt_.end.empty() && Passes(opt_.end, row, k)) close();
    }
    close();
    if (cut) {
      warnings->push_back("series(): values beyond memlimit (" + std::to_string(opt_.memlimit) +
                          " bytes) were left out");
    }
    return out;
  }

 private:
  static bool Passes(const std::vector<Stage>& stages, const Row& row, size_t k) {
    RecordKey key;
    key.offset = static_cast<int64_t>(k);
    return RunsThrough(stages, Record::FromRow(row, key), nullptr);
  }

  Options opt_;
};

// A size such as 1024, 1KiB, 4KB, 2MiB (KB/KiB = 1024 bytes, MB/MiB = 1024 KiB); -1 if invalid.
int64_t ParseSize(std::string_view s) {
  size_t i = 0;
  int64_t n = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
    if (n > kMaxMemlimit) return -1;
    n = n * 10 + (s[i] - '0');
    ++i;
  }
  if (i == 0) return -1;
  std::string unit;
  for (; i < s.size(); ++i) {
    if (s[i] != ' ')
      unit.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(s[i]))));
  }
  if (unit.empty() || unit == "b") return n;
  if (unit == "kb" || unit == "kib" || unit == "k") return n * 1024;
  if (unit == "mb" || unit == "mib" || unit == "m") return n * 1024 * 1024;
  return -1;
}

bool Build(Call& c, Stage* st) {
  Options opt;
  opt.collect = c.Fields("collect");
  if (c.Given("separator")) opt.separator = c.String("separator");
  if (c.Given("startmatch") &&
      !SubqueryStages(c, "startmatch", *c.Value("startmatch"), /*filter_call=*/true, &opt.start)) {
    return false;
  }
  if (c.Given("endmatch") &&
      !SubqueryStages(c, "endmatch", *c.Value("endmatch"), /*filter_call=*/true, &opt.end)) {
    return false;
  }
  opt.maxpause_ms = c.Limit("maxpause");
  opt.maxduration_ms = c.Limit("maxduration");
  opt.memlimit = ParseSize(c.String("memlimit"));
  if (opt.memlimit < 1 || opt.memlimit > kMaxMemlimit) {
    c.BadParam("memlimit", "a size from 1 byte to 16MiB such as 1KiB or 4096");
    return false;
  }
  st->kind = Stage::Kind::kRows;
  st->rows_function = std::make_shared<const Series>(std::move(opt));
  return true;
}

}  // namespace

const Function kSeries = {
    .name = "series",
    .kind = Kind::kCollector,
    .params = kParams,
    .doc = "collects the values of fields of a series of events into one row per series",
    .stage = &Build,
};

}  // namespace sediment::query::functions
