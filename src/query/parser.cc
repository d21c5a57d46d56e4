// Recursive-descent parser for the supported CQL subset: filters (query/README.md), pipeline
// functions and expressions (query/FUNCTIONS.md). Produces the CompiledQuery of compiled.h.
#include <re2/re2.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "query/compiled.h"
#include "query/query.h"
#include "query/record.h"
#include "query/text_util.h"

namespace sediment::query {
namespace {

// Row limits LogScale documents for its `limit=max` aliases (StateRowLimit, GroupMaxLimit) and
// the maximum number of series of timeChart()/bucket().
constexpr int64_t kMaxRows = 200000;
constexpr int64_t kMaxGroups = 1000000;
constexpr int64_t kMaxSeries = 500;
constexpr int64_t kNoMax = std::numeric_limits<int64_t>::max();
// Deepest nesting of parentheses, negations, lists, calls and case { } accepted (bounds the
// recursion, hence the stack a hostile query can use).
constexpr int kMaxDepth = 100;

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'; }

bool IsFieldNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '@' || c == '#';
}

bool IsIdentStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }

bool IsIdentChar(char c) { return IsIdentStart(c) || (c >= '0' && c <= '9'); }

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

bool IsKeyword(std::string_view w) {
  return EqualsIgnoreCase(w, "and") || EqualsIgnoreCase(w, "or") || EqualsIgnoreCase(w, "not");
}

// The non-empty runs between '*' characters, lower-cased.
std::vector<std::string> GlobPieces(std::string_view pattern) {
  std::vector<std::string> out;
  AppendGlobPieces(pattern, &out);
  return out;
}

// Shortest text that reads back as `v` ("50", "99.9", "-0.5").
std::string FormatNumber(double v) {
  char buf[64];
  auto [p, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  return ec == std::errc() ? std::string(buf, p) : std::string("nan");
}

// Milliseconds of a relative time span such as "1m", "5min", "1 hour", "100ms"; nullopt when
// `s` is not one (calendar months are not fixed spans and are rejected).
std::optional<int64_t> ParseSpan(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  size_t i = 0;
  while (i < s.size() && IsDigit(s[i])) ++i;
  if (i == 0 || i > 12) return std::nullopt;
  int64_t n = 0;
  std::from_chars(s.data(), s.data() + i, n);
  size_t u = i;
  while (u < s.size() && IsSpace(s[u])) ++u;
  std::string unit = Lower(s.substr(u));
  constexpr int64_t kSec = 1000, kMin = 60 * kSec, kHour = 60 * kMin, kDay = 24 * kHour;
  struct Unit {
    std::initializer_list<const char*> names;
    int64_t ms;
  };
  static const Unit kUnits[] = {
      {{"ms", "msec", "msecs", "millis", "millisecond", "milliseconds"}, 1},
      {{"s", "sec", "secs", "second", "seconds"}, kSec},
      {{"m", "min", "mins", "minute", "minutes"}, kMin},
      {{"h", "hr", "hrs", "hour", "hours"}, kHour},
      {{"d", "day", "days"}, kDay},
      {{"w", "week", "weeks"}, 7 * kDay},
      {{"y", "yr", "yrs", "year", "years"}, 365 * kDay},
  };
  for (const Unit& un : kUnits) {
    for (const char* name : un.names) {
      if (unit == name) {
        if (n == 0) return std::nullopt;
        return n * un.ms;
      }
    }
  }
  return std::nullopt;
}

// "UTC", "Z" (GMT is taken as UTC) or a fixed offset "+HH:MM" / "+HHMM" / "+HH" normalized to
// "+HH:MM"; nullopt for anything else (named zones are not supported).
std::optional<std::string> NormalizeTimezone(std::string_view tz) {
  std::string up = Lower(tz);
  if (up == "utc" || up == "gmt") return std::string("UTC");
  if (up == "z") return std::string("Z");
  if (tz.size() < 3 || (tz[0] != '+' && tz[0] != '-')) return std::nullopt;
  std::string_view rest = tz.substr(1);
  std::string digits;
  if (rest.size() == 5 && rest[2] == ':') {
    digits = std::string(rest.substr(0, 2)) + std::string(rest.substr(3, 2));
  } else if (rest.size() == 4 || rest.size() == 2) {
    digits = std::string(rest) + (rest.size() == 2 ? "00" : "");
  } else {
    return std::nullopt;
  }
  for (char c : digits) {
    if (!IsDigit(c)) return std::nullopt;
  }
  int hours = (digits[0] - '0') * 10 + (digits[1] - '0');
  int minutes = (digits[2] - '0') * 10 + (digits[3] - '0');
  if (hours > 18 || minutes > 59) return std::nullopt;
  return std::string(1, tz[0]) + digits.substr(0, 2) + ":" + digits.substr(2, 2);
}

// Rewrites Java/LogScale named groups `(?<name>...)` as RE2's `(?P<name>...)`. With
// `plain_to_noncapturing`, unnamed capturing groups `(...)` become `(?:...)`, so that the capture
// groups of the result are exactly its named groups. Escapes and character classes are skipped.
std::string ConvertRegex(std::string_view p, bool plain_to_noncapturing) {
  std::string out;
  out.reserve(p.size() + 8);
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      out.push_back(c);
      out.push_back(p[++i]);
      continue;
    }
    if (in_class) {
      if (c == ']') in_class = false;
      out.push_back(c);
      continue;
    }
    if (c == '[') {
      in_class = true;
      out.push_back(c);
      if (i + 1 < p.size() && p[i + 1] == '^') out.push_back(p[++i]);
      if (i + 1 < p.size() && p[i + 1] == ']') out.push_back(p[++i]);
      continue;
    }
    if (c == '(') {
      bool question = i + 1 < p.size() && p[i + 1] == '?';
      if (question && i + 3 < p.size() && p[i + 2] == '<' && p[i + 3] != '=' && p[i + 3] != '!') {
        out += "(?P<";
        i += 2;
        continue;
      }
      if (!question && plain_to_noncapturing) {
        out += "(?:";
        continue;
      }
    }
    out.push_back(c);
  }
  return out;
}

std::shared_ptr<const RE2> CompileRegex(const std::string& source, std::string* error) {
  RE2::Options opts;
  opts.set_log_errors(false);
  auto re = std::make_shared<RE2>(source, opts);
  if (!re->ok()) {
    *error = re->error();
    return nullptr;
  }
  return re;
}

// The bytes every match of the RE2 pattern `re` starts with, or "" when none is certain: after
// leading flag groups such as (?m) or (?s) (not (?i)), the pattern starts with literal bytes or
// escaped punctuation bytes, and has no '|' outside brackets. A byte that ?, * or { follows is
// not part of the prefix; one that + follows ends it.
std::string LeadingLiteral(std::string_view re) {
  size_t i = 0;
  while (re.compare(i, 2, "(?") == 0) {
    size_t j = i + 2;
    while (j < re.size() && (re[j] == 'm' || re[j] == 's' || re[j] == 'U')) ++j;
    if (j >= re.size() || re[j] != ')' || j == i + 2) return "";  // (?i), (?P<..>, (?:..)
    i = j + 1;
  }
  int depth = 0;
  bool in_class = false;
  for (size_t k = i; k < re.size(); ++k) {
    const char c = re[k];
    if (c == '\\') {
      ++k;
    } else if (in_class) {
      if (c == ']') in_class = false;
    } else if (c == '[') {
      in_class = true;
    } else if (c == '(') {
      ++depth;
    } else if (c == ')') {
      --depth;
    } else if (c == '|' && depth == 0) {
      return "";
    }
  }
  std::string out;
  for (size_t k = i; k < re.size();) {
    unsigned char c = static_cast<unsigned char>(re[k]);
    size_t next = k + 1;
    if (c == '\\') {
      if (k + 1 >= re.size()) break;
      c = static_cast<unsigned char>(re[k + 1]);
      if (std::isalnum(c) || c >= 0x80) break;  // \d, \w, \x41, \Q, ...: not a literal
      next = k + 2;
    } else if (c >= 0x80 || std::string_view("^$.|?*+()[]{}").find(static_cast<char>(c)) !=
                                std::string_view::npos) {
      break;
    }
    if (next < re.size() && (re[next] == '?' || re[next] == '*' || re[next] == '{')) break;
    out.push_back(static_cast<char>(c));
    if (next < re.size() && re[next] == '+') break;
    k = next;
  }
  return out;
}

// Names of the capture groups of `re` in capture order (every group must be named).
std::vector<std::string> GroupNames(const RE2& re) {
  std::vector<std::string> out;
  for (const auto& [index, name] : re.CapturingGroupNames()) out.push_back(name);
  return out;
}

// Gives a kRegex stage the regex `re` (every capture group named), its group names and its
// capture indexes and its leading literal bytes.
void SetStageRegex(std::shared_ptr<const RE2> re, Stage* st) {
  st->groups = GroupNames(*re);
  st->group_index = RegexGroupIndexes(*re, st->groups);
  st->regex_prefix = LeadingLiteral(re->pattern());
  st->re = std::move(re);
}

