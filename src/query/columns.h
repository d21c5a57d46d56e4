// Which columns of a block a query's scan reads (segment format 2 decodes only those).
//
// Contract: the selection is conservative. Every field a per-record stage or the first collecting
// stage may read is in it (a field name a stage reads, writes or matches on); anything the
// analysis cannot bound (events as results, head/tail/sort, split, kvParse without override)
// selects every column. @timestamp and @id are always decoded, @ingesttimestamp when a stage names
// it; tags (#...) are
// not columns. Stages after the first collecting stage read the collector's rows, not blocks.
#pragma once

#include "query/compiled.h"
#include "segment/segment.h"

namespace sediment::query {

ColumnSelection ScanColumns(const CompiledQuery& query);

}  // namespace sediment::query
