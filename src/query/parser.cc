// Recursive-descent parser for the supported CQL subset (grammar in query/README.md).
#include <re2/re2.h>

#include <algorithm>
#include <charconv>
#include <string>
#include <string_view>
#include <vector>

#include "query/compiled.h"
#include "query/query.h"

namespace sediment::query {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'; }

// Characters that end a bare word in the filter part.
bool EndsWord(char c) {
  return IsSpace(c) || c == '(' || c == ')' || c == '|' || c == '"' || c == '=' || c == '!' ||
         c == ',' || c == '[' || c == ']' || c == '<' || c == '>';
}

bool IsFieldNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '@' || c == '#';
}

bool IsIdentChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && Lower(a) == Lower(b);
}

// The non-empty runs between '*' characters, lower-cased.
std::vector<std::string> GlobPieces(std::string_view pattern) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i <= pattern.size(); ++i) {
    if (i == pattern.size() || pattern[i] == '*') {
      if (i > start) out.push_back(Lower(pattern.substr(start, i - start)));
      start = i + 1;
    }
  }
  return out;
}

// A parsed function argument value: a word/string, a [list], or a call like count().
struct ArgValue;
struct Arg {
  std::string name;  // empty for the unnamed (positional) argument
  size_t position = 0;
  std::shared_ptr<ArgValue> value;
};
struct ArgValue {
  enum class Kind { kScalar, kList, kCall } kind = Kind::kScalar;
  std::string text;  // scalar text or call name
  std::vector<ArgValue> list;
  std::vector<Arg> args;  // call arguments
  size_t position = 0;
};

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

class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  Result<std::shared_ptr<const CompiledQuery>> Parse() {
    auto q = std::make_shared<CompiledQuery>();
    q->text = std::string(s_);
    SkipWs();
    if (AtEnd() || Peek() == '|') {
      q->filter = MakeNode(FilterNode::Kind::kTrue, pos_);
    } else {
      q->filter = ParseAnd();
      if (!ok()) return err_;
      SkipWs();
      if (!AtEnd() && Peek() != '|') {
        Error(pos_, Unexpected());
        return err_;
      }
    }
    while (ok()) {
      SkipWs();
      if (AtEnd()) break;
      if (Peek() != '|') {
        Error(pos_, Unexpected());
        return err_;
      }
      ++pos_;
      SkipWs();
      Stage stage;
      if (!ParseStage(&stage)) return err_;
      q->stages.push_back(std::move(stage));
    }
    if (!ok()) return err_;
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
  std::string Unexpected() const {
    if (AtEnd()) return "unexpected end of query";
    return "unexpected '" + std::string(1, s_[pos_]) + "'";
  }
  // Records the first error.
  void Error(size_t at, const std::string& msg) {
    if (err_.ok()) {
      err_ = Status::InvalidArgument(msg + " at position " + std::to_string(at));
    }
  }

  // The bare word starting at pos_ (not consumed).
  std::string_view WordAt(size_t at) const {
    size_t e = at;
    while (e < s_.size() && !EndsWord(s_[e])) ++e;
    return s_.substr(at, e - at);
  }

  // A keyword (and/or/not, any case) at pos_ that is not used as a field name.
  bool AtKeyword(std::string_view kw) const {
    std::string_view w = WordAt(pos_);
    if (!EqualsIgnoreCase(w, kw)) return false;
    size_t e = pos_ + w.size();
    while (e < s_.size() && IsSpace(s_[e])) ++e;
    if (e < s_.size() && (s_[e] == '=' || (s_[e] == '!' && e + 1 < s_.size() && s_[e + 1] == '=')))
      return false;
    return true;
  }

