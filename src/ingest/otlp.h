// OTLP/HTTP logs (OpenTelemetry): the request encodings and the answers of the export endpoint.
// ParseRequest(Format::kOtlpLogs, ...) decodes an ExportLogsServiceRequest; these functions
// choose its encoding from the Content-Type and encode what the client gets back. README.md
// describes the mapping of log records to events.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "ingest/ingest.h"

namespace sediment::ingest {

enum class OtlpEncoding { kProtobuf, kJson };

// The encoding a Content-Type names: "application/x-protobuf" (also "application/protobuf" and a
// missing header: protobuf is OTLP's default) or "application/json"; case and parameters
// (`; charset=utf-8`) are ignored. nullopt for any other type (the endpoint answers 415).
std::optional<OtlpEncoding> OtlpEncodingFor(std::string_view content_type);

// "application/x-protobuf" or "application/json": the answer's Content-Type, the request's.
const char* OtlpContentType(OtlpEncoding encoding);

// The ExportLogsServiceResponse for a request that was parsed and whose events are durable:
// empty (full success) or with partial_success {rejected_log_records, error_message} when
// result.rejected_count > 0. Protobuf bytes or OTLP/JSON (`{}`, `{"partialSuccess": {...}}`).
std::string OtlpLogsResponse(OtlpEncoding encoding, const ParseResult& result);

// The body of an OTLP/HTTP error answer: a google.rpc.Status {code, message} in `encoding`, with
// the gRPC code matching the HTTP status (400 -> 3 INVALID_ARGUMENT, 413 -> 8
// RESOURCE_EXHAUSTED, 503 -> 14 UNAVAILABLE, 401 -> 16 UNAUTHENTICATED, else 13 INTERNAL).
std::string OtlpErrorBody(OtlpEncoding encoding, int http_status, std::string_view message);

}  // namespace sediment::ingest
