// Functions over the whole sequence of their input rows (Stage::Kind::kRows; the collector in
// aggregate.cc keeps the rows in order and calls the RowsFunction once, on the coordinator):
//
// - createEvents(rawstring): discards its input and emits one event per string, with only
//   @rawstring set (LogScale's "aggregator" that generates test data).
// - readFile(file, include, limit): discards its input and emits the rows of the repository's
//   lookup files (read when the query compiles, as match() reads them), in the order given.
// - neighbor(include, prefix, direction=preceding, distance=1): copies fields of the row
//   `distance` rows before (after) each row, as <prefix>.<field> (the field's own name without a
//   prefix); rows without such a neighbor get nothing.
// - accumulate(function, current=include): the aggregates over the rows up to each row (without
//   it with current=exclude), set on the row.
// - slidingTimeWindow(function, span, current=include, timestampfield=@timestamp): the aggregates
//   over the rows before each row (and it, unless current=exclude) whose timestamp lies less
//   than `span` before its own.
// - slidingWindow(function, events, current=include): the aggregates over the `events` rows
//   ending at each row (with current=exclude, the `events` rows before it).
// - transpose(pivot, header, column=column, limit=5): one row per field name of the first
//   `limit` rows, with `column` = the name and the values in row[1], row[2], ... (or under the
//   `header` field's values).
//
// LogScale calls neighbor/accumulate/slidingTimeWindow/slidingWindow "sequence functions" that must
// follow an aggregate such as head() or sort() to have an order; in sediment, used directly on
// events they take the events in @timestamp order (at most 200000, with a warning beyond).
#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "query/aggregate.h"
#include "query/functions/list.h"
#include "query/functions/transforms.h"
#include "query/lookup.h"

