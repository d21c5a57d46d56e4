// copyEvent(type): each record goes on twice: first unchanged, then a copy whose #type is `type`.
// A per-record stage that emits two records per input (Stage::function_emits_many); the copy has
// the same order key as the original, so an order by key keeps the pair together. LogScale mostly
// uses it in parsers (the copy then goes on to be stored); in a query the copy exists only in the
// query's pipeline.
#include <string>
#include <utility>
#include <vector>

#include "query/functions/list.h"
#include "query/functions/transforms.h"
#include "query/record.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "type", .type = Type::kString, .unnamed = true, .required = true},
};

const std::string kTypeTag = "#type";

class CopyEvent final : public RecordFunction {
 public:
  explicit CopyEvent(std::string type) : type_(std::move(type)) {}
  bool Apply(Record&) const override { return true; }
  void ApplyMany(Record&& r, std::vector<Record>* out) const override {
    Record copy = r;
    copy.Set(kTypeTag, Value(type_));
    out->push_back(std::move(r));
    out->push_back(std::move(copy));
  }

 private:
  std::string type_;
};

bool Build(Call& c, Stage* st) {
  const std::string& type = c.String("type");
  if (type.empty()) {
    c.BadParam("type", "a non-empty #type for the copy");
    return false;
  }
  st->kind = Stage::Kind::kFunction;
  st->record_function = std::make_shared<const CopyEvent>(type);
  st->function_fields = {kTypeTag};
  st->function_reads_all = true;  // the copy carries every field on
  st->function_emits_many = true;
  return true;
}

}  // namespace

const Function kCopyEvent = {
    .name = "copyEvent",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "emits each event and a copy of it with #type set",
    .stage = &Build,
};

}  // namespace sediment::query::functions
