// parseTimestamp(format, field, as=@timestamp, timezone, addErrors=true, caseSensitive=true): a
// text time parsed into milliseconds since the epoch. A per-record stage.
//
// `format` is a Java DateTimeFormatter pattern, as LogScale documents, or one of the epoch
// specifiers millis / milliseconds / unixTimeMillis, seconds / unixTimeSeconds / unixtime
// (fractions allowed), nanos (any case).
//
// Choices where LogScale's documentation leaves room: pattern letters y u M d H h k K m s S a E
// D X x Z z, quoted literals '...' ('' is a quote) and optional sections [...] are understood;
// other letters are a 400 when the query is compiled. A run of two or more letters reads exactly
// that many digits (yyyy four, yy two of 2000-2099), a single letter one or two (a year one to
// nine); any run of S reads 1 to 9 fraction digits. Month and day names are English; case
// matters unless caseSensitive=false. An offset pattern (X x Z) accepts `Z` or +HH, +HHMM,
// +HH:MM; `z` accepts UTC, GMT, Z. Named time zones (Europe/London) are not supported (400).
// A time without an offset uses `timezone`; with neither it is not parsed. Trailing text after
// the pattern is a failure. A failure (or a missing field) leaves `as` unset and, with
// addErrors, sets @error=true and @error_msg.
#include <charconv>
#include <cmath>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "query/functions/list.h"
#include "query/functions/transforms.h"
#include "query/text_util.h"
#include "query/time_zone.h"

namespace sediment::query::functions {

namespace {

constexpr Param kParams[] = {
    {.name = "format",
     .type = Type::kString,
     .unnamed = true,
     .default_value = "\"yyyy-MM-dd'T'HH:mm:ss[.SSSSSSSSS]XXXXX\""},
    {.name = "field", .type = Type::kField, .required = true},
    {.name = "as", .type = Type::kField, .default_value = "@timestamp"},
    {.name = "timezone", .type = Type::kString},
    {.name = "addErrors", .type = Type::kBool, .default_value = "true"},
    {.name = "caseSensitive", .type = Type::kBool, .default_value = "true"},
    {.name = "timezoneAs", .type = Type::kUnsupported},
};

enum class Epoch { kNone, kMillis, kSeconds, kNanos };

// One token of a compiled pattern.
struct Token {
  enum class K { kLiteral, kField, kOptional } k = K::kLiteral;
  std::string text;  // kLiteral
  char letter = 0;   // kField
  int count = 0;     // kField: run length
  std::vector<Token> optional;
};

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// Compiles `p` from *i up to `close` (']' inside an optional section, 0 at top level).
std::string CompilePattern(std::string_view p, size_t* i, char close, std::vector<Token>* out) {
  constexpr std::string_view kLetters = "yuMdHhkKmsSaEDXxZz";
  auto literal = [&](std::string s) {
    if (!out->empty() && out->back().k == Token::K::kLiteral) {
      out->back().text += s;
    } else {
      Token t;
      t.text = std::move(s);
      out->push_back(std::move(t));
    }
  };
  while (*i < p.size()) {
    const char c = p[*i];
    if (c == close) {
      ++*i;
      return "";
    }
    if (c == '[') {
      ++*i;
      Token t;
      t.k = Token::K::kOptional;
      std::string err = CompilePattern(p, i, ']', &t.optional);
      if (!err.empty()) return err;
      out->push_back(std::move(t));
      continue;
    }
    if (c == ']') return "an unmatched ']'";
    if (c == '\'') {
      std::string s;
      size_t k = *i + 1;
      if (k < p.size() && p[k] == '\'') {
        literal("'");
        *i = k + 1;
        continue;
      }
      for (; k < p.size(); ++k) {
        if (p[k] == '\'') {
          if (k + 1 < p.size() && p[k + 1] == '\'') {
            s.push_back('\'');
            ++k;
            continue;
          }
          break;
        }
        s.push_back(p[k]);
      }
      if (k >= p.size()) return "an unclosed quote";
      literal(std::move(s));
      *i = k + 1;
      continue;
    }
    if (IsAlpha(c)) {
      if (kLetters.find(c) == std::string_view::npos) {
        return "the pattern letter '" + std::string(1, c) + "' is not supported";
      }
      size_t k = *i;
      while (k < p.size() && p[k] == c) ++k;
      Token t;
      t.k = Token::K::kField;
      t.letter = c;
      t.count = static_cast<int>(k - *i);
      out->push_back(std::move(t));
      *i = k;
      continue;
    }
    literal(std::string(1, c));
    ++*i;
  }
  return close == 0 ? "" : "an unclosed '['";
}

constexpr std::string_view kMonths[] = {"january",   "february", "march",    "april",
                                        "may",       "june",     "july",     "august",
                                        "september", "october",  "november", "december"};
constexpr std::string_view kDays[] = {"monday", "tuesday",  "wednesday", "thursday",
                                      "friday", "saturday", "sunday"};

struct Parsed {
  int64_t year = 1970;
  int month = 1, day = 1, hour = 0, minute = 0, second = 0;
  int64_t nanos = 0;
  int day_of_year = 0;
  int ampm = -1;  // 0 am, 1 pm
  bool hour12 = false;
  std::optional<int32_t> offset;  // seconds east of UTC
};

class Parser {
 public:
  Parser(std::string_view s, bool case_sensitive) : s_(s), cs_(case_sensitive) {}

