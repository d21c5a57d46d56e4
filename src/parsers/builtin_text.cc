// The built-in parsers written natively: accesslog (Apache/NGINX common and combined log format)
// and syslog (RFC 5424 and RFC 3164). They read the line once, without a regex, because they run
// on every event of a request (README.md, cost).
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/time_parse.h"
#include "parsers/internal.h"

namespace sediment::parsers::internal {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Reads `n` digits at s[*i]; false when there are not.
bool Digits(std::string_view s, size_t* i, int n, int* out) {
  int v = 0;
  for (int k = 0; k < n; ++k) {
    if (*i >= s.size() || !IsDigit(s[*i])) return false;
    v = v * 10 + (s[*i] - '0');
    ++*i;
  }
  *out = v;
  return true;
}

bool Lit(std::string_view s, size_t* i, char c) {
  if (*i >= s.size() || s[*i] != c) return false;
  ++*i;
  return true;
}

// "Jan".."Dec" (case as written) -> 1..12; 0 otherwise.
int Month(std::string_view m) {
  static constexpr std::string_view kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                 "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  for (int k = 0; k < 12; ++k) {
    if (m == kMonths[k]) return k + 1;
  }
  return 0;
}

bool ValidClock(int h, int mi, int sec) { return h < 24 && mi < 60 && sec < 61; }

int64_t Millis(int y, int mo, int d, int h, int mi, int sec) {
  return ((DaysFromCivil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d)) * 24 + h) * 60 +
          mi) *
             60000 +
         static_cast<int64_t>(sec) * 1000;
}

// The next space-delimited token at *i (skipping one space after it).
std::string_view Token(std::string_view s, size_t* i) {
  size_t end = s.find(' ', *i);
  if (end == std::string_view::npos) end = s.size();
  std::string_view t = s.substr(*i, end - *i);
  *i = end < s.size() ? end + 1 : end;
  return t;
}

// A double-quoted string at *i (backslash escapes kept as written); nullopt when s[*i] is not a
// quote or the string does not end.
std::optional<std::string_view> Quoted(std::string_view s, size_t* i) {
  if (*i >= s.size() || s[*i] != '"') return std::nullopt;
  size_t k = *i + 1;
  while (k < s.size()) {
    const void* q = std::memchr(s.data() + k, '"', s.size() - k);
    if (q == nullptr) return std::nullopt;
    size_t at = static_cast<size_t>(static_cast<const char*>(q) - s.data());
    size_t backslashes = 0;  // an odd run of backslashes before the quote escapes it
    while (at - backslashes > k && s[at - backslashes - 1] == '\\') ++backslashes;
    k = at;
    if (backslashes % 2 == 0) break;
    ++k;
  }
  if (k >= s.size()) return std::nullopt;
  std::string_view v = s.substr(*i + 1, k - *i - 1);
  *i = k + 1;
  return v;
}

void SkipSpaces(std::string_view s, size_t* i) {
  while (*i < s.size() && s[*i] == ' ') ++*i;
}

// What a native parser read from a line, applied to the event only when the whole line parsed.
struct Parsed {
  std::optional<int64_t> timestamp_ms;
  std::vector<Field> fields;
};

// Adds a field unless the value is empty or "-" (a NILVALUE / absent value).
void Add(Parsed* e, std::string_view name, std::string_view v) {
  if (v.empty() || v == "-") return;
  e->fields.push_back(Field{std::string(name), std::string(v)});
}

// Moves `p` into `e`: the time, and the fields (replacing fields of the same name the event had).
// False (and `e` unchanged) when the fields would take more than the event's size + 512 bytes
// (Parser::Bounded: at most 2x + 1 KiB with the error fields; RFC 5424 structured data repeats
// its SD-ID in every parameter's field name, so a line of many short parameters could grow).
bool Commit(Parsed* p, Event* e) {
  size_t added = 0;
  for (const Field& f : p->fields) added += f.name.size() + f.value.size() + 4;
  if (added > e->ByteSize() + 512) return false;
  if (p->timestamp_ms) e->timestamp_ms = *p->timestamp_ms;
  if (e->fields.empty()) {
    e->fields = std::move(p->fields);
    return true;
  }
  for (Field& f : p->fields) SetField(e, f.name, f.value);
  return true;
}

// Apache/NGINX access log lines: common log format
//   client ident authuser [10/Oct/2000:13:55:36 -0700] "GET /a.gif HTTP/1.0" 200 2326
// and combined (the same + "referrer" "useragent"). Fields as LogScale's accesslog parser names
// them: client, ident, authuser, method, url, httpversion, statuscode (and status, which
// queries such as status=404 use), responsesize, referrer, useragent ("-" values are left out);
// @timestamp from the bracketed time.
class AccessLogParser final : public Parser {
 public:
  AccessLogParser() : Parser("accesslog") {}

