// regex(regex, field=@rawstring, strict=true, flags=m, limit=100, repeat=false): named groups of
// the first match become fields; strict drops records without a match. A per-record stage. With
// repeat=true every match (left to right, not overlapping; at most `limit`) gives its own copy of
// the record with that match's groups; an empty match moves on by one character.
#include <re2/re2.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "query/functions/list.h"
#include "query/functions/transforms.h"
#include "query/functions/util.h"
#include "query/transform.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "regex", .type = Type::kString, .unnamed = true, .required = true},
    {.name = "field", .type = Type::kField, .default_value = "@rawstring"},
    {.name = "strict", .type = Type::kBool, .default_value = "true"},
    {.name = "flags", .type = Type::kString, .default_value = "m"},
    {.name = "limit", .type = Type::kLimit, .default_value = "100"},
    {.name = "repeat", .type = Type::kBool, .default_value = "false"},
};

bool Build(Call& c, Stage* st) {
  st->kind = Stage::Kind::kRegex;
  st->field = c.String("field");
  st->strict = c.Bool("strict");
  if (c.Bool("repeat")) {
    st->repeat_limit = c.Limit("limit");
    if (st->repeat_limit == 0) {
      c.BadParam("limit", "a positive number of events per match with repeat=true");
      return false;
    }
  }
  std::string prefix;
  for (char f : c.String("flags")) {
    if (f == 'F') continue;  // LogScale's engine choice; no meaning here
    std::string flag = RegexFlag(f);
    if (flag.empty()) {
      c.BadParam("flags", "a combination of the flags d, i and m");
      return false;
    }
    prefix += flag;
  }
  std::string error;
  auto re = CompileRegex(prefix + ConvertRegex(c.String("regex"), /*plain_to_noncapturing=*/true),
                         &error);
  if (!re) {
    c.Error(c.Value("regex")->position, "invalid regular expression in regex(): " + error);
    return false;
  }
  SetStageRegex(std::move(re), st);
  return true;
}

}  // namespace

const Function kRegex = {
    .name = "regex",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "extracts the named groups of a regular expression as fields",
    .stage = &Build,
};

// ---- per-record implementation ----