  // Whether `tokens` match the whole text (or, with `prefix`, a prefix of it; then `*used` is
  // its length).
  bool Run(const std::vector<Token>& tokens, Parsed* out, bool prefix = false,
           size_t* used = nullptr) {
    if (!Seq(tokens, out)) return false;
    if (used != nullptr) *used = pos_;
    return prefix || pos_ == s_.size();
  }

 private:
  bool Seq(const std::vector<Token>& tokens, Parsed* out) {
    for (const Token& t : tokens) {
      switch (t.k) {
        case Token::K::kLiteral:
          if (s_.compare(pos_, t.text.size(), t.text) != 0) return false;
          pos_ += t.text.size();
          break;
        case Token::K::kOptional: {
          const size_t save = pos_;
          Parsed copy = *out;
          if (!Seq(t.optional, &copy)) {
            pos_ = save;
          } else {
            *out = copy;
          }
          break;
        }
        case Token::K::kField:
          if (!Field(t, out)) return false;
          break;
      }
    }
    return true;
  }

  // Digits: exactly `count` when count >= 2, else 1 to `max1`.
  std::optional<int64_t> Digits(int count, int max1) {
    const size_t lo = count >= 2 ? count : 1;
    const size_t hi = count >= 2 ? count : max1;
    size_t n = 0;
    while (pos_ + n < s_.size() && n < hi && IsDigit(s_[pos_ + n])) ++n;
    if (n < lo) return std::nullopt;
    int64_t v = 0;
    std::from_chars(s_.data() + pos_, s_.data() + pos_ + n, v);
    pos_ += n;
    return v;
  }

  bool Matches(std::string_view word) const {
    if (pos_ + word.size() > s_.size()) return false;
    std::string_view got = s_.substr(pos_, word.size());
    if (!cs_) return EqualsIgnoreCase(got, word);
    // Case-sensitive: the English spelling with a capital first letter.
    if (got.empty() || got[0] != static_cast<char>(word[0] - 32)) return false;
    return got.substr(1) == word.substr(1);
  }

  // A name of `names` (the full name with 4+ letters, else the 3-letter abbreviation).
  std::optional<int> Name(std::span<const std::string_view> names, int count) {
    for (size_t k = 0; k < names.size(); ++k) {
      std::string_view w = count >= 4 ? names[k] : names[k].substr(0, 3);
      if (Matches(w)) {
        pos_ += w.size();
        return static_cast<int>(k);
      }
    }
    return std::nullopt;
  }

  std::optional<int32_t> Offset(bool allow_z) {
    if (pos_ < s_.size() && s_[pos_] == 'Z' && allow_z) {
      ++pos_;
      return 0;
    }
    if (pos_ >= s_.size() || (s_[pos_] != '+' && s_[pos_] != '-')) return std::nullopt;
    const int sign = s_[pos_] == '-' ? -1 : 1;
    ++pos_;
    std::optional<int64_t> h = Digits(2, 2);
    if (!h || *h > 18) return std::nullopt;
    int64_t m = 0;
    const size_t save = pos_;
    if (pos_ < s_.size() && s_[pos_] == ':') ++pos_;
    if (std::optional<int64_t> mm = Digits(2, 2); mm && *mm < 60) {
      m = *mm;
    } else {
      pos_ = save;
    }
    return static_cast<int32_t>(sign * (*h * 3600 + m * 60));
  }