  void Run(TaggedEvent in, std::vector<TaggedEvent>* out) const override {
    TaggedEvent& t = out->emplace_back(std::move(in));
    Parsed p;
    if (const char* why = Parse(t.event.raw, &p)) {
      SetError(&t.event, std::string("accesslog: ") + why);
      return;
    }
    if (!Commit(&p, &t.event)) SetError(&t.event, "accesslog: the fields exceed the line's size");
  }
  bool Bounded() const override { return true; }

 private:
  // nullptr when the line parsed (fields and time in `e`), else why not.
  static const char* Parse(std::string_view s, Parsed* e) {
    size_t i = 0;
    std::string_view client = Token(s, &i);
    std::string_view ident = Token(s, &i);
    std::string_view authuser = Token(s, &i);
    if (client.empty() || i >= s.size() || s[i] != '[') {
      return "not a common or combined log format line";
    }
    size_t close = s.find(']', i);
    if (close == std::string_view::npos) return "no ']' after the time";
    std::optional<int64_t> ms = ParseClfTime(s.substr(i + 1, close - i - 1));
    if (!ms) return "the time in [...] is not dd/MMM/yyyy:HH:mm:ss +hhmm";
    i = close + 1;
    SkipSpaces(s, &i);
    std::optional<std::string_view> request = Quoted(s, &i);
    if (!request) return "no quoted request after the time";
    SkipSpaces(s, &i);
    std::string_view status = Token(s, &i);
    std::string_view size = Token(s, &i);
    if (status.size() != 3 || !IsDigit(status[0]) || !IsDigit(status[1]) || !IsDigit(status[2])) {
      return "no three-digit status after the request";
    }
    std::optional<std::string_view> referrer, agent;
    SkipSpaces(s, &i);
    if (i < s.size()) {
      referrer = Quoted(s, &i);
      SkipSpaces(s, &i);
      if (referrer) agent = Quoted(s, &i);
    }
    e->timestamp_ms = *ms;
    e->fields.reserve(11);
    Add(e, "client", client);
    Add(e, "ident", ident);
    Add(e, "authuser", authuser);
    size_t r = 0;
    std::string_view method = Token(*request, &r);
    std::string_view url = Token(*request, &r);
    std::string_view version = request->substr(r);
    Add(e, "method", method);
    Add(e, "url", url);
    if (version.rfind("HTTP/", 0) == 0) version.remove_prefix(5);
    Add(e, "httpversion", version);
    Add(e, "statuscode", status);
    Add(e, "status", status);
    Add(e, "responsesize", size);
    if (referrer) Add(e, "referrer", *referrer);
    if (agent) Add(e, "useragent", *agent);
    return nullptr;
  }
};

// Syslog lines, RFC 5424
//   <165>1 2003-10-11T22:14:15.003Z mymachine.example.com evntslog - ID47 [exampleSDID@32473
//   iut="3" eventSource="Application"] An application event
// and RFC 3164 (BSD)
//   <34>Oct 11 22:14:15 mymachine su[123]: 'su root' failed for lonvick on /dev/pts/8
// (the <PRI> is optional in 3164 lines, as files written by syslog daemons lack it). Fields:
// priority, facility, severity (numbers, from PRI), version, host, app, pid, msgid, message;
// each structured-data parameter as "<SD-ID>.<name>". "-" (NILVALUE) fields are left out.
// @timestamp from the line's time (3164: no year and no zone: UTC, this year).
class SyslogParser final : public Parser {
 public:
  SyslogParser() : Parser("syslog") {}

  void Run(TaggedEvent in, std::vector<TaggedEvent>* out) const override {
    TaggedEvent& t = out->emplace_back(std::move(in));
    Parsed p;
    if (const char* why = Parse(t.event.raw, t.event.ingest_ms, &p)) {
      SetError(&t.event, std::string("syslog: ") + why);
      return;
    }
    if (!Commit(&p, &t.event)) SetError(&t.event, "syslog: the fields exceed the line's size");
  }
  bool Bounded() const override { return true; }

 private:
  static const char* Parse(std::string_view s, int64_t now_ms, Parsed* e) {
    size_t i = 0;
    int pri = -1;
    if (!s.empty() && s[0] == '<') {
      size_t close = s.find('>');
      if (close == std::string_view::npos || close < 2 || close > 4) return "bad <PRI>";
      pri = 0;
      for (size_t k = 1; k < close; ++k) {
        if (!IsDigit(s[k])) return "bad <PRI>";
        pri = pri * 10 + (s[k] - '0');
      }
      if (pri > 191) return "<PRI> above 191";
      i = close + 1;
    }
    if (pri >= 0 && i + 1 < s.size() && IsDigit(s[i]) && (s[i + 1] == ' ' || IsDigit(s[i + 1]))) {
      return Parse5424(s, i, pri, e);
    }
    return Parse3164(s, i, pri, now_ms, e);
  }