std::shared_ptr<FilterNode> MakeNode(FilterNode::Kind kind, size_t position) {
  auto n = std::make_shared<FilterNode>();
  n->kind = kind;
  n->position = position;
  return n;
}

FilterPtr Combine(FilterNode::Kind kind, FilterPtr a, FilterPtr b, size_t position) {
  auto n = MakeNode(kind, position);
  n->children = {std::move(a), std::move(b)};
  return n;
}

// A node comparing a field (not set here) with `text`: kFieldGlob when `text` has a '*', else
// kFieldEq.
std::shared_ptr<FilterNode> MakeFieldMatch(std::string text, size_t position) {
  const bool glob = text.find('*') != std::string::npos;
  auto n = MakeNode(glob ? FilterNode::Kind::kFieldGlob : FilterNode::Kind::kFieldEq, position);
  n->text = std::move(text);
  return n;
}

ExprPtr MakeExpr(Expr::Kind kind, std::string text, size_t position,
                 std::vector<ExprPtr> args = {}) {
  auto e = std::make_shared<Expr>();
  e->kind = kind;
  e->text = std::move(text);
  e->position = position;
  e->args = std::move(args);
  return e;
}

// Output field names of a metric (see Metric::as): percentile's `as` is a prefix.
std::vector<std::string> MetricOutputNames(const Metric& m) {
  switch (m.kind) {
    case Metric::Kind::kCount:
      return {m.as.empty() ? "_count" : m.as};
    case Metric::Kind::kSum:
      return {m.as.empty() ? "_sum" : m.as};
    case Metric::Kind::kAvg:
      return {m.as.empty() ? "_avg" : m.as};
    case Metric::Kind::kMin:
      return {m.as.empty() ? "_min" : m.as};
    case Metric::Kind::kMax:
      return {m.as.empty() ? "_max" : m.as};
    case Metric::Kind::kPercentile: {
      std::vector<std::string> out;
      for (double p : m.percentiles) out.push_back(m.as + "_" + FormatNumber(p));
      return out;
    }
  }
  return {};
}

// ---- function names ----

// Pipeline functions, by their documented (camelCase) names.
const char* const kFunctions[] = {
    "count",   "sum",        "avg",    "min",    "max",   "percentile", "stats",
    "groupBy", "timeChart",  "bucket", "top",    "table", "select",     "sort",
    "head",    "tail",       "drop",   "rename", "eval",  "regex",      "parseJson",
    "kvParse", "formatTime", "lower",  "length", "split", "in",         "wildcard",
};
const char* const kMetricFunctions[] = {"count", "sum", "avg", "min", "max", "percentile"};

// The documented name of `name` (given as documented or all lower-case), or "".
template <size_t N>
std::string Canonical(const char* const (&names)[N], std::string_view name) {
  for (const char* n : names) {
    if (name == n || name == Lower(n)) return n;
  }
  return "";
}

std::string CanonicalFunction(std::string_view name) { return Canonical(kFunctions, name); }

bool IsFilterFunction(const std::string& fn) { return fn == "in" || fn == "wildcard"; }

// Expression functions: canonical (lower-case) name, documented camelCase spelling, arity.
struct ExprFunction {
  const char* name;
  const char* camel;
  int min_args;
  int max_args;  // -1 = any number
};
const ExprFunction kExprFunctions[] = {
    {"lower", nullptr, 1, 1},
    {"upper", nullptr, 1, 1},
    {"length", nullptr, 1, 1},
    {"concat", nullptr, 1, -1},
    {"substr", nullptr, 2, 3},
    {"trim", nullptr, 1, 1},
    {"round", nullptr, 1, 1},
    {"floor", nullptr, 1, 1},
    {"ceil", nullptr, 1, 1},
    {"abs", nullptr, 1, 1},
    {"min", nullptr, 2, -1},
    {"max", nullptr, 2, -1},
    {"if", nullptr, 3, 3},
    {"tostring", "toString", 1, 1},
    {"tonumber", "toNumber", 1, 1},
    {"now", nullptr, 0, 0},
    {"formattime", "formatTime", 2, 3},
};

const ExprFunction* FindExprFunction(std::string_view name) {
  for (const ExprFunction& f : kExprFunctions) {
    if (name == f.name || (f.camel != nullptr && name == f.camel)) return &f;
  }
  return nullptr;
}

// ---- function arguments ----

// A parsed argument value: a word/string, a [list], or a call like count(x).
struct Arg;
struct ArgValue {
  enum class Kind { kScalar, kList, kCall } kind = Kind::kScalar;
  std::string text;  // scalar text or call name
  bool quoted = false;
  std::vector<ArgValue> list;
  std::vector<Arg> args;  // call arguments
  size_t position = 0;
};
struct Arg {
  std::string name;  // empty for the unnamed argument
  size_t position = 0;
  ArgValue value;
};

// Short rendering of a value for messages.
std::string ValueText(const ArgValue& v) {
  switch (v.kind) {
    case ArgValue::Kind::kScalar:
      return v.text;
    case ArgValue::Kind::kList:
      return "[...]";
    case ArgValue::Kind::kCall:
      return v.text + "()";
  }
  return "";
}

// The items of a list value, or the value itself when it is not a list.
std::vector<const ArgValue*> ItemsOf(const ArgValue& v) {
  std::vector<const ArgValue*> items;
  if (v.kind == ArgValue::Kind::kList) {
    for (const ArgValue& item : v.list) items.push_back(&item);
  } else {
    items.push_back(&v);
  }
  return items;
}

// The arguments of one call bound to its parameter names.
struct Params {
  std::string fn;       // canonical function name
  size_t position = 0;  // of the function name
  std::vector<std::pair<std::string, const Arg*>> given;
  const Arg* Find(std::string_view name) const {
    for (const auto& [n, a] : given) {
      if (n == name) return a;
    }
    return nullptr;
  }
};

