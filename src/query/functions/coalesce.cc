// coalesce(expressions, as=_coalesce, ignoreEmpty=true): the first of a list of candidates that
// has a value (a non-empty one with ignoreEmpty) into a field. A per-record stage.
//
// Deviation from LogScale: a candidate is a field name, a quoted string or a number (not any
// expression): `coalesce([user, client, "unknown"])`.
#include <string>
#include <vector>

#include "query/functions/list.h"
#include "query/functions/transforms.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "expressions", .type = Type::kRaw, .unnamed = true, .required = true},
    {.name = "as", .type = Type::kField, .default_value = "_coalesce"},
    {.name = "ignoreEmpty", .type = Type::kBool, .default_value = "true"},
};

struct Candidate {
  bool literal = false;
  std::string text;  // the field name, or the literal
};

bool Build(Call& c, Stage* st) {
  std::vector<Candidate> candidates;
  std::vector<std::string> touched;
  for (const ArgValue* item : ItemsOf(*c.Value("expressions"))) {
    if (item->kind != ArgValue::Kind::kScalar || (item->text.empty() && !item->quoted)) {
      c.BadValue("expressions", *item, "a field name, a quoted string or a number");
      return false;
    }
    const bool literal = item->quoted || ParseNumber(item->text).has_value();
    candidates.push_back(Candidate{literal, item->text});
    if (!literal) touched.push_back(item->text);
  }
  std::string as = c.String("as");
  touched.push_back(as);
  const bool ignore_empty = c.Bool("ignoreEmpty");
  SetRecordFunction(
      st,
      [candidates = std::move(candidates), as = std::move(as), ignore_empty](Record& r) {
        for (const Candidate& k : candidates) {
          if (k.literal) {
            if (ignore_empty && k.text.empty()) continue;
            r.Set(as, Value(k.text));
            return true;
          }
          std::optional<Value> v = r.GetValue(k.text);
          if (!v) continue;
          if (ignore_empty) {
            const auto* s = std::get_if<std::string>(&*v);
            if (s != nullptr && s->empty()) continue;
          }
          r.Set(as, std::move(*v));
          return true;
        }
        return true;
      },
      std::move(touched));
  return true;
}

}  // namespace

const Function kCoalesce = {
    .name = "coalesce",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "the first candidate with a value into a field",
    .stage = &Build,
};

}  // namespace sediment::query::functions
