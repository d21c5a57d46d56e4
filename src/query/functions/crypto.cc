// crypto:md5(field, as=_md5), crypto:sha1(field, as=_sha1), crypto:sha256(field, as=_sha256):
// the cryptographic digest of the concatenated UTF-8 values of one or more fields, as lower-case
// hex. A per-record stage.
//
// A missing field counts as the empty string (as LogScale documents), so the digest is always
// set: crypto:sha256(x) of an event without x is the SHA-256 of "". The digests are OpenSSL's
// (EVP), identical to LogScale's and to any other implementation.
#include <openssl/evp.h>

#include <string>
#include <vector>

#include "query/functions/list.h"
#include "query/functions/transforms.h"

namespace sediment::query::functions {
namespace {

enum class Digest { kMd5, kSha1, kSha256 };

const EVP_MD* DigestOf(Digest d) {
  switch (d) {
    case Digest::kMd5:
      return EVP_md5();
    case Digest::kSha1:
      return EVP_sha1();
    case Digest::kSha256:
      return EVP_sha256();
  }
  return EVP_sha256();
}

// The hex digest of `data`; empty when OpenSSL fails (it does not for these fixed digests).
std::string HexDigest(const EVP_MD* md, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), out, &len, md, nullptr) != 1) return {};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * len);
  for (unsigned int i = 0; i < len; ++i) {
    hex.push_back(kHex[out[i] >> 4]);
    hex.push_back(kHex[out[i] & 0xf]);
  }
  return hex;
}

constexpr Param kMd5Params[] = {
    {.name = "field", .type = Type::kFields, .unnamed = true, .required = true},
    {.name = "as", .type = Type::kField, .default_value = "_md5"},
};
constexpr Param kSha1Params[] = {
    {.name = "field", .type = Type::kFields, .unnamed = true, .required = true},
    {.name = "as", .type = Type::kField, .default_value = "_sha1"},
};
constexpr Param kSha256Params[] = {
    {.name = "field", .type = Type::kFields, .unnamed = true, .required = true},
    {.name = "as", .type = Type::kField, .default_value = "_sha256"},
};

template <Digest D>
bool Build(Call& c, Stage* st) {
  std::vector<std::string> fields = c.Fields("field");
  std::string as = c.String("as");
  std::vector<std::string> touched = fields;
  touched.push_back(as);
  const EVP_MD* md = DigestOf(D);
  SetRecordFunction(
      st,
      [fields, as, md](Record& r) {
        std::string data, scratch;
        for (const std::string& f : fields) {
          if (std::optional<std::string_view> v = r.Get(f, &scratch)) data += *v;
        }
        std::string hex = HexDigest(md, data);
        if (!hex.empty()) r.Set(as, Value(std::move(hex)));
        return true;
      },
      std::move(touched));
  return true;
}

}  // namespace

const Function kCryptoMd5 = {
    .name = "crypto:md5",
    .kind = Kind::kTransform,
    .params = kMd5Params,
    .doc = "the MD5 digest of field values, as hex",
    .stage = &Build<Digest::kMd5>,
};
const Function kCryptoSha1 = {
    .name = "crypto:sha1",
    .kind = Kind::kTransform,
    .params = kSha1Params,
    .doc = "the SHA-1 digest of field values, as hex",
    .stage = &Build<Digest::kSha1>,
};
const Function kCryptoSha256 = {
    .name = "crypto:sha256",
    .kind = Kind::kTransform,
    .params = kSha256Params,
    .doc = "the SHA-256 digest of field values, as hex",
    .stage = &Build<Digest::kSha256>,
};

}  // namespace sediment::query::functions
