// shannonEntropy(field, as=_shannonentropy): the Shannon entropy, in bits per character, of a
// field's text: -sum(p * log2(p)) over the relative frequencies p of its characters (UTF-8 code
// points). LogScale's example: `example.com` gives 3.095795... A per-record stage.
//
// Decided: LogScale's page does not give the default output name; sediment uses
// `_shannonentropy`, LogScale's lower-case convention (`_parsehexstring`, `_urlencode`). The
// empty text gives 0; a missing field sets nothing.
#include <cmath>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "query/functions/field_mapper.h"
#include "query/functions/list.h"
#include "query/functions/transforms.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "field", .type = Type::kField, .unnamed = true, .required = true},
    {.name = "as", .type = Type::kField, .default_value = "_shannonentropy"},
};

double Entropy(std::string_view s) {
  std::unordered_map<std::string_view, size_t> counts;
  size_t total = 0;
  for (size_t i = 0; i < s.size();) {
    size_t len = 1;
    while (i + len < s.size() && (static_cast<unsigned char>(s[i + len]) & 0xC0) == 0x80) ++len;
    ++counts[s.substr(i, len)];
    ++total;
    i += len;
  }
  double h = 0;
  for (const auto& [ch, n] : counts) {
    const double p = static_cast<double>(n) / static_cast<double>(total);
    h -= p * std::log2(p);
  }
  return h;
}

bool Build(Call& c, Stage* st) { return SetFieldMapper(c, st, &Entropy); }

}  // namespace

const Function kShannonEntropy = {
    .name = "shannonEntropy",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "the Shannon entropy of a field's characters, in bits",
    .stage = &Build,
};

}  // namespace sediment::query::functions
