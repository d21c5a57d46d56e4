// hash(field, as=_hash, limit, seed): a non-cryptographic hash of the values of one or more
// fields, an integer in [0, 4294967295] (modulo `limit` when given). A per-record stage.
//
// The hash is MurmurHash3 (x86, 32 bits) over the values joined with a 0 byte after each (a
// missing field counts as empty), seeded with `seed` (an integer is used as it is, other text is
// first hashed with seed 0). LogScale does not document its algorithm, so the numbers differ
// from LogScale's; equal inputs and seeds always give equal hashes, on every node.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "query/functions/list.h"
#include "query/functions/transforms.h"

namespace sediment::query::functions {
namespace {

uint32_t Rotl(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }

}  // namespace

uint32_t Murmur3(std::string_view data, uint32_t seed) {
  const uint32_t c1 = 0xcc9e2d51, c2 = 0x1b873593;
  uint32_t h = seed;
  const size_t blocks = data.size() / 4;
  for (size_t i = 0; i < blocks; ++i) {
    uint32_t k;
    std::memcpy(&k, data.data() + 4 * i, 4);  // little-endian hosts only (x86-64, arm64)
    k *= c1;
    k = Rotl(k, 15);
    k *= c2;
    h ^= k;
    h = Rotl(h, 13);
    h = h * 5 + 0xe6546b64;
  }
  uint32_t k = 0;
  const unsigned char* tail = reinterpret_cast<const unsigned char*>(data.data()) + 4 * blocks;
  switch (data.size() & 3) {
    case 3:
      k ^= static_cast<uint32_t>(tail[2]) << 16;
      [[fallthrough]];
    case 2:
      k ^= static_cast<uint32_t>(tail[1]) << 8;
      [[fallthrough]];
    case 1:
      k ^= tail[0];
      k *= c1;
      k = Rotl(k, 15);
      k *= c2;
      h ^= k;
  }
  h ^= static_cast<uint32_t>(data.size());
  h ^= h >> 16;
  h *= 0x85ebca6b;
  h ^= h >> 13;
  h *= 0xc2b2ae35;
  h ^= h >> 16;
  return h;
}

namespace {

constexpr Param kParams[] = {
    {.name = "field", .type = Type::kFields, .unnamed = true, .required = true},
    {.name = "as", .type = Type::kField, .default_value = "_hash"},
    {.name = "limit", .type = Type::kLimit},
    {.name = "seed", .type = Type::kString},
};

bool Build(Call& c, Stage* st) {
  int64_t limit = 0;
  if (c.Given("limit")) {
    limit = c.Limit("limit");
    if (limit < 1) {
      c.BadParam("limit", "a positive integer");
      return false;
    }
  }
  uint32_t seed = 0;
  if (c.Given("seed")) {
    const std::string& s = c.String("seed");
    std::optional<int64_t> n = ParseInt(s);
    seed = n ? static_cast<uint32_t>(*n) : Murmur3(s, 0);
  }
  std::vector<std::string> fields = c.Fields("field");
  std::string as = c.String("as");
  std::vector<std::string> touched = fields;
  touched.push_back(as);
  SetRecordFunction(
      st,
      [fields, as, limit, seed](Record& r) {
        std::string data, scratch;
        for (const std::string& f : fields) {
          if (std::optional<std::string_view> v = r.Get(f, &scratch)) data += *v;
          data.push_back('\0');
        }
        int64_t h = Murmur3(data, seed);
        if (limit > 0) h %= limit;
        r.Set(as, Value(h));
        return true;
      },
      std::move(touched));
  return true;
}

}  // namespace

const Function kHash = {
    .name = "hash",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "a non-cryptographic hash of field values",
    .stage = &Build,
};

}  // namespace sediment::query::functions
