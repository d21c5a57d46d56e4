// All(): the registration list of list.h as an array.
#include "query/functions/list.h"

namespace sediment::query::functions {
namespace {

#define SEDIMENT_QUERY_ADDRESS_OF(f) &f,
const Function* const kAll[] = {SEDIMENT_QUERY_FUNCTIONS(SEDIMENT_QUERY_ADDRESS_OF)};
#undef SEDIMENT_QUERY_ADDRESS_OF

}  // namespace

std::span<const Function* const> All() { return kAll; }

}  // namespace sediment::query::functions
