// urlDecode(field, as), base64Decode(field, as=_base64Decode, charset=UTF-8) and
// parseHexString(field, as=_parsehexstring, charset=UTF-8): a field's text decoded into a field.
// Per-record stages.
//
// urlDecode: %XX escapes become their bytes and `+` a space (as Java's URLDecoder); a `%` not
// followed by two hex digits is kept as it is. Without `as` the field is replaced.
// base64Decode: the standard and the URL-safe alphabets, padding optional; characters outside
// the alphabet are skipped; a length that is not a whole encoding (one character left over) sets
// nothing. The bytes are read in `charset`: UTF-8 (malformed sequences become U+FFFD),
// ISO-8859-1, UTF-16BE or UTF-16LE.
// parseHexString: a leading `0x` or `16#` is dropped and every character that is not a hex digit
// (either case) skipped (LogScale: "0x4 865 6c6c..." decodes); the bytes are read in `charset` as
// above; an odd number of digits sets nothing.
#include <string>
#include <vector>

#include "common/coding.h"
#include "query/functions/list.h"
#include "query/functions/transforms.h"
#include "query/text_util.h"

namespace sediment::query::functions {
namespace {

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string UrlDecode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out.push_back(' ');
    } else if (s[i] == '%' && i + 2 < s.size() && HexDigit(s[i + 1]) >= 0 &&
               HexDigit(s[i + 2]) >= 0) {
      out.push_back(static_cast<char>(HexDigit(s[i + 1]) * 16 + HexDigit(s[i + 2])));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

int Base64Digit(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+' || c == '-') return 62;
  if (c == '/' || c == '_') return 63;
  return -1;
}

std::optional<std::string> Base64Bytes(std::string_view s) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0, chars = 0;
  for (char c : s) {
    if (c == '=') break;
    const int d = Base64Digit(c);
    if (d < 0) continue;
    acc = (acc << 6) | static_cast<uint32_t>(d);
    bits += 6;
    ++chars;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  if (chars % 4 == 1) return std::nullopt;
  return out;
}

enum class Charset { kUtf8, kLatin1, kUtf16Be, kUtf16Le };

// Well-formed UTF-8 kept, every malformed byte replaced by U+FFFD.
std::string ValidUtf8(std::string_view b) {
  std::string out;
  for (size_t i = 0; i < b.size();) {
    const unsigned char c = static_cast<unsigned char>(b[i]);
    size_t len = c < 0x80                  ? 1
                 : (c >= 0xC2 && c < 0xE0) ? 2
                 : (c >= 0xE0 && c < 0xF0) ? 3
                 : (c >= 0xF0 && c < 0xF5) ? 4
                                           : 0;
    bool ok = len > 0 && i + len <= b.size();
    for (size_t k = 1; ok && k < len; ++k)
      ok = (static_cast<unsigned char>(b[i + k]) & 0xC0) == 0x80;
    if (ok && len == 3) {
      const unsigned char c1 = static_cast<unsigned char>(b[i + 1]);
      ok = !(c == 0xE0 && c1 < 0xA0) && !(c == 0xED && c1 >= 0xA0);
    }
    if (ok && len == 4) {
      const unsigned char c1 = static_cast<unsigned char>(b[i + 1]);
      ok = !(c == 0xF0 && c1 < 0x90) && !(c == 0xF4 && c1 >= 0x90);
    }
    if (ok) {
      out.append(b.substr(i, len));
      i += len;
    } else {
      AppendUtf8(0xFFFD, &out);
      ++i;
    }
  }
  return out;
}

std::string Decode(std::string_view b, Charset cs) {
  std::string out;
  switch (cs) {
    case Charset::kUtf8:
      return ValidUtf8(b);
    case Charset::kLatin1:
      for (char c : b) AppendUtf8(static_cast<unsigned char>(c), &out);
      return out;
    case Charset::kUtf16Be:
    case Charset::kUtf16Le: {
      const bool be = cs == Charset::kUtf16Be;
      auto unit = [&](size_t i) -> uint32_t {
        const uint32_t a = static_cast<unsigned char>(b[i]),
                       c = static_cast<unsigned char>(b[i + 1]);
        return be ? (a << 8 | c) : (c << 8 | a);
      };
      size_t i = 0;
      for (; i + 1 < b.size(); i += 2) {
        const uint32_t u = unit(i);
        if (u >= 0xD800 && u < 0xDC00 && i + 3 < b.size()) {
          const uint32_t lo = unit(i + 2);
          if (lo >= 0xDC00 && lo < 0xE000) {
            AppendUtf8(0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00), &out);
            i += 2;
            continue;
          }
        }
        AppendUtf8(u >= 0xD800 && u < 0xE000 ? 0xFFFD : u, &out);
      }
      if (i < b.size()) AppendUtf8(0xFFFD, &out);
      return out;
    }
  }
  return out;
}

constexpr Param kUrlParams[] = {
    {.name = "field", .type = Type::kField, .unnamed = true, .required = true},
    {.name = "as", .type = Type::kField},
};

bool BuildUrl(Call& c, Stage* st) {
  std::string field = c.String("field");
  std::string as = c.Given("as") ? c.String("as") : field;
  std::vector<std::string> touched = {field, as};
  SetRecordFunction(
      st,
      [field, as](Record& r) {
        std::string scratch;
        if (std::optional<std::string_view> v = r.Get(field, &scratch)) {
          std::string decoded = UrlDecode(*v);
          r.Set(as, Value(std::move(decoded)));
        }
        return true;
      },
      std::move(touched));
  return true;
}

constexpr Param kBase64Params[] = {
    {.name = "field", .type = Type::kField, .unnamed = true, .required = true},
    {.name = "as", .type = Type::kField, .default_value = "_base64Decode"},
    {.name = "charset", .type = Type::kString, .default_value = "UTF-8"},
};

// The call's `charset`; false (error recorded) when it is none of the four.
bool CharsetOf(Call& c, Charset* charset) {
  const std::string cs = Lower(c.String("charset"));
  if (cs == "utf-8" || cs == "utf8") {
    *charset = Charset::kUtf8;
  } else if (cs == "iso-8859-1" || cs == "latin1") {
    *charset = Charset::kLatin1;
  } else if (cs == "utf-16be") {
    *charset = Charset::kUtf16Be;
  } else if (cs == "utf-16le") {
    *charset = Charset::kUtf16Le;
  } else {
    c.BadParam("charset", "UTF-8, ISO-8859-1, UTF-16BE or UTF-16LE");
    return false;
  }
  return true;
}

// base64Decode() and parseHexString(): `field`'s bytes as `bytes_of` reads them, decoded from
// `charset` into `as`; a value that does not read sets nothing.
bool BuildBytesDecoder(Call& c, Stage* st,
                       std::optional<std::string> (*bytes_of)(std::string_view)) {
  Charset charset;
  if (!CharsetOf(c, &charset)) return false;
  std::string field = c.String("field");
  std::string as = c.String("as");
  std::vector<std::string> touched = {field, as};
  SetRecordFunction(
      st,
      [field, as, charset, bytes_of](Record& r) {
        std::string scratch;
        std::optional<std::string_view> v = r.Get(field, &scratch);
        if (!v) return true;
        std::optional<std::string> bytes = bytes_of(*v);
        if (bytes) r.Set(as, Value(Decode(*bytes, charset)));
        return true;
      },
      std::move(touched));
  return true;
}

bool BuildBase64(Call& c, Stage* st) { return BuildBytesDecoder(c, st, &Base64Bytes); }

constexpr Param kHexParams[] = {
    {.name = "field", .type = Type::kField, .unnamed = true, .required = true},
    {.name = "as", .type = Type::kField, .default_value = "_parsehexstring"},
    {.name = "charset", .type = Type::kString, .default_value = "UTF-8"},
};

// The bytes of the hex digits of `s` (a leading `0x` or `16#` dropped, every other character
// that is not a hex digit skipped); nullopt for an odd number of digits.
std::optional<std::string> HexBytes(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  if (s.starts_with("0x") || s.starts_with("0X")) {
    s.remove_prefix(2);
  } else if (s.starts_with("16#")) {
    s.remove_prefix(3);
  }
  std::string out;
  int high = -1;
  for (char ch : s) {
    const int d = HexDigit(ch);
    if (d < 0) continue;
    if (high < 0) {
      high = d;
    } else {
      out.push_back(static_cast<char>(high * 16 + d));
      high = -1;
    }
  }
  if (high >= 0) return std::nullopt;
  return out;
}

bool BuildHex(Call& c, Stage* st) { return BuildBytesDecoder(c, st, &HexBytes); }

}  // namespace

const Function kUrlDecode = {
    .name = "urlDecode",
    .kind = Kind::kTransform,
    .params = kUrlParams,
    .doc = "URL-decodes a field",
    .stage = &BuildUrl,
};

const Function kBase64Decode = {
    .name = "base64Decode",
    .kind = Kind::kTransform,
    .params = kBase64Params,
    .doc = "Base64-decodes a field",
    .stage = &BuildBase64,
};

const Function kParseHexString = {
    .name = "parseHexString",
    .kind = Kind::kTransform,
    .params = kHexParams,
    .doc = "the bytes of a hex string read as text",
    .stage = &BuildHex,
};

}  // namespace sediment::query::functions