  // LogScale precedence: NOT binds tightest, then OR, then AND (explicit or implicit), so
  // `a b OR c` is `a AND (b OR c)`. Both binary operators are left-associative.
  FilterPtr ParseAnd() {
    size_t start = pos_;
    FilterPtr left = ParseOr();
    while (ok()) {
      SkipWs();
      if (AtEnd() || Peek() == '|' || Peek() == ')') break;
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
      if (!ok()) return nullptr;
      SkipWs();
      if (Peek() != ')') {
        Error(pos_, AtEnd() ? "missing ')' for '(' at position " + std::to_string(start)
                            : "expected ')' but found " + Unexpected().substr(11));
        return nullptr;
      }
      ++pos_;
      return inner;
    }
    if (c == '/') {
      std::shared_ptr<const re2::RE2> re;
      std::string source;
      if (!ParseRegex(&re, &source)) return nullptr;
      auto n = MakeNode(FilterNode::Kind::kRawRegex, start);
      n->field = "@rawstring";
      n->text = source;
      n->re = re;
      return n;
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
    if (Peek() == '=' || (Peek() == '!' && Peek(1) == '=')) {
      if (Peek() == '=' && Peek(1) == '=') {
        Error(pos_, "unsupported operator '=='");
        return nullptr;
      }
      return ParseComparison(word, quoted, start);
    }
    if (Peek() == '<' || Peek() == '>') {
      Error(pos_, "unsupported operator '" + std::string(1, Peek()) + "'");
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
    bool negated = Peek() == '!';
    pos_ += negated ? 2 : 1;
    SkipWs();
    size_t vpos = pos_;
    std::shared_ptr<FilterNode> n;
    if (Peek() == '/') {
      std::shared_ptr<const re2::RE2> re;
      std::string source;
      if (!ParseRegex(&re, &source)) return nullptr;
      n = MakeNode(FilterNode::Kind::kFieldRegex, start);
      n->text = source;
      n->re = re;
    } else if (Peek() == '"') {
      std::string value;
      if (!ParseQuoted(&value)) return nullptr;
      bool glob = value.find('*') != std::string::npos;
      n = MakeNode(glob ? FilterNode::Kind::kFieldGlob : FilterNode::Kind::kFieldEq, start);
      n->text = std::move(value);
    } else {
      std::string_view value = WordAt(pos_);
      if (value.empty()) {
        Error(vpos, "expected a value after '" + std::string(negated ? "!=" : "=") +
                        "' but found " + Unexpected().substr(11));
        return nullptr;
      }
      pos_ += value.size();
      bool glob = value.find('*') != std::string_view::npos;
      n = MakeNode(glob ? FilterNode::Kind::kFieldGlob : FilterNode::Kind::kFieldEq, start);
      n->text = std::string(value);
    }
    n->field = name;
    if (!negated) return n;
    auto neg = MakeNode(FilterNode::Kind::kNot, start);
    neg->children = {n};
    return neg;
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
  // matches newline).
  bool ParseRegex(std::shared_ptr<const re2::RE2>* re, std::string* source) {
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
      char f = Peek();
      if (f == 'i') {
        prefix += "(?i)";
      } else if (f == 'm') {
        prefix += "(?m)";
      } else if (f == 'd') {
        prefix += "(?s)";
      } else {
        Error(pos_, "unknown regex flag '" + std::string(1, f) + "'");
        return false;
      }
      ++pos_;
    }
    RE2::Options opts;
    opts.set_log_errors(false);
    auto compiled = std::make_shared<RE2>(prefix + pattern, opts);
    if (!compiled->ok()) {
      Error(start, "invalid regular expression: " + compiled->error());
      return false;
    }
    *re = std::move(compiled);
    *source = prefix + pattern;
    return true;
  }

  // ---- pipeline ----

  std::string ParseIdent() {
    size_t e = pos_;
    while (e < s_.size() && IsIdentChar(s_[e])) ++e;
    std::string out(s_.substr(pos_, e - pos_));
    pos_ = e;
    return out;
  }

  bool ParseArgs(std::vector<Arg>* args) {
    // pos_ is just after '('.
    SkipWs();
    if (Peek() == ')') {
      ++pos_;
      return true;
    }
    while (true) {
      SkipWs();
      Arg arg;
      arg.position = pos_;
      // name = value ?
      size_t save = pos_;
      std::string ident = ParseIdent();
      SkipWs();
      if (!ident.empty() && Peek() == '=' && Peek(1) != '=') {
        ++pos_;
        arg.name = ident;
      } else {
        pos_ = save;
      }
      auto value = std::make_shared<ArgValue>();
      if (!ParseArgValue(value.get())) return false;
      arg.value = value;
      args->push_back(std::move(arg));
      SkipWs();
      if (Peek() == ',') {
        ++pos_;
        continue;
      }
      if (Peek() == ')') {
        ++pos_;
        return true;
      }
      Error(pos_,
            AtEnd() ? "missing ')'" : "expected ',' or ')' but found " + Unexpected().substr(11));
      return false;
    }
  }

  bool ParseArgValue(ArgValue* v) {
    SkipWs();
    v->position = pos_;
    char c = Peek();
    if (c == '[') {
      v->kind = ArgValue::Kind::kList;
      ++pos_;
      SkipWs();
      if (Peek() == ']') {
        ++pos_;
        return true;
      }
      while (true) {
        ArgValue item;
        if (!ParseArgValue(&item)) return false;
        v->list.push_back(std::move(item));
        SkipWs();
        if (Peek() == ',') {
          ++pos_;
          continue;
        }
        if (Peek() == ']') {
          ++pos_;
          return true;
        }
        Error(pos_,
              AtEnd() ? "missing ']'" : "expected ',' or ']' but found " + Unexpected().substr(11));
        return false;
      }
    }
    if (c == '"') {
      v->kind = ArgValue::Kind::kScalar;
      return ParseQuoted(&v->text);
    }
    size_t e = pos_;
    while (e < s_.size() && !IsSpace(s_[e]) && s_[e] != ',' && s_[e] != ')' && s_[e] != ']' &&
           s_[e] != '(' && s_[e] != '[' && s_[e] != '|' && s_[e] != '"' && s_[e] != '=') {
      ++e;
    }
    if (e == pos_) {
      Error(pos_, "expected a value but found " + Unexpected().substr(11));
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

  // Accepts the documented camelCase name or its all-lower-case spelling.
  static std::string CanonicalFunction(const std::string& name) {
    static const char* kNames[] = {"count", "head", "tail", "sort", "table", "groupBy"};
    for (const char* n : kNames) {
      if (name == n || (name == Lower(n))) return n;
    }
    return "";
  }

  bool ToFieldList(const ArgValue& v, std::vector<std::string>* out) {
    if (v.kind == ArgValue::Kind::kScalar) {
      out->push_back(v.text);
      return true;
    }
    if (v.kind == ArgValue::Kind::kList) {
      for (const ArgValue& item : v.list) {
        if (item.kind != ArgValue::Kind::kScalar) {
          Error(item.position, "expected a field name");
          return false;
        }
        out->push_back(item.text);
      }
      if (out->empty()) {
        Error(v.position, "expected at least one field");
        return false;
      }
      return true;
    }
    Error(v.position, "expected a field name or a list of field names");
    return false;
  }

  bool ToLimit(const ArgValue& v, int64_t* out) {
    int64_t n = 0;
    if (v.kind == ArgValue::Kind::kScalar) {
      const char* b = v.text.data();
      const char* e = b + v.text.size();
      auto [p, ec] = std::from_chars(b, e, n);
      if (ec == std::errc() && p == e && n >= 0) {
        *out = n;
        return true;
      }
    }
    Error(v.position, "invalid limit '" + v.text + "' (expected a non-negative integer)");
    return false;
  }

  bool ParseStage(Stage* stage) {
    size_t start = pos_;
    stage->position = start;
    std::string name = ParseIdent();
    if (name.empty()) {
      Error(start, "expected a function name but found " + Unexpected().substr(11));
      return false;
    }
    std::string fn = CanonicalFunction(name);
    if (fn.empty()) {
      Error(start, "unknown function '" + name + "'");
      return false;
    }
    SkipWs();
    if (Peek() != '(') {
      Error(pos_, "expected '(' after '" + name + "'");
      return false;
    }
    ++pos_;
    std::vector<Arg> args;
    if (!ParseArgs(&args)) return false;

    std::string unnamed;  // name of the function's unnamed parameter
    std::vector<std::string> allowed;
    if (fn == "count") {
      stage->kind = Stage::Kind::kCount;
    } else if (fn == "head" || fn == "tail") {
      stage->kind = fn == "head" ? Stage::Kind::kHead : Stage::Kind::kTail;
      unnamed = "limit";
      allowed = {"limit"};
    } else if (fn == "sort") {
      stage->kind = Stage::Kind::kSort;
      unnamed = "field";
      allowed = {"field", "order", "limit"};
    } else if (fn == "table") {
      stage->kind = Stage::Kind::kTable;
      unnamed = "fields";
      allowed = {"fields", "limit"};
    } else {
      stage->kind = Stage::Kind::kGroupBy;
      stage->limit = 20000;
      unnamed = "field";
      allowed = {"field", "function", "limit"};
    }
    std::vector<std::string> seen;
    for (size_t i = 0; i < args.size(); ++i) {
      Arg& a = args[i];
      if (a.name.empty()) {
        if (i != 0 || unnamed.empty()) {
          Error(a.position, fn + "() takes no unnamed argument here");
          return false;
        }
        a.name = unnamed;
      }
      if (std::find(allowed.begin(), allowed.end(), a.name) == allowed.end()) {
        Error(a.position, "unknown parameter '" + a.name + "' for " + fn + "()");
        return false;
      }
      if (std::find(seen.begin(), seen.end(), a.name) != seen.end()) {
        Error(a.position, "parameter '" + a.name + "' given twice");
        return false;
      }
      seen.push_back(a.name);
      const ArgValue& v = *a.value;
      if (a.name == "limit") {
        if (!ToLimit(v, &stage->limit)) return false;
      } else if (a.name == "field" || a.name == "fields") {
        if (!ToFieldList(v, &stage->fields)) return false;
      } else if (a.name == "order") {
        std::string o = Lower(v.text);
        if (v.kind == ArgValue::Kind::kScalar && (o == "asc" || o == "ascending")) {
          stage->descending = false;
        } else if (v.kind == ArgValue::Kind::kScalar && (o == "desc" || o == "descending")) {
          stage->descending = true;
        } else {
          Error(v.position, "invalid order '" + v.text + "' (expected asc or desc)");
          return false;
        }
      } else if (a.name == "function") {
        std::vector<const ArgValue*> calls;
        if (v.kind == ArgValue::Kind::kList) {
          for (const ArgValue& item : v.list) calls.push_back(&item);
        } else {
          calls.push_back(&v);
        }
        if (calls.empty()) {
          Error(v.position, "expected an aggregate function");
          return false;
        }
        for (const ArgValue* c : calls) {
          if (c->kind != ArgValue::Kind::kCall) {
            Error(c->position, "expected a function call such as count()");
            return false;
          }
          if (CanonicalFunction(c->text) != "count") {
            Error(c->position, "unknown function '" + c->text + "' for groupBy(function=...)");
            return false;
          }
          if (!c->args.empty()) {
            Error(c->args[0].position,
                  "unknown parameter '" +
                      (c->args[0].name.empty() ? std::string("field") : c->args[0].name) +
                      "' for count()");
            return false;
          }
        }
      }
    }
    if ((stage->kind == Stage::Kind::kSort || stage->kind == Stage::Kind::kTable ||
         stage->kind == Stage::Kind::kGroupBy) &&
        stage->fields.empty()) {
      Error(start, fn + "() needs a field");
      return false;
    }
    return true;
  }

  std::string_view s_;
  size_t pos_ = 0;
  Status err_;
};

}  // namespace

Result<std::shared_ptr<const CompiledQuery>> Compile(std::string_view text) {
  Parser p(text);
  return p.Parse();
}

}  // namespace sediment::query
