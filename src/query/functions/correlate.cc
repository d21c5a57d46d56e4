// correlate(name1: { subquery } include: [fields], name2: { ... | f <=> name1.g } ..., within=,
// sequence=false, sequenceBy=@timestamp, jitterTolerance=, maxPerRoot=1, root=,
// includeMatchesOnceOnly=false, globalConstraints=[...], includeConstraintValues=true,
// iterationLimit=5): finds constellations, one event per named subquery, whose events agree on
// the `<=>` links and the globalConstraints fields, and outputs one row per constellation.
//
// A function over the whole sequence of its input (Stage::Kind::kRows). Each input row is run
// through every subquery (filters and per-record steps); the records that come out are the
// query's candidates, taken in sequenceBy order. For each candidate of the root query (the
// `root=` one, else the first), in that order, a depth-first search assigns the other queries
// one by one, each linked to one assigned before it (breadth-first over the links from the
// root), trying candidates in order; a constellation must satisfy every link and global
// constraint (equal values as text; an event lacking the field cannot take part), hold each
// input event at most once, span at most `within` in @timestamp, and with sequence=true have
// its events ordered as the queries are written (by sequenceBy; the first key may go back by up
// to jitterTolerance when numeric). At most maxPerRoot constellations per root event; with
// includeMatchesOnceOnly an event takes part in at most one constellation. The search stops
// after kMaxSteps candidate checks with a warning.
//
// Output rows, in the order found: @timestamp (the earliest event's), then per query in written
// order `name.@timestamp`, `name.@id`, the `include` fields, and with includeConstraintValues the
// query's link and global-constraint fields not already included, each as `name.field`.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "query/functions/list.h"
#include "query/functions/transforms.h"
#include "query/record.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "query", .type = Type::kRaw, .required = true},
    {.name = "within", .type = Type::kSpan},
    {.name = "sequence", .type = Type::kBool, .default_value = "false"},
    {.name = "sequenceBy", .type = Type::kFields, .default_value = "@timestamp"},
    {.name = "jitterTolerance", .type = Type::kSpan},
    {.name = "maxPerRoot", .type = Type::kLimit, .default_value = "1", .max = 1000},
    {.name = "root", .type = Type::kString},
    {.name = "includeMatchesOnceOnly", .type = Type::kBool, .default_value = "false"},
    {.name = "globalConstraints", .type = Type::kFields},
    {.name = "includeConstraintValues", .type = Type::kBool, .default_value = "true"},
    {.name = "iterationLimit", .type = Type::kLimit, .default_value = "5", .max = 10},
};

constexpr size_t kMaxQueries = 16;
constexpr uint64_t kMaxSteps = 10'000'000;

// One condition between two queries: field `field` of this query's event equals field
// `other_field` of query `other`'s.
struct Constraint {
  std::string field;
  size_t other = 0;
  std::string other_field;
};

struct Query {
  std::string name;
  std::vector<Stage> stages;
  std::vector<std::string> include;
  std::vector<Constraint> constraints;  // both directions of every link naming this query
  std::vector<std::string> output;      // fields output as name.field (after @timestamp/@id)
};

struct Options {
  int64_t within_ms = 0;  // 0: unbounded
  bool sequence = false;
  std::vector<std::string> sequence_by;
  int64_t jitter_ms = 0;
  int64_t max_per_root = 1;
  bool once_only = false;
  std::vector<std::string> global;
};

const Value* Find(const Row& row, const std::string& name) {
  for (const auto& [k, v] : row) {
    if (k == name) return &v;
  }
  return nullptr;
}

std::optional<std::string> Text(const Row& row, const std::string& name) {
  const Value* v = Find(row, name);
  if (v == nullptr) return std::nullopt;
  return ValueToString(*v);
}

// A candidate: an input row as it came out of the query's stages.
struct Candidate {
  size_t input = 0;  // index of the input row
  Row row;
  double ts = 0;
  std::vector<Value> seq;  // the sequenceBy values (missing: empty text)
};

// -1 / 0 / 1 comparing two sequenceBy values: numbers numerically (before text), text bytewise.
int CompareValues(const Value& a, const Value& b) {
  std::optional<double> x = ValueToNumber(a), y = ValueToNumber(b);
  if (x && y) return *x < *y ? -1 : *x > *y ? 1 : 0;
  if (x) return -1;
  if (y) return 1;
  std::string s = ValueToString(a), t = ValueToString(b);
  return s < t ? -1 : s > t ? 1 : 0;
}

