// wildcard(pattern, field=@rawstring, ignoreCase=false, includeEverythingOnAsterisk=false): an
// anchored '*' pattern on a field (or any of a list of fields). A filter.
#include "query/functions/list.h"
#include "query/functions/util.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "pattern", .type = Type::kString, .unnamed = true, .required = true},
    {.name = "field", .type = Type::kFields, .default_value = "@rawstring"},
    {.name = "ignoreCase", .type = Type::kBool, .default_value = "false"},
    {.name = "includeEverythingOnAsterisk", .type = Type::kBool, .default_value = "false"},
};

FilterPtr Build(Call& c) {
  const std::string& pattern = c.String("pattern");
  if (c.Bool("includeEverythingOnAsterisk") && GlobPieces(pattern).empty() && !pattern.empty()) {
    return MakeNode(FilterNode::Kind::kTrue, c.position());
  }
  FilterPtr result;
  for (const std::string& field : c.Fields("field")) {
    auto n = MakeFieldMatch(pattern, c.position());
    n->field = field;
    n->ignore_case = c.Bool("ignoreCase");
    result = result ? Combine(FilterNode::Kind::kOr, result, n, c.position()) : n;
  }
  return result;
}

}  // namespace

const Function kWildcard = {
    .name = "wildcard",
    .kind = Kind::kFilter,
    .params = kParams,
    .doc = "keeps events whose field matches an anchored '*' pattern",
    .filter = &Build,
};

}  // namespace sediment::query::functions
