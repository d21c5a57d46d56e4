// The query-function registry (internal to sediment_query): every function of the query language
// by name, with its parameter table, its kind, the factory that turns its bound arguments into
// the compiled form (compiled.h) and a one-line doc. The parser (parser.cc) knows only the
// grammar; it parses a call's arguments as generic values (ArgValue), looks the function up here
// and calls Bind, which does every generic check from the parameter table (unknown, unsupported,
// unnamed, given twice, required, type of value) and then the function's factory.
//
// Adding a function: one file under functions/ defining its `const Function` (parameter table,
// factory, doc), and one line in the SEDIMENT_QUERY_FUNCTIONS list in functions/list.h; then
// its section in FUNCTIONS.md (functions_test checks that both agree). See query/README.md.
//
// The Function and Param tables are constant-initialized and immutable (safe to share across
// threads); a Call is used by one thread. Compile-time only: nothing here runs per event.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "query/compiled.h"

namespace sediment::query::functions {

// Row limits LogScale documents for its `limit=max` aliases (StateRowLimit, GroupMaxLimit) and
// the maximum number of series of timeChart()/bucket().
inline constexpr int64_t kMaxRows = 200000;
inline constexpr int64_t kMaxGroups = 1000000;
inline constexpr int64_t kMaxSeries = 500;
inline constexpr int64_t kNoMax = std::numeric_limits<int64_t>::max();

// ---- generic argument values (what the parser produces for a call) ----

// A parsed argument value: a word/string, a [list], a call like count(x), or a subquery
// `{ ... }` (parsed and compiled by the parser; `text` is its source).
struct Arg;
struct ArgValue {
  // kExpr: the value of a Type::kExpr parameter, parsed as an expression (`expr`; `text` is its
  // source text).
  enum class Kind { kScalar, kList, kCall, kSubquery, kExpr } kind = Kind::kScalar;
  std::string text;  // scalar text or call name
  bool quoted = false;
  std::vector<ArgValue> list;
  std::vector<Arg> args;                     // call arguments
  std::shared_ptr<const Subquery> subquery;  // kSubquery
  ExprPtr expr;                              // kExpr
  size_t position = 0;
};
struct Arg {
  std::string name;  // empty for the unnamed argument
  size_t position = 0;
  ArgValue value;
};

// Parses `text` as one argument value (the grammar of a call's argument; defined in parser.cc).
// Used for the parameters' defaults, which are written in query syntax.
[[nodiscard]] bool ParseArgumentValue(std::string_view text, ArgValue* out);

// Short rendering of a value for messages.
std::string ValueText(const ArgValue& v);
// The items of a list value, or the value itself when it is not a list.
std::vector<const ArgValue*> ItemsOf(const ArgValue& v);

// ---- parameter tables ----

// The type of a parameter's value. Bind converts given values (and defaults) of every type but
// kRaw and kUnsupported, in table order, and reports the first invalid one.
enum class Type {
  kString,       // a scalar (quoted or not)
  kField,        // a non-empty scalar
  kFields,       // a field name or a non-empty list of field names
  kBool,         // true / false, any case
  kLimit,        // a non-negative integer up to Param::max ("max" = max when max_alias)
  kSpan,         // a time span (1m, 5min, "1 hour", auto = 0)
  kPercentiles,  // a number or a list of numbers in [0, 100]
  kMetrics,      // an aggregate call or a list of them (count(), [sum(x), avg(y)])
  kExpr,         // an expression evaluated per record (`x + 1`, `text:length(m) - 9`, a field, a
                 // literal); the parser reads the value as one (Call::Expression)
  kExprs,        // an expression or a [list] of them, each read as kExpr is (Call::Expressions)
  kRaw,          // any value; the factory checks and converts it (Call::Arg / Call::Value)
  kUnsupported,  // a LogScale parameter sediment refuses by name
};

struct Param {
  const char* name;  // as documented (camelCase); also accepted all lower-case
  Type type = Type::kString;
  bool unnamed = false;   // the parameter a positional argument stands for (at most one)
  bool required = false;  // "missing required parameter" when absent
  // The value when absent, in query syntax ("200", "@rawstring", "[50, 75, 99]", "count()");
  // nullptr: none (accessors give the empty value, Call::Given is false).
  const char* default_value = nullptr;
  int64_t max = kNoMax;    // kLimit
  bool max_alias = false;  // kLimit: "max" stands for `max`
};

// ---- functions ----

enum class Kind {
  kFilter,      // in(), wildcard(): a filter, usable anywhere a filter is
  kTransform,   // a per-record stage (Stage::IsTransform())
  kCollector,   // a collecting stage: head, tail, sort, table, groupBy, timeChart, ...
  kAggregate,   // count/sum/...: a collecting stage of its own, or a metric in function=
  kExpression,  // a function of eval()/:= expressions (lower(s), concat(a, b), ...)
};

// How the parser reads the call's arguments.
enum class Syntax {
  kArguments,    // name=value, ... (generic values bound to the parameter table)
  kAssignments,  // field = expression, ... (eval(); Call::assignments)
  kExpression,   // one expression (test(); Call::expression)
};

class Call;
struct Function {
  const char* name;  // documented spelling; also accepted all lower-case
  Kind kind;
  std::span<const Param> params;
  const char* doc;  // one line
  // Exactly the factories the kind needs (null otherwise). They get the bound, type-checked
  // arguments; on a function-specific error they report it (Call::Error / BadParam) and return
  // false / null.
  bool (*stage)(Call& c, Stage* st) = nullptr;   // kTransform, kCollector, kAggregate
  FilterPtr (*filter)(Call& c) = nullptr;        // kFilter
  bool (*metric)(Call& c, Metric* m) = nullptr;  // kAggregate
  Syntax syntax = Syntax::kArguments;
  int min_args = 0;             // kExpression: positional arguments
  int max_args = 0;             // kExpression; -1 = any number
  const char* camel = nullptr;  // kExpression: a camelCase spelling also accepted (toString)
  // A step that filters (it drops the records it does not match): `!f(...)` as a step of its
  // own keeps exactly the records f() drops, unchanged (Stage::negate).
  bool negatable = false;
};

// Every registered function, in registration order (functions/list.h).
std::span<const Function* const> All();
// The pipeline function (kind != kExpression) called `name` (documented or all lower-case).
const Function* FindPipelineFunction(std::string_view name);
// The aggregate usable in function= called `name`, or null.
const Function* FindAggregate(std::string_view name);
// The expression function called `name` (lower case, or its camel spelling), or null.
const Function* FindExpressionFunction(std::string_view name);

// ---- a call being compiled ----

// The arguments of one call of `fn` bound to its parameters. Errors go to *err (the first one
// is kept: the message ends with "at position N", as every parse error). Every accessor's
// `param` must be the documented name of a parameter of fn's table (the process aborts
// otherwise: a bug in the factory, not in the query).
class Call {
 public:
  Call(const Function& fn, size_t position, Status* err);

