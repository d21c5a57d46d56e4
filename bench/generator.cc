#include "bench/generator.h"

#include <cmath>
#include <cstring>

namespace sediment::bench {
namespace {

using SV = std::string_view;

inline char* Put(char* p, SV s) {
  std::memcpy(p, s.data(), s.size());
  return p + s.size();
}

inline char* PutUint(char* p, uint64_t v) {
  char tmp[20];
  int n = 0;
  do {
    tmp[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  while (n > 0) *p++ = tmp[--n];
  return p;
}

// Zero-padded to `width` digits.
inline char* PutUintPad(char* p, uint64_t v, int width) {
  for (int i = width - 1; i >= 0; --i) {
    p[i] = static_cast<char>('0' + v % 10);
    v /= 10;
  }
  return p + width;
}

inline char* PutHex(char* p, uint64_t v, int digits) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (int i = digits - 1; i >= 0; --i) {
    p[i] = kHex[v & 0xf];
    v >>= 4;
  }
  return p + digits;
}

inline uint64_t SplitMix64(uint64_t* x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

inline uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

// Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
void CivilFromDays(int64_t z, int64_t* y, unsigned* m, unsigned* d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const unsigned doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t yy = static_cast<int64_t>(yoe) + era * 400;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  *d = doy - (153 * mp + 2) / 5 + 1;
  *m = mp < 10 ? mp + 3 : mp - 9;
  *y = yy + (*m <= 2);
}

inline int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

constexpr SV kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                          "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

// Weighted choice tables: weights sum to 1000.
struct Weighted {
  SV value;
  uint32_t weight;
};

template <size_t N>
SV PickWeighted(const Weighted (&table)[N], uint32_t r /* in [0,1000) */) {
  for (const auto& w : table) {
    if (r < w.weight) return w.value;
    r -= w.weight;
  }
  return table[N - 1].value;
}

constexpr Weighted kMethods[] = {
    {"GET", 860}, {"POST", 100}, {"PUT", 20}, {"DELETE", 10}, {"HEAD", 10}};

constexpr Weighted kStatuses[] = {{"200", 780}, {"304", 60}, {"404", 60}, {"302", 30},
                                  {"301", 20},  {"206", 10}, {"401", 15}, {"403", 10},
                                  {"500", 10},  {"502", 3},  {"503", 2}};

constexpr SV kUsers[] = {"alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi"};

constexpr SV kUserAgents[] = {
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/120.0.0.0 Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) "
    "Version/17.1 Safari/605.1.15",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_1_2 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like "
    "Gecko) Version/17.1 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:121.0) Gecko/20100101 Firefox/121.0",
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/119.0.0.0 Safari/537.36",
    "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/120.0.6099.43 Mobile Safari/537.36",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/120.0.0.0 Safari/537.36 Edg/120.0.2210.61",
    "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
    "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)",
    "curl/8.4.0",
    "python-requests/2.31.0",
    "Go-http-client/1.1",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10.15; rv:120.0) Gecko/20100101 Firefox/120.0",
    "Mozilla/5.0 (iPad; CPU OS 16_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
    "Version/16.6 Mobile/15E148 Safari/604.1",
    "Apache-HttpClient/4.5.14 (Java/17.0.9)",
    "Prometheus/2.48.0",
};

constexpr SV kReferers[] = {
    "https://www.example.com/",
    "https://www.example.com/products",
    "https://www.example.com/cart",
    "https://www.google.com/",
    "https://www.bing.com/search?q=example+shop",
    "https://duckduckgo.com/",
    "https://t.co/",
    "https://www.example.com/blog",
};

constexpr SV kWords[] = {"shoes", "jacket", "laptop", "phone",  "camera", "desk",
                         "lamp",  "book",   "watch",  "bag",    "coffee", "tent",
                         "bike",  "helmet", "guitar", "router", "mouse",  "monitor"};

constexpr SV kSlugs[] = {"summer-sale",       "how-we-scaled-search", "release-notes-4-2",
                         "gift-guide",        "company-update",       "new-arrivals",
                         "care-instructions", "shipping-policy",      "returns"};

constexpr SV kStaticPages[] = {"/",      "/index.html", "/favicon.ico", "/robots.txt",
                               "/login", "/cart",       "/checkout",    "/about"};

constexpr Weighted kLevels[] = {{"INFO", 700}, {"DEBUG", 100}, {"WARN", 120}, {"ERROR", 80}};

constexpr SV kServices[] = {"checkout", "payments", "inventory", "auth",
                            "search",   "gateway",  "shipping",  "notifications"};

constexpr SV kApiPaths[] = {"/api/v1/orders",   "/api/v1/users",  "/api/v1/cart",
                            "/api/v1/products", "/api/v1/search", "/api/v1/login",
                            "/api/v1/payments"};

constexpr SV kTables[] = {"orders", "users", "line_items", "payments", "sessions", "inventory"};

constexpr SV kTopics[] = {"orders.created", "payments.settled", "users.updated", "stock.changed"};

constexpr SV kCurrencies[] = {"USD", "EUR", "GBP", "JPY"};

constexpr SV kSyslogApps[] = {"sshd", "CRON", "kernel", "systemd", "postfix", "sudo", "nginx"};

constexpr SV kDeployUsers[] = {"deploy", "ubuntu", "admin", "backup", "jenkins", "ops"};

constexpr SV kMsgIds[] = {"-", "-", "-", "ID47", "AUTH", "SESS", "QMGR", "CMD"};

constexpr SV kRegions[] = {"eu-west-1", "us-east-1", "us-west-2", "ap-south-1"};

}  // namespace

std::optional<LogFormat> ParseLogFormat(std::string_view name) {
  if (name == "apache") return LogFormat::kApache;
  if (name == "json") return LogFormat::kJson;
  if (name == "syslog") return LogFormat::kSyslog;
  return std::nullopt;
}

const char* LogFormatName(LogFormat format) {
  switch (format) {
    case LogFormat::kApache:
      return "apache";
    case LogFormat::kJson:
      return "json";
    case LogFormat::kSyslog:
      return "syslog";
  }
  return "?";
}

Result<uint64_t> ParseByteSize(std::string_view text) {
  std::string_view s = text;
  if (s.ends_with("iB")) {
    s.remove_suffix(2);
  } else if (s.size() > 1 && (s.back() == 'B' || s.back() == 'b')) {
    s.remove_suffix(1);
  }
  uint64_t mult = 1;
  if (!s.empty()) {
    switch (s.back()) {
      case 'k':
      case 'K':
        mult = 1ULL << 10;
        break;
      case 'm':
      case 'M':
        mult = 1ULL << 20;
        break;
      case 'g':
      case 'G':
        mult = 1ULL << 30;
        break;
      case 't':
      case 'T':
        mult = 1ULL << 40;
        break;
      default:
        break;
    }
    if (mult != 1) s.remove_suffix(1);
  }
  if (s.empty()) return Status::InvalidArgument("bad size '" + std::string(text) + "'");
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return Status::InvalidArgument("bad size '" + std::string(text) + "'");
    if (v > (UINT64_MAX - 9) / 10) return Status::InvalidArgument("size too large");
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v != 0 && mult > UINT64_MAX / v) return Status::InvalidArgument("size too large");
  return v * mult;
}