class Correlate final : public RowsFunction {
 public:
  Correlate(std::vector<Query> queries, std::vector<size_t> order, Options opt)
      : queries_(std::move(queries)), order_(std::move(order)), opt_(std::move(opt)) {}

  std::vector<Row> Run(std::vector<Row> rows, std::vector<std::string>* warnings) const override {
    Search s(*this, rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      for (size_t q = 0; q < queries_.size(); ++q) {
        RecordKey key;
        key.offset = static_cast<int64_t>(i);
        Record out;
        if (!RunsThrough(queries_[q].stages, Record::FromRow(rows[i], key), &out)) continue;
        Candidate c;
        c.input = i;
        c.row = out.ToRow();
        const Value* ts = Find(c.row, "@timestamp");
        std::optional<double> t = ts ? ValueToNumber(*ts) : std::nullopt;
        c.ts = t.value_or(0);
        for (const std::string& f : opt_.sequence_by) {
          const Value* v = Find(c.row, f);
          c.seq.push_back(v ? *v : Value(std::string()));
        }
        s.candidates[q].push_back(std::move(c));
      }
    }
    for (auto& list : s.candidates) {
      std::stable_sort(list.begin(), list.end(), [](const Candidate& a, const Candidate& b) {
        for (size_t k = 0; k < a.seq.size(); ++k) {
          int c = CompareValues(a.seq[k], b.seq[k]);
          if (c != 0) return c < 0;
        }
        return false;
      });
    }
    s.Index();
    const size_t root = order_[0];
    for (size_t r = 0; r < s.candidates[root].size() && !s.stopped; ++r) {
      if (opt_.once_only && s.used[s.candidates[root][r].input]) continue;
      s.found_for_root = 0;
      s.assigned[root] = r;
      s.in_use.insert(s.candidates[root][r].input);
      s.Extend(1);
      s.in_use.erase(s.candidates[root][r].input);
    }
    if (s.stopped) {
      warnings->push_back("correlate(): stopped searching after " + std::to_string(kMaxSteps) +
                          " candidate checks; constellations may be missing");
    }
    return std::move(s.out);
  }

 private:
  struct Search {
    Search(const Correlate& c, size_t inputs)
        : f(c),
          candidates(c.queries_.size()),
          index(c.queries_.size()),
          assigned(c.queries_.size(), 0),
          used(inputs, 0) {}

    // Per query but the root: its candidates by the value of the field linking it to the query
    // assigned before it (parent[q]).
    void Index() {
      parent.assign(f.queries_.size(), Constraint{});
      for (size_t k = 1; k < f.order_.size(); ++k) {
        const size_t q = f.order_[k];
        parent[q] = f.Parent(q, k);
        for (size_t i = 0; i < candidates[q].size(); ++i) {
          if (std::optional<std::string> v = Text(candidates[q][i].row, parent[q].field)) {
            index[q][*v].push_back(i);
          }
        }
      }
    }

    const Candidate& At(size_t q) const { return candidates[q][assigned[q]]; }

    void Extend(size_t k) {
      if (stopped || found_for_root >= f.opt_.max_per_root) return;
      if (k == f.order_.size()) {
        Emit();
        return;
      }
      const size_t q = f.order_[k];
      std::optional<std::string> key = Text(At(parent[q].other).row, parent[q].other_field);
      if (!key) return;
      auto it = index[q].find(*key);
      if (it == index[q].end()) return;
      for (size_t i : it->second) {
        if (stopped || found_for_root >= f.opt_.max_per_root) return;
        if (++steps > kMaxSteps) {
          stopped = true;
          return;
        }
        const Candidate& c = candidates[q][i];
        if (in_use.count(c.input) > 0 || (f.opt_.once_only && used[c.input])) continue;
        if (!Fits(q, k, c)) continue;
        assigned[q] = i;
        in_use.insert(c.input);
        Extend(k + 1);
        in_use.erase(c.input);
      }
    }

