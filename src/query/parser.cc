// Recursive-descent parser for the supported CQL subset: the grammar of filters
// (query/README.md), the pipeline, case { }, expressions and function arguments (as generic
// values). Functions are looked up in the registry (functions/registry.h), which checks their
// arguments and builds their compiled form. Produces the CompiledQuery of compiled.h.
#include <re2/re2.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "query/compiled.h"
#include "query/functions/registry.h"
#include "query/functions/util.h"
#include "query/lookup.h"
#include "query/query.h"
#include "query/record.h"
#include "query/text_util.h"
#include "query/transform.h"

namespace sediment::query {
namespace {

using functions::Combine;
using functions::CompileRegex;
using functions::ConvertRegex;
using functions::GlobPieces;
using functions::MakeFieldMatch;
using functions::MakeNode;
using functions::RegexFlag;
using functions::SetFilterRegex;
using functions::SetStageRegex;

// Deepest nesting of parentheses, negations, lists, calls and case { } accepted (bounds the
// recursion, hence the stack a hostile query can use).
constexpr int kMaxDepth = 100;
// `/re/g` with named groups: at most this many records per event (regex()'s default limit).
constexpr int64_t kGlobalRegexLimit = 100;

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'; }

bool IsFieldNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '@' || c == '#';
}

bool IsIdentStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }

bool IsIdentChar(char c) { return IsIdentStart(c) || (c >= '0' && c <= '9'); }

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// A namespaced function name such as `text:contains`.
bool IsNamespaced(std::string_view name) { return name.find(':') != std::string_view::npos; }

bool IsRegexFunction(const functions::Function& fn) { return std::string_view(fn.name) == "regex"; }

bool HasParam(const functions::Function& fn, std::string_view param) {
  return std::any_of(fn.params.begin(), fn.params.end(),
                     [&](const functions::Param& p) { return param == p.name; });
}

// `text` as a string literal of the query language (the inverse of Parser::ParseQuoted).
std::string QuoteString(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  out.push_back('"');
  return out;
}

// The error for a call of `name` where a pipeline function is expected and none has that name.
std::string UnknownFunction(const std::string& name) {
  if (functions::FindExpressionFunction(name) != nullptr) {
    return name + "() is an expression function: use it in an expression (x := " + name +
           "(...), eval(), if())";
  }
  return "unknown function '" + name + "'";
}

