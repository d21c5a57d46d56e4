// split(field=_events, strip=false): one record per element of an array field. A per-record
// stage that may emit several records.
//
// Choice where LogScale's documentation leaves room: f[i] becomes f, f[i].x becomes f.x,
// f[i][j] becomes f[j]; `_index` = i and `@id` gets "__i" appended; the outputs are rows.
#include <map>
#include <utility>
#include <vector>

#include "query/functions/list.h"
#include "query/functions/transforms.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "field", .type = Type::kField, .unnamed = true, .default_value = "_events"},
    {.name = "strip", .type = Type::kBool, .default_value = "false"},
};

bool Build(Call& c, Stage* st) {
  st->kind = Stage::Kind::kSplit;
  st->field = c.String("field");
  st->strip = c.Bool("strip");
  return true;
}

}  // namespace

const Function kSplit = {
    .name = "split",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "one record per element of an array field",
    .stage = &Build,
};

// ---- per-record implementation ----

namespace {

const std::string kEventsField = "_events";

}  // namespace

void ApplySplit(const Stage& st, Record&& r, std::vector<Record>* out) {
  const std::string& field = FieldOr(st.field, kEventsField);
  Row row = r.ToRow();
  const std::string open = field + "[";
  // index -> (suffix after "f[i]", value)
  std::map<int64_t, std::vector<std::pair<std::string, Value>>> elements;
  Row base;
  base.reserve(row.size());
  for (auto& [name, value] : row) {
    if (name.size() > open.size() && name.compare(0, open.size(), open) == 0) {
      const size_t close = name.find(']', open.size());
      if (close != std::string::npos) {
        std::optional<int64_t> idx =
            ParseInt(std::string_view(name).substr(open.size(), close - open.size()));
        if (idx && *idx >= 0 && name[open.size()] >= '0' && name[open.size()] <= '9') {
          elements[*idx].emplace_back(name.substr(close + 1), std::move(value));
          continue;
        }
      }
    }
    if (name == field) continue;
    base.emplace_back(std::move(name), std::move(value));
  }
  if (elements.empty()) {
    out->push_back(std::move(r));
    return;
  }
  std::optional<std::string> id;
  for (const auto& [name, value] : base) {
    if (name == "@id") id = ValueToString(value);
  }
  for (auto& [idx, fields] : elements) {
    Record rec = Record::FromRow(base, r.key());
    for (auto& [suffix, value] : fields) {
      // strip: "f[i].x" becomes "x" (the element itself keeps the name f).
      if (st.strip && suffix.size() > 1 && suffix[0] == '.') {
        rec.Set(std::string_view(suffix).substr(1), std::move(value));
      } else {
        rec.Set(field + suffix, std::move(value));
      }
    }
    rec.Set("_index", Value(idx));
    if (id) rec.Set("@id", Value(*id + "__" + std::to_string(idx)));
    out->push_back(std::move(rec));
  }
}

}  // namespace sediment::query::functions