    // Whether candidate `c` of query q (the k-th assigned) agrees with the queries assigned
    // before it.
    bool Fits(size_t q, size_t k, const Candidate& c) const {
      auto assigned_before = [&](size_t other) {
        for (size_t j = 0; j < k; ++j) {
          if (f.order_[j] == other) return true;
        }
        return false;
      };
      for (const Constraint& con : f.queries_[q].constraints) {
        if (!assigned_before(con.other)) continue;
        std::optional<std::string> a = Text(c.row, con.field);
        std::optional<std::string> b = Text(At(con.other).row, con.other_field);
        if (!a || !b || *a != *b) return false;
      }
      const Candidate& root = At(f.order_[0]);
      for (const std::string& g : f.opt_.global) {
        std::optional<std::string> a = Text(c.row, g);
        std::optional<std::string> b = Text(root.row, g);
        if (!a || !b || *a != *b) return false;
      }
      for (size_t j = 0; j < k; ++j) {
        const size_t other = f.order_[j];
        const Candidate& o = At(other);
        if (f.opt_.within_ms > 0 && std::abs(c.ts - o.ts) > static_cast<double>(f.opt_.within_ms)) {
          return false;
        }
        if (f.opt_.sequence && !(other < q ? f.Ordered(o, c) : f.Ordered(c, o))) {
          return false;
        }
      }
      return true;
    }

    void Emit() {
      ++found_for_root;
      Row row;
      double first = At(0).ts;
      for (size_t q = 0; q < f.queries_.size(); ++q) first = std::min(first, At(q).ts);
      row.emplace_back("@timestamp", static_cast<int64_t>(first));
      for (size_t q = 0; q < f.queries_.size(); ++q) {
        const Query& query = f.queries_[q];
        const Candidate& c = At(q);
        if (f.opt_.once_only) used[c.input] = 1;
        for (const char* builtin : {"@timestamp", "@id"}) {
          if (const Value* v = Find(c.row, builtin))
            row.emplace_back(query.name + "." + builtin, *v);
        }
        for (const std::string& field : query.output) {
          if (const Value* v = Find(c.row, field)) row.emplace_back(query.name + "." + field, *v);
        }
      }
      out.push_back(std::move(row));
      // Its events (the root's included) take part in no other constellation.
      if (f.opt_.once_only) found_for_root = f.opt_.max_per_root;
    }

    const Correlate& f;
    std::vector<std::vector<Candidate>> candidates;
    std::vector<std::unordered_map<std::string, std::vector<size_t>>> index;
    std::vector<Constraint> parent;
    std::vector<size_t> assigned;  // per query: index into candidates[q]
    std::vector<uint8_t> used;     // per input row: in an emitted constellation
    std::set<size_t> in_use;       // input rows of the partial constellation
    int64_t found_for_root = 0;
    uint64_t steps = 0;
    bool stopped = false;
    std::vector<Row> out;
  };

  // The constraint linking query q (the k-th in order_) to a query before it in order_.
  Constraint Parent(size_t q, size_t k) const {
    for (size_t j = 0; j < k; ++j) {
      for (const Constraint& con : queries_[q].constraints) {
        if (con.other == order_[j]) return con;
      }
    }
    // Linked only by a global constraint (Build checks every query is linked).
    return Constraint{opt_.global.front(), order_[0], opt_.global.front()};
  }

  // Whether `a` may come before `b` in a sequence.
  bool Ordered(const Candidate& a, const Candidate& b) const {
    for (size_t k = 0; k < a.seq.size(); ++k) {
      if (k == 0 && opt_.jitter_ms > 0) {
        std::optional<double> x = ValueToNumber(a.seq[0]), y = ValueToNumber(b.seq[0]);
        if (x && y) {
          if (*x > *y + static_cast<double>(opt_.jitter_ms)) return false;
          if (*x > *y) return true;  // within the tolerance: counts as ordered
        }
      }
      int c = CompareValues(a.seq[k], b.seq[k]);
      if (c != 0) return c < 0;
    }
    return true;
  }

  std::vector<Query> queries_;
  std::vector<size_t> order_;  // the root first, then breadth-first over the links
  Options opt_;
};

bool FieldsOf(Call& c, const ArgValue& v, std::vector<std::string>* out) {
  for (const ArgValue* item : ItemsOf(v)) {
    if (item->kind != ArgValue::Kind::kScalar || item->text.empty()) {
      c.Error(item->position,
              "correlate(): include: expects a field name or a list of them but "
              "found '" +
                  ValueText(*item) + "'");
      return false;
    }
    out->push_back(item->text);
  }
  return true;
}

void AddOnce(std::vector<std::string>* v, const std::string& s) {
  if (std::find(v->begin(), v->end(), s) == v->end()) v->push_back(s);
}

