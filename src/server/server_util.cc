// Helpers shared by the server's request handlers (server_impl.h).
#include <strings.h>

#include <optional>
#include <random>
#include <string_view>

#include "common/json_writer.h"
#include "server/server_impl.h"

namespace sediment {

std::string RandomHex(size_t bytes) {
  std::random_device rd;
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < bytes; ++i) {
    unsigned v = rd() & 0xff;
    out.push_back(kHex[v >> 4]);
    out.push_back(kHex[v & 15]);
  }
  return out;
}

int HttpStatusFor(const Status& st) {
  switch (st.code()) {
    case StatusCode::kInvalidArgument:
      return 400;
    case StatusCode::kUnauthenticated:
      return 401;
    case StatusCode::kPermissionDenied:
      return 403;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kTooLarge:
    case StatusCode::kResourceExhausted:
      return 413;
    case StatusCode::kDeadlineExceeded:
      return 408;
    case StatusCode::kUnavailable:
      return 503;
    default:
      return 500;
  }
}

// Token from "Authorization: Bearer T" (or "Splunk T" when allow_splunk).
std::string TokenFrom(const http::Request& req, bool allow_splunk) {
  std::string_view h = req.Header("Authorization");
  auto strip = [&](std::string_view prefix) -> std::optional<std::string_view> {
    if (h.size() > prefix.size() && strncasecmp(h.data(), prefix.data(), prefix.size()) == 0) {
      std::string_view t = h.substr(prefix.size());
      while (!t.empty() && t.front() == ' ') t.remove_prefix(1);
      return t;
    }
    return std::nullopt;
  };
  if (auto t = strip("Bearer ")) return std::string(*t);
  if (allow_splunk) {
    if (auto t = strip("Splunk ")) return std::string(*t);
  }
  return "";
}

// LogScale serializes every field as a string except @timestamp.
void WriteRowJson(JsonWriter& w, const query::Row& row) {
  w.BeginObject();
  for (const auto& [name, value] : row) {
    w.Key(name);
    if (const auto* s = std::get_if<std::string>(&value)) {
      w.String(*s);
    } else if (const auto* i = std::get_if<int64_t>(&value)) {
      if (name == "@timestamp") {
        w.Int(*i);
      } else {
        w.String(std::to_string(*i));
      }
    } else {
      JsonWriter num;
      num.Double(std::get<double>(value));
      w.String(num.str());
    }
  }
  w.EndObject();
}

bool ParseListen(const std::string& listen, std::string* host, uint16_t* port) {
  auto colon = listen.rfind(':');
  if (colon == std::string::npos) return false;
  *host = listen.substr(0, colon);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
  }
  if (*host == "localhost") *host = "127.0.0.1";
  try {
    int p = std::stoi(listen.substr(colon + 1));
    if (p < 0 || p > 65535) return false;
    *port = static_cast<uint16_t>(p);
  } catch (...) {
    return false;
  }
  return !host->empty();
}

}  // namespace sediment

namespace sediment {

bool ValidSegmentFileName(const std::string& name) {
  if (name.size() < 5 || name.size() > 200 || !name.ends_with(".seg")) return false;
  if (name.find('/') != std::string::npos || name.find('\\') != std::string::npos) return false;
  if (name.find("..") != std::string::npos || name[0] == '.') return false;
  return true;
}

bool HasSnapshot(Env* env, const std::string& dir) {
  auto names = env->ListDir(dir);
  if (!names.ok()) return false;
  for (const auto& n : *names) {
    if (n.rfind("snapshot-", 0) == 0 && n.size() > 4 && n.substr(n.size() - 4) == ".bin") {
      return true;
    }
  }
  return false;
}

}  // namespace sediment