Status ValidateOptions(const GenOptions& o) {
  if (!(o.rate > 0) || !std::isfinite(o.rate)) {
    return Status::InvalidArgument("rate must be > 0");
  }
  if (o.needle.empty() != (o.needle_every == 0)) {
    return Status::InvalidArgument("--needle and --needle-every go together (every > 0)");
  }
  for (char c : o.needle) {
    if (c == '\n' || c == '\r' || c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20) {
      return Status::InvalidArgument("needle must not contain quotes, backslashes or controls");
    }
  }
  if (o.needle.size() > 256) return Status::InvalidArgument("needle longer than 256 bytes");
  return Status::OK();
}

LogGenerator::LogGenerator(GenOptions options) : options_(std::move(options)) {
  uint64_t x = options_.seed;
  for (auto& s : state_) s = SplitMix64(&x);

  // Client address pool: mostly public-looking ranges, some internal, popularity skewed.
  static constexpr uint32_t kFirstOctets[] = {23,  31,  45,  52,  66,  73,  81,  93, 104,
                                              142, 157, 176, 185, 198, 203, 212, 10, 172};
  client_ips_.reserve(4096);
  for (int i = 0; i < 4096; ++i) {
    char buf[32];
    char* p = buf;
    uint32_t first = kFirstOctets[Below(std::size(kFirstOctets))];
    p = PutUint(p, first);
    *p++ = '.';
    p = PutUint(p, first == 172 ? 16 + Below(16) : Below(256));
    *p++ = '.';
    p = PutUint(p, Below(256));
    *p++ = '.';
    p = PutUint(p, 1 + Below(254));
    client_ips_.emplace_back(buf, p);
  }
  hosts_.reserve(24);
  for (int i = 0; i < 24; ++i) {
    char buf[32];
    char* p = Put(buf, i < 12 ? SV("web-") : SV("app-"));
    p = PutUintPad(p, static_cast<uint64_t>(i % 12 + 1), 2);
    hosts_.emplace_back(buf, p);
  }
}