class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  Result<std::shared_ptr<const CompiledQuery>> Parse() {
    auto q = std::make_shared<CompiledQuery>();
    q->text = std::string(s_);
    FilterPtr filter;
    if (!ParseSteps(&filter, &q->stages, /*in_branch=*/false)) return err_;
    q->filter = filter ? filter : MakeNode(FilterNode::Kind::kTrue, 0);
    q->is_aggregate = std::any_of(q->stages.begin(), q->stages.end(),
                                  [](const Stage& st) { return st.IsAggregate(); });
    return std::shared_ptr<const CompiledQuery>(std::move(q));
  }

 private:
  bool ok() const { return err_.ok(); }
  bool AtEnd() const { return pos_ >= s_.size(); }
  char Peek(size_t ahead = 0) const { return pos_ + ahead < s_.size() ? s_[pos_ + ahead] : '\0'; }
  void SkipWs() {
    while (!AtEnd() && IsSpace(s_[pos_])) ++pos_;
  }
  // "end of query" or "'c'".
  std::string Found() const {
    if (AtEnd()) return "end of query";
    return "'" + std::string(1, s_[pos_]) + "'";
  }
  std::string Unexpected() const {
    if (AtEnd()) return "unexpected end of query";
    return "unexpected " + Found();
  }
  // Records the first error.
  void Error(size_t at, const std::string& msg) {
    if (err_.ok()) {
      err_ = Status::InvalidArgument(msg + " at position " + std::to_string(at));
    }
  }
  bool InCase() const { return case_depth_ > 0; }

  // Counts one level of nesting while alive; ok() is false (and an error recorded) beyond
  // kMaxDepth.
  class Nest {
   public:
    explicit Nest(Parser* p) : p_(p) {
      if (++p_->depth_ > kMaxDepth) p_->Error(p_->pos_, "query nested too deeply");
    }
    ~Nest() { --p_->depth_; }
    Nest(const Nest&) = delete;
    Nest& operator=(const Nest&) = delete;
    bool ok() const { return p_->depth_ <= kMaxDepth; }

   private:
    Parser* p_;
  };
  // Whether pos_ (after SkipWs) is where a pipeline step ends.
  bool AtStepEnd() const {
    if (AtEnd()) return true;
    char c = Peek();
    return c == '|' || (InCase() && (c == ';' || c == '}'));
  }

  // Characters that end a bare word in a filter.
  bool EndsWord(char c) const {
    return IsSpace(c) || c == '(' || c == ')' || c == '|' || c == '"' || c == '=' || c == '!' ||
           c == ',' || c == '[' || c == ']' || c == '<' || c == '>' ||
           (InCase() && (c == ';' || c == '{' || c == '}'));
  }

  // The bare word starting at `at` (not consumed).
  std::string_view WordAt(size_t at) const {
    size_t e = at;
    while (e < s_.size() && !EndsWord(s_[e])) ++e;
    return s_.substr(at, e - at);
  }

  // End of the identifier starting at `at`.
  size_t IdentEnd(size_t at) const {
    size_t e = at;
    while (e < s_.size() && IsIdentChar(s_[e])) ++e;
    return e;
  }
  size_t SkipWsFrom(size_t at) const {
    while (at < s_.size() && IsSpace(s_[at])) ++at;
    return at;
  }
  // End of the field name starting at `at`.
  size_t FieldNameEnd(size_t at) const {
    while (at < s_.size() && IsFieldNameChar(s_[at])) ++at;
    return at;
  }

  // Consumes white space and then `close` when it follows (an empty list); whether it did.
  bool TryClose(char close) {
    SkipWs();
    if (Peek() != close) return false;
    ++pos_;
    return true;
  }
  // After an item of a list ended by `close`: consumes ',' (*done = false: another item follows)
  // or `close` (*done = true); false (an error recorded) when neither follows.
  bool ListSeparator(char close, bool* done) {
    SkipWs();
    if (Peek() == ',' || Peek() == close) {
      *done = Peek() == close;
      ++pos_;
      return true;
    }
    const std::string c(1, close);
    Error(pos_,
          AtEnd() ? "missing '" + c + "'" : "expected ',' or '" + c + "' but found " + Found());
    return false;
  }
  // The ')' closing the '(' at `open`, after white space; false (an error recorded) when another
  // character or the end follows.
  bool CloseParen(size_t open) {
    SkipWs();
    if (Peek() != ')') {
      Error(pos_, AtEnd() ? "missing ')' for '(' at position " + std::to_string(open)
                          : "expected ')' but found " + Found());
      return false;
    }
    ++pos_;
    return true;
  }
  // The name of a named argument `name = ...` at pos_ ('=' not the start of '=='), consumed with
  // its '='; "" (nothing consumed) when pos_ is not at one.
  std::string ParseParamName() {
    size_t e = IdentEnd(pos_);
    size_t k = SkipWsFrom(e);
    if (e == pos_ || k >= s_.size() || s_[k] != '=' || (k + 1 < s_.size() && s_[k + 1] == '=')) {
      return "";
    }
    std::string name(s_.substr(pos_, e - pos_));
    pos_ = k + 1;
    return name;
  }

  // A keyword (and/or/not, any case) at pos_ that is not used as a field name.
  bool AtKeyword(std::string_view kw) const {
    std::string_view w = WordAt(pos_);
    if (!EqualsIgnoreCase(w, kw)) return false;
    size_t e = SkipWsFrom(pos_ + w.size());
    if (e < s_.size() && (s_[e] == '=' || s_[e] == '<' || s_[e] == '>' ||
                          (s_[e] == '!' && e + 1 < s_.size() && s_[e + 1] == '='))) {
      return false;
    }
    return true;
  }

  // ---- pipeline ----

  // Steps separated by '|' up to the end of the query (or, in a case branch, up to ';' / '}',
  // not consumed). Leading pure-filter steps are ANDed into *leading (null when there are none);
  // every later step is appended to *stages.
  bool ParseSteps(FilterPtr* leading, std::vector<Stage>* stages, bool in_branch) {
    bool filter_phase = true;
    bool first = true;
    while (true) {
      SkipWs();
      if (AtStepEnd()) {
        // Only the first step may be empty: "| count()" or the empty query.
        bool allowed = first && (Peek() == '|' || (!in_branch && AtEnd()));
        if (!allowed) {
          Error(pos_, "expected a filter or a function but found " + Found());
          return false;
        }
      } else {
        if (!ParseStep(leading, stages, &filter_phase)) return false;
        SkipWs();
      }
      first = false;
      if (AtEnd()) return true;
      char c = Peek();
      if (c == '|') {
        ++pos_;
        continue;
      }
      if (in_branch && (c == ';' || c == '}')) return true;
      Error(pos_, Unexpected());
      return false;
    }
  }

  void AddFilter(FilterPtr f, size_t position, FilterPtr* leading, std::vector<Stage>* stages,
                 bool filter_phase) {
    if (filter_phase) {
      *leading = *leading ? Combine(FilterNode::Kind::kAnd, *leading, f, position) : f;
      return;
    }
    Stage st;
    st.kind = Stage::Kind::kFilter;
    st.position = position;
    st.function = "filter";
    st.filter = std::move(f);
    stages->push_back(std::move(st));
  }

  // One non-empty pipeline step at pos_.
  bool ParseStep(FilterPtr* leading, std::vector<Stage>* stages, bool* filter_phase) {
    size_t start = pos_;
    // A step that is not a pure filter: appended, and the leading filters end.
    auto add_stage = [&](Stage st) {
      stages->push_back(std::move(st));
      *filter_phase = false;
      return true;
    };
    char c = Peek();
    if (c == '[') {
      Stage st;
      if (!ParseStatsShorthand(start, &st)) return false;
      return add_stage(std::move(st));
    }
    if (IsFieldNameChar(c)) {
      size_t e = FieldNameEnd(start);
      size_t k = SkipWsFrom(e);
      if (k + 1 < s_.size() && s_[k] == ':' && s_[k + 1] == '=') {
        Stage st;
        st.kind = Stage::Kind::kEval;
        st.position = start;
        st.function = "eval";
        pos_ = k + 2;
        ExprPtr value = ParseExpr();
        if (!value) return false;
        st.assignments.emplace_back(std::string(s_.substr(start, e - start)), std::move(value));
        return add_stage(std::move(st));
      }
    }
    if (IsIdentStart(c)) {
      size_t e = IdentEnd(start);
      std::string name(s_.substr(start, e - start));
      size_t k = SkipWsFrom(e);
      if (name == "case" && k < s_.size() && s_[k] == '{') {
        pos_ = k;
        Stage st;
        if (!ParseCase(start, &st)) return false;
        return add_stage(std::move(st));
      }
      if (k < s_.size() && s_[k] == '(' && !IsKeyword(name)) {
        std::string fn = CanonicalFunction(name);
        if (fn.empty() && k == e) {
          Error(start, "unknown function '" + name + "'");
          return false;
        }
        if (!fn.empty() && !IsFilterFunction(fn)) {
          pos_ = k + 1;
          Stage st;
          if (!ParseFunctionStage(fn, start, &st)) return false;
          return add_stage(std::move(st));
        }
      }
    }
    FilterPtr f = ParseAnd();
    if (!f) return false;
    SkipWs();
    if (!AtStepEnd()) {
      Error(pos_, Unexpected());
      return false;
    }
    // A step that is one regex with named groups also extracts them as fields (as regex()).
    if ((f->kind == FilterNode::Kind::kRawRegex || f->kind == FilterNode::Kind::kFieldRegex) &&
        !f->re->NamedCapturingGroups().empty()) {
      std::string error;
      auto re = CompileRegex(ConvertRegex(f->text, /*plain_to_noncapturing=*/true), &error);
      if (!re) {
        Error(start, "invalid regular expression: " + error);
        return false;
      }
      AddFilter(f, start, leading, stages, *filter_phase);
      Stage st;
      st.kind = Stage::Kind::kRegex;
      st.position = start;
      st.function = "regex";
      st.field = f->field;
      st.strict = true;
      SetStageRegex(std::move(re), &st);
      return add_stage(std::move(st));
    }
    AddFilter(std::move(f), start, leading, stages, *filter_phase);
    return true;
  }

  // case { cond | stages ; cond | stages ; * | stages }; pos_ at '{'.
  bool ParseCase(size_t start, Stage* st) {
    Nest nest(this);
    if (!nest.ok()) return false;
    size_t brace = pos_;
    ++pos_;
    st->kind = Stage::Kind::kCase;
    st->position = start;
    st->function = "case";
    ++case_depth_;
    while (true) {
      SkipWs();
      if (AtEnd()) {
        Error(pos_, "missing '}' for 'case {' at position " + std::to_string(brace));
        return false;
      }
      if (Peek() == '}') {
        if (st->branches.empty()) {
          Error(pos_, "empty case { }");
          return false;
        }
        ++pos_;
        break;
      }
      CaseBranch branch;
      FilterPtr condition;
      if (!ParseSteps(&condition, &branch.stages, /*in_branch=*/true)) return false;
      for (const Stage& s : branch.stages) {
        if (!s.IsTransform()) {
          Error(s.position, s.function +
                                "() cannot be used in a case branch (only per-record functions "
                                "can)");
          return false;
        }
      }
      branch.condition = condition ? condition : MakeNode(FilterNode::Kind::kTrue, pos_);
      st->branches.push_back(std::move(branch));
      SkipWs();
      if (AtEnd()) {
        Error(pos_, "missing '}' for 'case {' at position " + std::to_string(brace));
        return false;
      }
      if (Peek() == ';') {
        ++pos_;
        continue;
      }
      ++pos_;  // '}' (ParseSteps stops only at the end, ';' or '}')
      break;
    }
    --case_depth_;
    return true;
  }

  // ---- filters ----

  // LogScale precedence: NOT binds tightest, then OR, then AND (explicit or implicit), so
  // `a b OR c` is `a AND (b OR c)`. Both binary operators are left-associative.
  FilterPtr ParseAnd() {
    size_t start = pos_;
    FilterPtr left = ParseOr();
    while (ok()) {
      SkipWs();
      if (AtStepEnd() || Peek() == ')') break;
      if (AtKeyword("and")) pos_ += 3;
      FilterPtr right = ParseOr();
      if (!ok()) return nullptr;
      left = Combine(FilterNode::Kind::kAnd, left, right, start);
    }
    return ok() ? left : nullptr;
  }

  FilterPtr ParseOr() {
    size_t start = pos_;
    FilterPtr left = ParseNot();
    while (ok()) {
      SkipWs();
      if (!AtKeyword("or")) break;
      pos_ += 2;
      FilterPtr right = ParseNot();
      if (!ok()) return nullptr;
      left = Combine(FilterNode::Kind::kOr, left, right, start);
    }
    return ok() ? left : nullptr;
  }

  FilterPtr ParseNot() {
    Nest nest(this);
    if (!nest.ok()) return nullptr;
    SkipWs();
    size_t start = pos_;
    bool negate = false;
    if (Peek() == '!' && Peek(1) != '=') {
      ++pos_;
      negate = true;
    } else if (AtKeyword("not")) {
      pos_ += 3;
      negate = true;
    }
    if (negate) {
      FilterPtr child = ParseNot();
      if (!ok()) return nullptr;
      auto n = MakeNode(FilterNode::Kind::kNot, start);
      n->children = {child};
      return n;
    }
    return ParsePrimary();
  }

  FilterPtr ParsePrimary() {
    SkipWs();
    size_t start = pos_;
    if (AtEnd()) {
      Error(pos_, "expected a filter but found end of query");
      return nullptr;
    }
    char c = Peek();
    if (c == '(') {
      ++pos_;
      SkipWs();
      if (Peek() == ')') {
        Error(pos_, "empty parentheses");
        return nullptr;
      }
      FilterPtr inner = ParseAnd();
      if (!ok() || !CloseParen(start)) return nullptr;
      return inner;
    }
    if (c == '/') {
      std::shared_ptr<const re2::RE2> re;
      std::string source;
      if (!ParseRegexLiteral(&re, &source)) return nullptr;
      auto n = MakeNode(FilterNode::Kind::kRawRegex, start);
      n->field = "@rawstring";
      n->text = source;
      n->re = re;
      return n;
    }
    if (IsIdentStart(c)) {
      // A filter function: in(...), wildcard(...).
      size_t e = IdentEnd(start);
      std::string name(s_.substr(start, e - start));
      size_t k = SkipWsFrom(e);
      if (k < s_.size() && s_[k] == '(' && !IsKeyword(name)) {
        std::string fn = CanonicalFunction(name);
        if (IsFilterFunction(fn)) {
          pos_ = k + 1;
          return ParseFilterFunction(fn, start);
        }
        if (k == e) {
          Error(start, fn.empty() ? "unknown function '" + name + "'"
                                  : fn + "() is not a filter: use it as a pipeline step of its "
                                         "own, after '|'");
          return nullptr;
        }
      }
    }
    std::string word;
    bool quoted = false;
    if (c == '"') {
      if (!ParseQuoted(&word)) return nullptr;
      quoted = true;
    } else if (EndsWord(c)) {
      Error(pos_, Unexpected());
      return nullptr;
    } else if (AtKeyword("and") || AtKeyword("or")) {
      Error(pos_, "expected a filter but found '" + std::string(WordAt(pos_)) + "'");
      return nullptr;
    } else {
      word = std::string(WordAt(pos_));
      pos_ += word.size();
    }
    size_t after = pos_;
    SkipWs();
    if (Peek() == '=' || Peek() == '<' || Peek() == '>' || (Peek() == '!' && Peek(1) == '=')) {
      return ParseComparison(word, quoted, start);
    }
    pos_ = after;
    if (word.find('*') != std::string::npos) {
      // Unanchored, case-insensitive wildcard over @rawstring (quoted or not; '*' cannot be
      // escaped).
      std::vector<std::string> pieces = GlobPieces(word);
      if (pieces.empty()) return MakeNode(FilterNode::Kind::kTrue, start);
      auto n = MakeNode(FilterNode::Kind::kTextGlob, start);
      n->text = Lower(word);
      for (const std::string& piece : pieces) n->pieces.emplace_back(piece);
      return n;
    }
    auto n = MakeNode(FilterNode::Kind::kText, start);
    n->text = Lower(word);
    n->searcher = std::make_shared<CiSearcher>(n->text);
    return n;
  }

  // `name` op value at pos_ (the operator), op one of = != < <= > >= ==.
  FilterPtr ParseComparison(const std::string& name, bool quoted_name, size_t start) {
    if (name.empty()) {
      Error(start, "empty field name");
      return nullptr;
    }
    if (!quoted_name) {
      for (size_t i = 0; i < name.size(); ++i) {
        if (!IsFieldNameChar(name[i])) {
          Error(start + i,
                "invalid character '" + std::string(1, name[i]) + "' in field name '" + name + "'");
          return nullptr;
        }
      }
    }
    std::string op;
    char c = Peek();
    if (c == '!' || (c == '=' && Peek(1) == '=') || ((c == '<' || c == '>') && Peek(1) == '=')) {
      op = std::string(s_.substr(pos_, 2));
    } else {
      op = std::string(1, c);
    }
    pos_ += op.size();
    SkipWs();
    size_t vpos = pos_;
    if (op != "=" && op != "!=") return ParseNumericComparison(name, op, start, vpos);
    bool negated = op == "!=";
    std::shared_ptr<FilterNode> n;
    if (Peek() == '/') {
      std::shared_ptr<const re2::RE2> re;
      std::string source;
      if (!ParseRegexLiteral(&re, &source)) return nullptr;
      n = MakeNode(FilterNode::Kind::kFieldRegex, start);
      n->text = source;
      n->re = re;
    } else if (Peek() == '"') {
      std::string value;
      if (!ParseQuoted(&value)) return nullptr;
      n = MakeFieldMatch(std::move(value), start);
    } else {
      std::string_view value = WordAt(pos_);
      if (value.empty()) {
        Error(vpos, "expected a value after '" + op + "' but found " + Found());
        return nullptr;
      }
      pos_ += value.size();
      n = MakeFieldMatch(std::string(value), start);
    }
    n->field = name;
    if (!negated) return n;
    auto neg = MakeNode(FilterNode::Kind::kNot, start);
    neg->children = {n};
    return neg;
  }

  FilterPtr ParseNumericComparison(const std::string& name, const std::string& op, size_t start,
                                   size_t vpos) {
    std::string value;
    if (Peek() == '"') {
      if (!ParseQuoted(&value)) return nullptr;
    } else {
      value = std::string(WordAt(pos_));
      pos_ += value.size();
    }
    std::optional<double> number = ParseNumber(value);
    if (!number) {
      std::string found = vpos < s_.size() && pos_ > vpos ? "'" + value + "'" : Found();
      Error(vpos, "expected a number after '" + op + "' but found " + found +
                      (op == "==" ? " (use '=' to compare text)" : ""));
      return nullptr;
    }
    auto n = MakeNode(FilterNode::Kind::kFieldCmp, start);
    n->field = name;
    n->text = value;
    n->number = *number;
    using C = FilterNode::Cmp;
    n->cmp = op == "<"    ? C::kLt
             : op == "<=" ? C::kLe
             : op == ">"  ? C::kGt
             : op == ">=" ? C::kGe
                          : C::kEq;
    return n;
  }

  // in(field, values=[...], ignoreCase=false) / wildcard(pattern, field=@rawstring,
  // ignoreCase=false, includeEverythingOnAsterisk=false); pos_ just after '('.
  FilterPtr ParseFilterFunction(const std::string& fn, size_t start) {
    std::vector<Arg> args;
    if (!ParseArgs(&args)) return nullptr;
    Params p;
    bool ignore_case = false;
    if (fn == "in") {
      if (!Bind(fn, start, args, "field", {"field", "values", "ignoreCase"}, {},
                {"field", "values"}, &p)) {
        return nullptr;
      }
      std::string field;
      if (!GetField(p, "field", &field) || !GetBool(p, "ignoreCase", &ignore_case)) return nullptr;
      std::vector<const ArgValue*> items = ItemsOf(p.Find("values")->value);
      if (items.empty()) {
        BadParam(p, "values", "at least one value");
        return nullptr;
      }
      FilterPtr result;
      for (const ArgValue* item : items) {
        if (item->kind != ArgValue::Kind::kScalar) {
          BadValue(p, "values", *item, "a string");
          return nullptr;
        }
        auto n = MakeFieldMatch(item->text, item->position);
        n->field = field;
        n->ignore_case = ignore_case;
        result = result ? Combine(FilterNode::Kind::kOr, result, n, start) : n;
      }
      return result;
    }
    // wildcard()
    if (!Bind(fn, start, args, "pattern",
              {"pattern", "field", "ignoreCase", "includeEverythingOnAsterisk"}, {}, {"pattern"},
              &p)) {
      return nullptr;
    }
    std::string pattern;
    std::vector<std::string> fields = {"@rawstring"};
    bool everything = false;
    if (!GetString(p, "pattern", &pattern) || !GetFields(p, "field", &fields) ||
        !GetBool(p, "ignoreCase", &ignore_case) ||
        !GetBool(p, "includeEverythingOnAsterisk", &everything)) {
      return nullptr;
    }
    if (everything && GlobPieces(pattern).empty() && !pattern.empty()) {
      return MakeNode(FilterNode::Kind::kTrue, start);
    }
    FilterPtr result;
    for (const std::string& field : fields) {
      auto n = MakeFieldMatch(pattern, start);
      n->field = field;
      n->ignore_case = ignore_case;
      result = result ? Combine(FilterNode::Kind::kOr, result, n, start) : n;
    }
    return result;
  }

  // "..." with \" and \\ escapes; other backslashes are kept.
  bool ParseQuoted(std::string* out) {
    size_t start = pos_;
    ++pos_;
    out->clear();
    while (!AtEnd()) {
      char c = s_[pos_];
      if (c == '\\' && pos_ + 1 < s_.size() && (s_[pos_ + 1] == '"' || s_[pos_ + 1] == '\\')) {
        out->push_back(s_[pos_ + 1]);
        pos_ += 2;
        continue;
      }
      if (c == '"') {
        ++pos_;
        return true;
      }
      out->push_back(c);
      ++pos_;
    }
    Error(start, "unterminated string");
    return false;
  }

  // /pattern/flags; "\/" stands for '/'. Flags: i (case-insensitive), m (multi-line), d (dot
  // matches newline). Named groups (?<name>...) are accepted.
  bool ParseRegexLiteral(std::shared_ptr<const re2::RE2>* re, std::string* source) {
    size_t start = pos_;
    ++pos_;
    std::string pattern;
    bool closed = false;
    while (!AtEnd()) {
      char c = s_[pos_];
      if (c == '\\' && pos_ + 1 < s_.size()) {
        if (s_[pos_ + 1] == '/') {
          pattern.push_back('/');
        } else {
          pattern.push_back(c);
          pattern.push_back(s_[pos_ + 1]);
        }
        pos_ += 2;
        continue;
      }
      ++pos_;
      if (c == '/') {
        closed = true;
        break;
      }
      pattern.push_back(c);
    }
    if (!closed) {
      Error(start, "unterminated regular expression");
      return false;
    }
    std::string prefix;
    while (!AtEnd() && IsIdentChar(Peek())) {
      std::string flag = RegexFlag(Peek());
      if (flag.empty()) {
        Error(pos_, "unknown regex flag '" + std::string(1, Peek()) + "'");
        return false;
      }
      prefix += flag;
      ++pos_;
    }
    std::string full = prefix + ConvertRegex(pattern, /*plain_to_noncapturing=*/false);
    std::string error;
    auto compiled = CompileRegex(full, &error);
    if (!compiled) {
      Error(start, "invalid regular expression: " + error);
      return false;
    }
    *re = std::move(compiled);
    *source = std::move(full);
    return true;
  }

  // The RE2 prefix of a LogScale regex flag, "" when `f` is not one.
  static std::string RegexFlag(char f) {
    switch (f) {
      case 'i':
        return "(?i)";
      case 'm':
        return "(?m)";
      case 'd':
        return "(?s)";
      default:
        return "";
    }
  }

  // ---- function arguments ----

  // Arguments up to and including ')'; pos_ is just after '('.
  bool ParseArgs(std::vector<Arg>* args) {
    for (bool done = TryClose(')'); !done;) {
      SkipWs();
      Arg arg;
      arg.position = pos_;
      arg.name = ParseParamName();
      if (!ParseArgValue(&arg.value)) return false;
      args->push_back(std::move(arg));
      if (!ListSeparator(')', &done)) return false;
    }
    return true;
  }

  bool ParseArgValue(ArgValue* v) {
    Nest nest(this);
    if (!nest.ok()) return false;
    SkipWs();
    v->position = pos_;
    char c = Peek();
    if (c == '[') {
      v->kind = ArgValue::Kind::kList;
      ++pos_;
      for (bool done = TryClose(']'); !done;) {
        ArgValue item;
        if (!ParseArgValue(&item)) return false;
        v->list.push_back(std::move(item));
        if (!ListSeparator(']', &done)) return false;
      }
      return true;
    }
    if (c == '"') {
      v->kind = ArgValue::Kind::kScalar;
      v->quoted = true;
      return ParseQuoted(&v->text);
    }
    if (c == '{') {
      Error(pos_, "subqueries { ... } are not supported");
      return false;
    }
    size_t e = pos_;
    while (e < s_.size() && !IsSpace(s_[e]) && s_[e] != ',' && s_[e] != ')' && s_[e] != ']' &&
           s_[e] != '(' && s_[e] != '[' && s_[e] != '|' && s_[e] != '"' && s_[e] != '=' &&
           s_[e] != '{' && s_[e] != '}' && s_[e] != ';') {
      ++e;
    }
    if (e == pos_) {
      Error(pos_, "expected a value but found " + Found());
      return false;
    }
    v->text = std::string(s_.substr(pos_, e - pos_));
    pos_ = e;
    size_t save = pos_;
    SkipWs();
    if (Peek() == '(') {
      v->kind = ArgValue::Kind::kCall;
      ++pos_;
      return ParseArgs(&v->args);
    }
    pos_ = save;
    v->kind = ArgValue::Kind::kScalar;
    return true;
  }

  // Binds `args` of `fn` (named `fn` at `fn_pos`) to its parameters: `unnamed` is the parameter
  // an unnamed argument stands for (nullptr: none), `known` the supported parameters,
  // `unsupported` the LogScale parameters this engine does not implement, `required` those that
  // must be given. Parameter names are matched as documented or all lower-case.
  bool Bind(const std::string& fn, size_t fn_pos, const std::vector<Arg>& args, const char* unnamed,
            std::initializer_list<const char*> known,
            std::initializer_list<const char*> unsupported,
            std::initializer_list<const char*> required, Params* out) {
    out->fn = fn;
    out->position = fn_pos;
    for (const Arg& a : args) {
      std::string name;
      if (a.name.empty()) {
        if (unnamed == nullptr) {
          Error(a.position, fn + "() takes no unnamed argument");
          return false;
        }
        name = unnamed;
      } else {
        for (const char* k : known) {
          if (a.name == k || a.name == Lower(k)) name = k;
        }
        if (name.empty()) {
          for (const char* u : unsupported) {
            if (a.name == u || a.name == Lower(u)) {
              Error(a.position,
                    "parameter '" + std::string(u) + "' of " + fn + "() is not supported");
              return false;
            }
          }
          Error(a.position, "unknown parameter '" + a.name + "' for " + fn + "()");
          return false;
        }
      }
      if (out->Find(name) != nullptr) {
        Error(a.position, "parameter '" + name + "' of " + fn + "() given twice");
        return false;
      }
      out->given.emplace_back(name, &a);
    }
    for (const char* r : required) {
      if (out->Find(r) == nullptr) {
        Error(fn_pos, "missing required parameter '" + std::string(r) + "' for " + fn + "()");
        return false;
      }
    }
    return true;
  }

  // Reports `v` (the value of parameter `name` of p.fn, or an item of its list) as invalid.
  void BadValue(const Params& p, const char* name, const ArgValue& v, const std::string& expected) {
    Error(v.position, "invalid value '" + ValueText(v) + "' for parameter '" + name + "' of " +
                          p.fn + "(): expected " + expected);
  }
  // Reports the value of parameter `name` of p.fn as invalid.
  void BadParam(const Params& p, const char* name, const std::string& expected) {
    BadValue(p, name, p.Find(name)->value, expected);
  }

  // Value accessors: leave *out as it is when the parameter is absent.
  bool GetString(const Params& p, const char* name, std::string* out) {
    const Arg* a = p.Find(name);
    if (a == nullptr) return true;
    if (a->value.kind != ArgValue::Kind::kScalar) {
      BadParam(p, name, "a string");
      return false;
    }
    *out = a->value.text;
    return true;
  }
  bool GetField(const Params& p, const char* name, std::string* out) {
    const Arg* a = p.Find(name);
    if (a == nullptr) return true;
    if (a->value.kind != ArgValue::Kind::kScalar || a->value.text.empty()) {
      BadParam(p, name, "a field name");
      return false;
    }
    *out = a->value.text;
    return true;
  }
  // A field name or a non-empty list of field names.
  bool GetFields(const Params& p, const char* name, std::vector<std::string>* out) {
    const Arg* a = p.Find(name);
    if (a == nullptr) return true;
    const ArgValue& v = a->value;
    std::vector<std::string> fields;
    if (v.kind == ArgValue::Kind::kScalar && !v.text.empty()) {
      fields.push_back(v.text);
    } else if (v.kind == ArgValue::Kind::kList && !v.list.empty()) {
      for (const ArgValue& item : v.list) {
        if (item.kind != ArgValue::Kind::kScalar || item.text.empty()) {
          BadValue(p, name, item, "a field name");
          return false;
        }
        fields.push_back(item.text);
      }
    } else {
      BadParam(p, name, "a field name or a list of field names");
      return false;
    }
    *out = std::move(fields);
    return true;
  }
  bool GetBool(const Params& p, const char* name, bool* out) {
    const Arg* a = p.Find(name);
    if (a == nullptr) return true;
    std::string v = Lower(a->value.text);
    if (a->value.kind == ArgValue::Kind::kScalar && (v == "true" || v == "false")) {
      *out = v == "true";
      return true;
    }
    BadParam(p, name, "true or false");
    return false;
  }
  // A non-negative integer up to `max`, or "max" (= `max`) when `max_alias`.
  bool GetLimit(const Params& p, const char* name, int64_t max, bool max_alias, int64_t* out) {
    const Arg* a = p.Find(name);
    if (a == nullptr) return true;
    const ArgValue& v = a->value;
    if (v.kind == ArgValue::Kind::kScalar) {
      if (max_alias && EqualsIgnoreCase(v.text, "max")) {
        *out = max;
        return true;
      }
      int64_t n = 0;
      const char* b = v.text.data();
      const char* e = b + v.text.size();
      auto [ptr, ec] = std::from_chars(b, e, n);
      if (ec == std::errc() && ptr == e && n >= 0 && n <= max) {
        *out = n;
        return true;
      }
    }
    std::string expected = "a non-negative integer";
    if (max != kNoMax) expected += " up to " + std::to_string(max);
    if (max_alias) expected += " or max";
    BadParam(p, name, expected);
    return false;
  }
  bool GetSpan(const Params& p, const char* name, int64_t* out) {
    const Arg* a = p.Find(name);
    if (a == nullptr) return true;
    if (a->value.kind == ArgValue::Kind::kScalar) {
      if (EqualsIgnoreCase(a->value.text, "auto")) {
        *out = 0;
        return true;
      }
      if (std::optional<int64_t> ms = ParseSpan(a->value.text)) {
        *out = *ms;
        return true;
      }
    }
    BadParam(p, name, "a time span such as 1m, 5min, 1h, 30s, 1d, 100ms, or auto");
    return false;
  }
  bool GetPercentiles(const Params& p, const char* name, std::vector<double>* out) {
    const Arg* a = p.Find(name);
    if (a == nullptr) return true;
    std::vector<const ArgValue*> items = ItemsOf(a->value);
    if (items.empty()) {
      BadParam(p, name, "a list of percentiles between 0 and 100");
      return false;
    }
    std::vector<double> values;
    for (const ArgValue* item : items) {
      std::optional<double> v;
      if (item->kind == ArgValue::Kind::kScalar) v = ParseNumber(item->text);
      if (!v || *v < 0 || *v > 100) {
        BadValue(p, name, *item, "a number between 0 and 100");
        return false;
      }
      values.push_back(*v);
    }
    *out = std::move(values);
    return true;
  }
  // function=count() or function=[count(), avg(x)]; context names the function for messages.
  bool GetMetrics(const Params& p, const char* name, std::vector<Metric>* out) {
    const Arg* a = p.Find(name);
    if (a == nullptr) return true;
    return MetricsFrom(a->value, p.fn + "(" + name + "=...)", out);
  }
  bool MetricsFrom(const ArgValue& v, const std::string& context, std::vector<Metric>* out) {
    std::vector<const ArgValue*> calls = ItemsOf(v);
    std::vector<Metric> metrics;
    for (const ArgValue* c : calls) {
      if (c->kind != ArgValue::Kind::kCall) {
        Error(c->position, "expected an aggregate function such as count() in " + context +
                               " but found '" + ValueText(*c) + "'");
        return false;
      }
      std::string fn = Canonical(kMetricFunctions, c->text);
      if (fn.empty()) {
        Error(c->position, "unknown aggregate function '" + c->text + "' in " + context);
        return false;
      }
      Metric m;
      if (!BuildMetric(fn, c->position, c->args, &m)) return false;
      metrics.push_back(std::move(m));
    }
    *out = std::move(metrics);
    return true;
  }

  // Output names of `metrics` must be distinct.
  bool CheckMetricNames(const std::vector<Metric>& metrics, const std::string& fn) {
    std::vector<std::string> seen;
    for (const Metric& m : metrics) {
      for (const std::string& n : MetricOutputNames(m)) {
        if (std::find(seen.begin(), seen.end(), n) != seen.end()) {
          Error(m.position,
                "duplicate output field '" + n + "' in " + fn + "() (use as= to name the results)");
          return false;
        }
        seen.push_back(n);
      }
    }
    return true;
  }

  // The metrics of aggregate stage `fn`: count() when none are left (function=[] lists only the
  // distinct keys, yet still counts), with distinct output names.
  bool FinishMetrics(size_t start, const std::string& fn, Stage* st) {
    if (st->metrics.empty()) st->metrics = {CountMetric(start)};
    return CheckMetricNames(st->metrics, fn);
  }

  static Metric CountMetric(size_t position) {
    Metric m;
    m.kind = Metric::Kind::kCount;
    m.position = position;
    return m;
  }

  bool BuildMetric(const std::string& fn, size_t start, const std::vector<Arg>& args, Metric* m) {
    m->position = start;
    Params p;
    if (fn == "count") {
      m->kind = Metric::Kind::kCount;
      if (!Bind(fn, start, args, "field", {"field", "distinct", "as"}, {}, {}, &p) ||
          !GetField(p, "field", &m->field) || !GetBool(p, "distinct", &m->distinct) ||
          !GetString(p, "as", &m->as)) {
        return false;
      }
      if (m->distinct && m->field.empty()) {
        Error(start, "missing required parameter 'field' for count() with distinct=true");
        return false;
      }
      return true;
    }
    if (fn == "percentile") {
      m->kind = Metric::Kind::kPercentile;
      m->percentiles = {50, 75, 99};
      if (!Bind(fn, start, args, "field", {"field", "percentiles", "as", "accuracy"}, {}, {"field"},
                &p) ||
          !GetField(p, "field", &m->field) || !GetPercentiles(p, "percentiles", &m->percentiles) ||
          !GetString(p, "as", &m->as)) {
        return false;
      }
      // accuracy tunes LogScale's estimator; percentiles here are exact. Only validated.
      if (const Arg* acc = p.Find("accuracy")) {
        std::optional<double> v;
        if (acc->value.kind == ArgValue::Kind::kScalar) v = ParseNumber(acc->value.text);
        if (!v || *v <= 0 || *v >= 1) {
          BadParam(p, "accuracy", "a number between 0 and 1");
          return false;
        }
      }
      return true;
    }
    m->kind = fn == "sum"   ? Metric::Kind::kSum
              : fn == "avg" ? Metric::Kind::kAvg
              : fn == "min" ? Metric::Kind::kMin
                            : Metric::Kind::kMax;
    return Bind(fn, start, args, "field", {"field", "as"}, {}, {"field"}, &p) &&
           GetField(p, "field", &m->field) && GetString(p, "as", &m->as);
  }

  // [f1(), f2()] as a step: stats().
  bool ParseStatsShorthand(size_t start, Stage* st) {
    ArgValue v;
    if (!ParseArgValue(&v)) return false;
    st->kind = Stage::Kind::kAggregate;
    st->grouping = Stage::Grouping::kNone;
    st->position = start;
    st->function = "stats";
    if (v.list.empty()) {
      Error(start, "expected aggregate functions such as count() in [ ]");
      return false;
    }
    return MetricsFrom(v, "[...]", &st->metrics) && CheckMetricNames(st->metrics, "stats");
  }

  // eval(field = expression, ...); pos_ just after '('.
  bool ParseEval(size_t start, Stage* st) {
    st->kind = Stage::Kind::kEval;
    for (bool done = false; !done;) {
      SkipWs();
      size_t tpos = pos_;
      std::string target;
      if (Peek() == '"') {
        if (!ParseQuoted(&target)) return false;
      } else {
        pos_ = FieldNameEnd(pos_);
        target = std::string(s_.substr(tpos, pos_ - tpos));
      }
      if (target.empty()) {
        Error(tpos, st->assignments.empty() && Peek() == ')'
                        ? "missing required assignment 'field = expression' for eval()"
                        : "expected a field name in eval() but found " + Found());
        return false;
      }
      SkipWs();
      if (Peek() != '=' || Peek(1) == '=') {
        Error(pos_, "expected '=' after '" + target + "' in eval() but found " + Found());
        return false;
      }
      ++pos_;
      ExprPtr value = ParseExpr();
      if (!value) return false;
      st->assignments.emplace_back(std::move(target), std::move(value));
      if (!ListSeparator(')', &done)) return false;
    }
    return true;
  }

  // A pipeline function `fn` named at `start`; pos_ just after '('.
  bool ParseFunctionStage(const std::string& fn, size_t start, Stage* st) {
    st->position = start;
    st->function = fn;
    if (fn == "eval") return ParseEval(start, st);
    std::vector<Arg> args;
    if (!ParseArgs(&args)) return false;
    Params p;
    using K = Stage::Kind;
    using G = Stage::Grouping;
    if (Canonical(kMetricFunctions, fn) == fn) {
      st->kind = K::kAggregate;
      st->grouping = G::kNone;
      Metric m;
      if (!BuildMetric(fn, start, args, &m)) return false;
      st->metrics = {std::move(m)};
      return true;
    }
    if (fn == "stats") {
      st->kind = K::kAggregate;
      st->grouping = G::kNone;
      st->metrics = {CountMetric(start)};
      if (!Bind(fn, start, args, "function", {"function"}, {}, {}, &p) ||
          !GetMetrics(p, "function", &st->metrics)) {
        return false;
      }
      return FinishMetrics(start, fn, st);
    }
    if (fn == "groupBy") {
      st->kind = K::kAggregate;
      st->grouping = G::kGroupBy;
      st->limit = 20000;
      st->metrics = {CountMetric(start)};
      if (!Bind(fn, start, args, "field", {"field", "function", "limit"}, {}, {"field"}, &p) ||
          !GetFields(p, "field", &st->fields) || !GetMetrics(p, "function", &st->metrics) ||
          !GetLimit(p, "limit", kMaxGroups, true, &st->limit)) {
        return false;
      }
      return FinishMetrics(start, fn, st);
    }
    if (fn == "timeChart" || fn == "bucket") {
      st->kind = K::kAggregate;
      st->grouping = G::kBucket;
      st->limit = 10;
      st->metrics = {CountMetric(start)};
      bool chart = fn == "timeChart";
      const char* series = chart ? "series" : "field";
      if (!Bind(fn, start, args, chart ? "series" : "span", {series, "function", "span", "limit"},
                {"buckets", "minSpan", "unit", "timezone"}, {}, &p) ||
          !GetFields(p, series, &st->fields) || !GetMetrics(p, "function", &st->metrics) ||
          !GetSpan(p, "span", &st->span_ms) ||
          !GetLimit(p, "limit", kMaxSeries, false, &st->limit)) {
        return false;
      }
      if (st->fields.size() > 1) {
        BadParam(p, series, "one field");
        return false;
      }
      return FinishMetrics(start, fn, st);
    }
    if (fn == "top") {
      st->kind = K::kAggregate;
      st->grouping = G::kTop;
      st->limit = 10;
      std::string as;
      if (!Bind(fn, start, args, "field", {"field", "limit", "sum", "percent", "as"},
                {"rest", "max", "error"}, {"field"}, &p) ||
          !GetFields(p, "field", &st->fields) || !GetLimit(p, "limit", kNoMax, false, &st->limit) ||
          !GetField(p, "sum", &st->top_sum) || !GetBool(p, "percent", &st->top_percent) ||
          !GetString(p, "as", &as)) {
        return false;
      }
      Metric m = CountMetric(start);
      if (!st->top_sum.empty()) {
        m.kind = Metric::Kind::kSum;
        m.field = st->top_sum;
      }
      m.as = as;
      st->metrics = {std::move(m)};
      return true;
    }
    if (fn == "table") {
      st->kind = K::kTable;
      return Bind(fn, start, args, "fields", {"fields", "limit"},
                  {"sortby", "order", "reverse", "type"}, {"fields"}, &p) &&
             GetFields(p, "fields", &st->fields) &&
             GetLimit(p, "limit", kMaxRows, true, &st->limit);
    }
    if (fn == "select" || fn == "drop") {
      st->kind = fn == "select" ? K::kSelect : K::kDrop;
      return Bind(fn, start, args, "fields", {"fields"}, {}, {"fields"}, &p) &&
             GetFields(p, "fields", &st->fields);
    }
    if (fn == "sort") {
      st->kind = K::kSort;
      st->fields = {"_count"};
      if (!Bind(fn, start, args, "field", {"field", "order", "limit", "reverse"}, {"type"}, {},
                &p) ||
          !GetFields(p, "field", &st->fields) ||
          !GetLimit(p, "limit", kMaxRows, true, &st->limit)) {
        return false;
      }
      if (p.Find("order") != nullptr && p.Find("reverse") != nullptr) {
        Error(p.Find("reverse")->position, "sort() takes order or reverse, not both");
        return false;
      }
      if (p.Find("reverse") != nullptr) return GetBool(p, "reverse", &st->descending);
      return GetOrder(p, &st->descending);
    }
    if (fn == "head" || fn == "tail") {
      st->kind = fn == "head" ? K::kHead : K::kTail;
      return Bind(fn, start, args, "limit", {"limit"}, {}, {}, &p) &&
             GetLimit(p, "limit", kMaxRows, true, &st->limit);
    }
    if (fn == "rename") return BuildRename(start, args, st);
    if (fn == "regex") return BuildRegex(start, args, st);
    if (fn == "parseJson") {
      st->kind = K::kParseJson;
      st->field = "@rawstring";
      return Bind(fn, start, args, "field", {"field", "prefix"},
                  {"exclude", "include", "excludeEmpty", "handleNull", "removePrefixes"}, {}, &p) &&
             GetField(p, "field", &st->field) && GetString(p, "prefix", &st->prefix);
    }
    if (fn == "kvParse") {
      st->kind = K::kKvParse;
      std::vector<std::string> fields = {"@rawstring"};
      if (!Bind(fn, start, args, "field", {"field", "override"},
                {"as", "prefix", "excludeEmpty", "separator", "separatorPadding", "onDuplicate"},
                {}, &p) ||
          !GetFields(p, "field", &fields) || !GetBool(p, "override", &st->override_fields)) {
        return false;
      }
      if (fields.size() > 1) {
        BadParam(p, "field", "one field");
        return false;
      }
      st->field = fields[0];
      return true;
    }
    if (fn == "formatTime") {
      st->kind = K::kFormatTime;
      st->field = "@timestamp";
      std::string tz = "UTC";
      if (!Bind(fn, start, args, "format", {"format", "as", "field", "timezone"},
                {"locale", "unit"}, {"format", "as"}, &p) ||
          !GetString(p, "format", &st->format) || !GetField(p, "as", &st->as) ||
          !GetField(p, "field", &st->field) || !GetString(p, "timezone", &tz)) {
        return false;
      }
      std::optional<std::string> norm = NormalizeTimezone(tz);
      if (!norm) {
        BadParam(p, "timezone", "UTC, Z or a fixed offset such as +02:00");
        return false;
      }
      st->timezone = *norm;
      return true;
    }
    if (fn == "lower" || fn == "length") {
      st->kind = fn == "lower" ? K::kLower : K::kLength;
      st->as = fn == "lower" ? "_lower" : "_length";
      if (fn == "lower") {
        return Bind(fn, start, args, "field", {"field", "as"}, {"locale", "type"}, {"field"}, &p) &&
               GetField(p, "field", &st->field) && GetField(p, "as", &st->as);
      }
      return Bind(fn, start, args, "field", {"field", "as"}, {}, {"field"}, &p) &&
             GetField(p, "field", &st->field) && GetField(p, "as", &st->as);
    }
    if (fn == "split") {
      st->kind = K::kSplit;
      st->field = "_events";
      return Bind(fn, start, args, "field", {"field", "strip"}, {}, {}, &p) &&
             GetField(p, "field", &st->field) && GetBool(p, "strip", &st->strip);
    }
    Error(start, "unknown function '" + fn + "'");  // a filter function reaching here
    return false;
  }

  bool GetOrder(const Params& p, bool* descending) {
    const Arg* a = p.Find("order");
    if (a == nullptr) return true;
    std::vector<const ArgValue*> items = ItemsOf(a->value);
    std::optional<bool> result;
    for (const ArgValue* item : items) {
      std::string o = Lower(item->text);
      std::optional<bool> desc;
      if (item->kind == ArgValue::Kind::kScalar && (o == "asc" || o == "ascending")) desc = false;
      if (item->kind == ArgValue::Kind::kScalar && (o == "desc" || o == "descending")) desc = true;
      if (!desc || (result && *result != *desc)) {
        BadValue(p, "order", *item, "asc or desc (one order for all fields)");
        return false;
      }
      result = desc;
    }
    if (!result) {
      BadParam(p, "order", "asc or desc");
      return false;
    }
    *descending = *result;
    return true;
  }

  // rename(field, as) / rename(field=[[from, to], ...]).
  bool BuildRename(size_t start, const std::vector<Arg>& args, Stage* st) {
    st->kind = Stage::Kind::kRename;
    Params p;
    if (!Bind("rename", start, args, "field", {"field", "as"}, {}, {"field"}, &p)) return false;
    const Arg* field = p.Find("field");
    const Arg* as = p.Find("as");
    const ArgValue& v = field->value;
    bool pairs = v.kind == ArgValue::Kind::kList && !v.list.empty() &&
                 v.list[0].kind == ArgValue::Kind::kList;
    if (!pairs) {
      std::vector<std::string> from;
      if (!GetFields(p, "field", &from)) return false;
      if (from.size() != 1) {
        BadParam(p, "field", "a field name or a list of [from, to] pairs");
        return false;
      }
      if (as == nullptr) {
        Error(start, "missing required parameter 'as' for rename()");
        return false;
      }
      std::string to;
      if (!GetField(p, "as", &to)) return false;
      st->renames.emplace_back(from[0], to);
      return true;
    }
    if (as != nullptr) {
      Error(as->position, "rename() takes as only with a single field");
      return false;
    }
    for (const ArgValue& pair : v.list) {
      if (pair.kind != ArgValue::Kind::kList || pair.list.size() != 2 ||
          pair.list[0].kind != ArgValue::Kind::kScalar ||
          pair.list[1].kind != ArgValue::Kind::kScalar || pair.list[0].text.empty() ||
          pair.list[1].text.empty()) {
        BadValue(p, "field", pair, "a [from, to] pair");
        return false;
      }
      st->renames.emplace_back(pair.list[0].text, pair.list[1].text);
    }
    return true;
  }

  // regex(regex, field=@rawstring, strict=true, flags=m, limit, repeat=false).
  bool BuildRegex(size_t start, const std::vector<Arg>& args, Stage* st) {
    st->kind = Stage::Kind::kRegex;
    st->field = "@rawstring";
    Params p;
    std::string pattern, flags = "m";
    bool repeat = false;
    int64_t limit = 100;
    if (!Bind("regex", start, args, "regex",
              {"regex", "field", "strict", "flags", "limit", "repeat"}, {}, {"regex"}, &p) ||
        !GetString(p, "regex", &pattern) || !GetField(p, "field", &st->field) ||
        !GetBool(p, "strict", &st->strict) || !GetString(p, "flags", &flags) ||
        !GetLimit(p, "limit", kNoMax, false, &limit) || !GetBool(p, "repeat", &repeat)) {
      return false;
    }
    if (repeat) {
      BadParam(p, "repeat", "false (repeat=true is not supported)");
      return false;
    }
    std::string prefix;
    for (char f : flags) {
      if (f == 'F') continue;  // LogScale's engine choice; no meaning here
      std::string flag = RegexFlag(f);
      if (flag.empty()) {
        BadParam(p, "flags", "a combination of the flags d, i and m");
        return false;
      }
      prefix += flag;
    }
    std::string error;
    auto re = CompileRegex(prefix + ConvertRegex(pattern, /*plain_to_noncapturing=*/true), &error);
    if (!re) {
      Error(p.Find("regex")->value.position, "invalid regular expression in regex(): " + error);
      return false;
    }
    SetStageRegex(std::move(re), st);
    return true;
  }

  // ---- expressions ----
  // Precedence, lowest first: || ; && ; == != ; < <= > >= ; + - ; * / % ; unary - ! ;
  // primary.
  // Binary operators are left-associative.

  ExprPtr ParseExpr() { return ParseBinary(0); }

  static constexpr int kBinaryLevels = 6;
  static constexpr int kEqualityLevel = 2;

  // The binary operator of precedence `level` (0 = lowest) at pos_, or "".
  std::string_view BinaryOperatorAt(int level) const {
    static constexpr std::string_view kOperators[kBinaryLevels][4] = {
        {"||"}, {"&&"}, {"==", "!="}, {"<=", ">=", "<", ">"}, {"+", "-"}, {"*", "/", "%"}};
    std::string_view rest = pos_ < s_.size() ? s_.substr(pos_) : std::string_view();
    for (std::string_view op : kOperators[level]) {
      if (!op.empty() && rest.starts_with(op)) return op;
    }
    return "";
  }

  // Operands of the levels above `level` joined by the operators of `level`.
  ExprPtr ParseBinary(int level) {
    if (level == kBinaryLevels) return ParseExprUnary();
    ExprPtr left = ParseBinary(level + 1);
    while (left) {
      SkipWs();
      if (level == kEqualityLevel && Peek() == '=' && Peek(1) != '=') {
        Error(pos_, "unexpected '=' in expression (use '==' to compare)");
        return nullptr;
      }
      std::string_view op = BinaryOperatorAt(level);
      if (op.empty()) break;
      size_t at = pos_;
      pos_ += op.size();
      ExprPtr right = ParseBinary(level + 1);
      if (!right) return nullptr;
      left =
          MakeExpr(Expr::Kind::kBinary, std::string(op), at, {std::move(left), std::move(right)});
    }
    return left;
  }

  ExprPtr ParseExprUnary() {
    Nest nest(this);
    if (!nest.ok()) return nullptr;
    SkipWs();
    char c = Peek();
    if (c == '-' || (c == '!' && Peek(1) != '=')) {
      size_t at = pos_;
      ++pos_;
      ExprPtr operand = ParseExprUnary();
      if (!operand) return nullptr;
      return MakeExpr(Expr::Kind::kUnary, std::string(1, c), at, {std::move(operand)});
    }
    return ParseExprPrimary();
  }

  ExprPtr ParseExprPrimary() {
    SkipWs();
    size_t start = pos_;
    if (AtEnd()) {
      Error(pos_, "expected an expression but found end of query");
      return nullptr;
    }
    char c = Peek();
    if (c == '(') {
      ++pos_;
      ExprPtr inner = ParseExpr();
      if (!inner || !CloseParen(start)) return nullptr;
      return inner;
    }
    if (c == '"') {
      std::string text;
      if (!ParseQuoted(&text)) return nullptr;
      return MakeExpr(Expr::Kind::kString, std::move(text), start);
    }
    if (IsDigit(c) || (c == '.' && IsDigit(Peek(1)))) {
      size_t e = pos_;
      while (e < s_.size() && (IsDigit(s_[e]) || s_[e] == '.')) ++e;
      if (e < s_.size() && (s_[e] == 'e' || s_[e] == 'E')) {
        size_t x = e + 1;
        if (x < s_.size() && (s_[x] == '+' || s_[x] == '-')) ++x;
        if (x < s_.size() && IsDigit(s_[x])) {
          e = x;
          while (e < s_.size() && IsDigit(s_[e])) ++e;
        }
      }
      std::string text(s_.substr(start, e - start));
      std::optional<double> v = ParseNumber(text);
      if (!v || (e < s_.size() && IsFieldNameChar(s_[e]))) {
        size_t w = FieldNameEnd(e);
        Error(start, "invalid number '" + std::string(s_.substr(start, w - start)) + "'");
        return nullptr;
      }
      pos_ = e;
      auto n = std::make_shared<Expr>();
      n->kind = Expr::Kind::kNumber;
      n->text = std::move(text);
      n->number = *v;
      n->position = start;
      return n;
    }
    if (IsFieldNameChar(c)) {
      size_t e = FieldNameEnd(pos_);
      std::string name(s_.substr(start, e - start));
      size_t k = SkipWsFrom(e);
      if (k < s_.size() && s_[k] == '(' && IdentEnd(start) == e && IsIdentStart(c)) {
        pos_ = k + 1;
        return ParseExprCall(name, start);
      }
      pos_ = e;
      return MakeExpr(Expr::Kind::kField, std::move(name), start);
    }
    Error(pos_, "expected an expression but found " + Found());
    return nullptr;
  }

  // name(args) in an expression; pos_ just after '('.
  ExprPtr ParseExprCall(const std::string& name, size_t start) {
    const ExprFunction* fn = FindExprFunction(name);
    if (fn == nullptr) {
      Error(start, "unknown function '" + name + "' in expression");
      return nullptr;
    }
    std::string fname = fn->name;
    std::vector<ExprPtr> args;
    ExprPtr then_arg, else_arg;  // if(): then= / else=
    for (bool done = TryClose(')'); !done;) {
      SkipWs();
      size_t arg_pos = pos_;
      std::string param = ParseParamName();
      if (!param.empty() &&
          (fname != "if" || (param != "then" && param != "else" && param != "condition"))) {
        Error(arg_pos, "unknown parameter '" + param + "' for " + fname + "()");
        return nullptr;
      }
      if (param.empty() && fname == "concat" && Peek() == '[') {
        // LogScale's concat([a, b, ...]): a list of values, as if given one by one.
        ++pos_;
        for (bool list_done = false; !list_done;) {
          SkipWs();
          ExprPtr item = ParseExpr();
          if (!item) return nullptr;
          args.push_back(std::move(item));
          if (!ListSeparator(']', &list_done)) return nullptr;
        }
      } else {
        ExprPtr value = ParseExpr();
        if (!value) return nullptr;
        if (param.empty() || param == "condition") {
          if (param == "condition" && !args.empty()) {
            Error(arg_pos, "parameter 'condition' of if() given twice");
            return nullptr;
          }
          args.push_back(std::move(value));
        } else {
          ExprPtr& slot = param == "then" ? then_arg : else_arg;
          if (slot) {
            Error(arg_pos, "parameter '" + param + "' of if() given twice");
            return nullptr;
          }
          slot = std::move(value);
        }
      }
      if (!ListSeparator(')', &done)) return nullptr;
    }
    if (then_arg || else_arg) {
      if (args.size() != 1 || !then_arg || !else_arg) {
        Error(start, "if() takes a condition, then= and else=");
        return nullptr;
      }
      args.push_back(std::move(then_arg));
      args.push_back(std::move(else_arg));
    }
    int n = static_cast<int>(args.size());
    if (n < fn->min_args || (fn->max_args >= 0 && n > fn->max_args)) {
      std::string expected =
          fn->min_args == fn->max_args ? std::to_string(fn->min_args)
          : fn->max_args < 0           ? "at least " + std::to_string(fn->min_args)
                             : std::to_string(fn->min_args) + " to " + std::to_string(fn->max_args);
      Error(start, "wrong number of arguments for " + fname + "(): expected " + expected +
                       ", got " + std::to_string(n));
      return nullptr;
    }
    return MakeExpr(Expr::Kind::kCall, fname, start, std::move(args));
  }

  std::string_view s_;
  size_t pos_ = 0;
  int case_depth_ = 0;
  int depth_ = 0;
  Status err_;
};

}  // namespace

Result<std::shared_ptr<const CompiledQuery>> Compile(std::string_view text) {
  Parser p(text);
  return p.Parse();
}

}  // namespace sediment::query
