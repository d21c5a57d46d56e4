// hashRewrite(field, salt, as, bits=256, hash=sha256, replaceInRawstring=true) and
// hashMatch(input, salt, field, bits=256, hash=sha256): a salted secure hash of a value, written
// into events by hashRewrite() and searched for by hashMatch(), which hashes its constant input
// the same way (so a query can find hashed values without knowing them).
//
// The hash of a value v: the first bits/8 bytes of SHA-256 (or SHA-512) of the salt's bytes
// followed by v's bytes, as lower-case hex (OpenSSL's EVP digests). Deviation: LogScale's `salt`
// names a secret configured on the server; sediment has no such store and uses the given text
// itself as the salt, and LogScale does not document its encoding of the digest, so hashes are
// sediment's own (hashMatch() finds exactly what hashRewrite() wrote).
//
// hashRewrite() is a per-record stage: the field's value is replaced by (or `as` set to) its hash;
// with replaceInRawstring every occurrence of the value in @rawstring is replaced by the hash too.
// A missing or empty field is left as it is. hashMatch() is a filter: with `field` the field's
// whole value must equal the hash (`ssn =~ hashMatch(...)` is the same), without it @rawstring
// must contain it (case-sensitively).
#include <openssl/evp.h>
#include <re2/re2.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "query/functions/list.h"
#include "query/functions/transforms.h"
#include "query/functions/util.h"

namespace sediment::query::functions {
namespace {

constexpr Param kRewriteParams[] = {
    {.name = "field", .type = Type::kField, .unnamed = true, .required = true},
    {.name = "salt", .type = Type::kString, .required = true},
    {.name = "as", .type = Type::kField},
    {.name = "bits", .type = Type::kLimit, .default_value = "256"},
    {.name = "hash", .type = Type::kString, .default_value = "sha256"},
    {.name = "replaceInRawstring", .type = Type::kBool, .default_value = "true"},
};
constexpr Param kMatchParams[] = {
    {.name = "input", .type = Type::kString, .unnamed = true, .required = true},
    {.name = "salt", .type = Type::kString, .required = true},
    {.name = "field", .type = Type::kField},
    {.name = "bits", .type = Type::kLimit, .default_value = "256"},
    {.name = "hash", .type = Type::kString, .default_value = "sha256"},
};

// The digest and the number of bytes kept, from the call's `hash` and `bits`.
struct Hasher {
  const EVP_MD* md = nullptr;
  size_t bytes = 32;
  std::string salt;

  std::string operator()(std::string_view value) const {
    std::string data = salt;
    data.append(value);
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (EVP_Digest(data.data(), data.size(), out, &len, md, nullptr) != 1) return {};
    static constexpr char kHex[] = "0123456789abcdef";
    std::string hex;
    for (size_t i = 0; i < bytes && i < len; ++i) {
      hex.push_back(kHex[out[i] >> 4]);
      hex.push_back(kHex[out[i] & 0xf]);
    }
    return hex;
  }
};

bool HasherOf(Call& c, Hasher* h) {
  const std::string& hash = c.String("hash");
  size_t max_bits = 0;
  if (hash == "sha256") {
    h->md = EVP_sha256();
    max_bits = 256;
  } else if (hash == "sha512") {
    h->md = EVP_sha512();
    max_bits = 512;
  } else {
    c.BadParam("hash", "sha256 or sha512");
    return false;
  }
  const int64_t bits = c.Limit("bits");
  if (bits < 8 || static_cast<size_t>(bits) > max_bits || bits % 8 != 0) {
    c.BadParam("bits", "a multiple of 8 from 8 to " + std::to_string(max_bits) + " for " + hash);
    return false;
  }
  h->bytes = static_cast<size_t>(bits / 8);
  h->salt = c.String("salt");
  if (h->salt.empty()) {
    c.BadParam("salt", "a non-empty salt");
    return false;
  }
  return true;
}

bool BuildRewrite(Call& c, Stage* st) {
  Hasher h;
  if (!HasherOf(c, &h)) return false;
  std::string field = c.String("field");
  std::string as = c.Given("as") ? c.String("as") : field;
  const bool raw = c.Bool("replaceInRawstring");
  SetRecordFunction(
      st,
      [h, field, as, raw](Record& r) {
        std::string scratch;
        std::optional<std::string_view> v = r.Get(field, &scratch);
        if (!v || v->empty()) return true;
        std::string value(*v);
        std::string hashed = h(value);
        if (raw) {
          std::string raw_scratch;
          if (std::optional<std::string_view> text = r.Get(kRawstringField, &raw_scratch)) {
            std::string out;
            size_t from = 0;
            for (size_t at = text->find(value); at != std::string_view::npos;
                 at = text->find(value, from)) {
              out.append(text->substr(from, at - from));
              out.append(hashed);
              from = at + value.size();
            }
            if (from != 0) {
              out.append(text->substr(from));
              r.Set(kRawstringField, Value(std::move(out)));
            }
          }
        }
        r.Set(as, Value(std::move(hashed)));
        return true;
      },
      std::vector<std::string>{field, as, kRawstringField});
  return true;
}

FilterPtr BuildMatch(Call& c) {
  Hasher h;
  if (!HasherOf(c, &h)) return nullptr;
  std::string hashed = h(c.String("input"));
  if (c.Given("field")) {
    auto n = MakeNode(FilterNode::Kind::kFieldEq, c.position());
    n->field = c.String("field");
    n->text = std::move(hashed);
    return n;
  }
  std::string error;
  std::shared_ptr<const re2::RE2> re = CompileRegex(RE2::QuoteMeta(hashed), &error);
  if (!re) {
    c.BadParam("input", error);
    return nullptr;
  }
  auto n = MakeNode(FilterNode::Kind::kRawRegex, c.position());
  n->text = re->pattern();
  SetFilterRegex(std::move(re), n.get());
  return n;
}

}  // namespace

const Function kHashRewrite = {
    .name = "hashRewrite",
    .kind = Kind::kTransform,
    .params = kRewriteParams,
    .doc = "replaces a field's value (and its occurrences in @rawstring) by a salted hash",
    .stage = &BuildRewrite,
};
const Function kHashMatch = {
    .name = "hashMatch",
    .kind = Kind::kFilter,
    .params = kMatchParams,
    .doc = "keeps the events holding the salted hash of a constant, as hashRewrite() writes it",
    .filter = &BuildMatch,
};

}  // namespace sediment::query::functions