  static void AddPri(Parsed* e, int pri) {
    if (pri < 0) return;
    e->fields.push_back(Field{"priority", std::to_string(pri)});
    e->fields.push_back(Field{"facility", std::to_string(pri / 8)});
    e->fields.push_back(Field{"severity", std::to_string(pri % 8)});
  }

  static const char* Parse5424(std::string_view s, size_t i, int pri, Parsed* e) {
    std::string_view version = Token(s, &i);
    std::string_view time = Token(s, &i);
    std::string_view host = Token(s, &i);
    std::string_view app = Token(s, &i);
    std::string_view procid = Token(s, &i);
    std::string_view msgid = Token(s, &i);
    if (msgid.empty())
      return "RFC 5424: fewer header fields than VERSION TIMESTAMP HOSTNAME "
             "APP-NAME PROCID MSGID";
    std::optional<int64_t> ms;
    if (time != "-") {
      ms = ParseIso8601Millis(time);
      if (!ms) return "RFC 5424: the TIMESTAMP is not RFC 3339";
    }
    std::vector<std::pair<std::string, std::string>> sd;
    std::unordered_map<std::string, size_t> sd_index;
    if (i < s.size() && s[i] == '-') {
      ++i;
    } else {
      while (i < s.size() && s[i] == '[') {
        ++i;
        size_t id_end = s.find_first_of(" ]", i);
        if (id_end == std::string_view::npos) return "RFC 5424: unterminated structured data";
        std::string_view id = s.substr(i, id_end - i);
        if (id.empty()) return "RFC 5424: an empty SD-ID";
        i = id_end;
        while (i < s.size() && s[i] == ' ') {
          SkipSpaces(s, &i);
          size_t eq = s.find('=', i);
          if (eq == std::string_view::npos || eq == i) return "RFC 5424: bad SD-PARAM";
          std::string_view name = s.substr(i, eq - i);
          i = eq + 1;
          if (i >= s.size() || s[i] != '"') return "RFC 5424: SD-PARAM value not quoted";
          std::string value;
          ++i;
          while (i < s.size() && s[i] != '"') {
            if (s[i] == '\\' && i + 1 < s.size() &&
                (s[i + 1] == '"' || s[i + 1] == '\\' || s[i + 1] == ']')) {
              ++i;
            }
            value.push_back(s[i]);
            ++i;
          }
          if (i >= s.size()) return "RFC 5424: unterminated SD-PARAM value";
          ++i;  // the closing quote
          std::string field(id);
          field.push_back('.');
          field.append(name);
          // A name repeated (in one element, or an SD-ID repeated) keeps its first place and
          // takes the last value: event field names are unique.
          auto [it, added] = sd_index.emplace(field, sd.size());
          if (added) {
            sd.emplace_back(std::move(field), std::move(value));
          } else {
            sd[it->second].second = std::move(value);
          }
        }
        if (i >= s.size() || s[i] != ']') return "RFC 5424: unterminated structured data";
        ++i;
      }
      if (sd.empty() && (i >= s.size() || s[i] != ' ') && i < s.size()) {
        return "RFC 5424: STRUCTURED-DATA is neither '-' nor [...]";
      }
    }
    if (i < s.size() && s[i] == ' ') ++i;
    std::string_view msg = s.substr(std::min(i, s.size()));
    if (msg.size() >= 3 && msg.substr(0, 3) == "\xEF\xBB\xBF") msg.remove_prefix(3);  // BOM
    if (ms) e->timestamp_ms = *ms;
    AddPri(e, pri);
    Add(e, "version", version);
    Add(e, "host", host);
    Add(e, "app", app);
    Add(e, "pid", procid);
    Add(e, "msgid", msgid);
    for (auto& [name, value] : sd) e->fields.push_back(Field{std::move(name), std::move(value)});
    Add(e, "message", msg);
    return nullptr;
  }