  bool Field(const Token& t, Parsed* out) {
    switch (t.letter) {
      case 'y':
      case 'u': {
        std::optional<int64_t> v = Digits(t.count, 9);
        if (!v) return false;
        out->year = t.count == 2 ? 2000 + *v : *v;
        return true;
      }
      case 'M': {
        if (t.count >= 3) {
          std::optional<int> m = Name(kMonths, t.count);
          if (!m) return false;
          out->month = *m + 1;
          return true;
        }
        std::optional<int64_t> v = Digits(t.count, 2);
        if (!v || *v < 1 || *v > 12) return false;
        out->month = static_cast<int>(*v);
        return true;
      }
      case 'E':
        return Name(kDays, t.count).has_value();
      case 'a':
        if (Matches("am")) {
          out->ampm = 0;
        } else if (Matches("pm")) {
          out->ampm = 1;
        } else if (!cs_ || pos_ + 2 > s_.size()) {
          return false;
        } else if (s_.compare(pos_, 2, "AM") == 0) {
          out->ampm = 0;
        } else if (s_.compare(pos_, 2, "PM") == 0) {
          out->ampm = 1;
        } else {
          return false;
        }
        pos_ += 2;
        return true;
      case 'S': {
        size_t n = 0;
        while (pos_ + n < s_.size() && n < 9 && IsDigit(s_[pos_ + n])) ++n;
        if (n == 0) return false;
        int64_t v = 0;
        std::from_chars(s_.data() + pos_, s_.data() + pos_ + n, v);
        for (size_t k = n; k < 9; ++k) v *= 10;
        out->nanos = v;
        pos_ += n;
        return true;
      }
      case 'X':
      case 'x':
      case 'Z': {
        std::optional<int32_t> off = Offset(t.letter != 'x');
        if (!off) return false;
        out->offset = off;
        return true;
      }
      case 'z':
        for (std::string_view z : {"UTC", "GMT", "Z"}) {
          if (s_.compare(pos_, z.size(), z) == 0) {
            pos_ += z.size();
            out->offset = 0;
            return true;
          }
        }
        return false;
      default:
        break;
    }
    const int max1 = t.letter == 'D' ? 3 : 2;
    std::optional<int64_t> v = Digits(t.count, max1);
    if (!v) return false;
    switch (t.letter) {
      case 'd':
        if (*v < 1 || *v > 31) return false;
        out->day = static_cast<int>(*v);
        return true;
      case 'D':
        if (*v < 1 || *v > 366) return false;
        out->day_of_year = static_cast<int>(*v);
        return true;
      case 'H':
      case 'k':
        if (*v > 24 || (t.letter == 'H' && *v > 23) || (t.letter == 'k' && *v < 1)) return false;
        out->hour = static_cast<int>(*v % 24);
        return true;
      case 'h':
      case 'K':
        if (*v > 12 || (t.letter == 'h' && *v < 1)) return false;
        out->hour = static_cast<int>(*v % 12);
        out->hour12 = true;
        return true;
      case 'm':
        if (*v > 59) return false;
        out->minute = static_cast<int>(*v);
        return true;
      case 's':
        if (*v > 59) return false;
        out->second = static_cast<int>(*v);
        return true;
      default:
        return false;
    }
  }

