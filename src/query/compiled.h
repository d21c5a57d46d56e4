// Internal representation of a compiled query (the contract between the parser, the record
// functions, the aggregates, the executor and the tests). Immutable after Compile; safe to share
// across threads.
//
// A query is a pipeline `filter | stage | stage ...`. The parser folds the leading filter steps
// (free text, field comparisons, regex, in(), wildcard(), NOT/AND/OR) into `filter`, which the
// executor evaluates block-at-a-time and uses for pruning; every later step is a Stage.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/event.h"
#include "query/lookup.h"
#include "query/query.h"
#include "query/regex_prefilter.h"
#include "query/search.h"
#include "query/simple_regex.h"

namespace re2 {
class RE2;
}

namespace sediment::query {

struct MatchTable;  // query/lookup.h
class Record;

// ---- filters ----

struct FilterNode {
  enum class Kind {
    kTrue,      // matches every event
    kFalse,     // matches no event
    kAnd,       // children[0] AND children[1]
    kOr,        // children[0] OR children[1]
    kNot,       // NOT children[0]
    kText,      // case-insensitive substring `text` (lower-cased) of @rawstring
    kTextGlob,  // free-text pattern with '*' (`text`, lower-cased): `pieces` in order in @rawstring
    kRawRegex,  // /re/ searched in @rawstring
    kFieldEq,   // field == text (whole value; case-sensitive unless ignore_case)
    kFieldGlob,   // field matches the anchored '*' glob `text` (case-sensitive unless ignore_case)
    kFieldRegex,  // `re` found in the field's value
    kFieldCmp,    // numeric comparison: number(field) `cmp` `number`; false when the field is
                  // missing or its value is not a number
  };
  enum class Cmp { kLt, kLe, kGt, kGe, kEq, kNe };
  Kind kind = Kind::kTrue;
  std::vector<std::shared_ptr<const FilterNode>> children;
  std::string field;         // field comparisons
  std::string text;          // literal / glob pattern / regex source
  bool ignore_case = false;  // kFieldEq / kFieldGlob: ASCII case-insensitive comparison
  Cmp cmp = Cmp::kEq;        // kFieldCmp
  double number = 0;         // kFieldCmp
  std::shared_ptr<const re2::RE2> re;
  // kRawRegex / kFieldRegex: written with the flag g (`/re/g`): the stage extracting its named
  // groups gives one record per match (as regex(repeat=true)).
  bool global = false;
  // kRawRegex / kFieldRegex: the literals every match of `re` contains (regex_prefilter.h), and
  // the prefilter taken from them: a text holding none of its literals cannot match (empty: no
  // prefilter). Set with `re` (functions::SetFilterRegex); nodes built without them just run
  // RE2.
  RegexLiterals regex_literals;
  std::vector<CiSearcher> regex_prefilter;
  std::shared_ptr<const CiSearcher> searcher;  // kText
  // kText added by WithRegexStageLiterals: a later stage drops the events it rejects, so the
  // executor may take it as true (it does where the literal turns out to be common).
  bool implied = false;
  // kTextGlob: the non-empty pieces between '*' (lower-cased), at least one.
  std::vector<CiSearcher> pieces;
  size_t position = 0;  // byte offset of the construct in the query text
};
using FilterPtr = std::shared_ptr<const FilterNode>;

// ---- expressions (eval(), `x := ...`, case conditions) ----

struct Expr;
struct Stage;  // below
using ExprPtr = std::shared_ptr<const Expr>;
struct Expr {
  enum class Kind {
    kField,   // value of field `text`; missing field = no value
    kString,  // string literal `text`
    kNumber,  // numeric literal `number` (`text` keeps the spelling, e.g. "2", "0.5")
    kCall,    // function `text` (canonical lower-case name) applied to `args`
    kUnary,   // `text` is "-" or "!": args[0]
    kBinary,  // `text` is one of + - * / % == != < <= > >= && ||  (args[0], args[1])
    // A per-record pipeline function called in an expression (`text:length(m) - 9`,
    // `if(regex("^5", field=s), ...)`): `stage` runs on a copy of the record; the value is the
    // copy's field `text` (the output the parser named with as=), or, when `text` is empty (the
    // function has no output field: a filter), 1 when the stage keeps the record and 0 when it
    // drops it.
    kStage,
  };
  Kind kind = Kind::kString;
  std::string text;
  double number = 0;
  std::vector<ExprPtr> args;
  size_t position = 0;
  std::shared_ptr<const Stage> stage;  // kStage: a transform with EmitsOneOrNone()
};

// ---- aggregate metrics ----

struct Subquery;    // below
struct TableQuery;  // query/lookup.h

// One metric of an aggregate: count(), sum(x), avg(x), min(x), max(x), percentile(x, ...),
// stdDev(x), range(x), collect(x).
struct Metric {
  enum class Kind {
    kCount,
    kSum,
    kAvg,
    kMin,
    kMax,
    kPercentile,
    kStdDev,
    kRange,
    kCollect,
    kSelectMax,   // selectFromMax(field, include): `select_fields` of the record with the max
    kSelectMin,   // selectFromMin(field, include): ... with the min
    kSelectLast,  // selectLast(fields): each of `select_fields` from the newest record having it
    kSubquery,    // `{ ... }` (or a collecting function such as groupBy()) in function=: the
                  // `subquery` runs over each group's records; its output rows are the metric's
  };
  Kind kind = Kind::kCount;
  std::string field;                         // empty for count() without field=
  bool distinct = false;                     // count(field, distinct=true)
  std::vector<double> percentiles;           // kPercentile (default 50, 75, 99)
  std::string separator = "\n";              // kCollect: between the values
  int64_t limit = 2000;                      // kCollect: most distinct values output
  std::vector<std::string> select_fields;    // kSelectMax/kSelectMin/kSelectLast: the output
  std::shared_ptr<const Subquery> subquery;  // kSubquery
  // window(function=..., buckets=, span=) in function= of timeChart()/bucket(): the metric of
  // each bucket is computed over the `window_buckets` buckets before it (window_span_ms: over
  // the buckets within that span, rounded to whole buckets of the enclosing aggregate) instead
  // of over the bucket itself. Both 0: not a window metric.
  int64_t window_buckets = 0;
  int64_t window_span_ms = 0;
  bool IsWindow() const { return window_buckets > 0 || window_span_ms > 0; }
  // Output field name(s): `as` when given, else _count / _sum / _avg / _min / _max / _stddev /
  // _range, collect the field's own name; percentile gives "<as>_<p>" per percentile (as empty
  // by default: _50, _99, _99.9).
  std::string as;
  size_t position = 0;
};

// ---- stages ----

// The per-record implementation of a function defined in its own file under functions/ (format(),
// replace(), parseTimestamp(), ...): a Stage::Kind::kFunction stage holds one. Immutable once
// built and shared by every worker: Apply must be reentrant.
class RecordFunction {
 public:
  virtual ~RecordFunction() = default;
  // Applies the function to `r`; false when `r` is dropped. Never fails on data.
  virtual bool Apply(Record& r) const = 0;
  // A function that may emit more than one record per input (copyEvent()) sets
  // Stage::function_emits_many and overrides this: it appends its output records for `r` to *out.
  // The default (transform.cc) appends `r` when Apply keeps it.
  virtual void ApplyMany(Record&& r, std::vector<Record>* out) const;
};

// The implementation of a function over the whole sequence of its input rows (createEvents(),
// neighbor(), accumulate(), slidingTimeWindow(), transpose()): a Stage::Kind::kRows stage holds
// one. Its collector keeps the input rows in order (events by their key, rows of an earlier
// collecting stage in their order) and calls Run once, on the coordinator. Immutable once built
// and shared: Run must be reentrant.
class RowsFunction {
 public:
  virtual ~RowsFunction() = default;
  // The output rows for `rows` (in sequence order). Notices go to `warnings`. Never fails on data.
  virtual std::vector<Row> Run(std::vector<Row> rows, std::vector<std::string>* warnings) const = 0;
  // True when the input is discarded (createEvents()): the collector then keeps nothing and
  // every block may be skipped unread.
  virtual bool IgnoresInput() const { return false; }
};

struct Stage;
struct CaseBranch {
  FilterPtr condition;        // kTrue for the `*` branch
  std::vector<Stage> stages;  // per-record stages only (IsTransform())
};

struct Stage {
  enum class Kind {
    // Per-record stages (transforms): each input record gives 0..N output records, independent
    // of other records; they run on the nodes that read the data.
    kFilter,      // filter: keep records matching `filter`
    kEval,        // assignments: `field := expr` / eval(f1 = e1, f2 = e2)
    kRegex,       // regex(regex, field=@rawstring, strict=true): named groups become fields;
                  // strict drops non-matching records
    kParseJson,   // parseJson(field=@rawstring, prefix=""): objects flattened with '.', arrays
                  // as name[0], name[1], ...; values of non-JSON fields are left as they are
    kKvParse,     // kvParse(field=@rawstring, override=false): key=value pairs become fields
    kCase,        // case { cond | stages ; ... ; * | stages }: first matching branch; records
                  // matching no branch are dropped
    kFormatTime,  // formatTime(format, field=@timestamp, as, timezone=UTC)
    kLower,       // lower(field, as=_lower)
    kLength,      // length(field, as=_length)
    kSplit,       // split(field=_events, strip=false): one record per element field[0],
                  // field[1], ...; field[i].x becomes field.x (x with strip)
    kDrop,        // drop([fields])
    kRename,      // rename(field, as) / rename(field=[[a, b], ...]): `renames`
    kSelect,      // select([fields]): keep only those fields, in that order
    kMatch,       // match(file, field, column, include, strict): `match_table` looked up by
                  // `field`; a match adds the table's included columns, `strict` drops the rest
    kFunction,    // a function with its own RecordFunction (`record_function`)
    // Collecting stages: need their whole input; the first one is computed as partial states
    // on the nodes that read the data and merged at the coordinator.
    kHead,       // head(limit=200): the oldest records
    kTail,       // tail(limit=200): the newest records
    kSort,       // sort(field, order=desc, limit=200)
    kTable,      // table([fields], limit=200)
    kAggregate,  // count/sum/avg/min/max/percentile/stats/groupBy/timeChart/bucket/top
    kRows,       // a function over the whole row sequence (`rows_function`)
  };
  enum class Grouping {
    kNone,     // one row of metrics (count(), sum(), stats([...]), [f1(), f2()])
    kGroupBy,  // groupBy(fields, function=[...], limit=20000)
    kBucket,   // bucket(span, field=series, function, limit) / timeChart(series, span, function,
               // limit): a row per time bucket (and series value), bucket start in _bucket
    kTop,      // top(fields, limit=10): groups by count (or sum=field), descending
  };