namespace {

// Leftmost match of `re` in `input` with `nsub` submatches. With a `prefix` (every match starts
// with these bytes) it tries anchored matches only where the prefix occurs, which RE2 runs as a
// one-pass or bounded match instead of a search over the whole text; the first anchored match is
// the leftmost one, with the same groups. After a few failed anchored matches it searches the
// rest unanchored. `searcher` (the prefix, case-insensitively), when given, finds candidates.
bool Re2MatchGroups(const re2::RE2& re, std::string_view prefix, const CiSearcher* searcher,
                    const re2::StringPiece& input, re2::StringPiece* sub, int nsub) {
  size_t from = 0;
  if (!prefix.empty()) {
    constexpr int kMaxCandidates = 8;
    const char* const begin = input.data();
    const char* const end = begin + input.size();
    int tries = 0;
    for (const char* p = begin; (p = FindPrefix(prefix, searcher, p, end)) != nullptr; ++p) {
      const size_t at = static_cast<size_t>(p - begin);
      if (re.Match(input, at, input.size(), re2::RE2::ANCHOR_START, sub, nsub)) return true;
      if (++tries == kMaxCandidates) {
        from = at + 1;
        break;
      }
    }
    if (tries < kMaxCandidates) return false;
  }
  return re.Match(input, from, input.size(), re2::RE2::UNANCHORED, sub, nsub);
}

constexpr int kMaxCaps = 16;

// The leftmost match of `simple` in `text` into caps[0..simple.captures()] (valid on kMatch);
// kUnknown when RE2 must decide. With a `prefix` (every match starts with it) only the places
// where it occurs are tried, leftmost first. Precondition: simple.captures() < kMaxCaps.
SimpleRegex::Outcome SimpleFind(const SimpleRegex& simple, std::string_view prefix,
                                const CiSearcher* searcher, std::string_view text,
                                SimpleRegex::Span* caps) {
  if (prefix.empty()) return simple.Search(text, 0, caps);
  SimpleRegex::Outcome r = SimpleRegex::Outcome::kNoMatch;
  const char* const begin = text.data();
  const char* const end = begin + text.size();
  for (const char* p = begin; (p = FindPrefix(prefix, searcher, p, end)) != nullptr; ++p) {
    r = simple.MatchAt(text, static_cast<size_t>(p - begin), caps);
    if (r != SimpleRegex::Outcome::kNoMatch) break;
  }
  return r;
}

// Storage for kMaxCaps spans, left unset: MatchAt and Search set every span they give
// (caps[0..captures()] on kMatch), and setting all 16 cost 64 instructions per event. The spans
// begin their lifetime in this storage implicitly as they are assigned.
struct CapsStorage {
  static_assert(std::is_trivially_copyable_v<SimpleRegex::Span> &&
                std::is_trivially_destructible_v<SimpleRegex::Span>);
  alignas(SimpleRegex::Span) unsigned char bytes[sizeof(SimpleRegex::Span) * kMaxCaps];
  SimpleRegex::Span* get() { return reinterpret_cast<SimpleRegex::Span*>(bytes); }
};

// MatchGroups with SimpleRegex: kUnknown when RE2 must decide.
SimpleRegex::Outcome SimpleMatchGroups(const SimpleRegex& simple, std::string_view prefix,
                                       const CiSearcher* searcher, std::string_view text,
                                       re2::StringPiece* sub, int nsub) {
  if (simple.captures() >= kMaxCaps) return SimpleRegex::Outcome::kUnknown;
  CapsStorage storage;
  SimpleRegex::Span* caps = storage.get();
  const SimpleRegex::Outcome r = SimpleFind(simple, prefix, searcher, text, caps);
  if (r != SimpleRegex::Outcome::kMatch) return r;
  for (int k = 0; k < nsub; ++k) {
    if (k > simple.captures() || caps[k].begin < 0) {
      sub[k] = re2::StringPiece();
    } else {
      sub[k] = re2::StringPiece(text.data() + caps[k].begin,
                                static_cast<size_t>(caps[k].end - caps[k].begin));
    }
  }
  return r;
}

// Leftmost match of stage `st`'s regex (`re` is its thread's copy) in `input` with `nsub`
// submatches: SimpleRegex's answer when it has one, else RE2's.
bool MatchGroups(const Stage& st, const re2::RE2& re, const re2::StringPiece& input,
                 re2::StringPiece* sub, int nsub) {
  if (st.simple_re != nullptr) {
    const SimpleRegex::Outcome r =
        SimpleMatchGroups(*st.simple_re, st.regex_prefix, st.regex_prefix_searcher.get(),
                          std::string_view(input.data(), input.size()), sub, nsub);
    if (r != SimpleRegex::Outcome::kUnknown) return r == SimpleRegex::Outcome::kMatch;
  }
  return Re2MatchGroups(re, st.regex_prefix, st.regex_prefix_searcher.get(), input, sub, nsub);
}

}  // namespace

RegexGroupOutcome RegexGroupOf(const Stage& st, const re2::RE2& re, int capture,
                               std::string_view text, std::string_view* value) {
  constexpr int kInline = 8;
  if (capture < 0 || capture >= kInline) return RegexGroupOutcome::kUnsure;
  if (!PrefilterAdmits(st.regex_prefilter, text)) return RegexGroupOutcome::kDropped;
  const bool simple = st.simple_re != nullptr && st.simple_re->captures() < kMaxCaps;
  if (simple) {
    // SimpleRegex's spans straight to the value (no submatch array for RE2's shape).
    CapsStorage storage;
    SimpleRegex::Span* caps = storage.get();
    const SimpleRegex::Outcome r =
        SimpleFind(*st.simple_re, st.regex_prefix, st.regex_prefix_searcher.get(), text, caps);
    if (r == SimpleRegex::Outcome::kNoMatch) return RegexGroupOutcome::kDropped;
    if (r == SimpleRegex::Outcome::kMatch) {
      if (capture > st.simple_re->captures() || caps[capture].begin < 0) {
        return RegexGroupOutcome::kUnsure;
      }
      *value = text.substr(static_cast<size_t>(caps[capture].begin),
                           static_cast<size_t>(caps[capture].end - caps[capture].begin));
      return RegexGroupOutcome::kValue;
    }
    // kUnknown: RE2 decides, below.
  }
  re2::StringPiece sub[kInline];
  const re2::StringPiece input(text.data(), text.size());
  const bool matched = simple ? Re2MatchGroups(re, st.regex_prefix, st.regex_prefix_searcher.get(),
                                               input, sub, capture + 1)
                              : MatchGroups(st, re, input, sub, capture + 1);
  if (!matched) return RegexGroupOutcome::kDropped;
  const re2::StringPiece& m = sub[capture];
  if (m.data() == nullptr) return RegexGroupOutcome::kUnsure;
  *value = std::string_view(m.data(), m.size());
  return RegexGroupOutcome::kValue;
}