uint64_t LogGenerator::Next() {
  // xoshiro256**
  const uint64_t result = Rotl(state_[1] * 5, 7) * 9;
  const uint64_t t = state_[1] << 17;
  state_[2] ^= state_[0];
  state_[3] ^= state_[1];
  state_[1] ^= state_[2];
  state_[0] ^= state_[3];
  state_[2] ^= t;
  state_[3] = Rotl(state_[3], 45);
  return result;
}

uint32_t LogGenerator::Below(uint32_t n) {
  return static_cast<uint32_t>(((Next() >> 32) * static_cast<uint64_t>(n)) >> 32);
}

uint32_t LogGenerator::Skewed(uint32_t n) {
  // u^3 with u uniform in [0,1): P(index < n/8) = 1/2.
  const uint64_t u = Next() >> 43;  // 21 bits
  const uint64_t cube = (u * u >> 21) * u >> 21;
  return static_cast<uint32_t>((cube * n) >> 21);
}

// kind 0: "[10/Oct/2023:13:55:36 +0000]"; kind 1: "2023-10-10T13:55:36".
const std::string& LogGenerator::SecondStamp(int64_t second, int kind) {
  if (cached_second_[kind] == second) return cached_stamp_[kind];
  cached_second_[kind] = second;
  const int64_t days = FloorDiv(second, 86400);
  const int64_t sod = second - days * 86400;
  int64_t y;
  unsigned m, d;
  CivilFromDays(days, &y, &m, &d);
  char buf[64];
  char* p = buf;
  const uint64_t yy = static_cast<uint64_t>(y < 0 ? 0 : y);
  if (kind == 0) {
    *p++ = '[';
    p = PutUintPad(p, d, 2);
    *p++ = '/';
    p = Put(p, kMonths[m - 1]);
    *p++ = '/';
    p = PutUintPad(p, yy, 4);
    *p++ = ':';
  } else {
    p = PutUintPad(p, yy, 4);
    *p++ = '-';
    p = PutUintPad(p, m, 2);
    *p++ = '-';
    p = PutUintPad(p, d, 2);
    *p++ = 'T';
  }
  p = PutUintPad(p, static_cast<uint64_t>(sod / 3600), 2);
  *p++ = ':';
  p = PutUintPad(p, static_cast<uint64_t>(sod / 60 % 60), 2);
  *p++ = ':';
  p = PutUintPad(p, static_cast<uint64_t>(sod % 60), 2);
  if (kind == 0) p = Put(p, " +0000]");
  cached_stamp_[kind].assign(buf, p);
  return cached_stamp_[kind];
}

size_t LogGenerator::WriteLine(char* dst) {
  const int64_t ms =
      options_.start_ms +
      static_cast<int64_t>(std::floor(static_cast<double>(lines_) * 1000.0 / options_.rate));
  ++lines_;
  const bool needle = options_.needle_every != 0 && lines_ % options_.needle_every == 0;
  if (needle) ++needles_;
  char* p = dst;
  switch (options_.format) {
    case LogFormat::kApache:
      p = WriteApache(p, needle, ms);
      break;
    case LogFormat::kJson:
      p = WriteJson(p, needle, ms);
      break;
    case LogFormat::kSyslog:
      p = WriteSyslog(p, needle, ms);
      break;
  }
  *p++ = '\n';
  return static_cast<size_t>(p - dst);
}