  Kind kind = Kind::kFilter;
  size_t position = 0;   // byte offset of the function name (or filter) in the query text
  std::string function;  // canonical name as written in the query, for messages ("groupBy")

  FilterPtr filter;                                          // kFilter
  std::vector<std::pair<std::string, ExprPtr>> assignments;  // kEval: target field, value
  std::shared_ptr<const re2::RE2> re;                        // kRegex
  std::vector<std::string> groups;                           // kRegex: named groups (output fields)
  // kRegex: the capture index in `re` of each of `groups` (-1: not a group of `re`); empty means
  // the executor looks the names up for every record.
  std::vector<int> group_index;
  // kRegex: bytes every match starts with (case-sensitively), empty when unknown; lets the
  // executor try anchored matches only where they occur.
  std::string regex_prefix;
  // kRegex: finds regex_prefix (case-sensitively) when it has at least 3 bytes. Null: the
  // executor looks for the prefix's first byte.
  std::shared_ptr<const CiSearcher> regex_prefix_searcher;
  // kRegex: the same regex for SimpleRegex's matcher when it is in its subset (null otherwise);
  // asked before RE2, which answers what it cannot.
  std::shared_ptr<const SimpleRegex> simple_re;
  // kRegex: the literals every match contains, and the prefilter taken from them when the prefix
  // search does not already imply it (see FilterNode::regex_literals).
  RegexLiterals regex_literals;
  std::vector<CiSearcher> regex_prefilter;
  bool strict = true;  // kRegex
  // kRegex: regex(repeat=true): one output record per match (in text order), at most this many;
  // 0 = the first match only, the record itself.
  int64_t repeat_limit = 0;
  std::string field;   // kRegex/kParseJson/kKvParse/kFormatTime/kLower/kLength/kSplit source
  std::string as;      // kFormatTime/kLower/kLength target
  std::string prefix;  // kParseJson
  bool override_fields = false;      // kKvParse
  bool strip = false;                // kSplit
  std::string format;                // kFormatTime (strftime-style)
  std::string timezone = "UTC";      // kFormatTime: "UTC"/"Z" or a fixed offset like "+02:00"
  int64_t time_unit_ms = 1;          // kFormatTime: ms per unit of the input (unit=seconds: 1000)
  std::vector<CaseBranch> branches;  // kCase
  std::vector<std::pair<std::string, std::string>> renames;  // kRename: from, to
  std::shared_ptr<const MatchTable> match_table;             // kMatch (built while compiling;
                                                             // null: a table not bound yet)
  // defineTable()/join(): the table the step defines (the parser moves it to the query's
  // tables; a defineTable() step is no stage of its own).
  std::shared_ptr<const TableQuery> table_query;
  std::string table;  // kMatch: the defineTable()/join() table it reads ("": a lookup file)
  // setTimeInterval(start, end): the time range the query sets for itself, as written (time
  // bounds that ParseTimeBound reads). The parser moves it to CompiledQuery::time_interval; the
  // step is no stage of its own.
  std::optional<std::pair<std::string, std::string>> time_interval;
  std::vector<std::string> fields;  // kDrop/kSelect/kTable columns; kSort keys; group keys
                                    // (kGroupBy/kTop; kBucket: the series field, if any)
  int64_t limit = 200;              // kHead/kTail/kSort/kTable rows; kGroupBy groups; kTop rows;
                                    // kBucket series
  bool descending = true;           // kSort (when sort_keys is empty: every field)
  // kSort: per field of `fields`, its order and how its values compare (sort(order=[...],
  // type=[...])); empty = every field `descending` and kNumber.
  enum class SortType : uint8_t {
    kNumber,  // numbers numerically, before text; text bytewise (also LogScale's `any`)
    kString,  // the values as text, bytewise
    kHex,     // hexadecimal numbers (0x optional), numerically, before other values
  };
  struct SortKey {
    bool descending = true;
    SortType type = SortType::kNumber;
  };
  std::vector<SortKey> sort_keys;
  Grouping grouping = Grouping::kNone;  // kAggregate
  std::vector<Metric> metrics;          // kAggregate (never empty)
  int64_t span_ms = 0;  // kBucket; 0 = chosen from the query's time range (about 100
                        // buckets, rounded to 1s/5s/10s/30s/1m/5m/10m/30m/1h/3h/12h/1d)
  // kFunction: the implementation, and every field it reads or writes (for the column
  // selection of columns.h); function_reads_all: it may read any field.
  std::shared_ptr<const RecordFunction> record_function;
  std::vector<std::string> function_fields;
  bool function_reads_all = false;
  // kFunction: record_function may emit several records per input (RecordFunction::ApplyMany);
  // such a stage is not negatable.
  bool function_emits_many = false;
  std::shared_ptr<const RowsFunction> rows_function;  // kRows
  std::string top_rest;     // kTop: top(rest=): the field value of a row counting the others
  int64_t buckets = 0;      // kBucket: timeChart(buckets=): the span is range/buckets
  int64_t min_span_ms = 0;  // kBucket: the least span chosen for span=auto or buckets=
  // kBucket: timeChart(unit=): each metric's values (one entry: every metric's) are multiplied by
  // (to_ms / from_ms) / divisor, where 0 ms stands for the bucket span.
  struct UnitConversion {
    int64_t from_ms = 0;
    int64_t to_ms = 0;
    double divisor = 1;
  };
  std::vector<UnitConversion> units;
  // kSort built by table(sortby=): the rows keep only these columns, in this order.
  std::vector<std::string> table_columns;
  std::string top_sum;       // kTop: sum this field instead of counting
  bool top_percent = false;  // kTop: add `percent`