bool ApplyRegex(const Stage& st, Record& r) {
  if (!st.re) return true;
  std::string scratch;
  std::optional<std::string_view> text = r.Get(FieldOr(st.field, kRawstringField), &scratch);
  if (!text) return !st.strict;
  // The groups are set on the record, which may move the text when it is a value the record
  // holds (a field a stage set): then match a copy. Text in the decoded block (whichever of its
  // buffers), the datasource or `scratch` stays put.
  std::string owned;
  if (r.HoldsBytesOf(*text)) {
    owned.assign(*text);
    text = owned;
  }
  const re2::RE2& re = ThreadLocalRegex(st.re);
  // The capture index of each output group (-1: not a group of the regex).
  constexpr size_t kInline = 8;
  std::vector<int> looked_up;
  const int* index = st.group_index.data();
  if (st.group_index.size() != st.groups.size()) {
    looked_up = RegexGroupIndexes(re, st.groups);
    index = looked_up.data();
  }
  int nsub = 1;
  for (size_t k = 0; k < st.groups.size(); ++k) nsub = std::max(nsub, index[k] + 1);
  re2::StringPiece inline_sub[kInline];
  std::vector<re2::StringPiece> more_sub;
  re2::StringPiece* sub = inline_sub;
  if (nsub > static_cast<int>(kInline)) {
    more_sub.resize(static_cast<size_t>(nsub));
    sub = more_sub.data();
  }
  if (!PrefilterAdmits(st.regex_prefilter, *text)) return !st.strict;
  const re2::StringPiece input(text->data(), text->size());
  if (!MatchGroups(st, re, input, sub, nsub)) {
    return !st.strict;
  }
  for (size_t k = 0; k < st.groups.size(); ++k) {
    if (index[k] < 0) continue;
    const re2::StringPiece& m = sub[index[k]];
    if (m.data() == nullptr) continue;  // optional group that did not take part
    r.SetText(st.groups[k], std::string_view(m.data(), m.size()));
  }
  return true;
}

void ApplyRegexRepeat(const Stage& st, Record&& r, std::vector<Record>* out) {
  std::string scratch;
  std::optional<std::string_view> found =
      st.re ? r.Get(FieldOr(st.field, kRawstringField), &scratch) : std::nullopt;
  if (!found || !PrefilterAdmits(st.regex_prefilter, *found)) {
    if (!st.strict) out->push_back(std::move(r));
    return;
  }
  const std::string text(*found);  // the copies below may move the field's bytes
  const re2::RE2& re = ThreadLocalRegex(st.re);
  std::vector<int> index =
      st.group_index.size() == st.groups.size() ? st.group_index : RegexGroupIndexes(re, st.groups);
  int nsub = 1;
  for (int i : index) nsub = std::max(nsub, i + 1);
  std::vector<re2::StringPiece> sub(static_cast<size_t>(nsub));
  const re2::StringPiece input(text.data(), text.size());
  size_t at = 0;
  int64_t emitted = 0;
  while (at <= text.size() && emitted < st.repeat_limit &&
         re.Match(input, at, text.size(), re2::RE2::UNANCHORED, sub.data(), nsub)) {
    Record copy = r;
    for (size_t k = 0; k < st.groups.size(); ++k) {
      if (index[k] < 0) continue;
      const re2::StringPiece& m = sub[static_cast<size_t>(index[k])];
      if (m.data() == nullptr) continue;
      copy.Set(st.groups[k], Value(std::string(m.data(), m.size())));
    }
    out->push_back(std::move(copy));
    ++emitted;
    const size_t end = static_cast<size_t>(sub[0].data() - text.data()) + sub[0].size();
    at = sub[0].empty() ? end + 1 : end;
  }
  if (emitted == 0 && !st.strict) out->push_back(std::move(r));
}

}  // namespace sediment::query::functions
