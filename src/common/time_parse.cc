#include "common/time_parse.h"

#include <cstdio>

namespace sediment {

int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

namespace {
bool Digits(std::string_view s, size_t pos, size_t n, int* out) {
  if (pos + n > s.size()) return false;
  int v = 0;
  for (size_t i = 0; i < n; ++i) {
    char c = s[pos + i];
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return true;
}
}  // namespace

std::optional<int64_t> ParseIso8601Millis(std::string_view s) {
  int y, mo, d, h, mi, sec = 0;
  if (!Digits(s, 0, 4, &y) || s.size() < 16 || s[4] != '-' || !Digits(s, 5, 2, &mo) ||
      s[7] != '-' || !Digits(s, 8, 2, &d) || (s[10] != 'T' && s[10] != 't' && s[10] != ' ') ||
      !Digits(s, 11, 2, &h) || s[13] != ':' || !Digits(s, 14, 2, &mi)) {
    return std::nullopt;
  }
  size_t pos = 16;
  if (pos < s.size() && s[pos] == ':') {
    if (!Digits(s, pos + 1, 2, &sec)) return std::nullopt;
    pos += 3;
  }
  int ms = 0;
  if (pos < s.size() && (s[pos] == '.' || s[pos] == ',')) {
    ++pos;
    size_t start = pos;
    int scale = 100;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
      ms += (s[pos] - '0') * scale;
      scale /= 10;
      ++pos;
    }
    if (pos == start) return std::nullopt;
  }
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60) return std::nullopt;
  int64_t offset_min = 0;
  if (pos < s.size()) {
    char c = s[pos];
    if ((c == 'Z' || c == 'z') && pos + 1 == s.size()) {
      pos++;
    } else if (c == '+' || c == '-') {
      int oh, om = 0;
      if (!Digits(s, pos + 1, 2, &oh)) return std::nullopt;
      size_t p = pos + 3;
      if (p < s.size() && s[p] == ':') ++p;
      if (p < s.size()) {
        if (!Digits(s, p, 2, &om)) return std::nullopt;
        p += 2;
      }
      if (p != s.size() || oh > 23 || om > 59) return std::nullopt;
      offset_min = (oh * 60 + om) * (c == '+' ? 1 : -1);
      pos = p;
    } else {
      return std::nullopt;
    }
  }
  int64_t days = DaysFromCivil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d));
  int64_t secs = days * 86400 + h * 3600 + mi * 60 + sec - offset_min * 60;
  return secs * 1000 + ms;
}

std::string FormatIso8601Millis(int64_t ms) {
  int64_t secs = ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000);
  int64_t rem_ms = ms - secs * 1000;
  int64_t days = secs >= 0 ? secs / 86400 : -((-secs + 86399) / 86400);
  int64_t sod = secs - days * 86400;
  // civil_from_days
  int64_t z = days + 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const unsigned doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  int64_t y = static_cast<int64_t>(yoe) + era * 400;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  const unsigned d = doy - (153 * mp + 2) / 5 + 1;
  const unsigned m = mp < 10 ? mp + 3 : mp - 9;
  y += m <= 2;
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04lld-%02u-%02uT%02lld:%02lld:%02lld.%03lldZ",
                static_cast<long long>(y), m, d, static_cast<long long>(sod / 3600),
                static_cast<long long>(sod / 60 % 60), static_cast<long long>(sod % 60),
                static_cast<long long>(rem_ms));
  return buf;
}

}  // namespace sediment
