// parseLEEF(field=@rawstring, prefix="leef.ext.", headerprefix="leef.", delimiter): a Log Event
// Extended Format (LEEF 1.0 or 2.0) message becomes fields. A per-record stage.
//
// Any text before the marker `LEEF:` (a syslog header) is skipped. The header values, separated
// by `|`, become <headerprefix>version, vendor, product, product_version, event_id and, for 2.0,
// delimiter (LogScale does not list its names; these follow IBM's LEEF specification). The
// attributes after the header are `key=value` pairs separated by the delimiter: for 1.0 the
// `delimiter` parameter, by default a tab; for 2.0 the header's delimiter field, one character or
// its code as hex (`^`, `0x5E`, `x5E`), a tab when empty. Each pair (split at its first `=`, an
// empty key or a pair without `=` skipped) becomes <prefix><key>. A text without the marker or
// with too few header values is left as it is.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/coding.h"
#include "query/functions/list.h"
#include "query/functions/transforms.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "field", .type = Type::kField, .unnamed = true, .default_value = "@rawstring"},
    {.name = "prefix", .type = Type::kString, .default_value = "\"leef.ext.\""},
    {.name = "headerprefix", .type = Type::kString, .default_value = "\"leef.\""},
    {.name = "delimiter", .type = Type::kString},
    {.name = "keeplabels", .type = Type::kUnsupported},
    {.name = "labelprefix", .type = Type::kUnsupported},
    {.name = "parsetime", .type = Type::kUnsupported},
    {.name = "timezone", .type = Type::kUnsupported},
};

constexpr const char* kHeader[] = {"version",         "vendor",   "product",
                                   "product_version", "event_id", "delimiter"};

// The delimiter a LEEF 2.0 header field stands for: one character (UTF-8), or `0x`/`x` and 1-4
// hex digits; "" when it is neither.
std::string DelimiterOf(std::string_view h) {
  if (h.empty()) return "\t";
  std::string_view hex;
  if (h.starts_with("0x") || h.starts_with("0X")) {
    hex = h.substr(2);
  } else if (h.size() > 1 && (h[0] == 'x' || h[0] == 'X')) {
    hex = h.substr(1);
  }
  if (!hex.empty()) {
    if (hex.size() > 4) return {};
    uint32_t cp = 0;
    for (char ch : hex) {
      int d = ch >= '0' && ch <= '9'   ? ch - '0'
              : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
              : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                       : -1;
      if (d < 0) return {};
      cp = cp * 16 + static_cast<uint32_t>(d);
    }
    if (cp == 0 || (cp >= 0xD800 && cp <= 0xDFFF)) return {};
    std::string out;
    AppendUtf8(cp, &out);
    return out;
  }
  // One character: its UTF-8 sequence is the whole field.
  size_t len = 1;
  while (len < h.size() && (static_cast<unsigned char>(h[len]) & 0xC0) == 0x80) ++len;
  return len == h.size() ? std::string(h) : std::string();
}

bool Build(Call& c, Stage* st) {
  std::string field = c.String("field");
  std::string prefix = c.String("prefix");
  std::string headerprefix = c.String("headerprefix");
  std::string delimiter = "\t";
  if (c.Given("delimiter")) {
    delimiter = c.String("delimiter");
    size_t len = delimiter.empty() ? 0 : 1;
    while (len < delimiter.size() && (static_cast<unsigned char>(delimiter[len]) & 0xC0) == 0x80) {
      ++len;
    }
    if (delimiter.empty() || len != delimiter.size()) {
      c.BadParam("delimiter", "one character");
      return false;
    }
  }
  std::vector<std::string> touched = {field};
  SetRecordFunction(
      st,
      [field, prefix, headerprefix, delimiter](Record& r) {
        std::string scratch;
        std::optional<std::string_view> v = r.Get(field, &scratch);
        if (!v) return true;
        const std::string text(*v);  // the fields set below may replace `field`
        const size_t marker = text.find("LEEF:");
        if (marker == std::string::npos) return true;
        std::string_view s = std::string_view(text).substr(marker + 5);
        const bool v2 = s.starts_with("2");
        const size_t count = v2 ? 6 : 5;
        std::vector<std::string_view> header;
        while (header.size() < count) {
          const size_t bar = s.find('|');
          if (bar == std::string_view::npos) return true;
          header.push_back(s.substr(0, bar));
          s.remove_prefix(bar + 1);
        }
        std::string delim = v2 ? DelimiterOf(header[5]) : delimiter;
        if (delim.empty()) return true;
        for (size_t i = 0; i < header.size(); ++i) {
          r.Set(headerprefix + kHeader[i], Value(std::string(header[i])));
        }
        while (!s.empty()) {
          size_t end = s.find(delim);
          std::string_view pair = s.substr(0, end);
          s = end == std::string_view::npos ? std::string_view() : s.substr(end + delim.size());
          const size_t eq = pair.find('=');
          if (eq == std::string_view::npos || eq == 0) continue;
          r.Set(prefix + std::string(pair.substr(0, eq)), Value(std::string(pair.substr(eq + 1))));
        }
        return true;
      },
      std::move(touched));
  return true;
}

}  // namespace

const Function kParseLEEF = {
    .name = "parseLEEF",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "a LEEF 1.0 or 2.0 message as fields",
    .stage = &Build,
};

}  // namespace sediment::query::functions
