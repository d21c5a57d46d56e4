// writeJson(field=@rawstring, as=_json): the fields of the record whose names match `field`
// written as one JSON object into `as`. A per-record stage.
//
// Each item of `field` is a prefix of field names (`a.b` matches a.b.c, a.bc, a.b[0]), or, with a
// `*`, a glob over the whole name (`a.b[*]`; `*` matches any characters). The matching fields,
// in the record's field order, are nested by their names: `.` separates object members and `[i]`
// is array element i (`a.b.c=5` gives {"a":{"b":{"c":5}}}, `a.b.e[0]=6` gives
// {"a":{"b":{"e":[6]}}}, as LogScale's examples show); array elements with no field are null.
// Values that are JSON numbers (integers, decimals, exponents) are written as numbers, all others
// as strings. Decided: where names conflict (`a` and `a.b`, or `a[0]` and `a.x`), the field met
// first is kept and the other left out; with no matching field `as` is `{}`.
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/json_writer.h"
#include "query/functions/list.h"
#include "query/functions/transforms.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "field", .type = Type::kFields, .unnamed = true, .default_value = "@rawstring"},
    {.name = "as", .type = Type::kField, .default_value = "_json"},
};

// `name` matched by `pattern`: a prefix, or a glob when it has a '*'.
bool Matches(std::string_view pattern, std::string_view name) {
  if (pattern.find('*') == std::string_view::npos) return name.starts_with(pattern);
  // Glob: '*' matches any run of characters; iterative with backtracking to the last star.
  size_t p = 0, n = 0, star = std::string_view::npos, mark = 0;
  while (n < name.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = n;
    } else if (p < pattern.size() && pattern[p] == name[n]) {
      ++p;
      ++n;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      n = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

bool IsJsonNumber(std::string_view s) {
  size_t i = 0;
  if (i < s.size() && s[i] == '-') ++i;
  if (i >= s.size()) return false;
  auto digit = [&](size_t k) { return k < s.size() && s[k] >= '0' && s[k] <= '9'; };
  if (s[i] == '0') {
    ++i;
  } else if (digit(i)) {
    while (digit(i)) ++i;
  } else {
    return false;
  }
  if (i < s.size() && s[i] == '.') {
    if (!digit(++i)) return false;
    while (digit(i)) ++i;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (!digit(i)) return false;
    while (digit(i)) ++i;
  }
  return i == s.size();
}

struct Node {
  enum class Kind { kUnset, kLeaf, kObject, kArray } kind = Kind::kUnset;
  std::string value;
  std::vector<std::pair<std::string, std::unique_ptr<Node>>> members;
  std::vector<std::unique_ptr<Node>> elements;
};

// One step of a field name: a member key, or an array index.
struct Step {
  bool index = false;
  std::string key;
  size_t i = 0;
};

// `name` split at '.' and at `[i]` suffixes ("a.b[0].c" is a, b, [0], c).
std::vector<Step> StepsOf(std::string_view name) {
  std::vector<Step> steps;
  size_t start = 0;
  while (start <= name.size()) {
    size_t dot = name.find('.', start);
    if (dot == std::string_view::npos) dot = name.size();
    std::string_view part = name.substr(start, dot - start);
    // Trailing [i] groups become index steps.
    std::vector<size_t> indexes;
    while (part.ends_with("]")) {
      const size_t open = part.rfind('[');
      if (open == std::string_view::npos || open == 0) break;
      std::optional<int64_t> i = ParseInt(part.substr(open + 1, part.size() - open - 2));
      if (!i || *i < 0 || *i > 100000) break;
      indexes.insert(indexes.begin(), static_cast<size_t>(*i));
      part = part.substr(0, open);
    }
    steps.push_back({.index = false, .key = std::string(part), .i = 0});
    for (size_t i : indexes) steps.push_back({.index = true, .key = {}, .i = i});
    start = dot + 1;
  }
  return steps;
}

// Inserts `value` at `steps`; false (nothing changed) on a conflict with what is there.
bool Insert(Node* node, const std::vector<Step>& steps, std::string value) {
  for (const Step& s : steps) {
    const Node::Kind want = s.index ? Node::Kind::kArray : Node::Kind::kObject;
    if (node->kind == Node::Kind::kUnset) node->kind = want;
    if (node->kind != want) return false;
    Node* next = nullptr;
    if (s.index) {
      while (node->elements.size() <= s.i) node->elements.push_back(std::make_unique<Node>());
      next = node->elements[s.i].get();
    } else {
      for (auto& [k, child] : node->members) {
        if (k == s.key) next = child.get();
      }
      if (next == nullptr) {
        node->members.emplace_back(s.key, std::make_unique<Node>());
        next = node->members.back().second.get();
      }
    }
    node = next;
  }
  if (node->kind != Node::Kind::kUnset) return false;
  node->kind = Node::Kind::kLeaf;
  node->value = std::move(value);
  return true;
}

void Write(const Node& n, JsonWriter* w) {
  switch (n.kind) {
    case Node::Kind::kUnset:
      w->Null();
      break;
    case Node::Kind::kLeaf:
      if (IsJsonNumber(n.value)) {
        w->Raw(n.value);
      } else {
        w->String(n.value);
      }
      break;
    case Node::Kind::kObject:
      w->BeginObject();
      for (const auto& [k, child] : n.members) {
        w->Key(k);
        Write(*child, w);
      }
      w->EndObject();
      break;
    case Node::Kind::kArray:
      w->BeginArray();
      for (const auto& child : n.elements) Write(*child, w);
      w->EndArray();
      break;
  }
}

bool Build(Call& c, Stage* st) {
  std::vector<std::string> patterns = c.Fields("field");
  std::string as = c.String("as");
  SetRecordFunction(
      st,
      [patterns, as](Record& r) {
        Node root;
        root.kind = Node::Kind::kObject;
        for (const auto& [name, value] : r.ToRow()) {
          bool match = false;
          for (const std::string& p : patterns) match = match || Matches(p, name);
          if (match) Insert(&root, StepsOf(name), ValueToString(value));
        }
        JsonWriter w;
        Write(root, &w);
        r.Set(as, Value(w.Take()));
        return true;
      },
      std::vector<std::string>{as}, /*reads_all=*/true);
  return true;
}

}  // namespace

const Function kWriteJson = {
    .name = "writeJson",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "fields of the record written as one JSON object",
    .stage = &Build,
};

}  // namespace sediment::query::functions
