// Compile-time helpers shared by the parser and the query functions (see util.h).
#include "query/functions/util.h"

#include <re2/re2.h>

#include <cctype>
#include <charconv>
#include <initializer_list>

#include "query/functions/registry.h"
#include "query/text_util.h"

namespace sediment::query::functions {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

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
std::vector<std::string> GroupNames(const re2::RE2& re) {
  std::vector<std::string> out;
  for (const auto& [index, name] : re.CapturingGroupNames()) out.push_back(name);
  return out;
}

}  // namespace

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

std::shared_ptr<const re2::RE2> CompileRegex(const std::string& source, std::string* error) {
  re2::RE2::Options opts;
  opts.set_log_errors(false);
  auto re = std::make_shared<re2::RE2>(source, opts);
  if (!re->ok()) {
    *error = re->error();
    return nullptr;
  }
  return re;
}

// Gives a kRegex stage the regex `re` (every capture group named), its group names and its
// capture indexes and its leading literal bytes.
void SetStageRegex(std::shared_ptr<const re2::RE2> re, Stage* st) {
  st->groups = GroupNames(*re);
  st->group_index = RegexGroupIndexes(*re, st->groups);
  st->regex_prefix = LeadingLiteral(re->pattern());
  // A one-byte prefix: memchr is exact. From two bytes on, the searcher compares the first and
  // last byte 32 at a time, which skips the many occurrences of a common first byte (`"` in JSON)
  // that memchr would stop at one by one.
  if (st->regex_prefix.size() >= 2) {
    st->regex_prefix_searcher = std::make_shared<CiSearcher>(st->regex_prefix, /*exact_case=*/true);
  }
  st->simple_re = SimpleRegex::Compile(*re);
  st->regex_literals = AnalyzeRegex(*re);
  st->regex_prefilter = RegexPrefilter(st->regex_literals);
  // A prefilter literal inside the prefix adds nothing: the prefix search already gives up when
  // the prefix does not occur.
  if (st->regex_prefilter.size() == 1 && !st->regex_prefix.empty() &&
      Lower(st->regex_prefix).find(st->regex_prefilter[0].needle()) != std::string::npos) {
    st->regex_prefilter.clear();
  }
  st->re = std::move(re);
}

void SetFilterRegex(std::shared_ptr<const re2::RE2> re, FilterNode* n) {
  n->regex_literals = AnalyzeRegex(*re);
  n->regex_prefilter = RegexPrefilter(n->regex_literals);
  n->re = std::move(re);
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
    case Metric::Kind::kStdDev:
      return {m.as.empty() ? "_stddev" : m.as};
    case Metric::Kind::kRange:
      return {m.as.empty() ? "_range" : m.as};
    case Metric::Kind::kCollect:
      return {m.as.empty() ? m.field : m.as};
    case Metric::Kind::kSelectMax:
    case Metric::Kind::kSelectMin:
    case Metric::Kind::kSelectLast:
      return m.select_fields;
    case Metric::Kind::kSubquery:
      return {};  // known only when its rows are
    case Metric::Kind::kPercentile: {
      std::vector<std::string> out;
      for (double p : m.percentiles) out.push_back(m.as + "_" + FormatNumber(p));
      return out;
    }
  }
  return {};
}

std::shared_ptr<const re2::RE2> RegexWithFlags(Call& c, bool plain_to_noncapturing) {
  std::string prefix;
  for (char f : c.String("flags")) {
    std::string flag = RegexFlag(f);
    if (flag.empty()) {
      c.BadParam("flags", "any of i, m, d");
      return nullptr;
    }
    prefix += flag;
  }
  std::string error;
  std::shared_ptr<const re2::RE2> re =
      CompileRegex(prefix + ConvertRegex(c.String("regex"), plain_to_noncapturing), &error);
  if (!re) c.BadParam("regex", "a regular expression (" + error + ")");
  return re;
}

std::string RegexFlag(char f) {
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

}  // namespace sediment::query::functions
