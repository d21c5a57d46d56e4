// selfJoinFilter(field, where, prefilter=false) and selfJoin(field, where, collect, select,
// limit=20000, prefilter=false, postfilter=false): joins the events of one query with each other
// by a key. Both run in two passes over their whole input (Stage::Kind::kRows: the rows in order,
// at most 200000 of them with a warning beyond).
//
// The key of a row is the tuple of the values of the `field` fields; a row lacking one of them
// has no key and takes no part. `where` is a list of filter subqueries `[{from=peter}, {to=paul}]`
// (or one); a key qualifies when for every clause some row with that key passes it (different
// rows may satisfy different clauses). The first pass finds the qualifying keys; the second
// produces the output:
// - selfJoinFilter(): the rows whose key qualifies, in input order, unchanged; with prefilter=true
//   only those that also pass at least one clause. Exact: sediment keeps the keys themselves, so
//   there are none of the false positives LogScale's probabilistic filter may let through.
// - selfJoin(): one row per qualifying key (ascending order of the key values): the key fields,
//   and per `collect` field its distinct values over the key's rows in ascending byte order joined
//   by newlines (as collect() joins them); with prefilter=true only rows passing at least one
//   clause contribute values; with postfilter=true a row is output only when the row itself passes
//   every clause; `select`, when given, keeps only those of its columns; at most `limit` rows (the
//   first in key order; a warning says how many were left out).
#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "query/functions/list.h"
#include "query/functions/transforms.h"
#include "query/record.h"