  std::string_view s_;
  bool cs_;
  size_t pos_ = 0;
};

int DaysInMonth(int64_t y, int m) {
  static constexpr int kDaysIn[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  return m == 2 && leap ? 29 : kDaysIn[m - 1];
}

// Milliseconds of an epoch number in `unit`, or nullopt.
std::optional<int64_t> EpochMillis(std::string_view s, Epoch unit) {
  std::optional<double> d = ParseNumber(s);
  if (!d) return std::nullopt;
  if (unit == Epoch::kMillis) {
    if (std::optional<int64_t> i = ParseInt(s)) return *i;
  }
  double ms = unit == Epoch::kMillis ? *d : unit == Epoch::kSeconds ? *d * 1000.0 : *d / 1.0e6;
  ms = std::floor(ms);
  if (!FitsInt64(ms)) return std::nullopt;
  return static_cast<int64_t>(ms);
}

struct Spec {
  Epoch epoch = Epoch::kNone;
  std::vector<Token> tokens;
  std::optional<TimeZone> timezone;
  bool case_sensitive = true;
};

// Milliseconds of `s`, or the reason it does not parse.
// Milliseconds of a parsed time, or the reason it has none.
std::optional<int64_t> ToMillis(Parsed p, const std::optional<TimeZone>& timezone,
                                std::string* why);

std::optional<int64_t> ParseTime(const Spec& spec, std::string_view s, std::string* why) {
  if (spec.epoch != Epoch::kNone) {
    std::optional<int64_t> ms = EpochMillis(s, spec.epoch);
    if (!ms) *why = "not a number";
    return ms;
  }
  Parsed p;
  Parser parser(s, spec.case_sensitive);
  if (!parser.Run(spec.tokens, &p)) {
    *why = "does not match the format";
    return std::nullopt;
  }
  return ToMillis(p, spec.timezone, why);
}

std::optional<int64_t> ToMillis(Parsed p, const std::optional<TimeZone>& timezone,
                                std::string* why) {
  if (p.hour12 && p.ampm == 1) p.hour += 12;
  if (!p.offset && !timezone) {
    *why = "has no time zone and no timezone= is given";
    return std::nullopt;
  }
  int64_t days;
  if (p.day_of_year > 0) {
    days = CivilDays(p.year, 1, 1) + p.day_of_year - 1;
  } else {
    if (p.day > DaysInMonth(p.year, p.month)) {
      *why = "is not a valid date";
      return std::nullopt;
    }
    days = CivilDays(p.year, static_cast<unsigned>(p.month), static_cast<unsigned>(p.day));
  }
  const int64_t local = days * 86400 + p.hour * 3600 + p.minute * 60 + p.second;
  const int64_t secs = local - (p.offset ? *p.offset : timezone->OffsetOfLocal(local));
  return secs * 1000 + p.nanos / 1000000;
}

// The record function of parseTimestamp() and findTimestamp(), with their `field`, `as` and
// `addErrors` parameters: parse(text, &why) gives the milliseconds of the text of `field` (or
// nullopt and why not). On success `as` is set; on failure, with addErrors, @error=true and
// @error_msg = "<name>(): ['<text>' when quote_text]<why>". The event is always kept.
template <typename Parse>
bool SetTimeStage(Call& c, Stage* st, const char* name, bool quote_text, Parse parse) {
  std::string field = c.String("field");
  std::string as = c.String("as");
  const bool add_errors = c.Bool("addErrors");
  std::vector<std::string> touched = {field, as, "@error", "@error_msg"};
  SetRecordFunction(
      st,
      [field, as, add_errors, name, quote_text, parse](Record& r) {
        std::string scratch, why;
        std::optional<std::string_view> text = r.Get(field, &scratch);
        std::optional<int64_t> ms;
        if (text) {
          ms = parse(*text, &why);
        } else {
          why = "field '" + field + "' is missing";
        }
        if (ms) {
          r.Set(as, Value(*ms));
        } else if (add_errors) {
          std::string msg = std::string(name) + "(): ";
          if (text && quote_text) msg += "'" + std::string(*text) + "' ";
          r.Set("@error", Value(std::string("true")));
          r.Set("@error_msg", Value(msg + why));
        }
        return true;
      },
      std::move(touched));
  return true;
}

bool Build(Call& c, Stage* st) {
  auto spec = std::make_shared<Spec>();
  const std::string& format = c.String("format");
  const std::string lower = Lower(format);
  if (lower == "millis" || lower == "milliseconds" || lower == "unixtimemillis") {
    spec->epoch = Epoch::kMillis;
  } else if (lower == "seconds" || lower == "unixtimeseconds" || lower == "unixtime") {
    spec->epoch = Epoch::kSeconds;
  } else if (lower == "nanos") {
    spec->epoch = Epoch::kNanos;
  } else {
    size_t i = 0;
    std::string err = CompilePattern(format, &i, 0, &spec->tokens);
    if (!err.empty()) {
      c.BadParam("format", "a DateTimeFormatter pattern or millis/seconds/nanos (" + err + ")");
      return false;
    }
  }
  if (c.Given("timezone")) {
    spec->timezone = TimeZone::Parse(c.String("timezone"));
    if (!spec->timezone) {
      c.BadParam("timezone", kTimezoneExpected);
      return false;
    }
  }
  spec->case_sensitive = c.Bool("caseSensitive");
  return SetTimeStage(
      c, st, "parseTimestamp", /*quote_text=*/true,
      [spec](std::string_view text, std::string* why) { return ParseTime(*spec, text, why); });
}

// ---- findTimestamp ----

// The formats findTimestamp tries, in order, at each position.
const std::vector<std::vector<Token>>& FindFormats() {
  static const std::vector<std::vector<Token>> kFormats = [] {
    std::vector<std::vector<Token>> out;
    for (std::string_view f : {
             "yyyy-MM-dd'T'HH:mm:ss[.SSSSSSSSS][,SSSSSSSSS][XXXXX]",
             "yyyy-MM-dd HH:mm:ss[.SSSSSSSSS][,SSSSSSSSS][ XXXXX][XXXXX]",
             "dd/MMM/yyyy:HH:mm:ss[ Z]",
             "yyyy/MM/dd HH:mm:ss[.SSSSSSSSS][ XXXXX]",
             "EEE MMM dd HH:mm:ss[.SSSSSSSSS] yyyy",
             "EEE, dd MMM yyyy HH:mm:ss[ Z]",
         }) {
      std::vector<Token> tokens;
      size_t i = 0;
      (void)CompilePattern(f, &i, 0, &tokens);
      out.push_back(std::move(tokens));
    }
    return out;
  }();
  return kFormats;
}

// The first time in the first `window` bytes of `s` (starting at a word boundary) that one of
// FindFormats() reads, in milliseconds; or why there is none.
std::optional<int64_t> FindTime(std::string_view s, const std::optional<TimeZone>& timezone,
                                std::string* why) {
  constexpr size_t kWindow = 128;
  *why = "no timestamp found";
  auto alnum = [](char c) { return IsDigit(c) || IsAlpha(c); };
  for (size_t i = 0; i < s.size() && i < kWindow; ++i) {
    if (!alnum(s[i]) || (i > 0 && alnum(s[i - 1]))) continue;
    for (const std::vector<Token>& tokens : FindFormats()) {
      Parsed p;
      Parser parser(s.substr(i), /*case_sensitive=*/true);
      size_t used = 0;
      if (!parser.Run(tokens, &p, /*prefix=*/true, &used)) continue;
      if (i + used < s.size() && alnum(s[i + used])) continue;  // ends inside a word
      std::string reason;
      if (std::optional<int64_t> ms = ToMillis(p, timezone, &reason)) return ms;
      *why = "found a timestamp that " + reason;
    }
  }
  return std::nullopt;
}

constexpr Param kFindParams[] = {
    {.name = "field", .type = Type::kField, .unnamed = true, .default_value = "@rawstring"},
    {.name = "as", .type = Type::kField, .default_value = "@timestamp"},
    {.name = "timezone", .type = Type::kString},
    {.name = "addErrors", .type = Type::kBool, .default_value = "true"},
    {.name = "timezoneAs", .type = Type::kUnsupported},
    {.name = "timezoneField", .type = Type::kUnsupported},
};

bool BuildFind(Call& c, Stage* st) {
  std::optional<TimeZone> timezone;
  if (c.Given("timezone")) {
    timezone = TimeZone::Parse(c.String("timezone"));
    if (!timezone) {
      c.BadParam("timezone", kTimezoneExpected);
      return false;
    }
  }
  return SetTimeStage(c, st, "findTimestamp", /*quote_text=*/false,
                      [timezone](std::string_view text, std::string* why) {
                        return FindTime(text, timezone, why);
                      });
}

}  // namespace

const Function kFindTimestamp = {
    .name = "findTimestamp",
    .kind = Kind::kTransform,
    .params = kFindParams,
    .doc = "finds and parses a timestamp in a text",
    .stage = &BuildFind,
};

const Function kParseTimestamp = {
    .name = "parseTimestamp",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "parses a text time into milliseconds since the epoch",
    .stage = &Build,
};

}  // namespace sediment::query::functions
