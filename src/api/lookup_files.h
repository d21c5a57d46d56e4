// Lookup file uploads (lookup_routes.cc): the request parsing and the checks, pure functions (no
// node, no I/O) so that api_test covers them without a server.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>

#include "common/status.h"

namespace sediment::api {

// The largest lookup file content (bytes). The whole file travels in one Global event
// (PutLookupFile), which must fit one commit-log record (Kafka's default message limit is 1 MB);
// a larger upload is answered 413.
inline constexpr size_t kMaxLookupFileBytes = 512 * 1024;

enum class LookupFileKind { kCsv, kJson, kUnknown };
// By the name's extension, case-insensitively: ".csv" or ".json".
LookupFileKind LookupFileKindOf(std::string_view name);

struct LookupUpload {
  std::string name;
  std::string content;
};

// An upload request: `multipart/form-data` (LogScale's shape: the file in the part named `file`,
// its name from the part's filename, a path in it cut to its last component), or any other body
// taken as the file's content with the name from ?name=. ?name= also overrides a multipart
// filename. InvalidArgument (400): no boundary, no `file` part, a malformed multipart body, no
// name.
Result<LookupUpload> ParseLookupUpload(std::string_view content_type, std::string_view body,
                                       const std::map<std::string, std::string>& query);

// Whether `content` may be stored as lookup file `name`: TooLarge (413) above
// kMaxLookupFileBytes; InvalidArgument (400) for a name that is not IsValidLookupFileName
// (global.h), not ending in .csv or .json, a CSV without a header line or not UTF-8, a JSON file
// that is not one object or array.
Status CheckLookupFile(std::string_view name, std::string_view content);

}  // namespace sediment::api
