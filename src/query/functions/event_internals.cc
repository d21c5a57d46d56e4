// eventInternals(prefix=@): adds fields describing where each event is stored. A per-record stage;
// records that are not stored events (rows of an aggregate, createEvents()) get nothing.
//
// sediment's storage coordinates differ from LogScale's (which names segments and blocks): an
// event is identified by its datasource (repository + tags), the ingest partition, the
// commit-log offset of the ingest message that carried it and its index in that message. The
// fields: <prefix>datasourceId (16 hex digits, a hash of the datasource's key: stable across
// queries and restarts, equal for the events of one datasource), <prefix>partition,
// <prefix>offset, <prefix>eventIndex.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "query/functions/list.h"
#include "query/functions/transforms.h"
#include "query/record.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "prefix", .type = Type::kString, .default_value = "\"@\""},
};

std::string DatasourceId(const Datasource& ds) {
  const std::string key = ds.Key();
  char buf[17];
  std::snprintf(buf, sizeof buf, "%08x%08x", Murmur3(key, 0x5ed1), Murmur3(key, 0x6e47));
  return buf;
}

bool Build(Call& c, Stage* st) {
  const std::string& prefix = c.String("prefix");
  std::vector<std::string> names = {prefix + "datasourceId", prefix + "partition",
                                    prefix + "offset", prefix + "eventIndex"};
  SetRecordFunction(
      st,
      [names](Record& r) {
        if (!r.is_event() || r.event().ds == nullptr) return true;
        const RecordKey& k = r.key();
        r.Set(names[0], Value(DatasourceId(*r.event().ds)));
        r.Set(names[1], Value(static_cast<int64_t>(k.partition)));
        r.Set(names[2], Value(k.offset));
        r.Set(names[3], Value(static_cast<int64_t>(k.index)));
        return true;
      },
      names);
  return true;
}

}  // namespace

const Function kEventInternals = {
    .name = "eventInternals",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "adds the storage coordinates of each event",
    .stage = &Build,
};

}  // namespace sediment::query::functions