void LogGenerator::AppendLine(std::string* out) {
  const size_t old = out->size();
  out->resize(old + MaxLineBytes());
  const size_t n = WriteLine(out->data() + old);
  out->resize(old + n);
}

char* LogGenerator::WriteApache(char* p, bool needle, int64_t ms) {
  p = Put(p, client_ips_[Skewed(static_cast<uint32_t>(client_ips_.size()))]);
  p = Put(p, " - ");
  p = Put(p, Below(100) < 5 ? kUsers[Below(std::size(kUsers))] : SV("-"));
  *p++ = ' ';
  p = Put(p, SecondStamp(FloorDiv(ms, 1000), 0));
  p = Put(p, " \"");
  SV method = PickWeighted(kMethods, Below(1000));
  SV status = PickWeighted(kStatuses, Below(1000));
  uint64_t size_lo = 200, size_span = 4000;
  p = Put(p, method);
  *p++ = ' ';
  if (needle) {
    p = Put(p, "/search?q=");
    p = Put(p, options_.needle);
    p = Put(p, "&page=1");
  } else {
    switch (Below(10)) {
      case 0:
        p = Put(p, kStaticPages[Skewed(std::size(kStaticPages))]);
        size_lo = 300;
        size_span = 30000;
        break;
      case 1:
        p = Put(p, "/static/js/app.");
        p = PutHex(p, 0x5f3a9c00u + Below(8), 8);
        p = Put(p, ".js");
        size_lo = 40000;
        size_span = 400000;
        break;
      case 2:
        p = Put(p, "/static/css/main.");
        p = PutHex(p, 0x1b7e4400u + Below(4), 8);
        p = Put(p, ".css");
        size_lo = 8000;
        size_span = 60000;
        break;
      case 3:
        p = Put(p, "/images/products/");
        p = PutUint(p, Skewed(5000) + 1000);
        p = Put(p, Below(4) == 0 ? SV(".png") : SV(".jpg"));
        size_lo = 5000;
        size_span = 500000;
        break;
      case 4:
        p = Put(p, "/api/v1/users/");
        p = PutUint(p, Skewed(100000) + 1);
        break;
      case 5:
        p = Put(p, "/api/v1/orders/");
        p = PutUint(p, 100000 + Below(900000));
        p = Put(p, "/items");
        break;
      case 6:
        p = Put(p, "/api/v1/search?q=");
        p = Put(p, kWords[Skewed(std::size(kWords))]);
        p = Put(p, "&page=");
        p = PutUint(p, 1 + Skewed(20));
        break;
      case 7:
        p = Put(p, "/products/");
        p = Put(p, kWords[Skewed(std::size(kWords))]);
        *p++ = '-';
        p = PutUint(p, Skewed(10000));
        size_lo = 10000;
        size_span = 90000;
        break;
      case 8:
        p = Put(p, "/blog/");
        p = PutUint(p, 2019 + Below(6));
        *p++ = '/';
        p = PutUintPad(p, 1 + Below(12), 2);
        *p++ = '/';
        p = Put(p, kSlugs[Below(std::size(kSlugs))]);
        size_lo = 12000;
        size_span = 40000;
        break;
      default:
        p = Put(p, "/api/v1/cart");
        size_lo = 100;
        size_span = 2000;
        break;
    }
  }
  p = Put(p, " HTTP/1.1\" ");
  p = Put(p, status);
  *p++ = ' ';
  if (status == "304" || method == "HEAD") {
    *p++ = '-';
  } else if (status[0] != '2') {
    p = PutUint(p, 150 + Below(400));
  } else {
    p = PutUint(p, size_lo + Below(static_cast<uint32_t>(size_span)));
  }
  p = Put(p, " \"");
  p = Put(p, Below(100) < 55 ? SV("-") : kReferers[Skewed(std::size(kReferers))]);
  p = Put(p, "\" \"");
  p = Put(p, kUserAgents[Skewed(std::size(kUserAgents))]);
  *p++ = '"';
  return p;
}

