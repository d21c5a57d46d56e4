// kvParse(field=@rawstring, override=false): key=value pairs become fields. A per-record stage.
//
// Choices where LogScale's documentation leaves room: pairs are separated by whitespace or ',';
// an unquoted value ends at whitespace or ','; "..." and '...' quote keys and values, a
// backslash escapes the quote and itself, an unclosed quote is a plain value. override=false
// keeps the fields present before the parse; of duplicate keys the last wins.
#include <string>
#include <utility>
#include <vector>

#include "query/functions/list.h"
#include "query/functions/transforms.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "field", .type = Type::kFields, .unnamed = true, .default_value = "@rawstring"},
    {.name = "override", .type = Type::kBool, .default_value = "false"},
    {.name = "as", .type = Type::kUnsupported},
    {.name = "prefix", .type = Type::kUnsupported},
    {.name = "excludeEmpty", .type = Type::kUnsupported},
    {.name = "separator", .type = Type::kUnsupported},
    {.name = "separatorPadding", .type = Type::kUnsupported},
    {.name = "onDuplicate", .type = Type::kUnsupported},
};

bool Build(Call& c, Stage* st) {
  st->kind = Stage::Kind::kKvParse;
  st->override_fields = c.Bool("override");
  const std::vector<std::string>& fields = c.Fields("field");
  if (fields.size() > 1) {
    c.BadParam("field", "one field");
    return false;
  }
  st->field = fields[0];
  return true;
}

}  // namespace

const Function kKvParse = {
    .name = "kvParse",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "extracts key=value pairs as fields",
    .stage = &Build,
};

// ---- per-record implementation ----

namespace {

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

bool KvDelimiter(char c) { return IsSpace(c) || c == ','; }

// A quoted run at s[*i] (the quote); false (with *i unchanged) when the quote is not closed.
// Backslash escapes the quote and itself; other backslashes are kept.
bool KvQuoted(std::string_view s, size_t* i, std::string* out) {
  const char q = s[*i];
  std::string v;
  for (size_t k = *i + 1; k < s.size(); ++k) {
    const char c = s[k];
    if (c == '\\' && k + 1 < s.size() && (s[k + 1] == q || s[k + 1] == '\\')) {
      v.push_back(s[++k]);
    } else if (c == q) {
      *i = k + 1;
      *out = std::move(v);
      return true;
    } else {
      v.push_back(c);
    }
  }
  return false;
}

void KvPairs(std::string_view s, std::vector<std::pair<std::string, std::string>>* out) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    while (i < n && KvDelimiter(s[i])) ++i;
    if (i >= n) break;
    std::string key;
    if (s[i] == '"' || s[i] == '\'') {
      size_t k = i;
      const bool closed = KvQuoted(s, &k, &key);
      if (!closed || k >= n || s[k] != '=') {
        i = closed ? k : i + 1;  // a quoted word that is not a key
        continue;
      }
      i = k;
    } else {
      const size_t start = i;
      while (i < n && s[i] != '=' && !KvDelimiter(s[i])) ++i;
      if (i >= n || s[i] != '=') continue;  // a word that is not a key
      key.assign(s.substr(start, i - start));
    }
    ++i;  // '='
    std::string value;
    if (i < n && (s[i] == '"' || s[i] == '\'') && KvQuoted(s, &i, &value)) {
      // quoted value consumed
    } else {
      const size_t start = i;
      while (i < n && !KvDelimiter(s[i])) ++i;
      value.assign(s.substr(start, i - start));
    }
    if (!key.empty()) out->emplace_back(std::move(key), std::move(value));
  }
}

}  // namespace

void ApplyKvParse(const Stage& st, Record& r) {
  std::string scratch;
  std::optional<std::string_view> text = r.Get(FieldOr(st.field, kRawstringField), &scratch);
  if (!text) return;
  std::vector<std::pair<std::string, std::string>> pairs;
  KvPairs(*text, &pairs);
  if (pairs.empty()) return;
  std::vector<uint8_t> keep(pairs.size(), 1);
  if (!st.override_fields) {
    for (size_t k = 0; k < pairs.size(); ++k) keep[k] = r.Has(pairs[k].first) ? 0 : 1;
  }
  for (size_t k = 0; k < pairs.size(); ++k) {
    if (keep[k]) r.Set(pairs[k].first, Value(std::move(pairs[k].second)));
  }
}

}  // namespace sediment::query::functions
