// kvParse(field=@rawstring, override=false): key=value pairs become fields. A per-record stage.
//
// Choices where LogScale's documentation leaves room: pairs are separated by whitespace or ',';
// an unquoted value ends at whitespace or ','; "..." and '...' quote keys and values, a
// backslash escapes the quote and itself, an unclosed quote is a plain value. override=false
// keeps the fields present before the parse; of duplicate keys the last wins.
#include <array>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "query/functions/list.h"
#include "query/functions/transforms.h"
#include "query/transform.h"

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

// Whitespace and ',' end a word and separate pairs.
constexpr std::array<bool, 256> kDelimiter = [] {
  std::array<bool, 256> t{};
  for (unsigned char c : {' ', '\t', '\n', '\r', '\f', '\v', ','}) t[c] = true;
  return t;
}();
// A delimiter or '=': where an unquoted key ends.
constexpr std::array<bool, 256> kKeyEnd = [] {
  std::array<bool, 256> t = kDelimiter;
  t[static_cast<unsigned char>('=')] = true;
  return t;
}();

bool IsDelimiter(char c) { return kDelimiter[static_cast<unsigned char>(c)]; }

bool IsQuote(char c) { return c == '"' || c == '\''; }

// A backslash escapes the quote and itself; other backslashes are kept.
bool IsEscape(std::string_view s, size_t k, char q) {
  return s[k] == '\\' && k + 1 < s.size() && (s[k + 1] == q || s[k + 1] == '\\');
}

// The end (one past the closing quote) of the quoted run that starts at s[at] (the quote), or
// npos when the quote is not closed. Allocates nothing: most quoted runs of a line are not keys
// (an access log's request and user agent) and are skipped without being copied.
size_t QuotedEnd(std::string_view s, size_t at) {
  const char q = s[at];
  size_t k = at + 1;
  while (k < s.size()) {
    // The next quote (memchr); with no backslash before it, it closes the run.
    const void* found = std::memchr(s.data() + k, q, s.size() - k);
    if (found == nullptr) return std::string_view::npos;
    const size_t close = static_cast<size_t>(static_cast<const char*>(found) - s.data());
    if (std::memchr(s.data() + k, '\\', close - k) == nullptr) return close + 1;
    // A backslash before it: step through escapes up to and including that quote.
    for (; k <= close; ++k) {
      if (IsEscape(s, k, q)) {
        ++k;
      } else if (s[k] == q) {
        return k + 1;
      }
    }
    // The quote at `close` was escaped; k is past it.
  }
  return std::string_view::npos;
}

// The text of the closed quoted run s[at, end) with its escapes resolved.
std::string Unquote(std::string_view s, size_t at, size_t end) {
  const char q = s[at];
  std::string_view inner = s.substr(at + 1, end - at - 2);
  if (inner.find('\\') == std::string_view::npos) return std::string(inner);
  std::string v;
  v.reserve(inner.size());
  for (size_t k = at + 1; k + 1 < end; ++k) {
    if (IsEscape(s, k, q)) ++k;
    v.push_back(s[k]);
  }
  return v;
}

// Calls on_pair(key_at, key_end, value_at, value_end, key_quoted, value_quoted) for each pair of
// `s` in order, as [at, end) ranges of `s` (quoted ranges include their quotes); stops early when
// on_pair returns false. Keys that are empty are passed too (the caller skips them).
template <typename OnPair>
void ScanKvPairs(std::string_view s, OnPair&& on_pair) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    while (i < n && IsDelimiter(s[i])) ++i;
    if (i >= n) break;
    const size_t key_at = i;
    const bool key_quoted = IsQuote(s[i]);
    if (key_quoted) {
      const size_t k = QuotedEnd(s, i);
      if (k == std::string_view::npos || k >= n || s[k] != '=') {
        // A quoted word that is not a key; an unclosed quote is one character of a word.
        i = k == std::string_view::npos ? i + 1 : k;
        continue;
      }
      i = k;
    } else {
      while (i < n && !kKeyEnd[static_cast<unsigned char>(s[i])]) ++i;
      if (i >= n || s[i] != '=') continue;  // a word that is not a key
    }
    const size_t key_end = i;
    ++i;  // '='
    const size_t value_at = i;
    bool value_quoted = false;
    if (i < n && IsQuote(s[i])) {
      const size_t k = QuotedEnd(s, i);
      if (k != std::string_view::npos) {
        value_quoted = true;
        i = k;
      }
    }
    if (!value_quoted) {
      while (i < n && !IsDelimiter(s[i])) ++i;
    }
    if (!on_pair(key_at, key_end, value_at, i, key_quoted, value_quoted)) return;
  }
}

std::string PairText(std::string_view s, size_t at, size_t end, bool quoted) {
  return quoted ? Unquote(s, at, end) : std::string(s.substr(at, end - at));
}

void KvPairs(std::string_view s, std::vector<std::pair<std::string, std::string>>* out) {
  ScanKvPairs(s, [&](size_t key_at, size_t key_end, size_t value_at, size_t value_end,
                     bool key_quoted, bool value_quoted) {
    std::string key = PairText(s, key_at, key_end, key_quoted);
    if (!key.empty()) {
      out->emplace_back(std::move(key), PairText(s, value_at, value_end, value_quoted));
    }
    return true;
  });
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

namespace sediment::query {

bool KvParseFindsPairs(std::string_view text) {
  // Every pair has an '=' (most lines of most logs have none: one memchr answers).
  if (text.empty() || std::memchr(text.data(), '=', text.size()) == nullptr) return false;
  bool found = false;
  functions::ScanKvPairs(text,
                         [&](size_t key_at, size_t key_end, size_t, size_t, bool key_quoted, bool) {
                           // An empty key ("" quoted, or '=' at the start of a word) is no pair.
                           found = key_quoted ? key_end - key_at > 2 : key_end > key_at;
                           return !found;
                         });
  return found;
}

}  // namespace sediment::query