char* LogGenerator::WriteJson(char* p, bool needle, int64_t ms) {
  p = Put(p, "{\"timestamp\":\"");
  p = Put(p, SecondStamp(FloorDiv(ms, 1000), 1));
  *p++ = '.';
  p = PutUintPad(p, static_cast<uint64_t>(ms - FloorDiv(ms, 1000) * 1000), 3);
  p = Put(p, "Z\",\"level\":\"");
  SV level = PickWeighted(kLevels, Below(1000));
  p = Put(p, level);
  p = Put(p, "\",\"service\":\"");
  const uint32_t service = Skewed(std::size(kServices));
  p = Put(p, kServices[service]);
  p = Put(p, "\",\"host\":\"");
  p = Put(p, hosts_[12 + Below(12)]);
  p = Put(p, "\",\"trace_id\":\"");
  p = PutHex(p, Next(), 16);
  p = PutHex(p, Next(), 16);
  p = Put(p, "\",\"span_id\":\"");
  p = PutHex(p, Next(), 16);
  p = Put(p, "\",\"duration_ms\":");
  const uint32_t duration = 1 + Skewed(level == "ERROR" ? 30000 : 2000);
  p = PutUint(p, duration);
  p = Put(p, ",\"message\":\"");
  if (needle) {
    p = Put(p, options_.needle);
    *p++ = ' ';
  }
  if (level == "ERROR") {
    switch (Below(3)) {
      case 0:
        p = Put(p, "connection refused to db-");
        p = PutUint(p, 1 + Below(3));
        p = Put(p, ":5432, retrying in ");
        p = PutUint(p, 50 * (1 + Below(10)));
        p = Put(p, "ms (attempt ");
        p = PutUint(p, 1 + Below(5));
        p = Put(p, "/5)");
        break;
      case 1:
        p = Put(p, "failed to parse request body: unexpected token at position ");
        p = PutUint(p, Below(4096));
        break;
      default:
        p = Put(p, "upstream timeout after ");
        p = PutUint(p, duration);
        p = Put(p, "ms calling ");
        p = Put(p, kServices[Below(std::size(kServices))]);
        break;
    }
  } else {
    switch (Below(6)) {
      case 0:
      case 1:
        p = Put(p, "request completed method=");
        p = Put(p, PickWeighted(kMethods, Below(1000)));
        p = Put(p, " path=");
        p = Put(p, kApiPaths[Skewed(std::size(kApiPaths))]);
        p = Put(p, " status=");
        p = Put(p, PickWeighted(kStatuses, Below(1000)));
        break;
      case 2:
        p = Put(p, "user ");
        p = PutUint(p, Skewed(100000) + 1);
        p = Put(p, " logged in from ");
        p = Put(p, client_ips_[Skewed(static_cast<uint32_t>(client_ips_.size()))]);
        break;
      case 3:
        p = Put(p, "payment authorized order_id=");
        p = PutUint(p, 100000 + Below(900000));
        p = Put(p, " amount=");
        p = PutUint(p, 1 + Skewed(2000));
        *p++ = '.';
        p = PutUintPad(p, Below(100), 2);
        p = Put(p, " currency=");
        p = Put(p, kCurrencies[Skewed(std::size(kCurrencies))]);
        break;
      case 4:
        p = Put(p, "cache miss key=product:");
        p = PutUint(p, Skewed(10000));
        break;
      default:
        p = Put(p, "published ");
        p = PutUint(p, 1 + Below(64));
        p = Put(p, " events to topic ");
        p = Put(p, kTopics[Below(std::size(kTopics))]);
        break;
    }
  }
  p = Put(p, "\"}");
  return p;
}

