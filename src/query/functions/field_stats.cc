// fieldstats(limit=1000) and fieldset(): what fields the input rows carry. Functions over the
// whole input (Stage::Kind::kRows): events with their built-ins (@timestamp, @rawstring, @id,
// @ingesttimestamp), #repo and tags, or the rows of an earlier aggregate.
//
// - fieldstats(): one row per #type and field name: `#type` (absent for rows without #type),
//   `field`, `_count` (the rows holding the field) and `distinct` (its distinct values, exactly),
//   ordered by _count descending, then #type and field name ascending; the first `limit` rows
//   (a warning says how many were left out).
// - fieldset(): one row per field name, in `field`, in descending byte order of the names (the
//   order of LogScale's documented output: @timestamp before @rawstring before #type).
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "query/functions/list.h"
#include "query/functions/transforms.h"
#include "query/record.h"

namespace sediment::query::functions {
namespace {

constexpr Param kStatsParams[] = {
    {.name = "limit", .type = Type::kLimit, .default_value = "1000", .max = kMaxRows},
};

const std::string kTypeTag = "#type";

bool BuildStats(Call& c, Stage* st) {
  const int64_t limit = c.Limit("limit");
  if (limit < 1) {
    c.BadParam("limit", "an integer from 1 to " + std::to_string(kMaxRows));
    return false;
  }
  SetRowsFunction(st, [limit](std::vector<Row> rows, std::vector<std::string>* warnings) {
    struct Stat {
      int64_t count = 0;
      std::set<std::string> values;
    };
    // Key: (has #type, #type, field).
    std::map<std::tuple<bool, std::string, std::string>, Stat> stats;
    for (const Row& row : rows) {
      const Value* type = nullptr;
      for (const auto& [k, v] : row) {
        if (k == kTypeTag) type = &v;
      }
      const std::string type_text = type != nullptr ? ValueToString(*type) : "";
      for (const auto& [k, v] : row) {
        Stat& s = stats[{type != nullptr, type_text, k}];
        ++s.count;
        s.values.insert(ValueToString(v));
      }
    }
    using Entry = std::pair<const std::tuple<bool, std::string, std::string>, Stat>;
    std::vector<const Entry*> order;
    order.reserve(stats.size());
    for (const Entry& e : stats) order.push_back(&e);
    std::stable_sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
      return a->second.count > b->second.count;
    });
    if (order.size() > static_cast<size_t>(limit)) {
      warnings->push_back("fieldstats(): reported " + std::to_string(limit) + " of " +
                          std::to_string(order.size()) + " fields (limit=" + std::to_string(limit) +
                          ")");
      order.resize(static_cast<size_t>(limit));
    }
    std::vector<Row> out;
    out.reserve(order.size());
    for (const Entry* e : order) {
      const auto& [has_type, type, field] = e->first;
      Row row;
      if (has_type) row.emplace_back(kTypeTag, Value(type));
      row.emplace_back("field", Value(field));
      row.emplace_back("_count", Value(e->second.count));
      row.emplace_back("distinct", Value(static_cast<int64_t>(e->second.values.size())));
      out.push_back(std::move(row));
    }
    return out;
  });
  return true;
}

bool BuildSet(Call&, Stage* st) {
  SetRowsFunction(st, [](std::vector<Row> rows, std::vector<std::string>*) {
    std::set<std::string, std::greater<>> names;
    for (const Row& row : rows) {
      for (const auto& [k, v] : row) names.insert(k);
    }
    std::vector<Row> out;
    out.reserve(names.size());
    for (const std::string& name : names) out.push_back(Row{{"field", Value(name)}});
    return out;
  });
  return true;
}

}  // namespace

const Function kFieldstats = {
    .name = "fieldstats",
    .kind = Kind::kCollector,
    .params = kStatsParams,
    .doc = "per field: how many rows hold it and its distinct values",
    .stage = &BuildStats,
};
const Function kFieldset = {
    .name = "fieldset",
    .kind = Kind::kCollector,
    .params = {},
    .doc = "the names of the fields the rows hold",
    .stage = &BuildSet,
};

}  // namespace sediment::query::functions
