// Ingest (DESIGN section 11): parses the request bodies of LogScale's and Splunk HEC's ingest APIs
// into ingest messages (one per datasource, split by size) and appends them to the commit log.
// Parsing validates the whole request before anything is appended (P6).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "ingest/sharder.h"
#include "log/commit_log.h"
#include "model/event.h"

namespace sediment::ingest {

enum class Format {
  kHumioStructured,    // POST /api/v1/ingest/humio-structured
  kHumioUnstructured,  // POST /api/v1/ingest/humio-unstructured
  kRaw,                // POST /api/v1/ingest/raw: one event per line
  kHecEvent,           // /api/v1/ingest/hec, /services/collector, /services/collector/event
  kHecRaw,             // /api/v1/ingest/hec/raw, /services/collector/raw
  kOtlpLogs,           // /api/v1/ingest/otlp/v1/logs, /v1/logs: OTLP/HTTP logs (otlp.h)
  kElasticBulk,  // /api/v1/ingest/elastic-bulk, /_bulk, /{index}/_bulk (parse_elastic_bulk.cc)
  kJson,         // /api/v1/ingest/json: an object or an array of objects (parse_logscale_json.cc)
};

struct ParseOptions {
  std::string repo;    // repository the token resolved to
  int64_t now_ms = 0;  // ingest time: @ingesttimestamp, and @timestamp when none is given
  size_t max_event_bytes = 1 << 20;
  // Bounds of JSON flattening (TooLarge beyond): nesting depth of a field below the object that
  // holds the event's fields, and fields per event.
  int max_json_depth = 64;
  size_t max_fields_per_event = 1000;
  // Messages are split so that each encodes at most about this many raw bytes.
  size_t max_message_bytes = 900 * 1024;
  // URL query parameters (HEC raw: host, source, sourcetype; raw: none yet).
  std::map<std::string, std::string> params;
  // The request's Content-Type (OTLP: protobuf or JSON, see otlp.h).
  std::string content_type;
  // Elastic bulk: the {index} of POST /{index}/_bulk, the default of actions without "_index".
  std::string bulk_index;
};

// Elastic bulk: the outcome of one action of the body, in body order (parse_elastic_bulk.cc).
// status 201: the action's document is one of the result's events (appended with them); any other
// status: nothing of the action is appended and `error_*` say why, in Elastic's terms.
struct BulkItem {
  std::string action;  // "index", "create", "delete", "update"
  std::string index;   // the action's "_index", else ParseOptions::bulk_index
  std::string id;      // the action's "_id", else a generated one
  int status = 201;
  std::string error_type;    // e.g. "mapper_parsing_exception"
  std::string error_reason;  // Elastic's wording where it has one, else sediment's
  std::string cause_type;    // "caused_by" (empty: none)
  std::string cause_reason;
};

struct ParseResult {
  std::vector<IngestMessage> messages;
  size_t event_count = 0;
  // Events refused one by one while the others are kept (OTLP's partial success): how many, and
  // the first one's reason. Formats that refuse a whole request instead leave these 0 and empty.
  size_t rejected_count = 0;
  std::string rejected_message;
  // kElasticBulk only: one per action (see BulkItem); empty for the other formats.
  std::vector<BulkItem> items;
};

// The format served at an ingest endpoint path (no query string; a trailing '/' is ignored), e.g.
// "/services/collector/raw" -> kHecRaw; nullopt for any other path. README.md lists the paths.
std::optional<Format> FormatForPath(std::string_view path);
// "humio-structured", "humio-unstructured", "raw", "hec", "hec-raw", "otlp-logs", "elastic-bulk",
// "json".
const char* FormatName(Format format);

// InvalidArgument (malformed JSON, wrong shape, bad timestamp; the message names the event index
// and what is wrong) or TooLarge (an event over max_event_bytes). Nothing is appended by parsing.
Result<ParseResult> ParseRequest(Format format, std::string_view body, const ParseOptions& options);

// The events of a raw or HEC raw body before they are built (ParseLineBatch): one per non-empty
// line, in body order, all of the datasource (options.repo, no tags), each with @timestamp and
// @ingesttimestamp now_ms and the same `fields` (HEC raw: host, source, sourcetype and channel
// of the query). `lines` are views into the body: the batch is valid while the body is.
struct LineBatch {
  Datasource datasource;
  int64_t now_ms = 0;
  std::vector<Field> fields;
  std::vector<std::string_view> lines;
  size_t max_message_bytes = 0;  // ParseOptions::max_message_bytes
  // What ParseRequest gives for the body: these events built and cut into messages.
  ParseResult ToEvents() const;
  // Event::ByteSize() of the event of a line of `line_bytes` bytes.
  size_t EventBytes(size_t line_bytes) const;
};

// ParseRequest for kRaw and kHecRaw (any other format is InvalidArgument) without building the
// events: the same validation and errors, and lines whose ToEvents() is ParseRequest's answer.
Result<LineBatch> ParseLineBatch(Format format, std::string_view body, const ParseOptions& options);

// Groups events (each with its datasource tags) by datasource (options.repo + tags) into messages
// exactly as ParseRequest does: datasources in order of first appearance, events in the given
// order, messages cut at options.max_message_bytes. Used to regroup events a parser changed.
using TaggedEvents =
    std::vector<std::pair<std::vector<std::pair<std::string, std::string>>, Event>>;
ParseResult GroupEvents(TaggedEvents events, const ParseOptions& options);

// A random non-zero 64-bit message id (IngestMessage::id).
uint64_t RandomMessageId();

// Appends every message and waits until all are durable. OK only when every one is (P1): on any
// error the caller must answer with an error status, never 200.
// Gives every message without an id a random one, encodes and appends them. Waits at most
// `timeout` in all: messages not acknowledged by then make it Unavailable (they may
// still become durable later, but they were not acknowledged).
// Partitions: without `sharder` (or with sharding disabled) a message goes to its datasource's
// PartitionFor. With one, each datasource of the request gets one partition from
// `sharder->Pick` (counting the summed Event::ByteSize() of its events in the request), and every
// message of that datasource goes there, in message order. `sharder` is borrowed.
[[nodiscard]] Status AppendAll(CommitLog* log, std::vector<IngestMessage> messages,
                               std::chrono::milliseconds timeout = std::chrono::hours(1),
                               DatasourceSharder* sharder = nullptr);

// AppendAll(log, batch.ToEvents().messages, timeout, sharder) without building the events: the
// same messages (cut where ToEvents cuts them, the same partitions) encoded straight from the
// lines (EncodeIngestLines), and the same answer. The body `batch` views must outlive the call.
[[nodiscard]] Status AppendLines(CommitLog* log, const LineBatch& batch,
                                 std::chrono::milliseconds timeout = std::chrono::hours(1),
                                 DatasourceSharder* sharder = nullptr);

}  // namespace sediment::ingest
