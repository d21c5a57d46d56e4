// Lookup file uploads: multipart parsing and content checks (lookup_files.h).
#include "api/lookup_files.h"

#include <simdjson.h>

#include <algorithm>
#include <cctype>

#include "global/global.h"

namespace sediment::api {
namespace {

bool EndsWithNoCase(std::string_view s, std::string_view suffix) {
  if (s.size() < suffix.size()) return false;
  return std::equal(suffix.begin(), suffix.end(), s.end() - suffix.size(), [](char a, char b) {
    return std::tolower(static_cast<unsigned char>(a)) ==
           std::tolower(static_cast<unsigned char>(b));
  });
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

// The value of parameter `key` in a header value such as `form-data; name="file"; filename=x`
// (quoted or not; a quoted value may contain `;`). nullopt when absent.
std::optional<std::string> HeaderParam(std::string_view value, std::string_view key) {
  size_t i = 0;
  while (i < value.size()) {
    size_t semi = value.find(';', i);
    if (semi == std::string_view::npos) return std::nullopt;
    i = semi + 1;
    while (i < value.size() && value[i] == ' ') ++i;
    size_t eq = value.find('=', i);
    if (eq == std::string_view::npos) return std::nullopt;
    std::string_view k = Trim(value.substr(i, eq - i));
    std::string out;
    size_t j = eq + 1;
    if (j < value.size() && value[j] == '"') {
      for (++j; j < value.size() && value[j] != '"'; ++j) {
        if (value[j] == '\\' && j + 1 < value.size()) ++j;
        out.push_back(value[j]);
      }
      ++j;
    } else {
      size_t end = value.find(';', j);
      out = std::string(Trim(value.substr(j, end == std::string_view::npos ? end : end - j)));
      j = end == std::string_view::npos ? value.size() : end;
    }
    if (EndsWithNoCase(k, key) && k.size() == key.size()) return out;
    i = j;
  }
  return std::nullopt;
}

bool IsUtf8(std::string_view s) { return simdjson::validate_utf8(s.data(), s.size()); }

// The part named `file` of a multipart/form-data body: (filename, content).
Result<LookupUpload> FilePart(std::string_view boundary, std::string_view body) {
  const std::string delim = "--" + std::string(boundary);
  size_t pos = body.find(delim);
  if (pos == std::string_view::npos) {
    return Status::InvalidArgument("multipart body without its boundary");
  }
  while (true) {
    pos += delim.size();
    if (body.substr(pos, 2) == "--") break;  // the closing delimiter
    if (body.substr(pos, 2) != "\r\n") return Status::InvalidArgument("malformed multipart body");
    pos += 2;
    const size_t headers_end = body.find("\r\n\r\n", pos);
    if (headers_end == std::string_view::npos) {
      return Status::InvalidArgument("malformed multipart body: a part without its headers' end");
    }
    std::string_view headers = body.substr(pos, headers_end - pos);
    const size_t content_start = headers_end + 4;
    const size_t next = body.find("\r\n" + delim, content_start);
    if (next == std::string_view::npos) {
      return Status::InvalidArgument("malformed multipart body: a part without its boundary");
    }
    std::optional<std::string> name, filename;
    size_t h = 0;
    while (h <= headers.size()) {
      size_t eol = headers.find("\r\n", h);
      std::string_view line = headers.substr(h, eol == std::string_view::npos ? eol : eol - h);
      const size_t colon = line.find(':');
      if (colon != std::string_view::npos &&
          EndsWithNoCase(line.substr(0, colon), "content-disposition") && colon == 19) {
        std::string_view v = line.substr(colon + 1);
        name = HeaderParam(v, "name");
        filename = HeaderParam(v, "filename");
      }
      if (eol == std::string_view::npos) break;
      h = eol + 2;
    }
    if (name && *name == "file") {
      LookupUpload up;
      if (filename) {
        // Browsers send the bare name; some clients a path (either separator): keep its last part.
        const size_t cut = filename->find_last_of("/\\");
        up.name = cut == std::string::npos ? *filename : filename->substr(cut + 1);
      }
      up.content = std::string(body.substr(content_start, next - content_start));
      return up;
    }
    pos = next + 2;
  }
  return Status::InvalidArgument("multipart body without a part named 'file'");
}

}  // namespace

LookupFileKind LookupFileKindOf(std::string_view name) {
  if (EndsWithNoCase(name, ".csv")) return LookupFileKind::kCsv;
  if (EndsWithNoCase(name, ".json")) return LookupFileKind::kJson;
  return LookupFileKind::kUnknown;
}

Result<LookupUpload> ParseLookupUpload(std::string_view content_type, std::string_view body,
                                       const std::map<std::string, std::string>& query) {
  LookupUpload up;
  const size_t semi = content_type.find(';');
  std::string_view media = Trim(content_type.substr(0, semi));
  if (EndsWithNoCase(media, "multipart/form-data") && media.size() == 19) {
    std::optional<std::string> boundary = HeaderParam(content_type, "boundary");
    if (!boundary || boundary->empty()) {
      return Status::InvalidArgument("multipart/form-data without a boundary");
    }
    auto part = FilePart(*boundary, body);
    if (!part.ok()) return part.status();
    up = std::move(*part);
  } else {
    up.content = std::string(body);
  }
  if (auto it = query.find("name"); it != query.end()) up.name = it->second;
  if (up.name.empty()) {
    return Status::InvalidArgument(
        "no file name: send the file as the multipart part 'file' with a filename, or the body "
        "with ?name=");
  }
  return up;
}

Status CheckLookupFile(std::string_view name, std::string_view content) {
  if (content.size() > kMaxLookupFileBytes) {
    return Status::TooLarge("lookup file of " + std::to_string(content.size()) +
                            " bytes: at most " + std::to_string(kMaxLookupFileBytes));
  }
  if (!IsValidLookupFileName(name)) {
    return Status::InvalidArgument("invalid lookup file name '" + std::string(name) +
                                   "': 1 to 255 bytes, no '/', '\\' or control character");
  }
  switch (LookupFileKindOf(name)) {
    case LookupFileKind::kCsv: {
      if (!IsUtf8(content)) return Status::InvalidArgument("a CSV lookup file must be UTF-8");
      const size_t eol = content.find('\n');
      std::string_view header = Trim(content.substr(0, eol));
      if (header.empty()) {
        return Status::InvalidArgument("a CSV lookup file needs a header line (column names)");
      }
      return Status::OK();
    }
    case LookupFileKind::kJson: {
      simdjson::dom::parser parser;
      simdjson::dom::element doc;
      if (parser.parse(content.data(), content.size()).get(doc) ||
          !(doc.is_object() || doc.is_array())) {
        return Status::InvalidArgument("a JSON lookup file must be one JSON object or array");
      }
      return Status::OK();
    }
    case LookupFileKind::kUnknown:
      break;
  }
  return Status::InvalidArgument("a lookup file name must end in .csv or .json");
}

}  // namespace sediment::api