  static const char* Parse3164(std::string_view s, size_t i, int pri, int64_t now_ms, Parsed* e) {
    // TIMESTAMP: "Mmm dd hh:mm:ss" (day space-padded), or RFC 3339 as some daemons write.
    std::optional<int64_t> ms;
    if (i + 15 <= s.size()) ms = ParseBsdTime(s.substr(i, 15), now_ms);
    if (ms) {
      i += 15;
    } else {
      size_t t = i;
      std::string_view iso = Token(s, &t);
      ms = ParseIso8601Millis(iso);
      if (!ms) return "no RFC 3164 (Mmm dd hh:mm:ss) or RFC 3339 time after the <PRI>";
      i = t;
      if (i > 0 && s[i - 1] == ' ') --i;
    }
    if (i < s.size() && s[i] != ' ') return "no space after the time";
    SkipSpaces(s, &i);
    std::string_view host = Token(s, &i);
    // TAG: up to ':' or '[' (letters, digits, and the characters daemons use); then "[pid]".
    std::string_view rest = s.substr(std::min(i, s.size()));
    std::string_view app, pid, msg = rest;
    size_t k = 0;
    while (k < rest.size() && k < 48 && rest[k] != ':' && rest[k] != '[' && rest[k] != ' ') ++k;
    if (k > 0 && k < rest.size() && (rest[k] == ':' || rest[k] == '[')) {
      app = rest.substr(0, k);
      size_t m = k;
      if (rest[m] == '[') {
        size_t close = rest.find(']', m);
        if (close != std::string_view::npos) {
          pid = rest.substr(m + 1, close - m - 1);
          m = close + 1;
        }
      }
      if (m < rest.size() && rest[m] == ':') {
        ++m;
        if (m < rest.size() && rest[m] == ' ') ++m;
        msg = rest.substr(m);
      } else {
        app = {};
        pid = {};
      }
    }
    e->timestamp_ms = *ms;
    AddPri(e, pri);
    Add(e, "host", host);
    Add(e, "app", app);
    Add(e, "pid", pid);
    Add(e, "message", msg);
    return nullptr;
  }
};

}  // namespace

std::optional<int64_t> ParseClfTime(std::string_view s) {
  // dd/MMM/yyyy:HH:mm:ss +hhmm
  size_t i = 0;
  int d, y, h, mi, sec, oh, om;
  if (!Digits(s, &i, 2, &d) || !Lit(s, &i, '/')) return std::nullopt;
  if (i + 3 > s.size()) return std::nullopt;
  const int mo = Month(s.substr(i, 3));
  i += 3;
  if (mo == 0 || !Lit(s, &i, '/') || !Digits(s, &i, 4, &y) || !Lit(s, &i, ':') ||
      !Digits(s, &i, 2, &h) || !Lit(s, &i, ':') || !Digits(s, &i, 2, &mi) || !Lit(s, &i, ':') ||
      !Digits(s, &i, 2, &sec)) {
    return std::nullopt;
  }
  if (d < 1 || d > 31 || !ValidClock(h, mi, sec)) return std::nullopt;
  int64_t offset_ms = 0;
  if (i < s.size()) {
    if (!Lit(s, &i, ' ') || i >= s.size() || (s[i] != '+' && s[i] != '-')) return std::nullopt;
    const int sign = s[i] == '-' ? -1 : 1;
    ++i;
    if (!Digits(s, &i, 2, &oh) || !Digits(s, &i, 2, &om) || i != s.size() || oh > 23 || om > 59) {
      return std::nullopt;
    }
    offset_ms = sign * (oh * 60 + om) * 60000LL;
  }
  return Millis(y, mo, d, h, mi, sec) - offset_ms;
}

std::optional<int64_t> ParseBsdTime(std::string_view s, int64_t now_ms) {
  // "Mmm dd hh:mm:ss", dd space-padded ("Oct  1").
  if (s.size() != 15 || s[3] != ' ') return std::nullopt;
  const int mo = Month(s.substr(0, 3));
  if (mo == 0) return std::nullopt;
  int d;
  if (s[4] == ' ' && IsDigit(s[5])) {
    d = s[5] - '0';
  } else if (IsDigit(s[4]) && IsDigit(s[5])) {
    d = (s[4] - '0') * 10 + (s[5] - '0');
  } else {
    return std::nullopt;
  }
  size_t i = 6;
  int h, mi, sec;
  if (!Lit(s, &i, ' ') || !Digits(s, &i, 2, &h) || !Lit(s, &i, ':') || !Digits(s, &i, 2, &mi) ||
      !Lit(s, &i, ':') || !Digits(s, &i, 2, &sec)) {
    return std::nullopt;
  }
  if (d < 1 || d > 31 || !ValidClock(h, mi, sec)) return std::nullopt;
  // The year of now (UTC); days since the epoch -> civil year.
  int64_t days = now_ms / 86400000;
  if (now_ms < 0 && now_ms % 86400000 != 0) --days;
  int64_t z = days + 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const int64_t doe = z - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  int64_t year = yoe + era * 400;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  const int64_t month = mp < 10 ? mp + 3 : mp - 9;
  if (month <= 2) ++year;
  int64_t ms = Millis(static_cast<int>(year), mo, d, h, mi, sec);
  if (ms > now_ms + 86400000) ms = Millis(static_cast<int>(year - 1), mo, d, h, mi, sec);
  return ms;
}

std::shared_ptr<const Parser> NewAccessLogParser() { return std::make_shared<AccessLogParser>(); }
std::shared_ptr<const Parser> NewSyslogParser() { return std::make_shared<SyslogParser>(); }

}  // namespace sediment::parsers::internal
