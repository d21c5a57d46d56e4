#include "query/compiled.h"

#include <re2/re2.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>

#include "query/record.h"
#include "query/text_util.h"

namespace sediment::query {
namespace {

// Fields whose values are not in the per-block token filters.
bool IsUnindexedField(const std::string& f) {
  return f.empty() || f[0] == '#' || f == "@timestamp" || f == "@ingesttimestamp" || f == "@id";
}

void CollectTerms(const FilterNode& n, std::vector<std::string>* out) {
  switch (n.kind) {
    case FilterNode::Kind::kAnd:
      for (const auto& c : n.children) CollectTerms(*c, out);
      break;
    case FilterNode::Kind::kOr: {
      // A term is implied by both sides when one side requires it and the other requires a term
      // containing it. Anything else could be absent from events matching one side.
      std::vector<std::string> a, b;
      CollectTerms(*n.children[0], &a);
      CollectTerms(*n.children[1], &b);
      auto implied_by = [](const std::string& t, const std::vector<std::string>& other) {
        return std::any_of(other.begin(), other.end(),
                           [&](const std::string& u) { return u.find(t) != std::string::npos; });
      };
      for (const std::string& t : a) {
        if (implied_by(t, b)) out->push_back(t);
      }
      for (const std::string& u : b) {
        if (implied_by(u, a)) out->push_back(u);
      }
      break;
    }
    case FilterNode::Kind::kText:
      if (!n.text.empty()) out->push_back(n.text);
      break;
    case FilterNode::Kind::kTextGlob:
      AppendGlobPieces(n.text, out);
      break;
    case FilterNode::Kind::kFieldEq:
      if (!IsUnindexedField(n.field) && !n.text.empty()) out->push_back(Lower(n.text));
      break;
    case FilterNode::Kind::kFieldGlob:
      if (!IsUnindexedField(n.field)) AppendGlobPieces(n.text, out);
      break;
    case FilterNode::Kind::kRawRegex:
      for (std::string& t : RequiredRegexTerms(n.regex_literals)) out->push_back(std::move(t));
      break;
    case FilterNode::Kind::kFieldRegex:
      if (IsUnindexedField(n.field)) break;
      for (std::string& t : RequiredRegexTerms(n.regex_literals)) out->push_back(std::move(t));
      break;
    // kFieldEq / kFieldGlob with ignore_case contribute the same lower-cased literals: the
    // terms are matched case-insensitively. kFieldCmp compares numbers, whose spelling varies
    // ("5", "5.0"), so it contributes nothing; neither do NOT and constants.
    default:
      break;
  }
}

const FilterPtr& TrueNode() {
  static const FilterPtr n = [] {
    auto p = std::make_shared<FilterNode>();
    p->kind = FilterNode::Kind::kTrue;
    return p;
  }();
  return n;
}
const FilterPtr& FalseNode() {
  static const FilterPtr n = [] {
    auto p = std::make_shared<FilterNode>();
    p->kind = FilterNode::Kind::kFalse;
    return p;
  }();
  return n;
}

std::optional<std::string_view> TagValue(const Datasource& ds, const std::string& name) {
  for (const auto& [k, v] : ds.tags) {
    if (k == name) return std::string_view(v);
  }
  if (name == "#repo") return std::string_view(ds.repo);
  return std::nullopt;
}

const char* CmpName(FilterNode::Cmp cmp) {
  switch (cmp) {
    case FilterNode::Cmp::kLt:
      return "<";
    case FilterNode::Cmp::kLe:
      return "<=";
    case FilterNode::Cmp::kGt:
      return ">";
    case FilterNode::Cmp::kGe:
      return ">=";
    case FilterNode::Cmp::kEq:
      return "==";
    case FilterNode::Cmp::kNe:
      return "!=";
  }
  return "?";
}

void Quote(std::string* out, std::string_view s) {
  out->push_back('"');
  for (char c : s) {
    if (c == '"' || c == '\\') out->push_back('\\');
    out->push_back(c);
  }
  out->push_back('"');
}

}  // namespace

bool CompareNumbers(double a, FilterNode::Cmp cmp, double b) {
  switch (cmp) {
    case FilterNode::Cmp::kLt:
      return a < b;
    case FilterNode::Cmp::kLe:
      return a <= b;
    case FilterNode::Cmp::kGt:
      return a > b;
    case FilterNode::Cmp::kGe:
      return a >= b;
    case FilterNode::Cmp::kEq:
      return a == b;
    case FilterNode::Cmp::kNe:
      return a != b;
  }
  return false;
}

bool GlobMatch(std::string_view pattern, std::string_view value) {
  size_t star = pattern.find('*');
  if (star == std::string_view::npos) return pattern == value;
  std::string_view prefix = pattern.substr(0, star);
  if (value.substr(0, prefix.size()) != prefix) return false;
  size_t last_star = pattern.rfind('*');
  std::string_view suffix = pattern.substr(last_star + 1);
  if (value.size() < prefix.size() + suffix.size()) return false;
  if (value.substr(value.size() - suffix.size()) != suffix) return false;
  // Middle pieces, greedy left to right inside the part between prefix and suffix.
  std::string_view rest = value.substr(prefix.size(), value.size() - prefix.size() - suffix.size());
  size_t i = star + 1;
  while (i < last_star) {
    size_t next = pattern.find('*', i);
    std::string_view piece = pattern.substr(i, next - i);
    if (!piece.empty()) {
      size_t at = rest.find(piece);
      if (at == std::string_view::npos) return false;
      rest = rest.substr(at + piece.size());
    }
    i = next + 1;
  }
  return true;
}

bool GlobMatchIgnoreCase(std::string_view pattern, std::string_view value) {
  return GlobMatch(Lower(pattern), Lower(value));
}

std::vector<std::string> RequiredTerms(const FilterNode& filter) {
  std::vector<std::string> out;
  CollectTerms(filter, &out);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

FilterPtr WithRegexStageLiterals(const FilterPtr& filter, const std::vector<Stage>& stages) {
  constexpr size_t kMaxClausesPerStage = 2;
  FilterPtr out = filter;
  // A literal the filter already requires (a /regex/ step with named groups is a filter and a
  // stage) adds nothing.
  const std::vector<std::string> required =
      filter ? RequiredTerms(*filter) : std::vector<std::string>{};
  auto text_node = [](const std::string& literal, size_t position) {
    auto n = std::make_shared<FilterNode>();
    n->kind = FilterNode::Kind::kText;
    n->text = literal;
    n->searcher = std::make_shared<CiSearcher>(literal);
    n->implied = true;
    n->position = position;
    return n;
  };
  auto and_with = [&](FilterPtr f) {
    if (out == nullptr || out->kind == FilterNode::Kind::kTrue) {
      out = std::move(f);
      return;
    }
    auto n = std::make_shared<FilterNode>();
    n->kind = FilterNode::Kind::kAnd;
    n->position = f->position;
    n->children = {out, std::move(f)};
    out = std::move(n);
  };
  for (const Stage& st : stages) {
    if (st.kind == Stage::Kind::kFilter) continue;
    if (st.kind != Stage::Kind::kRegex) break;
    if (!st.strict || !(st.field.empty() || st.field == "@rawstring")) continue;
    std::vector<const std::vector<std::string>*> clauses;
    for (const auto& c : st.regex_literals.clauses) {
      // A clause of one two-byte literal joins too (after the longer ones): too short for the
      // block filters and too common for a per-event search, but a block's raw bytes are searched
      // for it at once, so a block without it skips the stage's per-event work (the search is
      // itself skipped where the literal is common, see `implied`).
      const bool long_enough =
          std::all_of(c.begin(), c.end(),
                      [&](const std::string& l) { return l.size() >= kMinPrefilterLiteral; }) ||
          (c.size() == 1 && c[0].size() >= kMinImpliedLiteral);
      const bool known =
          c.size() == 1 && std::any_of(required.begin(), required.end(), [&](const std::string& t) {
            return t.find(c[0]) != std::string::npos;
          });
      if (long_enough && !known && c.size() <= kMaxPrefilterLiterals) clauses.push_back(&c);
    }
    // Longest shortest literal first, then fewest literals.
    auto shortest = [](const std::vector<std::string>& c) {
      size_t m = SIZE_MAX;
      for (const std::string& l : c) m = std::min(m, l.size());
      return m;
    };
    std::stable_sort(clauses.begin(), clauses.end(), [&](const auto* a, const auto* b) {
      if (shortest(*a) != shortest(*b)) return shortest(*a) > shortest(*b);
      return a->size() < b->size();
    });
    if (clauses.size() > kMaxClausesPerStage) clauses.resize(kMaxClausesPerStage);
    for (const auto* c : clauses) {
      FilterPtr any;
      for (const std::string& l : *c) {
        FilterPtr t = text_node(l, st.position);
        if (any == nullptr) {
          any = std::move(t);
        } else {
          auto n = std::make_shared<FilterNode>();
          n->kind = FilterNode::Kind::kOr;
          n->position = st.position;
          n->children = {any, std::move(t)};
          any = std::move(n);
        }
      }
      and_with(std::move(any));
    }
  }
  return out;
}

FilterPtr Specialize(const FilterPtr& f, const Datasource& ds) {
  using K = FilterNode::Kind;
  switch (f->kind) {
    case K::kFieldEq:
    case K::kFieldGlob:
    case K::kFieldRegex:
    case K::kFieldCmp: {
      if (f->field.empty() || f->field[0] != '#') return f;
      std::optional<std::string_view> v = TagValue(ds, f->field);
      bool match = false;
      if (v) {
        if (f->kind == K::kFieldEq) {
          match = f->ignore_case ? Lower(*v) == Lower(f->text) : *v == f->text;
        } else if (f->kind == K::kFieldGlob) {
          match = f->ignore_case ? GlobMatchIgnoreCase(f->text, *v) : GlobMatch(f->text, *v);
        } else if (f->kind == K::kFieldCmp) {
          std::optional<double> n = ParseNumber(*v);
          match = n && CompareNumbers(*n, f->cmp, f->number);
        } else {
          match = RE2::PartialMatch(re2::StringPiece(v->data(), v->size()), *f->re);
        }
      }
      return match ? TrueNode() : FalseNode();
    }
    case K::kNot: {
      FilterPtr c = Specialize(f->children[0], ds);
      if (c->kind == K::kTrue) return FalseNode();
      if (c->kind == K::kFalse) return TrueNode();
      if (c == f->children[0]) return f;
      auto n = std::make_shared<FilterNode>(*f);
      n->children = {c};
      return n;
    }
    case K::kAnd:
    case K::kOr: {
      FilterPtr a = Specialize(f->children[0], ds);
      FilterPtr b = Specialize(f->children[1], ds);
      K absorbing = f->kind == K::kAnd ? K::kFalse : K::kTrue;
      K neutral = f->kind == K::kAnd ? K::kTrue : K::kFalse;
      if (a->kind == absorbing || b->kind == absorbing) {
        return absorbing == K::kTrue ? TrueNode() : FalseNode();
      }
      if (a->kind == neutral) return b;
      if (b->kind == neutral) return a;
      if (a == f->children[0] && b == f->children[1]) return f;
      auto n = std::make_shared<FilterNode>(*f);
      n->children = {a, b};
      return n;
    }
    default:
      return f;
  }
}

std::string DebugString(const FilterNode& n) {
  using K = FilterNode::Kind;
  std::string out;
  switch (n.kind) {
    case K::kTrue:
      return "true";
    case K::kFalse:
      return "false";
    case K::kAnd:
    case K::kOr:
      out = n.kind == K::kAnd ? "(and " : "(or ";
      out += DebugString(*n.children[0]);
      out += ' ';
      out += DebugString(*n.children[1]);
      out += ')';
      return out;
    case K::kNot:
      return "(not " + DebugString(*n.children[0]) + ")";
    case K::kText:
      out = "(text ";
      Quote(&out, n.text);
      break;
    case K::kTextGlob:
      out = "(textglob ";
      Quote(&out, n.text);
      break;
    case K::kRawRegex:
      out = "(regex ";
      Quote(&out, n.text);
      break;
    case K::kFieldEq:
    case K::kFieldGlob:
    case K::kFieldRegex:
      out = n.kind == K::kFieldEq     ? (n.ignore_case ? "(ieq " : "(eq ")
            : n.kind == K::kFieldGlob ? (n.ignore_case ? "(iglob " : "(glob ")
                                      : "(fregex ";
      Quote(&out, n.field);
      out += ' ';
      Quote(&out, n.text);
      break;
    case K::kFieldCmp: {
      out = "(cmp ";
      Quote(&out, n.field);
      out += ' ';
      out += CmpName(n.cmp);
      out += ' ';
      char buf[64];
      auto [p, ec] = std::to_chars(buf, buf + sizeof(buf), n.number);
      out.append(buf, ec == std::errc() ? p : buf);
      break;
    }
  }
  out += ')';
  return out;
}

std::vector<int> RegexGroupIndexes(const re2::RE2& re, const std::vector<std::string>& groups) {
  const std::map<std::string, int>& named = re.NamedCapturingGroups();
  std::vector<int> out;
  out.reserve(groups.size());
  for (const std::string& g : groups) {
    auto it = named.find(g);
    out.push_back(it == named.end() ? -1 : it->second);
  }
  return out;
}

}  // namespace sediment::query