bool Build(Call& c, Stage* st) {
  const ArgValue& list = *c.Value("query");
  std::vector<Query> queries;
  std::vector<const Subquery*> subqueries;
  for (const ArgValue* item : ItemsOf(list)) {
    if (item->kind != ArgValue::Kind::kCall || item->args.empty() ||
        item->args[0].value.kind != ArgValue::Kind::kSubquery) {
      c.BadValue("query", *item, "named subqueries such as A: { ... } include: [field]");
      return false;
    }
    Query q;
    q.name = item->text;
    for (const Query& other : queries) {
      if (other.name == q.name) {
        c.Error(item->position, "correlate(): query '" + q.name + "' is defined twice");
        return false;
      }
    }
    const Subquery& sq = *item->args[0].value.subquery;
    if (sq.collect < sq.stages.size()) {
      c.Error(sq.stages[sq.collect].position, "correlate(): the query '" + q.name +
                                                  "' cannot hold the collecting function " +
                                                  sq.stages[sq.collect].function + "()");
      return false;
    }
    q.stages = sq.stages;
    if (item->args.size() > 1 && !FieldsOf(c, item->args[1].value, &q.include)) return false;
    queries.push_back(std::move(q));
    subqueries.push_back(&sq);
  }
  if (queries.size() < 2 || queries.size() > kMaxQueries) {
    c.BadParam("query", "2 to 16 named subqueries such as A: { ... }, B: { ... }");
    return false;
  }
  auto find = [&](const std::string& name) -> std::optional<size_t> {
    for (size_t i = 0; i < queries.size(); ++i) {
      if (queries[i].name == name) return i;
    }
    return std::nullopt;
  };
  for (size_t q = 0; q < queries.size(); ++q) {
    for (const FieldLink& link : subqueries[q]->links) {
      std::optional<size_t> other = find(link.query);
      if (!other || *other == q) {
        c.Error(link.position, "correlate(): '<=>' links " + queries[q].name + " to " +
                                   (other ? "itself" : "unknown query '" + link.query + "'"));
        return false;
      }
      queries[q].constraints.push_back({link.field, *other, link.other_field});
      queries[*other].constraints.push_back({link.other_field, q, link.field});
    }
  }
  Options opt;
  opt.within_ms = c.Limit("within");
  opt.sequence = c.Bool("sequence");
  opt.sequence_by = c.Fields("sequenceBy");
  opt.jitter_ms = c.Limit("jitterTolerance");
  opt.max_per_root = c.Limit("maxPerRoot");
  opt.once_only = c.Bool("includeMatchesOnceOnly");
  opt.global = c.Fields("globalConstraints");
  if (opt.max_per_root < 1) {
    c.BadParam("maxPerRoot", "a number of constellations from 1 to 1000");
    return false;
  }
  size_t root = 0;
  if (c.Given("root")) {
    std::optional<size_t> r = find(c.String("root"));
    if (!r) {
      c.BadParam("root", "the name of one of the queries");
      return false;
    }
    root = *r;
  }
  // Breadth-first from the root over the links (every query, with global constraints).
  std::vector<size_t> order = {root};
  std::vector<uint8_t> seen(queries.size(), 0);
  seen[root] = 1;
  for (size_t i = 0; i < order.size(); ++i) {
    for (const Constraint& con : queries[order[i]].constraints) {
      if (!seen[con.other]) {
        seen[con.other] = 1;
        order.push_back(con.other);
      }
    }
  }
  for (size_t q = 0; q < queries.size(); ++q) {
    if (seen[q]) continue;
    if (opt.global.empty()) {
      c.Error(c.position(), "correlate(): query '" + queries[q].name + "' is not linked to '" +
                                queries[root].name +
                                "': link it with field <=> query.field or globalConstraints=[...]");
      return false;
    }
    order.push_back(q);
  }
  const bool constraint_values = c.Bool("includeConstraintValues");
  for (Query& q : queries) {
    q.output = q.include;
    if (!constraint_values) continue;
    for (const Constraint& con : q.constraints) AddOnce(&q.output, con.field);
    for (const std::string& g : opt.global) AddOnce(&q.output, g);
  }
  st->kind = Stage::Kind::kRows;
  st->rows_function =
      std::make_shared<const Correlate>(std::move(queries), std::move(order), std::move(opt));
  return true;
}

}  // namespace

const Function kCorrelate = {
    .name = "correlate",
    .kind = Kind::kCollector,
    .params = kParams,
    .doc = "constellations of events of named subqueries linked by <=> and global constraints",
    .stage = &Build,
};

}  // namespace sediment::query::functions