char* LogGenerator::WriteSyslog(char* p, bool needle, int64_t ms) {
  const uint32_t app = Skewed(std::size(kSyslogApps));
  // facility: auth(4) for sshd/sudo, cron(9), kern(0), daemon(3), mail(2), local7(23) for nginx.
  static constexpr uint32_t kFacility[] = {4, 9, 0, 3, 2, 4, 23};
  const uint32_t severity = Below(100) < 85 ? 6 : (Below(2) == 0 ? 4 : 3);
  *p++ = '<';
  p = PutUint(p, kFacility[app] * 8 + severity);
  p = Put(p, ">1 ");
  p = Put(p, SecondStamp(FloorDiv(ms, 1000), 1));
  *p++ = '.';
  p = PutUintPad(p, static_cast<uint64_t>(ms - FloorDiv(ms, 1000) * 1000), 3);
  p = Put(p, "Z ");
  p = Put(p, hosts_[Below(12)]);
  p = Put(p, ".example.com ");
  p = Put(p, kSyslogApps[app]);
  *p++ = ' ';
  p = PutUint(p, 300 + Skewed(60000));
  *p++ = ' ';
  p = Put(p, kMsgIds[Below(std::size(kMsgIds))]);
  *p++ = ' ';
  if (Below(10) < 3) {
    p = Put(p, "[meta@32473 seq=\"");
    p = PutUint(p, lines_);
    p = Put(p, "\" region=\"");
    p = Put(p, kRegions[Below(std::size(kRegions))]);
    p = Put(p, "\"] ");
  } else {
    p = Put(p, "- ");
  }
  if (needle) {
    p = Put(p, options_.needle);
    *p++ = ' ';
  }
  const SV user = kDeployUsers[Skewed(std::size(kDeployUsers))];
  const SV ip = client_ips_[Skewed(static_cast<uint32_t>(client_ips_.size()))];
  switch (app) {
    case 0:  // sshd
      if (severity == 6) {
        p = Put(p, "Accepted publickey for ");
        p = Put(p, user);
        p = Put(p, " from ");
        p = Put(p, ip);
        p = Put(p, " port ");
        p = PutUint(p, 32768 + Below(28000));
        p = Put(p, " ssh2: ED25519 SHA256:");
        p = PutHex(p, Next(), 16);
      } else {
        p = Put(p, "Failed password for invalid user ");
        p = Put(p, user);
        p = Put(p, " from ");
        p = Put(p, ip);
        p = Put(p, " port ");
        p = PutUint(p, 32768 + Below(28000));
        p = Put(p, " ssh2");
      }
      break;
    case 1:  // cron
      p = Put(p, "(root) CMD (/usr/local/bin/backup.sh --incremental --target s3://backups/");
      p = Put(p, hosts_[Below(12)]);
      *p++ = ')';
      break;
    case 2:  // kernel
      *p++ = '[';
      p = PutUint(p, lines_ / 7 + 1000);
      *p++ = '.';
      p = PutUintPad(p, Below(1000000), 6);
      p = Put(p, severity == 6 ? SV("] eth0: renamed from veth")
                               : SV("] Out of memory: Killed process "));
      p = PutUint(p, 1000 + Below(60000));
      break;
    case 3:  // systemd
      if (severity == 6) {
        p = Put(p, "Started Session ");
        p = PutUint(p, lines_ % 100000);
        p = Put(p, " of User ");
        p = Put(p, user);
        *p++ = '.';
      } else {
        p = Put(p, "nginx.service: Main process exited, code=exited, status=1/FAILURE");
      }
      break;
    case 4:  // postfix
      p = PutHex(p, Next(), 10);
      p = Put(p, ": to=<");
      p = Put(p, user);
      p = Put(p, "@example.com>, relay=mx.example.com[");
      p = Put(p, ip);
      p = Put(p, "]:25, delay=0.");
      p = PutUint(p, Below(100));
      p = Put(p, severity == 6 ? SV(", status=sent (250 2.0.0 OK)")
                               : SV(", status=deferred (connection timed out)"));
      break;
    case 5:  // sudo
      p = Put(p, user);
      p = Put(p, " : TTY=pts/");
      p = PutUint(p, Below(8));
      p = Put(p, " ; PWD=/home/");
      p = Put(p, user);
      p = Put(p, " ; USER=root ; COMMAND=/usr/bin/systemctl restart ");
      p = Put(p, kServices[Below(std::size(kServices))]);
      break;
    default:  // nginx error log
      p = Put(p,
              "upstream timed out (110: Connection timed out) while reading response header, "
              "client: ");
      p = Put(p, ip);
      p = Put(p, ", server: www.example.com, request: \"GET ");
      p = Put(p, kApiPaths[Below(std::size(kApiPaths))]);
      p = Put(p, " HTTP/1.1\"");
      break;
  }
  return p;
}

}  // namespace sediment::bench
