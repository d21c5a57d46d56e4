// The query engine: LogScale query language (CQL) subset, compiled once, executed over segment
// files and buffered (not yet flushed) events. The caller (server) decides *what* to scan: the
// ScanInput must already hold each event exactly once (the digest/Global cut is the caller's job).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/env.h"
#include "common/status.h"
#include "common/types.h"
#include "model/event.h"
#include "segment/segment.h"

namespace sediment::query {

// [start_ms, end_ms) on @timestamp.
struct TimeRange {
  int64_t start_ms = 0;
  int64_t end_ms = 0;
};

// Parses one bound as LogScale accepts it: relative ("15m", "24h", "7d", "30s", "1w", "2y", with
// optional "ago"/spaces such as "1 hour"), epoch milliseconds (digits), or ISO-8601 with offset
// or Z. "now" is `now_ms`. InvalidArgument naming the bad value otherwise.
Result<int64_t> ParseTimeBound(std::string_view s, int64_t now_ms);
// Missing start = 24h ago (LogScale's default), missing end = now.
Result<TimeRange> ParseTimeRange(std::string_view start, std::string_view end, int64_t now_ms);

class CompiledQuery;
// Parse errors are InvalidArgument with a message that contains "at position N" (0-based byte
// offset into `text`).
Result<std::shared_ptr<const CompiledQuery>> Compile(std::string_view text);
// `text` with every query parameter (`?name`, `?{name=default}`) replaced by a string literal of
// its value: `arguments[name]`, else its default. InvalidArgument "query parameter ?name has no
// value ... at position N" when it has neither, or Compile's error when `text` does not parse.
// The result compiles to the query the parameters stand for (and needs no arguments), so it is
// what a coordinator sends to other nodes. Compile itself gives parameters their defaults.
// `missing_as_empty`: a parameter with neither gets "0" instead, a value every place of a
// parameter takes (to check a saved search whose parameters its callers give).
Result<std::string> BindParameters(std::string_view text,
                                   const std::map<std::string, std::string>& arguments,
                                   bool missing_as_empty = false);

// The saved searches of one repository, which a query calls as `$name()` or
// `$"name"(param=value, ...)`. Implementations must be usable from the calling thread for the
// duration of the ExpandSavedQueries call.
class SavedQueries {
 public:
  virtual ~SavedQueries() = default;
  // The query text of the saved search `name`, or nullopt when there is none.
  virtual std::optional<std::string> Find(std::string_view name) const = 0;
};
// `text` with every saved query call replaced by the saved search's query text (as LogScale
// inserts it: in place, so `a | $q() | b` runs a, q's steps, then b), its parameters bound to the
// call's arguments, else to `arguments` (the request's), else their defaults; saved queries
// calling saved queries are expanded too (at most 8 deep). InvalidArgument naming the call for
// an unknown name, a parameter without a value, too deep a nesting, or a saved text that does
// not parse, or a call leading back to a saved query being expanded. `self`: the name of the
// saved search `text` is the query of (when one is being stored), which its calls must not lead
// back to. A text without calls comes back unchanged. Compile refuses a text that still holds a
// call.
Result<std::string> ExpandSavedQueries(std::string_view text, const SavedQueries& saved,
                                       const std::map<std::string, std::string>& arguments,
                                       std::string_view self = {});

// `text` with every start() and end() of its expressions replaced by the number of milliseconds
// of `range`'s start and end (both ms since the epoch). Compile's error when `text` does not
// parse. A query whose CompiledQuery::uses_time_range is set must be bound so before it runs;
// the result is what a coordinator sends to other nodes.
Result<std::string> BindTimeRange(std::string_view text, const TimeRange& range);
// Whether `q` calls start()/end() (then its text must go through BindTimeRange before it runs).
bool UsesTimeRange(const CompiledQuery& q);
// The start and end (as written) that `q` sets with setTimeInterval(), if it does: they override
// the range the query is run with (resolve them with ParseTimeRange).
std::optional<std::pair<std::string, std::string>> QueryTimeInterval(const CompiledQuery& q);

struct SegmentSource {
  // How the file is opened: the node's SegmentStore, or a DirectorySegmentOpener in tools and
  // tests. Not owned; must outlive the query.
  const SegmentOpener* opener = nullptr;
  std::string file_name;
  SegmentId id;
  Datasource datasource;
  PartitionId partition;
  int64_t min_ts = 0, max_ts = 0;
};
struct BufferedSource {
  Datasource datasource;
  PartitionId partition;
  std::shared_ptr<const std::vector<PositionedEvent>> events;
};
struct ScanInput {
  std::vector<SegmentSource> segments;
  std::vector<BufferedSource> buffered;
};

// A result cell: string, integer or double.
using Value = std::variant<std::string, int64_t, double>;
using Row = std::vector<std::pair<std::string, Value>>;

struct QueryStats {
  uint64_t segments_total = 0, segments_scanned = 0;
  uint64_t blocks_total = 0, blocks_scanned = 0;
  uint64_t events_scanned = 0, events_matched = 0;
  uint64_t bytes_scanned = 0;  // raw bytes of events examined
  int64_t elapsed_ms = 0;
};

struct QueryResult {
  bool is_aggregate = false;
  // Non-aggregate: one row per event, in @timestamp order (ties by @id), with "@timestamp"
  // (int64), "@rawstring", "@id", "@ingesttimestamp", tags ("#repo", ...) and fields (strings).
  // Aggregate: the rows of the last aggregate function and what follows it.
  std::vector<Row> rows;
  // P5: what could not be read (corrupt or missing segments), and truncation notices.
  std::vector<std::string> warnings;
  // Segments of the input with a part that could not be read (sorted): the caller may report the
  // copies and run the query again on other copies.
  std::vector<SegmentId> unreadable_segments;
  QueryStats stats;
};

// Shared progress counters of a running query (for query jobs); written by worker threads.
struct QueryProgress {
  std::atomic<uint64_t> tasks_total{0};  // blocks and buffered chunks to scan (grows as planned)
  std::atomic<uint64_t> tasks_done{0};
  std::atomic<uint64_t> events_scanned{0};
  std::atomic<uint64_t> bytes_scanned{0};
  std::atomic<uint64_t> events_matched{0};
};

struct ExecOptions {
  int threads = 2;
  // Non-aggregate queries keep at most this many events (the newest), with a warning when cut.
  size_t max_events = 200000;
  // Skip blocks whose token filter rules out a required term, or that lack a field the filter
  // compares (SegmentReader::BlockMayHaveField). Off only to cross-check pruning.
  bool use_block_filters = true;
  // The query fails with DeadlineExceeded once the steady clock passes this (checked before
  // every block and buffered chunk).
  std::optional<std::chrono::steady_clock::time_point> deadline;
  // The query fails with Cancelled once this is set (checked as often as the deadline). Not
  // owned; must outlive the call.
  const std::atomic<bool>* cancel = nullptr;
  // The partial states of the query (groups, kept rows) may hold at most this many bytes per
  // query; beyond it the query fails with ResourceExhausted naming the stage. 0 = unlimited.
  size_t max_memory_bytes = size_t{1} << 30;
  // Optional progress counters, updated as blocks are scanned. Not owned.
  QueryProgress* progress = nullptr;
};

Result<QueryResult> Execute(Env* env, const CompiledQuery& query, const TimeRange& range,
                            const ScanInput& input, const ExecOptions& options = {});

// The distributable part of a query over some input: the partial state of its first collecting
// stage (or of the implicit event collector), after the leading filter and the per-record stages
// before it. A coordinator gathers one from every node that read data (and one from its own
// input) and calls FinishPartials.
class Collector;  // aggregate.h
struct PartialResult {
  // The collector: in memory as ExecutePartial returns it, or encoded (see WIRE.md) as
  // DecodePartial returns it. FinishPartials uses `collector` when set, else decodes `state`.
  std::shared_ptr<Collector> collector;
  std::string state;
  std::vector<std::string> warnings;
  std::vector<SegmentId> unreadable_segments;  // not part of the wire encoding
  QueryStats stats;
};

// Scans `input` and computes the partial state. Fails only on internal errors and on the limits
// of `options` (DeadlineExceeded, Cancelled, ResourceExhausted).
Result<PartialResult> ExecutePartial(Env* env, const CompiledQuery& query, const TimeRange& range,
                                     const ScanInput& input, const ExecOptions& options = {});
// Merges partial results of the same query and range (from any nodes) and runs the remaining
// stages. Warnings of every partial come first in the result, in the order given; stats are
// summed. Corruption when a state does not decode.
Result<QueryResult> FinishPartials(const CompiledQuery& query, const TimeRange& range,
                                   std::vector<PartialResult> partials,
                                   const ExecOptions& options = {});

// The filter part of a query, for a coordinator that gathers matching events from the nodes that
// hold them and then runs Execute over them (as `ScanInput::buffered`).
struct MatchSet {
  // One per (datasource, partition) present, each non-empty, in order of first appearance in
  // the input (segments, then buffered sources). Events keep their datasource, partition and
  // position and are in position order within a source.
  std::vector<BufferedSource> sources;
  // Segments / blocks that could not be read (same text as Execute's warnings), in input order.
  std::vector<std::string> warnings;
  // As QueryResult's (not part of the wire encoding).
  std::vector<SegmentId> unreadable_segments;
  // As Execute's; events_matched counts the matches found in the scanned blocks, which exceeds
  // the returned events only when `truncated`.
  QueryStats stats;
  // The scan stopped at max_events: more matching events may exist.
  bool truncated = false;
};

// The events of `input` in `range` that match the query's filter (free text, field filters,
// regex, datasource tags); the pipeline stages are ignored. Uses Execute's scan: the same segment
// and block pruning, the same block verification, `options.threads` worker threads;
// options.max_events is ignored. Segment problems (missing file, checksum failure) become
// warnings naming the segment id, as in Execute. Returns at most `max_events` events: once that
// many matches are found the remaining blocks are skipped and `truncated` is set (which events
// are kept is not specified; it is not the newest). Pass max_events only when !IsAggregate(query).
// Errors only on internal failures. Reentrant.
Result<MatchSet> CollectMatches(Env* env, const CompiledQuery& query, const TimeRange& range,
                                const ScanInput& input, const ExecOptions& options = {},
                                size_t max_events = SIZE_MAX);

// Whether the query has an aggregate stage (count, groupBy, sort, table), which needs every
// matching event.
bool IsAggregate(const CompiledQuery& query);

}  // namespace sediment::query
