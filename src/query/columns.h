// Which columns of a block a query's scan reads (segment format 2 decodes only those).
//
// Contract: the selection is conservative. Every field a per-record stage or the first collecting
// stage may read is in it (a field name a stage reads, writes or matches on); anything the
// analysis cannot bound (events as results, head/tail/sort, split, kvParse without override)
// selects every column. @ingesttimestamp is decoded when a stage names it; tags (#...) are not
// columns. Stages after the first collecting stage read the collector's rows, not blocks.
// `order` (@timestamp and positions) is false only when nothing before or in the first collecting
// stage may read @timestamp, @id or the records' order key (Record::key): the filter and per-record
// stages do not name them, no stage is a RecordFunction (kFunction), and the collector is an
// aggregate other than bucket/timeChart without selectLast/selectFromMax/selectFromMin. The
// scan still decodes them for blocks that are not wholly inside the query's range (the range
// check needs each event's @timestamp).
#pragma once

#include "query/compiled.h"
#include "segment/segment.h"

namespace sediment::query {

ColumnSelection ScanColumns(const CompiledQuery& query);

}  // namespace sediment::query