bool IsKeyword(std::string_view w) {
  return EqualsIgnoreCase(w, "and") || EqualsIgnoreCase(w, "or") || EqualsIgnoreCase(w, "not");
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

class Parser {
 public:
  explicit Parser(std::string_view s, const std::map<std::string, std::string>* arguments = nullptr)
      : s_(s), arguments_(arguments) {}

  // A query parameter occurring at [begin, end) of the text, and the value it got.
  struct Parameter {
    size_t begin = 0, end = 0;
    std::string value;
  };
  // A call of start() or end() in an expression at [begin, end) of the text.
  struct TimeCall {
    size_t begin = 0, end = 0;
    bool is_end = false;
  };
  // A saved query call `$name(args)` at [begin, end) of the text.
  struct SavedCall {
    size_t begin = 0, end = 0;
    std::string name;
    std::map<std::string, std::string> args;
  };
  // The saved query calls parsed (after a successful Parse), in text order.
  std::vector<SavedCall> SavedCalls() const {
    std::vector<SavedCall> out = saved_calls_;
    std::sort(out.begin(), out.end(),
              [](const SavedCall& a, const SavedCall& b) { return a.begin < b.begin; });
    out.erase(
        std::unique(out.begin(), out.end(),
                    [](const SavedCall& a, const SavedCall& b) { return a.begin == b.begin; }),
        out.end());
    return out;
  }
  // The start()/end() calls parsed (after a successful Parse), in text order.
  std::vector<TimeCall> TimeCalls() const {
    std::vector<TimeCall> out = time_calls_;
    std::sort(out.begin(), out.end(),
              [](const TimeCall& a, const TimeCall& b) { return a.begin < b.begin; });
    out.erase(std::unique(out.begin(), out.end(),
                          [](const TimeCall& a, const TimeCall& b) { return a.begin == b.begin; }),
              out.end());
    return out;
  }
  // The parameters parsed (after a successful Parse), in text order, each once.
  std::vector<Parameter> Parameters() const {
    std::vector<Parameter> out = parameters_;
    std::sort(out.begin(), out.end(),
              [](const Parameter& a, const Parameter& b) { return a.begin < b.begin; });
    out.erase(
        std::unique(out.begin(), out.end(),
                    [](const Parameter& a, const Parameter& b) { return a.begin == b.begin; }),
        out.end());
    return out;
  }

  Result<std::shared_ptr<const CompiledQuery>> Parse() {
    auto q = std::make_shared<CompiledQuery>();
    q->text = std::string(s_);
    FilterPtr filter;
    if (!ParseSteps(&filter, &q->stages, /*in_branch=*/false) || !ok()) return err_;
    q->filter = filter ? filter : MakeNode(FilterNode::Kind::kTrue, 0);
    q->filter = WithRegexStageLiterals(q->filter, q->stages);
    q->is_aggregate = std::any_of(q->stages.begin(), q->stages.end(),
                                  [](const Stage& st) { return st.IsAggregate(); });
    q->tables = std::move(tables_);
    q->uses_time_range = !time_calls_.empty();
    q->time_interval = std::move(time_interval_);
    return std::shared_ptr<const CompiledQuery>(std::move(q));
  }

  // The whole text as one argument value (functions::ParseArgumentValue).
  bool ParseWholeValue(functions::ArgValue* v) {
    if (!ParseArgValue(v)) return false;
    SkipWs();
    return AtEnd();
  }

 private:
  bool ok() const { return err_.ok(); }
  bool AtEnd() const { return pos_ >= s_.size(); }
  char Peek(size_t ahead = 0) const { return pos_ + ahead < s_.size() ? s_[pos_ + ahead] : '\0'; }
  // Skips white space and comments: `// ...` to the end of the line, `/* ... */` (an unterminated
  // one is an error). Comments count as white space wherever a token may start; inside a bare
  // word (`docker/*`), a quoted string or a regex they are text.
  void SkipWs() {
    size_t unterminated = kNone;
    pos_ = SkipWsFrom(pos_, &unterminated);
    if (unterminated != kNone) Error(unterminated, "unterminated comment '/*'");
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
  // Whether pos_ (after SkipWs) is where a pipeline step ends: a '|' (or the end, or the end of
  // a case branch or subquery), or the start of a step on a new line (ImplicitStepAt).
  bool AtStepEnd() const { return AtStepSeparator() || ImplicitStepAt(); }
  bool AtStepSeparator() const {
    if (AtEnd()) return true;
    char c = Peek();
    return c == '|' || (InCase() && (c == ';' || c == '}')) || (subquery_depth_ > 0 && c == '}');
  }
  // Whether only white space separates pos_ from the line before it.
  bool NewlineBefore() const {
    for (size_t i = pos_; i > 0; --i) {
      if (s_[i - 1] == '\n') return true;
      if (!IsSpace(s_[i - 1])) return false;
    }
    return false;
  }
  // LogScale's steps on separate lines without '|' (`head(limit=10)` newline `groupBy(x)`):
  // whether pos_ starts, on a new line, a step that cannot continue a filter or an expression:
  // an assignment `x :=`, or a call of a pipeline function that is not a filter (regex(),
  // which can be one, excepted).
  bool ImplicitStepAt() const {
    if (AtEnd() || !NewlineBefore()) return false;
    size_t e = pos_;
    while (e < s_.size() && (IsIdentChar(s_[e]) || s_[e] == '.' || s_[e] == '@' || s_[e] == '#' ||
                             s_[e] == '[' || s_[e] == ']')) {
      ++e;
    }
    if (e == pos_) return false;
    size_t k = SkipWsFrom(e);
    if (k + 1 < s_.size() && s_[k] == ':' && s_[k + 1] == '=') return true;
    if (!IsIdentStart(s_[pos_])) return false;
    const size_t name_end = FunctionNameEnd(pos_);
    k = SkipWsFrom(name_end);
    if (k >= s_.size() || s_[k] != '(') return false;
    const std::string_view name = s_.substr(pos_, name_end - pos_);
    if (IsKeyword(name)) return false;
    const functions::Function* fn = functions::FindPipelineFunction(name);
    return fn != nullptr && fn->kind != functions::Kind::kFilter && !IsRegexFunction(*fn);
  }

  // Characters that end a bare word in a filter. `{` and `}` always do (they are syntax in
  // LogScale: case/match blocks, ?{param}, subqueries), so that they never become free text.
  bool EndsWord(char c) const {
    return IsSpace(c) || c == '(' || c == ')' || c == '|' || c == '"' || c == '=' || c == '!' ||
           c == ',' || c == '[' || c == ']' || c == '<' || c == '>' || c == '{' || c == '}' ||
           c == '`' || (InCase() && c == ';');
  }

  // The end of an array index `[digits]` at `at`, or `at` when there is none there.
  size_t IndexEnd(size_t at) const {
    if (at >= s_.size() || s_[at] != '[') return at;
    size_t e = at + 1;
    while (e < s_.size() && IsDigit(s_[e])) ++e;
    if (e == at + 1 || e >= s_.size() || s_[e] != ']') return at;
    return e + 1;
  }

  // The bare word starting at `at` (not consumed); array indexes `a[0]` belong to it.
  std::string_view WordAt(size_t at) const {
    size_t e = at;
    while (e < s_.size()) {
      if (!EndsWord(s_[e])) {
        ++e;
      } else if (e > at && IndexEnd(e) > e) {
        e = IndexEnd(e);
      } else {
        break;
      }
    }
    return s_.substr(at, e - at);
  }

  // The end of a function name at `at`: an identifier, or namespaced ones joined by ':'
  // (`text:contains`, `array:filter`); `at` when there is none.
  size_t FunctionNameEnd(size_t at) const {
    if (at >= s_.size() || !IsIdentStart(s_[at])) return at;
    size_t e = IdentEnd(at);
    while (e + 1 < s_.size() && s_[e] == ':' && IsIdentStart(s_[e + 1])) e = IdentEnd(e + 1);
    return e;
  }

  // End of the identifier starting at `at`.
  size_t IdentEnd(size_t at) const {
    size_t e = at;
    while (e < s_.size() && IsIdentChar(s_[e])) ++e;
    return e;
  }
  // The position after the white space and comments at `at` (the end of the text when a `/*`
  // there has no `*/`; then its position goes to *unterminated).
  static constexpr size_t kNone = std::string_view::npos;
  size_t SkipWsFrom(size_t at, size_t* unterminated = nullptr) const {
    while (at < s_.size()) {
      if (IsSpace(s_[at])) {
        ++at;
      } else if (s_[at] == '/' && at + 1 < s_.size() && s_[at + 1] == '/') {
        size_t nl = s_.find('\n', at + 2);
        at = nl == std::string_view::npos ? s_.size() : nl + 1;
      } else if (s_[at] == '/' && at + 1 < s_.size() && s_[at + 1] == '*') {
        size_t close = s_.find("*/", at + 2);
        if (close == std::string_view::npos) {
          if (unterminated != nullptr) *unterminated = at;
          return s_.size();
        }
        at = close + 2;
      } else {
        break;
      }
    }
    return at;
  }
  // End of the field name starting at `at`: field-name characters and array indexes after
  // them (`a[0]`, `a[0].b`).
  size_t FieldNameEnd(size_t at) const {
    const size_t start = at;
    while (at < s_.size()) {
      if (IsFieldNameChar(s_[at])) {
        ++at;
      } else if (at > start && IndexEnd(at) > at) {
        at = IndexEnd(at);
      } else {
        break;
      }
    }
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
      if (AtStepSeparator()) {
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
      // A step on a new line without '|' is the next step (as in LogScale).
      if (NewlineBefore()) continue;
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
    std::string target;
    const functions::Function* step_fn = nullptr;
    if (MatchStepAt(start, &target, &step_fn)) {  // `field =~ match(...)`: match() with
                                                  // field=field (also cidr(), ...)
      const size_t name_at = SkipWsFrom(SkipWsFrom(pos_) + 2);
      const size_t open = SkipWsFrom(FunctionNameEnd(name_at));
      functions::Arg field;
      field.name = "field";
      field.position = start;
      field.value.text = target;
      field.value.quoted = true;
      field.value.position = start;
      pos_ = open + 1;
      Stage st;
      if (!ParseFunctionStage(*step_fn, name_at, &st, nullptr, &field) || !CheckTables(&st)) {
        return false;
      }
      return add_stage(std::move(st));
    }
    if (!ok()) return false;
    if (AssignmentAt(&target)) return ParseAssignmentStep(target, start, stages, filter_phase);
    if (!ok()) return false;
    if (MatchAt(&target)) {
      Stage st;
      if (!ParseMatch(target, start, &st)) return false;
      return add_stage(std::move(st));
    }
    if (c == '!' && Peek(1) != '=') {
      bool negated = false;
      if (!ParseNegatedStep(start, &negated, add_stage)) return false;
      if (negated) return true;
    }
    if (IsIdentStart(c)) {
      size_t e = FunctionNameEnd(start);
      std::string name(s_.substr(start, e - start));
      size_t k = SkipWsFrom(e);
      if (name == "case" && k < s_.size() && s_[k] == '{') {
        pos_ = k;
        Stage st;
        if (!ParseCase(start, &st)) return false;
        return add_stage(std::move(st));
      }
      if (k < s_.size() && s_[k] == '(' && !IsKeyword(name)) {
        const functions::Function* fn = functions::FindPipelineFunction(name);
        if (fn == nullptr && (k == e || IsNamespaced(name))) {
          Error(start, UnknownFunction(name));
          return false;
        }
        if (fn != nullptr && fn->kind != functions::Kind::kFilter) {
          pos_ = k + 1;
          Stage st;
          if (!ParseFunctionStage(*fn, start, &st) || !CheckTables(&st)) return false;
          // defineTable() is no stage: its table is the query's (CompiledQuery::tables).
          if (st.table_query != nullptr && st.kind == Stage::Kind::kFilter) return true;
          // setTimeInterval() is no stage either: its range is the query's.
          if (st.time_interval) {
            if (!stages->empty() || *leading || subquery_depth_ > 0 || InCase() || time_interval_ ||
                !tables_.empty()) {
              Error(start, "setTimeInterval() must be the first step of the query");
              return false;
            }
            time_interval_ = std::move(st.time_interval);
            return true;
          }
          SkipWs();
          // regex(...) followed by `and`/`or`/another filter is a filter (ParsePrimary).
          if (!IsRegexFunction(*fn)) return add_stage(std::move(st));
          if (AtStepEnd()) {
            // Among a case branch's leading filters a strict regex() is part of the branch's
            // condition (a record it rejects tries the next branch, as with /re/), and extracts
            // its named groups, if any, as a stage.
            if (InCase() && *filter_phase && st.strict) {
              AddFilter(RegexFilter(st, start), start, leading, stages, *filter_phase);
              if (st.groups.empty()) return true;
            }
            return add_stage(std::move(st));
          }
          if (!ok()) return false;
          pos_ = start;
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
    // The regexes with named groups that every match of the step passes (its AND-spine) also
    // extract them as fields (as regex()); under OR/NOT they are refused (LogScale extracts
    // from whichever matched, which sediment does not model).
    std::vector<FilterPtr> extract;
    if (!NamedGroupRegexes(f, /*on_spine=*/true, &extract)) return false;
    if (extract.empty()) {
      AddFilter(std::move(f), start, leading, stages, *filter_phase);
      return true;
    }
    // A step that is one regex on @rawstring is the strict stage alone (RE2 runs once per
    // event, not twice); its literals still join the leading filter (WithRegexStageLiterals). A
    // field regex stays a filter too, for its block-filter terms, and so does any regex in a
    // case branch, where the filter is the branch's condition.
    if (f != extract[0] || f->kind == FilterNode::Kind::kFieldRegex || InCase()) {
      AddFilter(f, start, leading, stages, *filter_phase);
    }
    for (const FilterPtr& r : extract) {
      std::string error;
      auto re = CompileRegex(ConvertRegex(r->text, /*plain_to_noncapturing=*/true), &error);
      if (!re) {
        Error(r->position, "invalid regular expression: " + error);
        return false;
      }
      Stage st;
      st.kind = Stage::Kind::kRegex;
      st.position = r->position;
      st.function = "regex";
      st.field = r->field;
      st.strict = true;
      if (r->global) st.repeat_limit = kGlobalRegexLimit;
      SetStageRegex(std::move(re), &st);
      add_stage(std::move(st));
    }
    return true;
  }

  // `!f(...)` at `start` (pos_ there) as a whole step, f a pipeline function that is neither a
  // filter nor regex() (those are negated filters: ParseNot): when f is negatable, the step is
  // f's stage with Stage::negate (*negated set, the stage passed to `add`); when f is another
  // pipeline function, an error naming it. Otherwise (no such call there) pos_ is unchanged and
  // the step is parsed as a filter.
  template <typename Add>
  bool ParseNegatedStep(size_t start, bool* negated, Add&& add) {
    const size_t name_at = SkipWsFrom(start + 1);
    if (name_at >= s_.size() || !IsIdentStart(s_[name_at])) return true;
    const size_t e = FunctionNameEnd(name_at);
    const std::string name(s_.substr(name_at, e - name_at));
    const size_t k = SkipWsFrom(e);
    if (k >= s_.size() || s_[k] != '(' || IsKeyword(name)) return true;
    const functions::Function* fn = functions::FindPipelineFunction(name);
    if (fn == nullptr || fn->kind == functions::Kind::kFilter || IsRegexFunction(*fn)) return true;
    if (!fn->negatable) {
      Error(start, std::string(fn->name) +
                       "() cannot be negated with '!': it is not a function that filters");
      return false;
    }
    pos_ = k + 1;
    Stage st;
    if (!ParseFunctionStage(*fn, name_at, &st) || !CheckTables(&st)) return false;
    if (st.kind == Stage::Kind::kMatch && !st.strict) {
      Error(start, "a negated match() must be strict: with strict=false it drops no event");
      return false;
    }
    SkipWs();
    if (!AtStepEnd()) {
      Error(pos_, "a negated function call '!" + name +
                      "(...)' must be a step of its own: " + "expected '|' but found " + Found());
      return false;
    }
    st.position = start;
    st.negate = true;
    *negated = true;
    return add(std::move(st));
  }

  // Appends to *out the regex leaves of `f` with named groups, in order; false (an error
  // recorded) for one under OR or NOT (`on_spine` false).
  bool NamedGroupRegexes(const FilterPtr& f, bool on_spine, std::vector<FilterPtr>* out) {
    switch (f->kind) {
      case FilterNode::Kind::kAnd:
        for (const FilterPtr& c : f->children) {
          if (!NamedGroupRegexes(c, on_spine, out)) return false;
        }
        return true;
      case FilterNode::Kind::kOr:
      case FilterNode::Kind::kNot:
        for (const FilterPtr& c : f->children) {
          if (!NamedGroupRegexes(c, /*on_spine=*/false, out)) return false;
        }
        return true;
      case FilterNode::Kind::kRawRegex:
      case FilterNode::Kind::kFieldRegex:
        if (f->re == nullptr || f->re->NamedCapturingGroups().empty()) return true;
        if (!on_spine) {
          Error(f->position,
                "a regex with named groups under 'or' or 'not' does not extract fields: use "
                "(?:...) groups there, or extract with regex() in a step of its own");
          return false;
        }
        out->push_back(f);
        return true;
      default:
        return true;
    }
  }

  // A field name at pos_ ("quoted", `backquoted` or bare) for a construct that may not be
  // there: on success *name is set and pos_ is after it; otherwise pos_ and err_ are unchanged
  // (a malformed name is reported again by the filter parser).
  bool TryFieldNameAt(std::string* name) {
    const size_t start = pos_;
    const char c = Peek();
    if (c == '"' || c == '`') {
      if (c == '"' ? !ParseQuoted(name) : !ParseBackquoted(name)) {
        pos_ = start;
        err_ = Status::OK();
        return false;
      }
      return true;
    }
    if (!IsFieldNameChar(c)) return false;
    pos_ = FieldNameEnd(start);
    *name = std::string(s_.substr(start, pos_ - start));
    return true;
  }

  // Whether `field match {` starts at pos_ (field a field name, "quoted" or `backquoted`); then
  // *field is set and pos_ is at '{'. Otherwise pos_ is unchanged.
  bool MatchAt(std::string* field) {
    const size_t start = pos_;
    if (!TryFieldNameAt(field)) return false;
    size_t k = SkipWsFrom(pos_);
    if (k + 5 <= s_.size() && EqualsIgnoreCase(s_.substr(k, 5), "match")) {
      size_t b = SkipWsFrom(k + 5);
      if (b < s_.size() && s_[b] == '{') {
        pos_ = b;
        return true;
      }
    }
    pos_ = start;
    return false;
  }

  // field match { pattern => stages ; ... ; * => stages }; pos_ at '{'. A case { } whose branch
  // conditions test `field`: a "quoted" or bare value (as field=value: exact, '*' a wildcard),
  // a /regex/ (searched in the field; its named groups become fields), a filter function
  // (in(values=[...]), wildcard("x*"), regex("...") with field=field) or `*` (every record).
  // Filters after '=>' filter the branch's records (they do not fall through to the next
  // branch); records matching no pattern are dropped.
  bool ParseMatch(const std::string& field, size_t start, Stage* st) {
    Nest nest(this);
    if (!nest.ok()) return false;
    const size_t brace = pos_;
    ++pos_;
    st->kind = Stage::Kind::kCase;
    st->position = start;
    st->function = "match";
    ++case_depth_;
    while (true) {
      SkipWs();
      if (AtEnd()) {
        Error(pos_, "missing '}' for 'match {' at position " + std::to_string(brace));
        return false;
      }
      if (Peek() == '}') {
        if (st->branches.empty()) {
          Error(pos_, "empty match { }");
          return false;
        }
        ++pos_;
        break;
      }
      CaseBranch branch;
      FilterPtr condition = ParseMatchPattern(field, &branch.stages);
      if (!condition) return false;
      SkipWs();
      if (!(Peek() == '=' && Peek(1) == '>')) {
        Error(pos_, "expected '=>' after the match pattern but found " + Found());
        return false;
      }
      pos_ += 2;
      SkipWs();
      if (!AtEnd() && Peek() != ';' && Peek() != '}') {
        FilterPtr lead;
        std::vector<Stage> stages;
        if (!ParseSteps(&lead, &stages, /*in_branch=*/true)) return false;
        if (lead) {
          Stage f;
          f.kind = Stage::Kind::kFilter;
          f.position = lead->position;
          f.function = "filter";
          f.filter = std::move(lead);
          branch.stages.push_back(std::move(f));
        }
        for (Stage& s : stages) {
          if (!s.IsTransform()) {
            Error(s.position, s.function +
                                  "() cannot be used in a match branch (only per-record "
                                  "functions can)");
            return false;
          }
          branch.stages.push_back(std::move(s));
        }
      }
      branch.condition = std::move(condition);
      st->branches.push_back(std::move(branch));
      SkipWs();
      if (AtEnd()) {
        Error(pos_, "missing '}' for 'match {' at position " + std::to_string(brace));
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

  // One pattern of `field match { }` at pos_, as a filter on `field`; a regex with named groups
  // also puts its extraction stage into *stages. Null (an error recorded) when it is none.
  FilterPtr ParseMatchPattern(const std::string& field, std::vector<Stage>* stages) {
    const size_t at = pos_;
    const char c = Peek();
    if (c == '*' && (SkipWsFrom(pos_ + 1) >= s_.size() || s_[SkipWsFrom(pos_ + 1)] == '=')) {
      ++pos_;
      return MakeNode(FilterNode::Kind::kTrue, at);
    }
    if (c == '/') {
      std::shared_ptr<const re2::RE2> re;
      std::string source;
      if (!ParseRegexLiteral(&re, &source)) return nullptr;
      auto n = MakeNode(FilterNode::Kind::kFieldRegex, at);
      n->field = field;
      n->text = source;
      n->global = last_regex_global_;
      SetFilterRegex(re, n.get());
      if (!re->NamedCapturingGroups().empty()) {
        std::string error;
        auto extract = CompileRegex(ConvertRegex(source, /*plain_to_noncapturing=*/true), &error);
        if (!extract) {
          Error(at, "invalid regular expression: " + error);
          return nullptr;
        }
        Stage st;
        st.kind = Stage::Kind::kRegex;
        st.position = at;
        st.function = "regex";
        st.field = field;
        st.strict = true;
        if (last_regex_global_) st.repeat_limit = kGlobalRegexLimit;
        SetStageRegex(std::move(extract), &st);
        stages->push_back(std::move(st));
      }
      return n;
    }
    const size_t e = FunctionNameEnd(at);
    const size_t k = SkipWsFrom(e);
    if (e > at && k < s_.size() && s_[k] == '(') {
      std::string name(s_.substr(at, e - at));
      const functions::Function* fn = functions::FindPipelineFunction(name);
      if (fn == nullptr || (fn->kind != functions::Kind::kFilter && !IsRegexFunction(*fn))) {
        Error(at, fn == nullptr ? UnknownFunction(name)
                                : std::string(fn->name) +
                                      "() is not a filter: it cannot be a "
                                      "match pattern");
        return nullptr;
      }
      pos_ = k + 1;
      return ParseFilterFunction(*fn, at, field, at);
    }
    std::string value;
    if (c == '"') {
      if (!ParseQuoted(&value)) return nullptr;
    } else if (c == '?') {
      if (!ParseParameter(&value)) return nullptr;
    } else {
      size_t w = pos_;
      while (w < s_.size() && !IsSpace(s_[w]) && s_[w] != '=' && s_[w] != ';' && s_[w] != '}' &&
             s_[w] != '"') {
        ++w;
      }
      value = std::string(s_.substr(pos_, w - pos_));
      pos_ = w;
      if (value.empty()) {
        Error(at, "expected a match pattern (a value, /regex/, a filter function or *) but found " +
                      Found());
        return nullptr;
      }
    }
    auto n = MakeFieldMatch(std::move(value), at);
    n->field = field;
    return n;
  }

  // Whether a `target :=` starts at pos_ (target a field name, "quoted" or `backquoted`); then
  // *target is set and pos_ is after ':='. Otherwise pos_ is unchanged.
  // Whether `field =~ f(` starts at pos_ for a step f that filters by a `field` parameter
  // (match(), or a negatable step such as cidr(); not a filter function): true with *field and
  // *fn set and pos_ after the field name; else pos_ unchanged.
  bool MatchStepAt(size_t start, std::string* field, const functions::Function** fn) {
    if (!TryFieldNameAt(field)) return false;
    const size_t k = SkipWsFrom(pos_);
    if (k + 1 < s_.size() && s_[k] == '=' && s_[k + 1] == '~') {
      const size_t name_at = SkipWsFrom(k + 2);
      const size_t e = FunctionNameEnd(name_at);
      const size_t open = SkipWsFrom(e);
      if (e > name_at && open < s_.size() && s_[open] == '(') {
        const std::string_view name = s_.substr(name_at, e - name_at);
        const functions::Function* f = functions::FindPipelineFunction(name);
        if (f != nullptr && f->kind == functions::Kind::kTransform && HasParam(*f, "field") &&
            (EqualsIgnoreCase(name, "match") || f->negatable)) {
          *fn = f;
          return true;
        }
      }
    }
    pos_ = start;
    return false;
  }

  bool AssignmentAt(std::string* target) {
    const size_t start = pos_;
    if (!TryFieldNameAt(target)) return false;
    size_t k = SkipWsFrom(pos_);
    if (k + 1 < s_.size() && s_[k] == ':' && s_[k + 1] == '=') {
      pos_ = k + 2;
      return true;
    }
    pos_ = start;
    return false;
  }

  // `target := expression`, or `target := f(...)` for a pipeline function f (an aggregate or a
  // transform with an `as` parameter: as LogScale, the same as f(..., as=target)); pos_ after
  // ':='. A name that is both (min, max, lower, ...) is the expression function when the call
  // parses as one (`m := max(a, b)`), else the pipeline function (`m := max(x)`).
  // The argument as=`target` that `target := f(...)` gives f (at `start`).
  static functions::Arg OutputArg(const std::string& target, size_t start) {
    functions::Arg as;
    as.name = "as";
    as.position = start;
    as.value.kind = functions::ArgValue::Kind::kScalar;
    as.value.quoted = true;
    as.value.text = target;
    as.value.position = start;
    return as;
  }

  bool ParseAssignmentStep(const std::string& target, size_t start, std::vector<Stage>* stages,
                           bool* filter_phase) {
    SkipWs();
    const size_t fstart = pos_;
    const size_t fe = FunctionNameEnd(fstart);
    ExprPtr value;
    Status expr_err;  // why the call is not an expression, when it is tried as a function
    bool prefer_expr_err = false;      // report expr_err when the function fails too
    bool value_was_lone_step = false;  // the expression was the pipeline call alone
    if (fe > fstart) {
      std::string name(s_.substr(fstart, fe - fstart));
      size_t k = SkipWsFrom(fe);
      const functions::Function* fn = functions::FindPipelineFunction(name);
      bool pipeline = k < s_.size() && s_[k] == '(' && fn != nullptr;
      if (pipeline) {
        // An expression when it is one up to the step's end (`x := lower(y)`,
        // `i := array:length("a[]") - 1`); a lone pipeline call stays the step itself with
        // as=target (`c := count()`, `x := text:length(m)`).
        const size_t parameters = parameters_.size();
        const size_t time_calls = time_calls_.size();
        value = ParseExpr();
        SkipWs();
        const bool lone_step =
            value && value->kind == Expr::Kind::kStage && value->position == fstart;
        if (value && AtStepEnd() && !lone_step) pipeline = false;
        value_was_lone_step = lone_step && AtStepEnd();
        if (!pipeline && value->kind == Expr::Kind::kCall && value->position == fstart &&
            fn->kind != functions::Kind::kFilter && HasParam(*fn, "as") &&
            fn->syntax == functions::Syntax::kArguments) {
          // A lone call of a name that is both: LogScale reads `x := f(...)` as f(..., as=x),
          // where a quoted argument names a field (`x := upper("d")` reads field d). The step
          // when it takes these arguments (`concat(a, b)` does not), else the expression.
          const size_t expr_end = pos_;
          pos_ = k + 1;
          Stage st;
          functions::Arg as = OutputArg(target, start);
          if (ParseFunctionStage(*fn, fstart, &st, &as)) {
            SkipWs();
            if (AtStepEnd()) {
              stages->push_back(std::move(st));
              *filter_phase = false;
              return true;
            }
          }
          err_ = Status::OK();
          pos_ = expr_end;
          parameters_.resize(parameters);
          time_calls_.resize(time_calls);
        }
        if (pipeline) {
          expr_err = ok() ? Status::InvalidArgument("unexpected " + Found() + " at position " +
                                                    std::to_string(pos_))
                          : err_;
          prefer_expr_err = functions::FindExpressionFunction(name) != nullptr;
          err_ = Status::OK();  // not an expression: try the function
          pos_ = fstart;
          value = nullptr;
          parameters_.resize(parameters);
          time_calls_.resize(time_calls);
        }
      }
      if (pipeline) {
        if (fn->kind == functions::Kind::kFilter) {
          Error(fstart, std::string(fn->name) + "() is a filter: it has no value to assign");
          return false;
        }
        functions::Arg as = OutputArg(target, start);
        pos_ = k + 1;
        Stage st;
        if (!ParseFunctionStage(*fn, fstart, &st, &as)) {
          if (prefer_expr_err) err_ = expr_err;  // neither: the expression's error
          return false;
        }
        SkipWs();
        if (!value_was_lone_step && !AtStepEnd()) {  // `x := count() + 1`: why it is no expression
          err_ = expr_err;
          return false;
        }
        stages->push_back(std::move(st));
        *filter_phase = false;
        return true;
      }
    }
    Stage st;
    st.kind = Stage::Kind::kEval;
    st.position = start;
    st.function = "eval";
    if (!value) value = ParseExpr();
    if (!value) return false;
    st.assignments.emplace_back(target, std::move(value));
    stages->push_back(std::move(st));
    *filter_phase = false;
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
    const size_t links = LinkCount();
    FilterPtr left = ParseNot();
    while (ok()) {
      SkipWs();
      if (!AtKeyword("or")) break;
      pos_ += 2;
      FilterPtr right = ParseNot();
      if (!ok() || !NoLinkSince(links, "OR")) return nullptr;
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
      const size_t links = LinkCount();
      FilterPtr child = ParseNot();
      if (!ok() || !NoLinkSince(links, "NOT")) return nullptr;
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
      n->global = last_regex_global_;
      SetFilterRegex(std::move(re), n.get());
      return n;
    }
    if (c == '$') {
      // A saved query call: recorded for ExpandSavedQueries, a placeholder matching every event
      // here (Compile refuses a text that still has one).
      if (!ParseSavedCall()) return nullptr;
      return MakeNode(FilterNode::Kind::kTrue, start);
    }
    if (IsIdentStart(c)) {
      // A filter function: in(...), wildcard(...), regex(...).
      size_t e = FunctionNameEnd(start);
      std::string name(s_.substr(start, e - start));
      size_t k = SkipWsFrom(e);
      if (k < s_.size() && s_[k] == '(' && !IsKeyword(name)) {
        const functions::Function* fn = functions::FindPipelineFunction(name);
        if (fn != nullptr && (fn->kind == functions::Kind::kFilter || IsRegexFunction(*fn))) {
          pos_ = k + 1;
          return ParseFilterFunction(*fn, start);
        }
        if (k == e || IsNamespaced(name)) {
          Error(start, fn == nullptr ? UnknownFunction(name)
                                     : std::string(fn->name) +
                                           "() is not a filter: use it as a pipeline step of its "
                                           "own, after '|'");
          return nullptr;
        }
      }
    }
    std::string word;
    bool quoted = false;
    bool backquoted = false;
    if (c == '"') {
      if (!ParseQuoted(&word)) return nullptr;
      quoted = true;
    } else if (c == '`') {
      if (!ParseBackquoted(&word)) return nullptr;
      quoted = backquoted = true;
    } else if (c == '?') {
      if (!ParseParameter(&word)) return nullptr;
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
    if (AtKeyword("like")) return ParseLike(word, quoted, start);
    if (backquoted) {
      Error(pos_, "expected a comparison after the field name `" + word + "` but found " +
                      (AtEnd() ? "end of query" : "'" + std::string(1, Peek()) + "'"));
      return nullptr;
    }
    if (EqualsIgnoreCase(WordAt(pos_), "match") && SkipWsFrom(pos_ + 5) < s_.size() &&
        s_[SkipWsFrom(pos_ + 5)] == '{') {
      Error(pos_,
            "a match statement (field match { ... }) must be a pipeline step of its own: "
            "put '|' before it");
      return nullptr;
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

  // Whether `name` (unquoted, at `start`) is a field name; else an error is recorded.
  bool CheckFieldName(const std::string& name, bool quoted_name, size_t start) {
    if (name.empty()) {
      Error(start, "empty field name");
      return false;
    }
    if (quoted_name) return true;
    for (size_t i = 0; i < name.size(); ++i) {
      if (name[i] == '[' && i > 0) {  // an array index a[0]
        size_t e = i + 1;
        while (e < name.size() && IsDigit(name[e])) ++e;
        if (e > i + 1 && e < name.size() && name[e] == ']') {
          i = e;
          continue;
        }
      }
      if (!IsFieldNameChar(name[i])) {
        Error(start + i,
              "invalid character '" + std::string(1, name[i]) + "' in field name '" + name + "'");
        return false;
      }
    }
    return true;
  }

  // `name like value` at pos_ (the keyword): the value occurs in the field (case-sensitive;
  // '*' in it is a wildcard), as LogScale's like.
  FilterPtr ParseLike(const std::string& name, bool quoted_name, size_t start) {
    if (!CheckFieldName(name, quoted_name, start)) return nullptr;
    pos_ += 4;
    SkipWs();
    size_t vpos = pos_;
    std::string value;
    if (Peek() == '"') {
      if (!ParseQuoted(&value)) return nullptr;
    } else if (Peek() == '?') {
      if (!ParseParameter(&value)) return nullptr;
    } else {
      value = std::string(WordAt(pos_));
      pos_ += value.size();
    }
    if (value.empty()) {
      Error(vpos, "expected a value after 'like' but found " + Found());
      return nullptr;
    }
    auto n = MakeFieldMatch("*" + value + "*", start);
    n->field = name;
    return n;
  }

  // `name` op value at pos_ (the operator), op one of = != < <= > >= == =~.
  FilterPtr ParseComparison(const std::string& name, bool quoted_name, size_t start) {
    if (!CheckFieldName(name, quoted_name, start)) return nullptr;
    std::string op;
    char c = Peek();
    if (c == '<' && Peek(1) == '=' && Peek(2) == '>') return ParseFieldLink(name, start);
    if (c == '!' && Peek(1) == '=' && Peek(2) == '~') {
      Error(pos_, "'!=~' is not supported: write not (field =~ f(...))");
      return nullptr;
    }
    if (c == '!' || (c == '=' && (Peek(1) == '=' || Peek(1) == '~')) ||
        ((c == '<' || c == '>') && Peek(1) == '=')) {
      op = std::string(s_.substr(pos_, 2));
    } else {
      op = std::string(1, c);
    }
    pos_ += op.size();
    SkipWs();
    size_t vpos = pos_;
    if (op == "=~") {
      // field =~ f(...): the filter function f with field=field.
      size_t e = FunctionNameEnd(vpos);
      size_t k = SkipWsFrom(e);
      std::string fname(s_.substr(vpos, e - vpos));
      const functions::Function* fn = e > vpos && k < s_.size() && s_[k] == '('
                                          ? functions::FindPipelineFunction(fname)
                                          : nullptr;
      if (fn == nullptr || (fn->kind != functions::Kind::kFilter && !IsRegexFunction(*fn))) {
        Error(vpos, fn == nullptr && e > vpos && k < s_.size() && s_[k] == '('
                        ? "unknown function '" + fname + "'"
                        : "expected a filter function such as in(), wildcard() or regex() "
                          "after '=~' but found " +
                              (e > vpos ? "'" + fname + "'" : Found()));
        return nullptr;
      }
      pos_ = k + 1;
      return ParseFilterFunction(*fn, vpos, name, start);
    }
    if (op != "=" && op != "!=") return ParseNumericComparison(name, op, start, vpos);
    bool negated = op == "!=";
    std::shared_ptr<FilterNode> n;
    if (Peek() == '?') {
      std::string value;
      if (!ParseParameter(&value)) return nullptr;
      n = MakeFieldMatch(std::move(value), start);
    } else if (Peek() == '/') {
      std::shared_ptr<const re2::RE2> re;
      std::string source;
      if (!ParseRegexLiteral(&re, &source)) return nullptr;
      n = MakeNode(FilterNode::Kind::kFieldRegex, start);
      n->text = source;
      n->global = last_regex_global_;
      SetFilterRegex(std::move(re), n.get());
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

  // `name <=> query.field` at pos_ (the operator), in a subquery of correlate(): recorded in
  // links_; the filter itself keeps every record.
  FilterPtr ParseFieldLink(const std::string& name, size_t start) {
    if (links_ == nullptr) {
      Error(pos_,
            "'<=>' field links are only allowed in the named subqueries of correlate() "
            "(name: { ... | field <=> other.field })");
      return nullptr;
    }
    pos_ += 3;
    SkipWs();
    const size_t vpos = pos_;
    const size_t qend = IdentEnd(pos_);
    const size_t fend = FieldNameEnd(qend + 1);
    if (qend == pos_ || qend >= s_.size() || s_[qend] != '.' || fend == qend + 1) {
      Error(vpos, "expected query.field after '<=>' but found " + Found());
      return nullptr;
    }
    FieldLink link;
    link.field = name;
    link.query = std::string(s_.substr(pos_, qend - pos_));
    link.other_field = std::string(s_.substr(qend + 1, fend - qend - 1));
    link.position = start;
    links_->push_back(std::move(link));
    pos_ = fend;
    return MakeNode(FilterNode::Kind::kTrue, start);
  }

  // Refuses a `<=>` link parsed since `links_before` links were recorded (under OR or NOT,
  // where it cannot hold).
  bool NoLinkSince(size_t links_before, const char* where) {
    if (links_ == nullptr || links_->size() == links_before) return true;
    Error((*links_)[links_before].position,
          std::string("a '<=>' field link cannot be under ") + where);
    return false;
  }
  size_t LinkCount() const { return links_ == nullptr ? 0 : links_->size(); }

  FilterPtr ParseNumericComparison(const std::string& name, const std::string& op, size_t start,
                                   size_t vpos) {
    std::string value;
    bool word = false;
    if (Peek() == '"') {
      if (!ParseQuoted(&value)) return nullptr;
    } else if (Peek() == '?') {
      if (!ParseParameter(&value)) return nullptr;
    } else {
      value = std::string(WordAt(pos_));
      pos_ += value.size();
      word = true;
    }
    std::optional<double> number = ParseNumber(value);
    std::optional<double> left = ParseNumber(name);
    if (!number && left && word && !value.empty() && IsIdentStart(value[0])) {
      // `400 > status`: the number on the left is `status < 400`.
      auto n = MakeNode(FilterNode::Kind::kFieldCmp, start);
      n->field = value;
      n->text = name;
      n->number = *left;
      using C = FilterNode::Cmp;
      n->cmp = op == "<"    ? C::kGt
               : op == "<=" ? C::kGe
               : op == ">"  ? C::kLt
               : op == ">=" ? C::kLe
                            : C::kEq;
      return n;
    }
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

  // A filter function (in(), wildcard(), or regex() used as a filter) named at `start`; pos_
  // just after '('. `field` (the left side of `field =~ f(...)`, at `field_pos`), when not empty,
  // is given as its field= argument.
  FilterPtr ParseFilterFunction(const functions::Function& fn, size_t start,
                                const std::string& field = "", size_t field_pos = 0) {
    std::vector<functions::Arg> args;
    if (!ParseArgs(&args, &fn)) return nullptr;
    if (!field.empty()) {
      if (!HasParam(fn, "field")) {
        Error(start, std::string(fn.name) + "() has no field parameter: it cannot follow '=~'");
        return nullptr;
      }
      functions::Arg a;
      a.name = "field";
      a.position = field_pos;
      a.value.kind = functions::ArgValue::Kind::kScalar;
      a.value.quoted = true;
      a.value.text = field;
      a.value.position = field_pos;
      args.push_back(std::move(a));
    }
    functions::Call call(fn, start, &err_);
    if (!call.Bind(args)) return nullptr;
    if (fn.kind == functions::Kind::kFilter) return fn.filter(call);
    // regex(): its stage's regex as a filter on its field.
    Stage st;
    if (!fn.stage(call, &st)) return nullptr;
    if (!st.strict) {
      Error(start, "regex(strict=false) keeps every event: it cannot be a filter");
      return nullptr;
    }
    return RegexFilter(st, start);
  }

  // The filter a strict regex() stage `st` (at `start`) applies: its regex on its field.
  static FilterPtr RegexFilter(const Stage& st, size_t start) {
    const bool raw = st.field.empty() || st.field == "@rawstring";
    auto n = MakeNode(raw ? FilterNode::Kind::kRawRegex : FilterNode::Kind::kFieldRegex, start);
    n->field = raw ? "@rawstring" : st.field;
    n->text = st.re->pattern();
    SetFilterRegex(st.re, n.get());
    return n;
  }

  // `$name(arg=value, ...)` or `$"name"(...)` at pos_: recorded in saved_calls_. The arguments
  // are named scalars (the values of the saved query's parameters).
  bool ParseSavedCall() {
    const size_t start = pos_++;
    SavedCall call;
    call.begin = start;
    if (Peek() == '"') {
      if (!ParseQuoted(&call.name)) return false;
    } else {
      const size_t e = FunctionNameEnd(pos_);
      call.name = std::string(s_.substr(pos_, e - pos_));
      pos_ = e;
    }
    if (call.name.empty()) {
      Error(start, "expected a saved query name after '$' but found " + Found());
      return false;
    }
    SkipWs();
    if (Peek() != '(') {
      Error(pos_,
            "expected '(' after the saved query name '" + call.name + "' but found " + Found());
      return false;
    }
    ++pos_;
    std::vector<functions::Arg> args;
    if (!ParseArgs(&args)) return false;
    for (const functions::Arg& a : args) {
      if (a.name.empty() || a.value.kind != functions::ArgValue::Kind::kScalar) {
        Error(a.position, "the arguments of saved query '" + call.name +
                              "' are name=value pairs (its parameters' values)");
        return false;
      }
      call.args[a.name] = a.value.text;
    }
    call.end = pos_;
    saved_calls_.push_back(std::move(call));
    return true;
  }

  // `?name` or `?{name=default}` at pos_ (a query parameter): its value from the arguments, else
  // its default; an error when it has neither. Recorded for BindParameters.
  bool ParseParameter(std::string* value) {
    const size_t start = pos_;
    ++pos_;
    std::string name;
    std::optional<std::string> fallback;
    if (Peek() == '{') {
      ++pos_;
      SkipWs();
      size_t e = IdentEnd(pos_);
      name = std::string(s_.substr(pos_, e - pos_));
      pos_ = e;
      if (name.empty()) {
        Error(pos_, "expected a parameter name after '?{' but found " + Found());
        return false;
      }
      SkipWs();
      if (Peek() == '=') {
        ++pos_;
        SkipWs();
        std::string d;
        if (Peek() == '"') {
          if (!ParseQuoted(&d)) return false;
        } else {
          size_t b = pos_;
          while (!AtEnd() && Peek() != '}' && !IsSpace(Peek())) ++pos_;
          d = std::string(s_.substr(b, pos_ - b));
        }
        fallback = std::move(d);
        SkipWs();
      }
      if (Peek() != '}') {
        Error(pos_, AtEnd() ? "missing '}' for '?{' at position " + std::to_string(start)
                            : "expected '=' or '}' in ?{" + name + "} but found " + Found());
        return false;
      }
      ++pos_;
    } else {
      size_t e = IdentEnd(pos_);
      if (e == pos_) {
        Error(start, "expected a query parameter (?name or ?{name=default}) after '?'");
        return false;
      }
      name = std::string(s_.substr(pos_, e - pos_));
      pos_ = e;
    }
    const std::string* given = nullptr;
    if (arguments_ != nullptr) {
      auto it = arguments_->find(name);
      if (it != arguments_->end()) given = &it->second;
    }
    if (given != nullptr) {
      *value = *given;
    } else if (fallback) {
      *value = *fallback;
    } else if (missing_as_empty_) {
      *value = "0";  // a value every place of a parameter takes (numbers, texts, patterns)
    } else {
      Error(start, "query parameter ?" + name +
                       " has no value (give it in the request's \"arguments\", or a default: ?{" +
                       name + "=value})");
      return false;
    }
    parameters_.push_back({start, pos_, *value});
    return true;
  }

  // `...` (a field name); no escapes.
  bool ParseBackquoted(std::string* out) {
    size_t start = pos_;
    size_t close = s_.find('`', pos_ + 1);
    if (close == std::string_view::npos) {
      Error(start, "unterminated `field name`");
      return false;
    }
    *out = std::string(s_.substr(pos_ + 1, close - pos_ - 1));
    pos_ = close + 1;
    return true;
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
    bool global = false;
    while (!AtEnd() && IsIdentChar(Peek())) {
      if (Peek() == 'g') {  // every match: the same events match
        global = true;
        ++pos_;
        continue;
      }
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
    last_regex_global_ = global;
    *re = std::move(compiled);
    *source = std::move(full);
    return true;
  }

  // ---- function arguments ----

  // Arguments up to and including ')'; pos_ is just after '('.
  // The arguments of a call up to its ')'; pos_ just after '('. With `fn`, the values of its
  // Type::kExpr parameters are read as expressions (ArgValue::Kind::kExpr), those of its
  // Type::kExprs parameters as an expression or a list of them.
  bool ParseArgs(std::vector<functions::Arg>* args, const functions::Function* fn = nullptr) {
    functions::Arg queries;  // correlate()'s named subqueries, as one list argument `query`
    for (bool done = TryClose(')'); !done;) {
      SkipWs();
      if (NamedSubqueryAt()) {
        if (fn == nullptr || std::string_view(fn->name) != "correlate") {
          Error(pos_, "a named subquery (name: { ... }) is only an argument of correlate()");
          return false;
        }
        if (queries.value.list.empty()) {
          queries.name = "query";
          queries.position = pos_;
          queries.value.kind = functions::ArgValue::Kind::kList;
          queries.value.position = pos_;
        }
        functions::ArgValue q;
        if (!ParseNamedSubquery(&q)) return false;
        queries.value.list.push_back(std::move(q));
        if (!ListSeparator(')', &done)) return false;
        continue;
      }
      functions::Arg arg;
      arg.position = pos_;
      arg.name = ParseParamName();
      const functions::Type type = fn != nullptr ? ParamType(*fn, arg.name) : functions::Type::kRaw;
      SkipWs();
      if (type == functions::Type::kExprs && Peek() == '[') {
        // A list of expressions: `[lower(a), b, "c"]`.
        arg.value.position = pos_++;
        arg.value.kind = functions::ArgValue::Kind::kList;
        for (bool done = TryClose(']'); !done;) {
          functions::ArgValue item;
          if (!ParseExpressionValue(&item)) return false;
          arg.value.list.push_back(std::move(item));
          if (!ListSeparator(']', &done)) return false;
        }
      } else if (type == functions::Type::kExpr || type == functions::Type::kExprs) {
        if (!ParseExpressionValue(&arg.value)) return false;
      } else if (!ParseArgValue(&arg.value)) {
        return false;
      }
      args->push_back(std::move(arg));
      if (!ListSeparator(')', &done)) return false;
    }
    if (!queries.value.list.empty()) args->push_back(std::move(queries));
    return true;
  }

  // Whether pos_ is at `name: {` (a named subquery of correlate()).
  bool NamedSubqueryAt() const {
    const size_t e = IdentEnd(pos_);
    const size_t k = SkipWsFrom(e);
    if (e == pos_ || k + 1 >= s_.size() || s_[k] != ':' || s_[k + 1] == '=') return false;
    const size_t b = SkipWsFrom(k + 1);
    return b < s_.size() && s_[b] == '{';
  }

  // `name: { subquery } [include: fields]` at pos_: *v becomes a kCall value named `name`
  // whose unnamed argument is the subquery (with its `<=>` links) and whose `include` argument
  // is the fields, when given.
  bool ParseNamedSubquery(functions::ArgValue* v) {
    v->position = pos_;
    const size_t e = IdentEnd(pos_);
    v->kind = functions::ArgValue::Kind::kCall;
    v->text = std::string(s_.substr(pos_, e - pos_));
    pos_ = SkipWsFrom(SkipWsFrom(e) + 1);
    functions::Arg query;
    query.position = pos_;
    correlate_subquery_ = true;
    const bool parsed = ParseSubquery(&query.value);
    correlate_subquery_ = false;
    if (!parsed) return false;
    v->args.push_back(std::move(query));
    SkipWs();
    const size_t ie = IdentEnd(pos_);
    const size_t colon = SkipWsFrom(ie);
    if (ie > pos_ && EqualsIgnoreCase(s_.substr(pos_, ie - pos_), "include") && colon < s_.size() &&
        s_[colon] == ':') {
      functions::Arg include;
      include.name = "include";
      include.position = pos_;
      pos_ = colon + 1;
      if (!ParseArgValue(&include.value)) return false;
      v->args.push_back(std::move(include));
    }
    return true;
  }

  // One expression as an argument value (ArgValue::Kind::kExpr, `text` its source).
  bool ParseExpressionValue(functions::ArgValue* v) {
    SkipWs();
    v->position = pos_;
    v->kind = functions::ArgValue::Kind::kExpr;
    v->expr = ParseExpr();
    if (!v->expr) return false;
    v->text = std::string(s_.substr(v->position, pos_ - v->position));
    while (!v->text.empty() && IsSpace(v->text.back())) v->text.pop_back();
    return true;
  }

  // The type of the parameter the argument named `name` ("" = positional) of `fn` binds to
  // (kRaw when none: Bind reports it).
  static functions::Type ParamType(const functions::Function& fn, std::string_view name) {
    for (const functions::Param& p : fn.params) {
      const bool named =
          name.empty() ? p.unnamed : name == p.name || name == Lower(std::string_view(p.name));
      if (named) return p.type;
    }
    return functions::Type::kRaw;
  }

  bool ParseArgValue(functions::ArgValue* v) {
    Nest nest(this);
    if (!nest.ok()) return false;
    SkipWs();
    v->position = pos_;
    char c = Peek();
    if (c == '[') {
      v->kind = functions::ArgValue::Kind::kList;
      ++pos_;
      for (bool done = TryClose(']'); !done;) {
        functions::ArgValue item;
        if (!ParseArgValue(&item)) return false;
        v->list.push_back(std::move(item));
        if (!ListSeparator(']', &done)) return false;
      }
      return true;
    }
    if (c == '"' || c == '`' || c == '?') {
      v->kind = functions::ArgValue::Kind::kScalar;
      v->quoted = true;
      bool parsed = c == '"'   ? ParseQuoted(&v->text)
                    : c == '`' ? ParseBackquoted(&v->text)
                               : ParseParameter(&v->text);
      return parsed && NamedCall(v);
    }
    if (c == '{') return ParseSubquery(v);
    if (c == '(') {  // a value in parentheses: function=([count(), max(x)]), function=(f())
      const size_t open = pos_++;
      if (!ParseArgValue(v)) return false;
      SkipWs();
      if (Peek() != ')') {
        Error(pos_, "expected ')' closing the '(' at position " + std::to_string(open) +
                        " but found " + Found());
        return false;
      }
      ++pos_;
      return true;
    }
    if (c == '$') {
      Error(pos_, "saved query call '" +
                      std::string(s_.substr(pos_, FunctionNameEnd(pos_ + 1) - pos_)) +
                      "' cannot be an argument value: call it as a step of its own");
      return false;
    }
    size_t e = pos_;
    while (e < s_.size() && !IsSpace(s_[e]) && s_[e] != ',' && s_[e] != ')' && s_[e] != ']' &&
           s_[e] != '(' && s_[e] != '|' && s_[e] != '"' && s_[e] != '=' && s_[e] != '{' &&
           s_[e] != '}' && s_[e] != ';' && s_[e] != '`' &&
           !(s_[e] == ':' && e + 1 < s_.size() && s_[e + 1] == '=')) {
      if (s_[e] == '[') {  // an array index a[0]; else the value ends
        if (e == pos_ || IndexEnd(e) == e) break;
        e = IndexEnd(e);
        continue;
      }
      ++e;
    }
    if (e == pos_) {
      Error(pos_, "expected a value but found " + Found());
      return false;
    }
    v->text = std::string(s_.substr(pos_, e - pos_));
    pos_ = e;
    if (SkipWsFrom(pos_) + 1 < s_.size() && s_[SkipWsFrom(pos_)] == ':') {
      v->kind = functions::ArgValue::Kind::kScalar;
      return NamedCall(v);
    }
    size_t save = pos_;
    SkipWs();
    if (Peek() == '(') {
      v->kind = functions::ArgValue::Kind::kCall;
      ++pos_;
      return ParseArgs(&v->args);
    }
    pos_ = save;
    v->kind = functions::ArgValue::Kind::kScalar;
    return true;
  }

  // The tables of a defineTable()/join() step `st` join the query's (in text order), and a
  // match(table=) must name one defined before it; false (error recorded) otherwise.
  bool CheckTables(Stage* st) {
    if (st->table_query != nullptr) {
      if (subquery_depth_ > 0 || InCase()) {
        Error(st->position, st->function + "() cannot be used inside a subquery or case");
        return false;
      }
      for (const TableQuery& t : tables_) {
        if (t.name == st->table_query->name) {
          Error(st->position, "table '" + t.name + "' is defined twice");
          return false;
        }
      }
      tables_.push_back(*st->table_query);
    }
    if (st->kind == Stage::Kind::kMatch && !st->table.empty() &&
        std::none_of(tables_.begin(), tables_.end(),
                     [st](const TableQuery& t) { return t.name == st->table; }) &&
        (CurrentBoundTables() == nullptr || CurrentBoundTables()->count(st->table) == 0)) {
      Error(st->position, "unknown table '" + st->table +
                              "' in match(): define it with defineTable(name=\"" + st->table +
                              "\", ...) before it");
      return false;
    }
    return true;
  }

  // A subquery `{ filter | stages }` as an argument value; pos_ at '{'.
  bool ParseSubquery(functions::ArgValue* v) {
    const size_t brace = pos_;
    ++pos_;
    const int saved_case = case_depth_;
    case_depth_ = 0;  // ';' separates case branches, not subquery steps
    ++subquery_depth_;
    FilterPtr filter;
    auto sq = std::make_shared<Subquery>();
    sq->position = brace;
    std::vector<Stage> stages;
    std::vector<FieldLink>* const saved_links = links_;
    links_ = correlate_subquery_ ? &sq->links : nullptr;
    correlate_subquery_ = false;
    const bool parsed = ParseSteps(&filter, &stages, /*in_branch=*/true);
    links_ = saved_links;
    case_depth_ = saved_case;
    --subquery_depth_;
    if (!parsed) return false;
    SkipWs();
    if (Peek() != '}') {
      Error(pos_,
            AtEnd() ? "missing '}' for '{' at position " + std::to_string(brace) : Unexpected());
      return false;
    }
    ++pos_;
    if (filter) {
      Stage st;
      st.kind = Stage::Kind::kFilter;
      st.position = brace + 1;
      st.function = "filter";
      st.filter = std::move(filter);
      sq->stages.push_back(std::move(st));
    }
    for (Stage& st : stages) sq->stages.push_back(std::move(st));
    sq->collect = sq->stages.size();
    for (size_t i = 0; i < sq->stages.size(); ++i) {
      if (!sq->stages[i].IsTransform()) {
        sq->collect = i;
        break;
      }
    }
    v->kind = functions::ArgValue::Kind::kSubquery;
    v->text = std::string(s_.substr(brace, pos_ - brace));
    v->subquery = std::move(sq);
    return true;
  }

  // After the value `*v` (a name): when `:=` follows, `*v` becomes the call after it with the
  // name as its as= argument (`n := count()` in a list of aggregates); true otherwise.
  bool NamedCall(functions::ArgValue* v) {
    size_t k = SkipWsFrom(pos_);
    if (!(k + 1 < s_.size() && s_[k] == ':' && s_[k + 1] == '=')) return true;
    pos_ = k + 2;
    functions::Arg as;
    as.name = "as";
    as.position = v->position;
    as.value = *v;
    as.value.quoted = true;
    functions::ArgValue call;
    if (!ParseArgValue(&call)) return false;
    if (call.kind != functions::ArgValue::Kind::kCall) {
      Error(call.position,
            "expected a function call after ':=' but found '" + functions::ValueText(call) + "'");
      return false;
    }
    call.args.push_back(std::move(as));
    *v = std::move(call);
    return true;
  }

  // [f1(), f2()] as a step: stats().
  bool ParseStatsShorthand(size_t start, Stage* st) {
    functions::ArgValue v;
    if (!ParseArgValue(&v)) return false;
    st->kind = Stage::Kind::kAggregate;
    st->grouping = Stage::Grouping::kNone;
    st->position = start;
    st->function = "stats";
    if (v.list.empty()) {
      Error(start, "expected aggregate functions such as count() in [ ]");
      return false;
    }
    return functions::MetricsFrom(v, "[...]", &err_, &st->metrics) &&
           functions::CheckMetricNames(st->metrics, "stats", &err_) && WindowsInBuckets(*st);
  }

  // False (error recorded) when `st` has window() metrics but is not a timeChart()/bucket().
  bool WindowsInBuckets(const Stage& st) {
    if (st.kind != Stage::Kind::kAggregate || st.grouping == Stage::Grouping::kBucket) return true;
    for (const Metric& m : st.metrics) {
      if (m.IsWindow()) {
        Error(m.position, "window() can only be used in function= of timeChart() or bucket()");
        return false;
      }
    }
    return true;
  }

  // The `field = expression, ...` of eval() up to and including ')'; pos_ just after '('.
  bool ParseAssignments(std::vector<std::pair<std::string, ExprPtr>>* assignments) {
    for (bool done = false; !done;) {
      SkipWs();
      size_t tpos = pos_;
      std::string target;
      if (Peek() == '"') {
        if (!ParseQuoted(&target)) return false;
      } else if (Peek() == '`') {
        if (!ParseBackquoted(&target)) return false;
      } else {
        pos_ = FieldNameEnd(pos_);
        target = std::string(s_.substr(tpos, pos_ - tpos));
      }
      if (target.empty()) {
        Error(tpos, assignments->empty() && Peek() == ')'
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
      assignments->emplace_back(std::move(target), std::move(value));
      if (!ListSeparator(')', &done)) return false;
    }
    return true;
  }

  // A pipeline function `fn` (not a filter) named at `start`; pos_ just after '('. `as` (from
  // `name := fn(...)`), when given, is added to the arguments.
  // `as` (the `x :=` target of a step, or the hidden output of a call in an expression) is given
  // as the call's as= argument; with `as_overrides` (a call in an expression) an as= written in
  // the call is dropped for it, else both are an error (given twice).
  bool ParseFunctionStage(const functions::Function& fn, size_t start, Stage* st,
                          const functions::Arg* as = nullptr, const functions::Arg* field = nullptr,
                          bool as_overrides = false) {
    st->position = start;
    st->function = fn.name;
    functions::Call call(fn, start, &err_);
    std::vector<functions::Arg> args;  // `call` points into them
    if (as != nullptr && (fn.syntax == functions::Syntax::kAssignments || !HasParam(fn, "as"))) {
      Error(as->position, std::string(fn.name) +
                              "() has no 'as' parameter: its output cannot be named with ':='");
      return false;
    }
    if (fn.syntax == functions::Syntax::kAssignments) {
      if (!ParseAssignments(&call.assignments)) return false;
    } else if (fn.syntax == functions::Syntax::kExpression) {
      const size_t open = pos_ - 1;
      SkipWs();
      if (Peek() == ')') {
        Error(start, std::string("missing required expression for ") + fn.name + "()");
        return false;
      }
      call.expression = ParseExpr();
      if (!call.expression || !CloseParen(open)) return false;
    } else {
      if (!ParseArgs(&args, &fn)) return false;
      if (as != nullptr && as_overrides) {
        std::erase_if(args, [](const functions::Arg& a) { return a.name == "as"; });
      }
      if (as != nullptr) args.push_back(*as);
      if (field != nullptr) args.push_back(*field);
      if (!call.Bind(args)) return false;
    }
    return fn.stage(call, st) && WindowsInBuckets(*st);
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
    if (c == '"' || c == '?') {
      std::string text;
      if (c == '"' ? !ParseQuoted(&text) : !ParseParameter(&text)) return nullptr;
      return MakeExpr(Expr::Kind::kString, std::move(text), start);
    }
    if (c == '`') {
      std::string name;
      if (!ParseBackquoted(&name)) return nullptr;
      return MakeExpr(Expr::Kind::kField, std::move(name), start);
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
      size_t fe = FunctionNameEnd(pos_);
      size_t k = SkipWsFrom(fe);
      if (k < s_.size() && s_[k] == '(' && fe > start &&
          (fe == e || IsNamespaced(s_.substr(start, fe - start)))) {
        pos_ = k + 1;
        return ParseExprCall(std::string(s_.substr(start, fe - start)), start);
      }
      std::string name(s_.substr(start, e - start));
      pos_ = e;
      return MakeExpr(Expr::Kind::kField, std::move(name), start);
    }
    Error(pos_, "expected an expression but found " + Found());
    return nullptr;
  }

  // name(args) in an expression; pos_ just after '('.
  ExprPtr ParseExprCall(const std::string& name, size_t start) {
    const functions::Function* fn = functions::FindExpressionFunction(name);
    if (fn == nullptr) {
      if (const functions::Function* step = functions::FindPipelineFunction(name)) {
        return ParseStageCall(*step, start);
      }
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
    if (fname == "start" || fname == "end") time_calls_.push_back({start, pos_, fname == "end"});
    return MakeExpr(Expr::Kind::kCall, fname, start, std::move(args));
  }

  // A per-record pipeline function `fn` called in an expression (Expr::Kind::kStage); pos_ just
  // after '('. Its output goes to a field of the record's copy named here with as=; a function
  // without as= (a filter) gives 1 when it keeps the record, else 0.
  ExprPtr ParseStageCall(const functions::Function& fn, size_t start) {
    if (fn.kind != functions::Kind::kTransform && fn.kind != functions::Kind::kFilter) {
      Error(start, std::string(fn.name) +
                       "() needs every event (it aggregates): it cannot be used in an expression");
      return nullptr;
    }
    auto st = std::make_shared<Stage>();
    std::string out;
    if (fn.kind == functions::Kind::kFilter) {
      FilterPtr f = ParseFilterFunction(fn, start);
      if (!f) return nullptr;
      st->kind = Stage::Kind::kFilter;
      st->filter = std::move(f);
      st->position = start;
      st->function = fn.name;
    } else {
      functions::Arg as;
      const bool named_output = fn.syntax == functions::Syntax::kArguments && HasParam(fn, "as");
      if (named_output) {
        out = "_expr@" + std::to_string(start);
        as.name = "as";
        as.position = start;
        as.value.kind = functions::ArgValue::Kind::kScalar;
        as.value.quoted = true;
        as.value.text = out;
        as.value.position = start;
      }
      if (!ParseFunctionStage(fn, start, st.get(), named_output ? &as : nullptr, nullptr,
                              /*as_overrides=*/true)) {
        return nullptr;
      }
      if (!EmitsOneOrNone(*st) || st->table_query != nullptr || st->time_interval) {
        Error(start, std::string(fn.name) +
                         "() is not a per-event function with one result: it cannot be used in "
                         "an expression");
        return nullptr;
      }
      if (!CheckTables(st.get())) return nullptr;
    }
    auto e = std::make_shared<Expr>();
    e->kind = Expr::Kind::kStage;
    e->text = std::move(out);
    e->position = start;
    e->stage = std::move(st);
    return e;
  }

  std::string_view s_;
  size_t pos_ = 0;
  // The values of query parameters (null: none given; defaults still apply), and where each
  // parameter occurs with the value it got.
  const std::map<std::string, std::string>* arguments_ = nullptr;
  std::vector<Parameter> parameters_;
  std::vector<TimeCall> time_calls_;
  std::vector<SavedCall> saved_calls_;

 public:
  // A parameter with neither an argument nor a default gets "0" instead of an error.
  bool missing_as_empty_ = false;

 private:
  std::optional<std::pair<std::string, std::string>> time_interval_;  // setTimeInterval()
  int case_depth_ = 0;
  int subquery_depth_ = 0;
  // The `<=>` links of the correlate() subquery being parsed (null elsewhere, where `<=>` is
  // refused); correlate_subquery_: the next ParseSubquery is such a subquery.
  std::vector<FieldLink>* links_ = nullptr;
  // Whether the last regex literal ParseRegexLiteral read had the flag g.
  bool last_regex_global_ = false;
  bool correlate_subquery_ = false;
  std::vector<TableQuery> tables_;  // of defineTable()/join(), in text order  // subqueries `{ ...
                                    // }` being parsed: '}' ends their steps
  int depth_ = 0;
  Status err_;
};

}  // namespace

Result<std::shared_ptr<const CompiledQuery>> Compile(std::string_view text) {
  Parser p(text);
  auto parsed = p.Parse();
  if (parsed.ok() && !p.SavedCalls().empty()) {
    const Parser::SavedCall call = p.SavedCalls().front();
    return Status::InvalidArgument("saved query call '$" + call.name +
                                   "()' here: saved queries are expanded by a repository's query "
                                   "API (ExpandSavedQueries) at position " +
                                   std::to_string(call.begin));
  }
  return parsed;
}

namespace {

constexpr size_t kMaxSavedQueryDepth = 8;

// `chain`: the saved queries being expanded around `text`, outermost first.
Result<std::string> Expand(std::string_view text, const SavedQueries& saved,
                           const std::map<std::string, std::string>& arguments,
                           std::vector<std::string>* chain) {
  Parser p(text, &arguments);
  auto parsed = p.Parse();
  if (!parsed.ok()) return parsed.status();
  const std::vector<Parser::SavedCall> calls = p.SavedCalls();
  if (calls.empty()) return std::string(text);
  std::string out;
  size_t at = 0;
  for (const Parser::SavedCall& call : calls) {
    const std::string where = " at position " + std::to_string(call.begin);
    if (std::find(chain->begin(), chain->end(), call.name) != chain->end()) {
      std::string path;
      for (const std::string& n : *chain) path += n + " -> ";
      return Status::InvalidArgument("saved query '" + call.name + "' calls itself (" + path +
                                     call.name + ")" + where);
    }
    if (chain->size() >= kMaxSavedQueryDepth) {
      return Status::InvalidArgument("saved queries nest more than " +
                                     std::to_string(kMaxSavedQueryDepth) + " deep" + where);
    }
    std::optional<std::string> body = saved.Find(call.name);
    if (!body) {
      return Status::InvalidArgument("unknown saved query '" + call.name +
                                     "' (the repository has no saved search of that name)" + where);
    }
    // Its parameters: the call's arguments, else the request's, else their defaults.
    std::map<std::string, std::string> args = arguments;
    for (const auto& [k, v] : call.args) args[k] = v;
    Result<std::string> bound = BindParameters(*body, args);
    if (!bound.ok()) {
      return Status::InvalidArgument("in saved query '" + call.name + "' called" + where + ": " +
                                     bound.status().message());
    }
    chain->push_back(call.name);
    Result<std::string> expanded = Expand(*bound, saved, arguments, chain);
    chain->pop_back();
    if (!expanded.ok()) return expanded.status();  // names the inner call already
    out.append(text.substr(at, call.begin - at));
    out += *expanded;
    // A `// comment` at its end must not swallow what follows the call.
    if (expanded->find("//") != std::string::npos) out += '\n';
    at = call.end;
  }
  out.append(text.substr(at));
  return out;
}

}  // namespace

Result<std::string> ExpandSavedQueries(std::string_view text, const SavedQueries& saved,
                                       const std::map<std::string, std::string>& arguments,
                                       std::string_view self) {
  std::vector<std::string> chain;
  if (!self.empty()) chain.emplace_back(self);
  return Expand(text, saved, arguments, &chain);
}

Result<std::string> BindParameters(std::string_view text,
                                   const std::map<std::string, std::string>& arguments,
                                   bool missing_as_empty) {
  Parser p(text, &arguments);
  p.missing_as_empty_ = missing_as_empty;
  auto parsed = p.Parse();
  if (!parsed.ok()) return parsed.status();
  std::string out;
  size_t at = 0;
  for (const Parser::Parameter& param : p.Parameters()) {
    out.append(text.substr(at, param.begin - at));
    out += QuoteString(param.value);
    at = param.end;
  }
  out.append(text.substr(at));
  return out;
}

Result<std::string> BindTimeRange(std::string_view text, const TimeRange& range) {
  Parser p(text);
  auto parsed = p.Parse();
  if (!parsed.ok()) return parsed.status();
  std::string out;
  size_t at = 0;
  for (const Parser::TimeCall& call : p.TimeCalls()) {
    out.append(text.substr(at, call.begin - at));
    out += std::to_string(call.is_end ? range.end_ms : range.start_ms);
    at = call.end;
  }
  out.append(text.substr(at));
  return out;
}

bool UsesTimeRange(const CompiledQuery& q) { return q.uses_time_range; }

std::optional<std::pair<std::string, std::string>> QueryTimeInterval(const CompiledQuery& q) {
  return q.time_interval;
}

bool functions::ParseArgumentValue(std::string_view text, ArgValue* out) {
  Parser p(text);
  return p.ParseWholeValue(out);
}

}  // namespace sediment::query