  // Binds `args`: the generic checks, then the conversion of every typed parameter (given or
  // defaulted) in table order. False (error recorded) on the first failure.
  [[nodiscard]] bool Bind(const std::vector<functions::Arg>& args);

  const Function& fn() const { return *fn_; }
  const std::string& name() const { return name_; }  // documented name, for messages
  size_t position() const { return position_; }      // of the function name

  // Whether the parameter was given in the query (not defaulted).
  bool Given(std::string_view param) const;
  // The argument given for `param`, or null.
  const functions::Arg* GivenArg(std::string_view param) const;
  // The value of `param` (given, else its default), or null when it has neither.
  const ArgValue* Value(std::string_view param) const;

  // Converted values of typed parameters (the type's empty value when absent without default).
  const std::string& String(std::string_view param) const;  // kString, kField
  const std::vector<std::string>& Fields(std::string_view param) const;
  bool Bool(std::string_view param) const;
  int64_t Limit(std::string_view param) const;  // also kSpan (ms, 0 = auto)
  const std::vector<double>& Percentiles(std::string_view param) const;
  std::vector<Metric> TakeMetrics(std::string_view param);
  // kExpr: the expression (null when absent without default). A default in query syntax is a
  // literal or a field name.
  ExprPtr Expression(std::string_view param) const;
  // kExprs: the expressions, in order (empty when not given and without default).
  const std::vector<ExprPtr>& Expressions(std::string_view param) const;

