// tokenHash(field, as=_tokenHash): a "structure hash" of a text that is equal for texts made of
// the same space-separated tokens in any order ("abc def ghi" and "def ghi abc"). A per-record
// stage.
//
// The text is split at spaces (runs of spaces make no empty tokens); each token is hashed with
// MurmurHash3 (x86, 32 bits, seed 0) and the hashes are added modulo 2^32; the output is that sum
// as 8 lower-case hex digits. LogScale does not document its hash function: the digits differ
// from LogScale's, but equal token multisets always hash alike, on every node. A missing field
// sets nothing.
#include <cstdint>
#include <string>
#include <string_view>

#include "query/functions/field_mapper.h"
#include "query/functions/list.h"
#include "query/functions/transforms.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "field", .type = Type::kField, .unnamed = true, .required = true},
    {.name = "as", .type = Type::kField, .default_value = "_tokenHash"},
};

std::string TokenHash(std::string_view s) {
  uint32_t sum = 0;
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] == ' ') {
      ++i;
      continue;
    }
    size_t j = s.find(' ', i);
    if (j == std::string_view::npos) j = s.size();
    sum += Murmur3(s.substr(i, j - i), 0);
    i = j;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(8, '0');
  for (int k = 7; k >= 0; --k, sum >>= 4) out[static_cast<size_t>(k)] = kHex[sum & 0xf];
  return out;
}

bool Build(Call& c, Stage* st) { return SetFieldMapper(c, st, &TokenHash); }

}  // namespace

const Function kTokenHash = {
    .name = "tokenHash",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "a hash equal for texts of the same space-separated tokens",
    .stage = &Build,
};

}  // namespace sediment::query::functions
