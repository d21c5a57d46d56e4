// base64Encode(field, as=_base64Encode) and urlEncode(field, as=_urlencode): a field's text
// encoded into a field. Per-record stages; a missing field sets nothing.
//
// base64Encode: the UTF-8 bytes of the text in the standard alphabet with `=` padding (RFC 4648,
// section 4), so that base64Decode() gives the text back. urlEncode: as Java's URLEncoder with
// UTF-8, which LogScale's examples show: letters, digits and `.`, `-`, `*`, `_` are kept, a space
// becomes `+`, every other byte `%XX` (upper-case hex): `tail(1) | count()` becomes
// `tail%281%29+%7C+count%28%29`. Not supported: urlEncode's `type` (its values are not
// documented).
#include <string>
#include <string_view>
#include <vector>

#include "query/functions/field_mapper.h"
#include "query/functions/list.h"
#include "query/functions/transforms.h"

namespace sediment::query::functions {
namespace {

std::string Base64(std::string_view in) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const uint32_t v = static_cast<uint32_t>(static_cast<unsigned char>(in[i])) << 16 |
                       static_cast<uint32_t>(static_cast<unsigned char>(in[i + 1])) << 8 |
                       static_cast<unsigned char>(in[i + 2]);
    out.push_back(kAlphabet[v >> 18]);
    out.push_back(kAlphabet[(v >> 12) & 63]);
    out.push_back(kAlphabet[(v >> 6) & 63]);
    out.push_back(kAlphabet[v & 63]);
  }
  if (i < in.size()) {
    uint32_t v = static_cast<uint32_t>(static_cast<unsigned char>(in[i])) << 16;
    if (i + 1 < in.size()) v |= static_cast<uint32_t>(static_cast<unsigned char>(in[i + 1])) << 8;
    out.push_back(kAlphabet[v >> 18]);
    out.push_back(kAlphabet[(v >> 12) & 63]);
    out.push_back(i + 1 < in.size() ? kAlphabet[(v >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

std::string UrlEncode(std::string_view in) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(in.size());
  for (char ch : in) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
        c == '-' || c == '*' || c == '_') {
      out.push_back(ch);
    } else if (c == ' ') {
      out.push_back('+');
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

constexpr Param kBase64Params[] = {
    {.name = "field", .type = Type::kField, .unnamed = true, .required = true},
    {.name = "as", .type = Type::kField, .default_value = "_base64Encode"},
};
constexpr Param kUrlParams[] = {
    {.name = "field", .type = Type::kField, .unnamed = true, .required = true},
    {.name = "as", .type = Type::kField, .default_value = "_urlencode"},
    {.name = "type", .type = Type::kUnsupported},
};

template <std::string (*Encode)(std::string_view)>
bool Build(Call& c, Stage* st) {
  return SetFieldMapper(c, st, Encode);
}

}  // namespace

const Function kBase64Encode = {
    .name = "base64Encode",
    .kind = Kind::kTransform,
    .params = kBase64Params,
    .doc = "Base64-encodes a field",
    .stage = &Build<&Base64>,
};

const Function kUrlEncode = {
    .name = "urlEncode",
    .kind = Kind::kTransform,
    .params = kUrlParams,
    .doc = "URL-encodes a field",
    .stage = &Build<&UrlEncode>,
};

}  // namespace sediment::query::functions
