// SetFieldMapper: the per-record stage of the functions that set `as` from the value of one
// `field` (base64Encode, urlEncode, shannonEntropy, tokenHash, upper). Internal to
// sediment_query; compile-time only.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "query/functions/registry.h"
#include "query/functions/transforms.h"

namespace sediment::query::functions {

// Makes `st` set the parameter "as" of `c` to `f(value)` (a callable returning a Value or
// something a Value is built from) on every record having the field named by the parameter
// "field"; records without it pass unchanged.
template <typename F>
bool SetFieldMapper(Call& c, Stage* st, F f) {
  std::string field = c.String("field");
  std::string as = c.String("as");
  std::vector<std::string> touched = {field, as};
  SetRecordFunction(
      st,
      [field, as, f = std::move(f)](Record& r) {
        std::string scratch;
        if (std::optional<std::string_view> v = r.Get(field, &scratch)) r.Set(as, Value(f(*v)));
        return true;
      },
      std::move(touched));
  return true;
}

}  // namespace sediment::query::functions