namespace sediment::query::functions {
namespace {

constexpr Param kFilterParams[] = {
    {.name = "field", .type = Type::kFields, .unnamed = true, .required = true},
    {.name = "where", .type = Type::kRaw, .required = true},
    {.name = "prefilter", .type = Type::kBool, .default_value = "false"},
};
constexpr Param kJoinParams[] = {
    {.name = "field", .type = Type::kFields, .unnamed = true, .required = true},
    {.name = "where", .type = Type::kRaw, .required = true},
    {.name = "collect", .type = Type::kFields},
    {.name = "select", .type = Type::kFields},
    {.name = "limit", .type = Type::kLimit, .default_value = "20000", .max = kMaxRows},
    {.name = "prefilter", .type = Type::kBool, .default_value = "false"},
    {.name = "postfilter", .type = Type::kBool, .default_value = "false"},
};

constexpr size_t kMaxClauses = 64;

using Clauses = std::vector<std::vector<Stage>>;
using Key = std::vector<std::string>;

bool WhereClauses(Call& c, Clauses* out) {
  for (const ArgValue* item : ItemsOf(*c.Value("where"))) {
    std::vector<Stage> stages;
    if (!SubqueryStages(c, "where", *item, /*filter_call=*/true, &stages)) return false;
    out->push_back(std::move(stages));
  }
  if (out->empty() || out->size() > kMaxClauses) {
    c.BadParam("where", "a list of 1 to 64 filter subqueries such as [{from=a}, {to=b}]");
    return false;
  }
  return true;
}

const Value* Find(const Row& row, const std::string& name) {
  for (const auto& [k, v] : row) {
    if (k == name) return &v;
  }
  return nullptr;
}

std::optional<Key> KeyOf(const Row& row, const std::vector<std::string>& fields) {
  Key key;
  key.reserve(fields.size());
  for (const std::string& f : fields) {
    const Value* v = Find(row, f);
    if (v == nullptr) return std::nullopt;
    key.push_back(ValueToString(*v));
  }
  return key;
}

// Bit i set when `row` passes clause i.
uint64_t Passed(const Clauses& clauses, const Row& row, size_t i) {
  uint64_t mask = 0;
  RecordKey key;
  key.offset = static_cast<int64_t>(i);
  for (size_t c = 0; c < clauses.size(); ++c) {
    if (RunsThrough(clauses[c], Record::FromRow(row, key), nullptr)) mask |= uint64_t{1} << c;
  }
  return mask;
}

uint64_t AllOf(const Clauses& clauses) {
  return clauses.size() == 64 ? ~uint64_t{0} : (uint64_t{1} << clauses.size()) - 1;
}

bool BuildFilter(Call& c, Stage* st) {
  Clauses clauses;
  if (!WhereClauses(c, &clauses)) return false;
  std::vector<std::string> fields = c.Fields("field");
  const bool prefilter = c.Bool("prefilter");
  SetRowsFunction(st,
                  [clauses, fields, prefilter](std::vector<Row> rows, std::vector<std::string>*) {
                    std::vector<std::optional<Key>> keys(rows.size());
                    std::vector<uint64_t> passed(rows.size());
                    std::map<Key, uint64_t> by_key;
                    for (size_t i = 0; i < rows.size(); ++i) {
                      keys[i] = KeyOf(rows[i], fields);
                      if (!keys[i]) continue;
                      passed[i] = Passed(clauses, rows[i], i);
                      by_key[*keys[i]] |= passed[i];
                    }
                    const uint64_t all = AllOf(clauses);
                    std::vector<Row> out;
                    for (size_t i = 0; i < rows.size(); ++i) {
                      if (!keys[i] || by_key[*keys[i]] != all) continue;
                      if (prefilter && passed[i] == 0) continue;
                      out.push_back(std::move(rows[i]));
                    }
                    return out;
                  });
  return true;
}

bool BuildJoin(Call& c, Stage* st) {
  Clauses clauses;
  if (!WhereClauses(c, &clauses)) return false;
  std::vector<std::string> fields = c.Fields("field");
  std::vector<std::string> collect = c.Fields("collect");
  std::vector<std::string> select = c.Fields("select");
  const int64_t limit = c.Limit("limit");
  if (limit < 1) {
    c.BadParam("limit", "an integer from 1 to " + std::to_string(kMaxRows));
    return false;
  }
  const bool prefilter = c.Bool("prefilter");
  const bool postfilter = c.Bool("postfilter");
  SetRowsFunction(st, [=](std::vector<Row> rows, std::vector<std::string>* warnings) {
    struct Group {
      uint64_t passed = 0;
      std::vector<std::set<std::string>> values;
    };
    std::map<Key, Group> groups;
    for (size_t i = 0; i < rows.size(); ++i) {
      std::optional<Key> key = KeyOf(rows[i], fields);
      if (!key) continue;
      const uint64_t passed = Passed(clauses, rows[i], i);
      Group& g = groups[*key];
      g.passed |= passed;
      if (prefilter && passed == 0) continue;
      g.values.resize(collect.size());
      for (size_t f = 0; f < collect.size(); ++f) {
        if (const Value* v = Find(rows[i], collect[f])) g.values[f].insert(ValueToString(*v));
      }
    }
    const uint64_t all = AllOf(clauses);
    std::vector<Row> out;
    size_t qualifying = 0;
    for (const auto& [key, g] : groups) {
      if (g.passed != all) continue;
      Row row;
      for (size_t f = 0; f < fields.size(); ++f) row.emplace_back(fields[f], Value(key[f]));
      for (size_t f = 0; f < collect.size() && f < g.values.size(); ++f) {
        if (g.values[f].empty()) continue;
        std::string joined;
        for (const std::string& v : g.values[f]) {
          if (!joined.empty()) joined.push_back('\n');
          joined += v;
        }
        row.emplace_back(collect[f], Value(std::move(joined)));
      }
      if (postfilter && Passed(clauses, row, out.size()) != all) continue;
      ++qualifying;
      if (out.size() >= static_cast<size_t>(limit)) continue;
      if (!select.empty()) {
        Row kept;
        for (const std::string& s : select) {
          if (const Value* v = Find(row, s)) kept.emplace_back(s, *v);
        }
        row = std::move(kept);
      }
      out.push_back(std::move(row));
    }
    if (qualifying > out.size()) {
      warnings->push_back("selfJoin(): output " + std::to_string(out.size()) + " of " +
                          std::to_string(qualifying) + " keys (limit=" + std::to_string(limit) +
                          ")");
    }
    return out;
  });
  return true;
}

}  // namespace

const Function kSelfJoinFilter = {
    .name = "selfJoinFilter",
    .kind = Kind::kCollector,
    .params = kFilterParams,
    .doc = "keeps the events whose key has events satisfying every where clause",
    .stage = &BuildFilter,
};
const Function kSelfJoin = {
    .name = "selfJoin",
    .kind = Kind::kCollector,
    .params = kJoinParams,
    .doc = "one row per key whose events satisfy every where clause, with collected fields",
    .stage = &BuildJoin,
};

}  // namespace sediment::query::functions
