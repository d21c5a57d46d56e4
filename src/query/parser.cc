// Recursive-descent parser for the supported CQL subset: the grammar of filters
// (query/README.md), the pipeline, case { }, expressions and function arguments (as generic
// values). Functions are looked up in the registry (functions/registry.h), which checks their
// arguments and builds their compiled form. Produces the CompiledQuery of compiled.h.
#include <re2/re2.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "query/compiled.h"
#include "query/functions/registry.h"
#include "query/functions/util.h"
#include "query/query.h"
#include "query/record.h"
#include "query/text_util.h"

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
  explicit Parser(std::string_view s) : s_(s) {}

  Result<std::shared_ptr<const CompiledQuery>> Parse() {
    auto q = std::make_shared<CompiledQuery>();
    q->text = std::string(s_);
    FilterPtr filter;
    if (!ParseSteps(&filter, &q->stages, /*in_branch=*/false)) return err_;
    q->filter = filter ? filter : MakeNode(FilterNode::Kind::kTrue, 0);
    q->filter = WithRegexStageLiterals(q->filter, q->stages);
    q->is_aggregate = std::any_of(q->stages.begin(), q->stages.end(),
                                  [](const Stage& st) { return st.IsAggregate(); });
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
        const functions::Function* fn = functions::FindPipelineFunction(name);
        if (fn == nullptr && k == e) {
          Error(start, "unknown function '" + name + "'");
          return false;
        }
        if (fn != nullptr && fn->kind != functions::Kind::kFilter) {
          pos_ = k + 1;
          Stage st;
          if (!ParseFunctionStage(*fn, start, &st)) return false;
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
      // On @rawstring the strict stage alone filters (RE2 runs once per event, not twice); its
      // literals still join the leading filter (WithRegexStageLiterals). A field regex stays a
      // filter too, for its block-filter terms, and so does any regex in a case branch, where
      // the filter is the branch's condition.
      if (f->kind == FilterNode::Kind::kFieldRegex || InCase()) {
        AddFilter(f, start, leading, stages, *filter_phase);
      }
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
      SetFilterRegex(std::move(re), n.get());
      return n;
    }
    if (IsIdentStart(c)) {
      // A filter function: in(...), wildcard(...).
      size_t e = IdentEnd(start);
      std::string name(s_.substr(start, e - start));
      size_t k = SkipWsFrom(e);
      if (k < s_.size() && s_[k] == '(' && !IsKeyword(name)) {
        const functions::Function* fn = functions::FindPipelineFunction(name);
        if (fn != nullptr && fn->kind == functions::Kind::kFilter) {
          pos_ = k + 1;
          return ParseFilterFunction(*fn, start);
        }
        if (k == e) {
          Error(start, fn == nullptr ? "unknown function '" + name + "'"
                                     : std::string(fn->name) +
                                           "() is not a filter: use it as a pipeline step of its "
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

  // A filter function (in(), wildcard()) named at `start`; pos_ just after '('.
  FilterPtr ParseFilterFunction(const functions::Function& fn, size_t start) {
    std::vector<functions::Arg> args;
    if (!ParseArgs(&args)) return nullptr;
    functions::Call call(fn, start, &err_);
    if (!call.Bind(args)) return nullptr;
    return fn.filter(call);
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

  // ---- function arguments ----

  // Arguments up to and including ')'; pos_ is just after '('.
  bool ParseArgs(std::vector<functions::Arg>* args) {
    for (bool done = TryClose(')'); !done;) {
      SkipWs();
      functions::Arg arg;
      arg.position = pos_;
      arg.name = ParseParamName();
      if (!ParseArgValue(&arg.value)) return false;
      args->push_back(std::move(arg));
      if (!ListSeparator(')', &done)) return false;
    }
    return true;
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
    if (c == '"') {
      v->kind = functions::ArgValue::Kind::kScalar;
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
      v->kind = functions::ArgValue::Kind::kCall;
      ++pos_;
      return ParseArgs(&v->args);
    }
    pos_ = save;
    v->kind = functions::ArgValue::Kind::kScalar;
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
           functions::CheckMetricNames(st->metrics, "stats", &err_);
  }

  // The `field = expression, ...` of eval() up to and including ')'; pos_ just after '('.
  bool ParseAssignments(std::vector<std::pair<std::string, ExprPtr>>* assignments) {
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

  // A pipeline function `fn` (not a filter) named at `start`; pos_ just after '('.
  bool ParseFunctionStage(const functions::Function& fn, size_t start, Stage* st) {
    st->position = start;
    st->function = fn.name;
    functions::Call call(fn, start, &err_);
    std::vector<functions::Arg> args;  // `call` points into them
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
    } else if (!ParseArgs(&args) || !call.Bind(args)) {
      return false;
    }
    return fn.stage(call, st);
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
    const functions::Function* fn = functions::FindExpressionFunction(name);
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

bool functions::ParseArgumentValue(std::string_view text, ArgValue* out) {
  Parser p(text);
  return p.ParseWholeValue(out);
}

}  // namespace sediment::query