  // Converters for kRaw parameters, with the same checks and messages as the typed ones: false
  // (error recorded) when the value does not fit; *out unchanged when `param` has no value.
  [[nodiscard]] bool ConvertBool(std::string_view param, bool* out);
  [[nodiscard]] bool ConvertField(std::string_view param, std::string* out);
  [[nodiscard]] bool ConvertFields(std::string_view param, std::vector<std::string>* out);

  // Error reporting.
  void Error(size_t at, const std::string& msg);
  // `v` (the value of `param`, or an item of its list) is invalid.
  void BadValue(std::string_view param, const ArgValue& v, const std::string& expected);
  // The value of `param` is invalid.
  void BadParam(std::string_view param, const std::string& expected);
  bool ok() const { return err_->ok(); }
  Status* err() { return err_; }

  // Syntax::kAssignments: the parsed `field = expression` pairs.
  std::vector<std::pair<std::string, ExprPtr>> assignments;
  // Syntax::kExpression: the parsed expression.
  ExprPtr expression;

 private:
  // One parameter of the table: what was given (or defaulted) and its converted value.
  struct Bound {
    const Param* param = nullptr;
    const functions::Arg* arg = nullptr;  // given
    const ArgValue* value = nullptr;      // given, else the default, else null
    std::string text;                     // kString, kField
    std::vector<std::string> fields;      // kFields
    bool flag = false;                    // kBool
    int64_t number = 0;                   // kLimit, kSpan
    std::vector<double> percentiles;      // kPercentiles
    std::vector<Metric> metrics;          // kMetrics
    ExprPtr expr;                         // kExpr
    std::vector<ExprPtr> exprs;           // kExprs
  };
  Bound* Find(std::string_view param);
  const Bound* Find(std::string_view param) const;
  bool Convert(Bound* b);

  const Function* fn_;
  std::string name_;
  size_t position_;
  Status* err_;
  std::vector<Bound> bound_;        // one per parameter of the table, in table order
  std::vector<ArgValue> defaults_;  // reserved up front: Bound::value points into it
  // Lists made of several positional values of one kFields parameter (`readFile("a", "b")`):
  // Bound::value points into it (a deque: its elements stay where they are).
  std::deque<ArgValue> combined_;
};

// Fills `metrics` from `v` (an aggregate call or a list of them), `context` naming where they
// are for messages ("groupBy(function=...)", "[...]"). False (error recorded) on failure.
[[nodiscard]] bool MetricsFrom(const ArgValue& v, const std::string& context, Status* err,
                               std::vector<Metric>* metrics);
// False (error recorded) when two of `metrics` have the same output name; `fn` names the function.
[[nodiscard]] bool CheckMetricNames(const std::vector<Metric>& metrics, const std::string& fn,
                                    Status* err);

// ---- helpers of the aggregate functions ----

// count() at `position`.
Metric CountMetric(size_t position);
// The factory of an aggregate used as a step of its own (count(), sum(x), ...): a kAggregate
// stage without grouping whose only metric is c.fn().metric's.
[[nodiscard]] bool MetricAsStage(Call& c, Stage* st);
// The metrics of an aggregate stage from parameter `param` (kMetrics): count() when none are
// left (function=[] still counts), with distinct output names.
[[nodiscard]] bool SetMetrics(Call& c, std::string_view param, Stage* st);

// Records "msg at position `at`" in *err unless it already holds an error.
void RecordError(Status* err, size_t at, const std::string& msg);

}  // namespace sediment::query::functions