namespace sediment::query::functions {
namespace {

const Value* FindValue(const Row& row, std::string_view name) {
  for (const auto& [k, v] : row) {
    if (k == name) return &v;
  }
  return nullptr;
}

void SetValue(Row* row, const std::string& name, Value v) {
  for (auto& [k, old] : *row) {
    if (k == name) {
      old = std::move(v);
      return;
    }
  }
  row->emplace_back(name, std::move(v));
}

// ---- createEvents(rawstring) ----

constexpr Param kCreateParams[] = {
    {.name = "rawstring", .type = Type::kRaw, .unnamed = true, .required = true},
};

bool BuildCreate(Call& c, Stage* st) {
  std::vector<std::string> raws;
  for (const ArgValue* v : ItemsOf(*c.Value("rawstring"))) {
    if (v->kind != ArgValue::Kind::kScalar) {
      c.BadValue("rawstring", *v, "a string or a list of strings");
      return false;
    }
    raws.push_back(v->text);
  }
  SetRowsFunction(
      st,
      [raws](std::vector<Row>, std::vector<std::string>*) {
        std::vector<Row> out;
        out.reserve(raws.size());
        for (const std::string& raw : raws) out.push_back(Row{{"@rawstring", Value(raw)}});
        return out;
      },
      /*ignores_input=*/true);
  return true;
}

// ---- readFile(file, include, limit) ----

constexpr Param kReadFileParams[] = {
    {.name = "file", .type = Type::kFields, .unnamed = true, .required = true},
    {.name = "include", .type = Type::kFields},
    {.name = "limit", .type = Type::kLimit},
    {.name = "table", .type = Type::kUnsupported},
};

bool BuildReadFile(Call& c, Stage* st) {
  int64_t limit = kNoMax;
  if (c.Given("limit")) {
    limit = c.Limit("limit");
    if (limit < 1) {
      c.BadParam("limit", "a positive integer");
      return false;
    }
  }
  const std::vector<std::string>& include = c.Fields("include");
  const size_t at = c.Value("file")->position;
  const LookupFiles* files = CurrentLookupFiles();
  if (files == nullptr) {
    c.Error(at, "readFile(): no lookup files here (upload them to the repository)");
    return false;
  }
  // The files are read when the query compiles, in the order given, each row one event.
  std::vector<Row> rows;
  for (const std::string& file : c.Fields("file")) {
    Result<std::string> content = files->Read(file);
    if (!content.ok()) {
      c.Error(at, "readFile(): " + content.status().message());
      return false;
    }
    Result<LookupTable> table = ParseLookupTable(file, *content);
    if (!table.ok()) {
      c.Error(at, "readFile(): file '" + file + "': " + table.status().message());
      return false;
    }
    for (const std::vector<std::string>& cells : table->rows) {
      if (static_cast<int64_t>(rows.size()) >= limit) break;
      Row row;
      for (size_t k = 0; k < cells.size() && k < table->columns.size(); ++k) {
        const std::string& col = table->columns[k];
        if (!include.empty() && std::find(include.begin(), include.end(), col) == include.end()) {
          continue;
        }
        row.emplace_back(col, Value(cells[k]));
      }
      rows.push_back(std::move(row));
    }
  }
  SetRowsFunction(
      st, [rows](std::vector<Row>, std::vector<std::string>*) { return rows; },
      /*ignores_input=*/true);
  return true;
}

// ---- neighbor(include, prefix, direction=preceding, distance=1) ----

constexpr Param kNeighborParams[] = {
    {.name = "include", .type = Type::kFields, .unnamed = true, .required = true},
    {.name = "prefix", .type = Type::kString},
    {.name = "direction", .type = Type::kString, .default_value = "preceding"},
    {.name = "distance", .type = Type::kLimit, .default_value = "1", .max = 10000},
};

bool BuildNeighbor(Call& c, Stage* st) {
  const std::string& dir = c.String("direction");
  if (dir != "preceding" && dir != "succeeding") {
    c.BadParam("direction", "preceding or succeeding");
    return false;
  }
  const int64_t distance = c.Limit("distance");
  if (distance < 1) {
    c.BadParam("distance", "an integer from 1 to 10000");
    return false;
  }
  std::vector<std::pair<std::string, std::string>> fields;  // read, write
  const std::string& prefix = c.String("prefix");
  for (const std::string& f : c.Fields("include")) {
    fields.emplace_back(f, prefix.empty() ? f : prefix + "." + f);
  }
  const int64_t step = dir == "preceding" ? -distance : distance;
  SetRowsFunction(st, [fields, step](std::vector<Row> rows, std::vector<std::string>*) {
    const int64_t n = static_cast<int64_t>(rows.size());
    // The neighbors' values are read before any row changes.
    std::vector<std::vector<std::pair<std::string, Value>>> set(rows.size());
    for (int64_t i = 0; i < n; ++i) {
      const int64_t j = i + step;
      if (j < 0 || j >= n) continue;
      for (const auto& [from, to] : fields) {
        if (const Value* v = FindValue(rows[j], from)) set[i].emplace_back(to, *v);
      }
    }
    for (int64_t i = 0; i < n; ++i) {
      for (auto& [name, v] : set[i]) SetValue(&rows[i], name, std::move(v));
    }
    return rows;
  });
  return true;
}

// ---- accumulate / slidingTimeWindow ----

// The aggregates `metrics` as a stage of their own (one row of metrics).
std::shared_ptr<const Stage> MetricsStage(std::vector<Metric> metrics, const std::string& fn) {
  auto st = std::make_shared<Stage>();
  st->kind = Stage::Kind::kAggregate;
  st->grouping = Stage::Grouping::kNone;
  st->function = fn;
  st->metrics = std::move(metrics);
  return st;
}

// The metric fields `c` gives for what was added to it so far (it is left unchanged).
Row Snapshot(const Stage& st, const Collector& c) {
  std::string state;
  c.Encode(&state);
  Result<std::unique_ptr<Collector>> copy = DecodeCollector(&st, CollectorContext{}, state);
  if (!copy.ok()) return {};
  std::vector<std::string> ignored;
  std::vector<Row> rows = (*copy)->Finish(&ignored);
  return rows.empty() ? Row{} : std::move(rows[0]);
}

void AddRow(Collector* c, const Row& row, size_t i) {
  RecordKey key;
  key.offset = static_cast<int64_t>(i);
  c->Add(Record::FromRow(row, key));
}

void SetAll(Row* row, Row metrics) {
  for (auto& [k, v] : metrics) SetValue(row, k, std::move(v));
}

bool CurrentOf(Call& c, bool* include) {
  const std::string& cur = c.String("current");
  if (cur != "include" && cur != "exclude") {
    c.BadParam("current", "include or exclude");
    return false;
  }
  *include = cur == "include";
  return true;
}

constexpr Param kAccumulateParams[] = {
    {.name = "function", .type = Type::kMetrics, .unnamed = true, .required = true},
    {.name = "current", .type = Type::kString, .default_value = "include"},
};

bool BuildAccumulate(Call& c, Stage* st) {
  bool include = true;
  if (!CurrentOf(c, &include)) return false;
  std::vector<Metric> metrics = c.TakeMetrics("function");
  if (!CheckMetricNames(metrics, c.name(), c.err())) return false;
  std::shared_ptr<const Stage> agg = MetricsStage(std::move(metrics), c.name());
  SetRowsFunction(st, [agg, include](std::vector<Row> rows, std::vector<std::string>*) {
    std::unique_ptr<Collector> running = NewCollector(*agg, CollectorContext{});
    for (size_t i = 0; i < rows.size(); ++i) {
      if (include) AddRow(running.get(), rows[i], i);
      Row m = Snapshot(*agg, *running);
      if (!include) AddRow(running.get(), rows[i], i);
      SetAll(&rows[i], std::move(m));
    }
    return rows;
  });
  return true;
}

constexpr Param kWindowParams[] = {
    {.name = "function", .type = Type::kMetrics, .unnamed = true, .required = true},
    {.name = "span", .type = Type::kSpan, .required = true},
    {.name = "current", .type = Type::kString, .default_value = "include"},
    {.name = "timestampfield", .type = Type::kField, .default_value = "@timestamp"},
};

bool BuildWindow(Call& c, Stage* st) {
  bool include = true;
  if (!CurrentOf(c, &include)) return false;
  const int64_t span = c.Limit("span");
  if (span <= 0) {
    c.BadParam("span", "a time span such as 30s or 1h");
    return false;
  }
  std::vector<Metric> metrics = c.TakeMetrics("function");
  if (!CheckMetricNames(metrics, c.name(), c.err())) return false;
  std::shared_ptr<const Stage> agg = MetricsStage(std::move(metrics), c.name());
  std::string ts_field = c.String("timestampfield");
  SetRowsFunction(st,
                  [agg, include, span, ts_field](std::vector<Row> rows, std::vector<std::string>*) {
                    std::vector<std::optional<double>> ts(rows.size());
                    for (size_t i = 0; i < rows.size(); ++i) {
                      if (const Value* v = FindValue(rows[i], ts_field)) ts[i] = ValueToNumber(*v);
                    }
                    std::vector<Row> metrics(rows.size());
                    for (size_t i = 0; i < rows.size(); ++i) {
                      if (!ts[i]) continue;
                      std::unique_ptr<Collector> c = NewCollector(*agg, CollectorContext{});
                      // Rows before i (in sequence order) within the span; the walk stops at the
                      // first row older than the window (the input is in time order).
                      size_t first = i;
                      while (first > 0 && (!ts[first - 1] || *ts[i] - *ts[first - 1] < span))
                        --first;
                      for (size_t j = first; j < i; ++j) {
                        if (ts[j]) AddRow(c.get(), rows[j], j);
                      }
                      if (include) AddRow(c.get(), rows[i], i);
                      std::vector<std::string> ignored;
                      std::vector<Row> out = c->Finish(&ignored);
                      if (!out.empty()) metrics[i] = std::move(out[0]);
                    }
                    for (size_t i = 0; i < rows.size(); ++i)
                      SetAll(&rows[i], std::move(metrics[i]));
                    return rows;
                  });
  return true;
}

constexpr Param kCountWindowParams[] = {
    {.name = "function", .type = Type::kMetrics, .unnamed = true, .required = true},
    {.name = "events", .type = Type::kLimit, .required = true, .max = 1000},
    {.name = "current", .type = Type::kString, .default_value = "include"},
};

bool BuildCountWindow(Call& c, Stage* st) {
  bool include = true;
  if (!CurrentOf(c, &include)) return false;
  const int64_t events = c.Limit("events");
  if (events < 1) {
    c.BadParam("events", "a number of events from 1 to 1000");
    return false;
  }
  std::vector<Metric> metrics = c.TakeMetrics("function");
  if (!CheckMetricNames(metrics, c.name(), c.err())) return false;
  std::shared_ptr<const Stage> agg = MetricsStage(std::move(metrics), c.name());
  const size_t n = static_cast<size_t>(events);
  SetRowsFunction(st, [agg, include, n](std::vector<Row> rows, std::vector<std::string>*) {
    std::vector<Row> metrics(rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      // The window: the n rows ending at i, or with current=exclude the n rows before it.
      const size_t end = include ? i + 1 : i;
      const size_t first = end > n ? end - n : 0;
      std::unique_ptr<Collector> c = NewCollector(*agg, CollectorContext{});
      for (size_t j = first; j < end; ++j) AddRow(c.get(), rows[j], j);
      std::vector<std::string> ignored;
      std::vector<Row> out = c->Finish(&ignored);
      if (!out.empty()) metrics[i] = std::move(out[0]);
    }
    for (size_t i = 0; i < rows.size(); ++i) SetAll(&rows[i], std::move(metrics[i]));
    return rows;
  });
  return true;
}

// ---- array:union(array, as=_union), array:intersection(array, as=_intersection),
//      array:reduceAll(array, var, function) ----

// The elements of array `base` (fields base[0], base[1], ... up to the first missing index).
std::vector<std::string> RowElements(const Row& row, const std::string& base) {
  std::vector<std::string> out;
  for (size_t i = 0;; ++i) {
    const Value* v = FindValue(row, base + "[" + std::to_string(i) + "]");
    if (v == nullptr) break;
    out.push_back(ValueToString(*v));
  }
  return out;
}

std::string ArrayBaseOf(std::string_view name) {
  if (name.ends_with("[]")) name.remove_suffix(2);
  return std::string(name);
}

constexpr Param kUnionParams[] = {
    {.name = "array", .type = Type::kField, .unnamed = true, .required = true},
    {.name = "as", .type = Type::kField, .default_value = "_union"},
};
constexpr Param kIntersectionParams[] = {
    {.name = "array", .type = Type::kField, .unnamed = true, .required = true},
    {.name = "as", .type = Type::kField, .default_value = "_intersection"},
};

// Decided: the output elements are in ascending byte order (LogScale leaves the order
// undefined); with no array in the input the output row has no elements.
bool BuildSet(Call& c, Stage* st, bool intersection) {
  std::string base = ArrayBaseOf(c.String("array"));
  std::string as = ArrayBaseOf(c.String("as"));
  if (base.empty() || as.empty()) {
    c.BadParam(base.empty() ? "array" : "as", "an array name such as \"a[]\"");
    return false;
  }
  SetRowsFunction(st, [base, as, intersection](std::vector<Row> rows, std::vector<std::string>*) {
    std::map<std::string, size_t> seen;  // element -> number of arrays holding it
    size_t arrays = 0;
    for (const Row& row : rows) {
      std::vector<std::string> e = RowElements(row, base);
      if (e.empty()) continue;  // empty arrays are ignored
      ++arrays;
      std::sort(e.begin(), e.end());
      e.erase(std::unique(e.begin(), e.end()), e.end());
      for (std::string& x : e) ++seen[std::move(x)];
    }
    Row out;
    size_t i = 0;
    for (const auto& [x, n] : seen) {
      if (intersection && n != arrays) continue;
      out.emplace_back(as + "[" + std::to_string(i++) + "]", Value(x));
    }
    return std::vector<Row>{std::move(out)};
  });
  return true;
}
bool BuildUnion(Call& c, Stage* st) { return BuildSet(c, st, false); }
bool BuildIntersection(Call& c, Stage* st) { return BuildSet(c, st, true); }

constexpr Param kReduceAllParams[] = {
    {.name = "array", .type = Type::kField, .unnamed = true, .required = true},
    {.name = "var", .type = Type::kField, .required = true},
    {.name = "function", .type = Type::kMetrics, .required = true},
};

bool BuildReduceAll(Call& c, Stage* st) {
  std::string base = ArrayBaseOf(c.String("array"));
  if (base.empty()) {
    c.BadParam("array", "an array name such as \"a[]\"");
    return false;
  }
  std::vector<Metric> metrics = c.TakeMetrics("function");
  if (!CheckMetricNames(metrics, c.name(), c.err())) return false;
  std::shared_ptr<const Stage> agg = MetricsStage(std::move(metrics), c.name());
  std::string var = c.String("var");
  SetRowsFunction(st, [agg, base, var](std::vector<Row> rows, std::vector<std::string>* warnings) {
    std::unique_ptr<Collector> all = NewCollector(*agg, CollectorContext{});
    size_t k = 0;
    for (const Row& row : rows) {
      for (std::string& e : RowElements(row, base)) AddRow(all.get(), Row{{var, Value(e)}}, k++);
    }
    return all->Finish(warnings);
  });
  return true;
}

// ---- transpose(pivot, header, column=column, limit=5) ----

constexpr Param kTransposeParams[] = {
    {.name = "pivot", .type = Type::kField, .unnamed = true},
    {.name = "header", .type = Type::kField},
    {.name = "column", .type = Type::kField, .default_value = "column"},
    {.name = "limit", .type = Type::kLimit, .default_value = "5", .max = 1000},
};

bool BuildTranspose(Call& c, Stage* st) {
  if (c.Given("pivot") && (c.Given("header") || c.Given("column"))) {
    c.BadParam("pivot", "either pivot or header/column, not both");
    return false;
  }
  const int64_t limit = c.Limit("limit");
  if (limit < 1) {
    c.BadParam("limit", "an integer from 1 to 1000");
    return false;
  }
  std::string header = c.Given("pivot") ? c.String("pivot") : c.String("header");
  std::string column = c.Given("pivot") ? c.String("pivot") : c.String("column");
  SetRowsFunction(
      st, [header, column, limit](std::vector<Row> rows, std::vector<std::string>* warnings) {
        if (rows.size() > static_cast<size_t>(limit)) {
          warnings->push_back("transpose(): used the first " + std::to_string(limit) + " of " +
                              std::to_string(rows.size()) +
                              " rows (limit=" + std::to_string(limit) + ")");
          rows.resize(static_cast<size_t>(limit));
        }
        // The output columns: the header field's values, else row[1], row[2], ...
        std::vector<std::string> names(rows.size());
        for (size_t i = 0; i < rows.size(); ++i) {
          const Value* h = header.empty() ? nullptr : FindValue(rows[i], header);
          names[i] = h ? ValueToString(*h) : "row[" + std::to_string(i + 1) + "]";
        }
        // Decided: one output row per field name, in ascending byte order of the names (LogScale's
        // example lists _count before loglevel; it does not state an order).
        std::map<std::string, Row> by_field;
        for (size_t i = 0; i < rows.size(); ++i) {
          for (auto& [k, v] : rows[i]) {
            if (!header.empty() && k == header) continue;
            Row& out = by_field[k];
            if (out.empty()) out.emplace_back(column, Value(k));
            SetValue(&out, names[i], std::move(v));
          }
        }
        std::vector<Row> out;
        out.reserve(by_field.size());
        for (auto& [k, row] : by_field) out.push_back(std::move(row));
        return out;
      });
  return true;
}

}  // namespace

const Function kCreateEvents = {
    .name = "createEvents",
    .kind = Kind::kCollector,
    .params = kCreateParams,
    .doc = "discards its input and emits one event per given @rawstring",
    .stage = &BuildCreate,
};
const Function kReadFile = {
    .name = "readFile",
    .kind = Kind::kCollector,
    .params = kReadFileParams,
    .doc = "discards its input and emits the rows of lookup files as events",
    .stage = &BuildReadFile,
};
const Function kNeighbor = {
    .name = "neighbor",
    .kind = Kind::kCollector,
    .params = kNeighborParams,
    .doc = "copies fields of a preceding or succeeding row",
    .stage = &BuildNeighbor,
};
const Function kAccumulate = {
    .name = "accumulate",
    .kind = Kind::kCollector,
    .params = kAccumulateParams,
    .doc = "running aggregates over the row sequence",
    .stage = &BuildAccumulate,
};
const Function kSlidingTimeWindow = {
    .name = "slidingTimeWindow",
    .kind = Kind::kCollector,
    .params = kWindowParams,
    .doc = "aggregates over a sliding time window of the row sequence",
    .stage = &BuildWindow,
};
const Function kSlidingWindow = {
    .name = "slidingWindow",
    .kind = Kind::kCollector,
    .params = kCountWindowParams,
    .doc = "aggregates over a sliding window of a number of rows of the sequence",
    .stage = &BuildCountWindow,
};
const Function kArrayUnion = {
    .name = "array:union",
    .kind = Kind::kCollector,
    .params = kUnionParams,
    .doc = "the set union of an array's values over the input events",
    .stage = &BuildUnion,
};
const Function kArrayIntersection = {
    .name = "array:intersection",
    .kind = Kind::kCollector,
    .params = kIntersectionParams,
    .doc = "the values in every input event's array",
    .stage = &BuildIntersection,
};
const Function kArrayReduceAll = {
    .name = "array:reduceAll",
    .kind = Kind::kCollector,
    .params = kReduceAllParams,
    .doc = "aggregates over the elements of an array in every input event",
    .stage = &BuildReduceAll,
};
const Function kTranspose = {
    .name = "transpose",
    .kind = Kind::kCollector,
    .params = kTransposeParams,
    .doc = "turns the fields of rows into rows",
    .stage = &BuildTranspose,
};

}  // namespace sediment::query::functions