  // A per-record stage written `!f(...)` (a Function::negatable one): the stage runs on a copy
  // of the record, which passes unchanged exactly when the stage would have dropped it.
  bool negate = false;

  bool IsTransform() const { return kind < Kind::kHead; }
  bool IsAggregate() const {
    return kind == Kind::kAggregate || kind == Kind::kSort || kind == Kind::kTable;
  }
};

// A subquery `{ filter | stages }` used as an argument (function=[{...}] of groupBy, stats,
// timeChart, bucket; a nested collecting function). `stages` holds the leading filter as a
// kFilter stage (when there is one) and then the steps; stages[collect] is the first collecting
// stage (there is always one): the stages before it run on each record of the group, it keeps
// the group's partial state (merged and sent as the enclosing aggregate's state), and the stages
// after it run over its output rows.
// A field link `field <=> query.other_field` in a subquery of correlate(): the value of `field`
// in this subquery's event equals the value of `other_field` in the event of the subquery
// named `query` of the same correlate() call.
struct FieldLink {
  std::string field;
  std::string query;
  std::string other_field;
  size_t position = 0;  // of `field`
};

struct Subquery {
  std::vector<Stage> stages;
  size_t collect = 0;
  size_t position = 0;  // of the '{' (or of the function name)
  // correlate()'s subqueries only: their `<=>` links (the steps themselves hold no stage). The
  // parser refuses `<=>` anywhere else.
  std::vector<FieldLink> links;
};

class CompiledQuery {
 public:
  std::string text;
  // The tables of defineTable()/join(), in text order (a later one may read an earlier one), and
  // whether they were bound when compiling (Compile(text, files, tables)). A query with tables
  // that are not bound cannot execute (Execute refuses it with FailedPrecondition).
  std::vector<TableQuery> tables;
  bool tables_bound = false;
  FilterPtr filter;  // never null (kTrue for an empty filter)
  std::vector<Stage> stages;
  bool is_aggregate = false;  // some stage IsAggregate()
  // The text calls start() or end() (the query's time range) in an expression. Such a query
  // cannot execute as compiled (Execute refuses it with FailedPrecondition): the caller binds
  // the range into the text first (BindTimeRange, query.h) and compiles that.
  bool uses_time_range = false;
  // setTimeInterval(start, end) (its first step): the range the query sets, overriding the one
  // it is run with; the caller resolves it (ParseTimeRange) before running the query.
  std::optional<std::pair<std::string, std::string>> time_interval;
};

// Lower-cased literals that every event matching `filter` contains (case-insensitively) in its
// @rawstring or a field value: taken from the AND-spine (free text, phrases, field literals,
// wildcard pieces, the literals regexes require: RequiredRegexTerms); an OR contributes only
// terms implied by both of its sides.
std::vector<std::string> RequiredTerms(const FilterNode& filter);

// The shortest literal WithRegexStageLiterals adds, as a clause of its own.
constexpr size_t kMinImpliedLiteral = 2;

// `filter` AND the literals that the leading strict regex() stages on @rawstring require (at most
// two clauses per stage, each literal at least kMinPrefilterLiteral bytes, or one literal of at
// least kMinImpliedLiteral bytes; longer clauses first), as free-text nodes
// marked `implied`: an event without
// them would be dropped by the stage anyway, and as filter terms they prune blocks and are
// searched over a block's raw bytes at once. The leading stages are those before the first stage
// other than regex() and filters (which never change @rawstring). Returns `filter` when there
// is nothing to add.
FilterPtr WithRegexStageLiterals(const FilterPtr& filter, const std::vector<Stage>& stages);

// `filter` with every comparison on a datasource tag (#repo, #type, ...) replaced by its constant
// outcome for `ds`, and constants folded. Shares unchanged subtrees.
FilterPtr Specialize(const FilterPtr& filter, const Datasource& ds);

// S-expression rendering for tests and debugging, e.g. (and (text "foo") (eq "a" "b")).
std::string DebugString(const FilterNode& filter);

// Whether `value` matches the anchored glob `pattern` ('*' = any run of bytes), case-sensitive.
bool GlobMatch(std::string_view pattern, std::string_view value);
// As GlobMatch, ignoring ASCII case.
bool GlobMatchIgnoreCase(std::string_view pattern, std::string_view value);

// Whether `a` `cmp` `b` holds (the comparison of a kFieldCmp filter).
bool CompareNumbers(double a, FilterNode::Cmp cmp, double b);

// The capture index in `re` of each name in `groups` (-1: not a group of `re`), as a kRegex
// stage's group_index holds them.
std::vector<int> RegexGroupIndexes(const re2::RE2& re, const std::vector<std::string>& groups);

}  // namespace sediment::query
