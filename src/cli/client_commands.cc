#include "cli/client_commands.h"

#include <simdjson.h>
#include <CLI/CLI.hpp>

#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>

#include <cstdio>
#include <ctime>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <optional>

#include "common/json_writer.h"
#include "common/time_parse.h"
#include "http/http_client.h"

namespace sediment::cli {
namespace {

std::vector<std::pair<std::string, std::string>> AuthHeaders(const std::string& token,
                                                             const std::string& content_type) {
  std::vector<std::pair<std::string, std::string>> h;
  if (!token.empty()) h.emplace_back("Authorization", "Bearer " + token);
  if (!content_type.empty()) h.emplace_back("Content-Type", content_type);
  return h;
}

// The options of every request: https:// servers are verified against `cacert` (PEM; empty = the
// system's CAs) and must name the URL's host.
sediment::http::FetchOptions Options(const std::string& cacert) {
  sediment::http::FetchOptions o;
  o.ca_file = cacert;
  return o;
}

int Fail(const std::string& what) {
  std::fprintf(stderr, "error: %s\n", what.c_str());
  return 1;
}

// `sediment ingest`'s report on stderr: on a terminal a line redrawn at most ten times a second
// (bytes read, of the total and an ETA when every input is a regular file; events acknowledged;
// events/s), and a summary line at the end either way.
class IngestProgress {
 public:
  IngestProgress(bool terminal, uint64_t total_bytes)
      : terminal_(terminal), total_(total_bytes), start_(Clock::now()) {}

  void Acknowledged(size_t events, uint64_t bytes) {
    events_ += events;
    bytes_ += bytes;
    if (!terminal_) return;
    const auto now = Clock::now();
    if (now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    const double secs = Seconds(now);
    const double rate = secs > 0 ? static_cast<double>(events_) / secs : 0;
    std::string line = "\ringested " + Bytes(bytes_);
    if (total_ > 0) {
      line += " of " + Bytes(total_) + " (" + std::to_string(bytes_ * 100 / total_) + "%)";
    }
    char tail[128];
    std::snprintf(tail, sizeof tail, ", %zu events, %.0f events/s", events_, rate);
    line += tail;
    if (total_ > 0 && bytes_ > 0 && bytes_ < total_) {
      const double eta = secs * static_cast<double>(total_ - bytes_) / static_cast<double>(bytes_);
      std::snprintf(tail, sizeof tail, ", ETA %.0f s", eta);
      line += tail;
    }
    line += "\x1b[K";  // clear the rest of the previous, longer line
    std::fputs(line.c_str(), stderr);
    std::fflush(stderr);
  }

  // The summary line (after the progress line on a terminal).
  void Done() const {
    const double secs = Seconds(Clock::now());
    const double rate = secs > 0 ? static_cast<double>(events_) / secs : 0;
    std::fprintf(stderr, "%singested %zu events, all acknowledged (%s in %.1f s, %.0f events/s)\n",
                 terminal_ ? "\r\x1b[K" : "", events_, Bytes(bytes_).c_str(), secs, rate);
  }

 private:
  using Clock = std::chrono::steady_clock;
  double Seconds(Clock::time_point now) const {
    return std::chrono::duration<double>(now - start_).count();
  }
  static std::string Bytes(uint64_t b) {
    char out[32];
    if (b >= (uint64_t{1} << 30)) {
      std::snprintf(out, sizeof out, "%.1f GiB", static_cast<double>(b) / (1 << 30));
    } else if (b >= (uint64_t{1} << 20)) {
      std::snprintf(out, sizeof out, "%.1f MiB", static_cast<double>(b) / (1 << 20));
    } else if (b >= 1024) {
      std::snprintf(out, sizeof out, "%.1f KiB", static_cast<double>(b) / 1024);
    } else {
      std::snprintf(out, sizeof out, "%llu B", static_cast<unsigned long long>(b));
    }
    return out;
  }

  const bool terminal_;
  const uint64_t total_;  // 0: unknown (stdin, a pipe)
  const Clock::time_point start_;
  Clock::time_point last_draw_{};
  size_t events_ = 0;
  uint64_t bytes_ = 0;
};

// The summed size of `files` when each is a regular file (an ETA is possible); else 0.
uint64_t TotalBytes(const std::vector<std::string>& files) {
  uint64_t total = 0;
  for (const auto& f : files) {
    struct stat st {};
    if (f == "-" || ::stat(f.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    total += static_cast<uint64_t>(st.st_size);
  }
  return total;
}

int IngestLines(const std::string& url, const std::string& cacert, const std::string& token,
                std::vector<std::string> files, size_t batch_lines) {
  if (files.empty()) files.push_back("-");
  IngestProgress progress(::isatty(STDERR_FILENO) == 1, TotalBytes(files));
  std::string batch;
  size_t lines = 0;
  uint64_t batch_bytes = 0;  // of the input, blank lines included
  auto send = [&]() -> bool {
    if (lines == 0) {
      progress.Acknowledged(0, batch_bytes);
      batch_bytes = 0;
      return true;
    }
    auto r = sediment::http::Fetch("POST", url + "/api/v1/ingest/raw",
                                   AuthHeaders(token, "text/plain"), batch, Options(cacert));
    if (!r.ok()) {
      Fail(r.status().ToString());
      return false;
    }
    if (r->status != 200) {
      Fail("server answered " + std::to_string(r->status) + ": " + r->body);
      return false;
    }
    progress.Acknowledged(lines, batch_bytes);
    batch.clear();
    lines = 0;
    batch_bytes = 0;
    return true;
  };
  for (const auto& f : files) {
    std::ifstream file;
    std::istream* in = &std::cin;
    if (f != "-") {
      file.open(f);
      if (!file) return Fail("cannot open " + f);
      in = &file;
    }
    std::string line;
    while (std::getline(*in, line)) {
      batch_bytes += line.size() + 1;
      if (line.empty()) continue;
      batch.append(line).push_back('\n');
      if (++lines >= batch_lines && !send()) return 1;
    }
  }
  if (!send()) return 1;
  progress.Done();
  return 0;
}

int QueryAndPrint(const std::string& url, const std::string& cacert, const std::string& token,
                  const std::string& repo, const std::string& query, const std::string& start,
                  const std::string& end, const std::string& format) {
  sediment::JsonWriter w;
  w.BeginObject().Key("queryString").String(query).Key("start").String(start);
  if (!end.empty()) w.Key("end").String(end);
  w.Key("isLive").Bool(false).EndObject();
  auto headers = AuthHeaders(token, "application/json");
  if (format == "ndjson") headers.emplace_back("Accept", "application/x-ndjson");
  auto r = sediment::http::Fetch("POST", url + "/api/v1/repositories/" + repo + "/query", headers,
                                 w.str(), Options(cacert));
  if (!r.ok()) return Fail(r.status().ToString());
  for (const auto& [k, v] : r->headers) {
    if (strcasecmp(k.c_str(), "X-Sediment-Warning") == 0) {
      std::fprintf(stderr, "warning: %s\n", v.c_str());
    }
  }
  if (r->status != 200)
    return Fail("server answered " + std::to_string(r->status) + ": " + r->body);
  if (format == "ndjson" || format == "json") {
    std::fwrite(r->body.data(), 1, r->body.size(), stdout);
    if (format == "json") std::fputc('\n', stdout);
    return 0;
  }
  // Terminal table: events as "time  rawstring", aggregates as aligned columns.
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(r->body).get(doc) || !doc.is_array())
    return Fail("unexpected answer: " + r->body);
  std::vector<std::string> columns;
  std::vector<std::map<std::string, std::string>> rows;
  bool events = false;
  for (simdjson::dom::element row : doc.get_array()) {
    if (!row.is_object()) continue;
    std::map<std::string, std::string> cells;
    for (auto field : row.get_object()) {
      std::string key(field.key);
      std::string value;
      if (field.value.is_string()) {
        value = std::string(field.value.get_string().value());
      } else if (field.value.is_int64()) {
        int64_t v = field.value.get_int64().value();
        value = key == "@timestamp" ? sediment::FormatIso8601Millis(v) : std::to_string(v);
      } else {
        value = simdjson::to_string(field.value);
      }
      if (key == "@rawstring") events = true;
      if (std::find(columns.begin(), columns.end(), key) == columns.end()) columns.push_back(key);
      cells[key] = std::move(value);
    }
    rows.push_back(std::move(cells));
  }
  if (events) {
    for (auto& row : rows)
      std::printf("%s  %s\n", row["@timestamp"].c_str(), row["@rawstring"].c_str());
  } else {
    std::vector<size_t> width;
    for (const auto& c : columns) {
      size_t wd = c.size();
      for (auto& row : rows) wd = std::max(wd, row[c].size());
      width.push_back(std::min<size_t>(wd, 80));
    }
    for (size_t i = 0; i < columns.size(); ++i)
      std::printf("%-*s  ", static_cast<int>(width[i]), columns[i].c_str());
    std::printf("\n");
    for (size_t i = 0; i < columns.size(); ++i)
      std::printf("%s  ", std::string(width[i], '-').c_str());
    std::printf("\n");
    for (auto& row : rows) {
      for (size_t i = 0; i < columns.size(); ++i)
        std::printf("%-*s  ", static_cast<int>(width[i]), row[columns[i]].c_str());
      std::printf("\n");
    }
  }
  std::fprintf(stderr, "%zu %s\n", rows.size(), events ? "events" : "rows");
  return 0;
}

// The cluster view (GET /api/v1/cluster) as tables: nodes, partitions, warnings.
int PrintCluster(const std::string& body) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(body).get(doc)) return Fail("the cluster view is not JSON: " + body);
  auto str = [](simdjson::dom::element e, const char* k) {
    std::string_view v;
    return e[k].get(v) ? std::string() : std::string(v);
  };
  auto num = [](simdjson::dom::element e, const char* k) {
    int64_t v = 0;
    return e[k].get(v) ? int64_t{-1} : v;
  };
  auto flag = [](simdjson::dom::element e, const char* k) {
    bool v = false;
    return !e[k].get(v) && v;
  };
  simdjson::dom::array nodes, partitions, warnings;
  if (doc["nodes"].get(nodes) || doc["partitions"].get(partitions) ||
      doc["warnings"].get(warnings)) {
    return Fail("the cluster view lacks nodes/partitions/warnings: " + body);
  }
  size_t alive = 0, total = 0;
  for (auto n : nodes) {
    ++total;
    alive += flag(n, "alive") ? 1 : 0;
  }
  std::printf("cluster %s: %zu of %zu nodes alive; this node %lld; Global applied through %lld\n\n",
              str(doc, "clusterId").c_str(), alive, total, static_cast<long long>(num(doc, "self")),
              static_cast<long long>(num(doc, "globalApplied")));
  if (str(doc, "health") == "degraded") {
    std::printf(
        "HEALTH DEGRADED: %lld commit-log offsets were deleted before they were digested "
        "(events lost; see lostRanges and the warnings)\n\n",
        static_cast<long long>(num(doc, "lostOffsets")));
  }
  simdjson::dom::element repl;
  if (!doc["replication"].get(repl)) {
    std::printf(
        "segments: %lld, replication factor %lld; %lld under-replicated (%lld bytes), "
        "%lld without a live copy, %lld with no copy, %lld staged merges\n\n",
        static_cast<long long>(num(repl, "segments")), static_cast<long long>(num(repl, "factor")),
        static_cast<long long>(num(repl, "underReplicated")),
        static_cast<long long>(num(repl, "underReplicatedBytes")),
        static_cast<long long>(num(repl, "withoutLiveCopy")),
        static_cast<long long>(num(repl, "lost")),
        static_cast<long long>(num(repl, "stagedMerges")));
  }
  std::printf("%-12s %-22s %-6s %-10s %-10s %-9s %-12s %s\n", "NODE", "ADDRESS", "ALIVE",
              "HEARTBEAT", "PARTITIONS", "COPIES", "BYTES", "REPAIR (pending/copied/corrupt)");
  for (auto n : nodes) {
    std::string id = std::to_string(num(n, "id")) + (flag(n, "self") ? "*" : "");
    std::string hb = flag(n, "alive") || num(n, "lastHeartbeatMsAgo") >= 0
                         ? std::to_string(num(n, "lastHeartbeatMsAgo")) + " ms"
                         : "never";
    std::string repair = "-";
    simdjson::dom::element r;
    if (!n["repair"].get(r) && r.is_object()) {
      repair = std::to_string(num(r, "pendingSegments")) + "/" +
               std::to_string(num(r, "copiedSegments")) + "/" +
               std::to_string(num(r, "corruptDetected"));
    }
    std::printf("%-12s %-22s %-6s %-10s %-10lld %-9lld %-12lld %s\n", id.c_str(),
                str(n, "address").c_str(), flag(n, "alive") ? "yes" : "NO", hb.c_str(),
                static_cast<long long>(num(n, "partitionsOwned")),
                static_cast<long long>(num(n, "segments")),
                static_cast<long long>(num(n, "segmentBytes")), repair.c_str());
  }
  std::printf("\n%-9s %-12s %-6s %-7s %-10s %-10s %-10s %-10s %-8s %s\n", "PARTITION", "OWNER",
              "EPOCH", "ALIVE", "REPLAY", "SAFE", "LOG START", "LOG END", "LAG", "BUFFERED");
  auto opt = [](int64_t v) { return v < 0 ? std::string("?") : std::to_string(v); };
  for (auto p : partitions) {
    std::printf("%-9lld %-12s %-6lld %-7s %-10lld %-10lld %-10s %-10s %-8s %lld\n",
                static_cast<long long>(num(p, "partition")),
                num(p, "owner") > 0 ? std::to_string(num(p, "owner")).c_str() : "-",
                static_cast<long long>(num(p, "epoch")), flag(p, "ownerAlive") ? "yes" : "NO",
                static_cast<long long>(num(p, "replayPoint")),
                static_cast<long long>(num(p, "safeOffset")), opt(num(p, "logStart")).c_str(),
                opt(num(p, "logEnd")).c_str(), opt(num(p, "lag")).c_str(),
                static_cast<long long>(num(p, "bufferedEvents")));
  }
  size_t nw = 0;
  for (auto w : warnings) {
    std::string_view text;
    if (w.get(text)) continue;
    if (nw++ == 0) std::printf("\nwarnings:\n");
    std::printf("  - %.*s\n", static_cast<int>(text.size()), text.data());
  }
  if (nw == 0) std::printf("\nno warnings\n");
  return 0;
}

int ShowStatus(const std::string& url, const std::string& token, const std::string& cacert,
               bool cluster, bool json) {
  auto r = sediment::http::Fetch("GET", url + (cluster ? "/api/v1/cluster" : "/api/v1/status"),
                                 {{"Authorization", "Bearer " + token}}, "", Options(cacert));
  if (!r.ok()) return Fail(r.status().ToString());
  if (r->status != 200)
    return Fail("server answered " + std::to_string(r->status) + ": " + r->body);
  if (cluster && !json) return PrintCluster(r->body);
  std::printf("%s\n", r->body.c_str());
  return 0;
}

void AddCacertOption(CLI::App& command, ClientArgs& args) {
  command
      .add_option("--cacert", args.cacert,
                  "https: PEM CA bundle to verify the server's certificate against (default: the "
                  "system's CAs)")
      ->envname("SEDIMENT_CACERT");
}

// ---- admin ----

// One management request; the answer's body on a 2xx, else 1 after an error line.
std::optional<std::string> AdminRequest(const ClientArgs& args, const std::string& method,
                                        const std::string& path, const std::string& body, int* rc) {
  auto r = sediment::http::Fetch(method, args.url + path,
                                 AuthHeaders(args.token, body.empty() ? "" : "application/json"),
                                 body, Options(args.cacert));
  if (!r.ok()) {
    *rc = Fail(r.status().ToString());
    return std::nullopt;
  }
  if (r->status < 200 || r->status >= 300) {
    *rc = Fail("server answered " + std::to_string(r->status) + ": " + r->body);
    return std::nullopt;
  }
  *rc = 0;
  return r->body;
}

std::string JsonStr(simdjson::dom::element e, const char* key) {
  std::string_view v;
  return e[key].get(v) ? std::string("-") : std::string(v);
}

std::string JsonNum(simdjson::dom::element e, const char* key) {
  int64_t v = 0;
  return e[key].get(v) ? std::string("-") : std::to_string(v);
}

// "2026-12-03T02:00:00Z" of an epoch-ms field; "-" when null or absent.
std::string JsonTime(simdjson::dom::element e, const char* key) {
  int64_t ms = 0;
  if (e[key].get(ms)) return "-";
  const std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// {"R": ["read", "manage"]} as "R:read+manage, ..." ("-" when empty).
std::string JsonGrants(simdjson::dom::element e) {
  simdjson::dom::object obj;
  if (e.get(obj)) return "-";
  std::string out;
  for (auto [repo, perms] : obj) {
    if (!out.empty()) out += ", ";
    out.append(repo).push_back(':');
    simdjson::dom::array arr;
    if (perms.get(arr)) continue;
    bool first = true;
    for (auto p : arr) {
      std::string_view v;
      if (p.get(v)) continue;
      if (!first) out += "+";
      out.append(v);
      first = false;
    }
  }
  return out.empty() ? "-" : out;
}

// Prints `body` (JSON) with `table` unless --json; 1 when it is not JSON.
int PrintAdmin(const ClientArgs& args, const std::string& body,
               const std::function<void(simdjson::dom::element)>& table) {
  if (args.json) {
    std::printf("%s\n", body.c_str());
    return 0;
  }
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(body).get(doc)) return Fail("the server's answer is not JSON: " + body);
  table(doc);
  return 0;
}

int AdminRepo(const ClientArgs& args, const std::string& action) {
  int rc = 0;
  if (action == "list") {
    auto body = AdminRequest(args, "GET", "/api/v1/repositories", "", &rc);
    if (!body) return rc;
    return PrintAdmin(args, *body, [](simdjson::dom::element doc) {
      std::printf("%-24s %-12s %-14s %-14s %-14s %-14s %s\n", "NAME", "EVENTS", "BYTES",
                  "RAW BYTES", "RETENTION MS", "RETENTION B", "CREATED");
      simdjson::dom::array repos;
      if (doc["repositories"].get(repos)) return;
      for (auto r : repos) {
        simdjson::dom::element ret = r["retention"].value_unsafe();
        std::printf("%-24s %-12s %-14s %-14s %-14s %-14s %s\n", JsonStr(r, "name").c_str(),
                    JsonNum(r, "events").c_str(), JsonNum(r, "bytes").c_str(),
                    JsonNum(r, "rawBytes").c_str(), JsonNum(ret, "retentionMs").c_str(),
                    JsonNum(ret, "retentionBytes").c_str(), JsonTime(r, "createdAt").c_str());
      }
    });
  }
  if (action == "create") {
    JsonWriter w;
    w.BeginObject().Key("name").String(args.admin_name).EndObject();
    auto body = AdminRequest(args, "POST", "/api/v1/repositories", w.Take(), &rc);
    if (!body) return rc;
    return PrintAdmin(args, *body, [&](simdjson::dom::element) {
      std::printf("created repository '%s'\n", args.admin_name.c_str());
    });
  }
  auto body = AdminRequest(args, "DELETE", "/api/v1/repositories/" + args.admin_name, "", &rc);
  if (!body) return rc;
  if (!args.json) std::printf("deleted repository '%s'\n", args.admin_name.c_str());
  return 0;
}

int AdminIngestToken(const ClientArgs& args, const std::string& action) {
  int rc = 0;
  const std::string path = "/api/v1/repositories/" + args.admin_repo + "/ingest-tokens";
  if (action == "list") {
    auto body = AdminRequest(args, "GET", path, "", &rc);
    if (!body) return rc;
    return PrintAdmin(args, *body, [](simdjson::dom::element doc) {
      std::printf("%-24s %-16s %s\n", "NAME", "PARSER", "CREATED");
      simdjson::dom::array tokens;
      if (doc["tokens"].get(tokens)) return;
      for (auto t : tokens) {
        std::printf("%-24s %-16s %s\n", JsonStr(t, "name").c_str(), JsonStr(t, "parser").c_str(),
                    JsonTime(t, "createdAt").c_str());
      }
      int64_t startup = 0;
      if (!doc["startupTokens"].get(startup) && startup > 0) {
        std::printf("(and %lld unnamed token(s) from --ingest-token)\n",
                    static_cast<long long>(startup));
      }
    });
  }
  if (action == "create") {
    JsonWriter w;
    w.BeginObject().Key("name").String(args.admin_name).Key("parser");
    if (args.parser.empty()) {
      w.Null();
    } else {
      w.String(args.parser);
    }
    w.EndObject();
    auto body = AdminRequest(args, "POST", path, w.Take(), &rc);
    if (!body) return rc;
    return PrintAdmin(args, *body, [&](simdjson::dom::element doc) {
      std::printf("created ingest token '%s' of repository '%s' (parser: %s)\ntoken: %s\n",
                  args.admin_name.c_str(), args.admin_repo.c_str(),
                  args.parser.empty() ? "none" : args.parser.c_str(),
                  JsonStr(doc, "token").c_str());
      std::fprintf(stderr, "the token is shown only once: store it now\n");
    });
  }
  auto body = AdminRequest(args, "DELETE", path + "/" + args.admin_name, "", &rc);
  if (!body) return rc;
  if (!args.json) {
    std::printf("revoked ingest token '%s' of repository '%s'\n", args.admin_name.c_str(),
                args.admin_repo.c_str());
  }
  return 0;
}

int AdminToken(const ClientArgs& args, const std::string& action) {
  int rc = 0;
  if (action == "list") {
    auto body = AdminRequest(args, "GET", "/api/v1/tokens", "", &rc);
    if (!body) return rc;
    return PrintAdmin(args, *body, [](simdjson::dom::element doc) {
      std::printf("%-24s %-6s %-40s %s\n", "NAME", "ADMIN", "REPOSITORIES", "CREATED");
      simdjson::dom::array tokens;
      if (doc["tokens"].get(tokens)) return;
      for (auto t : tokens) {
        bool admin_flag = false;
        const bool admin = !t["admin"].get(admin_flag) && admin_flag;
        std::printf("%-24s %-6s %-40s %s\n", JsonStr(t, "name").c_str(), admin ? "yes" : "no",
                    JsonGrants(t["repositories"].value_unsafe()).c_str(),
                    JsonTime(t, "createdAt").c_str());
      }
      int64_t startup = 0;
      if (!doc["startupTokens"].get(startup) && startup > 0) {
        std::printf("(and %lld unnamed admin token(s) from --api-token)\n",
                    static_cast<long long>(startup));
      }
    });
  }
  if (action == "create") {
    std::map<std::string, std::vector<std::string>> grants;
    for (const auto& r : args.read) grants[r].push_back("read");
    for (const auto& r : args.ingest) grants[r].push_back("ingest");
    for (const auto& r : args.manage) grants[r].push_back("manage");
    JsonWriter w;
    w.BeginObject().Key("name").String(args.admin_name).Key("admin").Bool(args.admin);
    w.Key("repositories").BeginObject();
    for (const auto& [repo, perms] : grants) {
      w.Key(repo).BeginArray();
      for (const auto& p : perms) w.String(p);
      w.EndArray();
    }
    w.EndObject().EndObject();
    auto body = AdminRequest(args, "POST", "/api/v1/tokens", w.Take(), &rc);
    if (!body) return rc;
    return PrintAdmin(args, *body, [&](simdjson::dom::element doc) {
      std::printf("created API token '%s' (admin: %s; repositories: %s)\ntoken: %s\n",
                  args.admin_name.c_str(), args.admin ? "yes" : "no",
                  JsonGrants(doc["repositories"].value_unsafe()).c_str(),
                  JsonStr(doc, "token").c_str());
      std::fprintf(stderr, "the token is shown only once: store it now\n");
    });
  }
  auto body = AdminRequest(args, "DELETE", "/api/v1/tokens/" + args.admin_name, "", &rc);
  if (!body) return rc;
  if (!args.json) std::printf("revoked API token '%s'\n", args.admin_name.c_str());
  return 0;
}

}  // namespace

CLI::App* AddAdminCommand(CLI::App& app, ClientArgs& args) {
  auto* admin = app.add_subcommand(
      "admin", "manage repositories, ingest tokens and API tokens (the management API)");
  admin->fallthrough();  // --url/--token/--json may also follow the nested commands
  admin->require_subcommand(1);
  admin->add_option("--url", args.url, "server URL (http:// or https://)")
      ->envname("SEDIMENT_URL")
      ->capture_default_str();
  AddCacertOption(*admin, args);
  admin->add_option("--token", args.token, "API token")->envname("SEDIMENT_API_TOKEN")->required();
  admin->add_flag("--json", args.json, "print the server's JSON instead of tables");

  auto* repo = admin->add_subcommand("repo", "repositories (create and delete: admin)");
  repo->require_subcommand(1);
  repo->add_subcommand("list", "the repositories this token can read");
  repo->add_subcommand("create", "create a repository")
      ->add_option("name", args.admin_name, "repository name")
      ->required();
  repo->add_subcommand("delete", "delete a repository and its data")
      ->add_option("name", args.admin_name, "repository name")
      ->required();

  auto* ingest = admin->add_subcommand("ingest-token", "a repository's ingest tokens (manage)");
  ingest->require_subcommand(1);
  ingest->add_subcommand("list", "the named ingest tokens of a repository")
      ->add_option("repo", args.admin_repo, "repository")
      ->required();
  auto* ic = ingest->add_subcommand("create", "create an ingest token (printed once)");
  ic->add_option("repo", args.admin_repo, "repository")->required();
  ic->add_option("name", args.admin_name, "token name")->required();
  ic->add_option("--parser", args.parser, "the parser its events go through");
  auto* ir = ingest->add_subcommand("revoke", "revoke an ingest token");
  ir->add_option("repo", args.admin_repo, "repository")->required();
  ir->add_option("name", args.admin_name, "token name")->required();

  auto* token = admin->add_subcommand("token", "API tokens (admin)");
  token->require_subcommand(1);
  token->add_subcommand("list", "the named API tokens and their permissions");
  auto* tc = token->add_subcommand("create", "create an API token (printed once)");
  tc->add_option("name", args.admin_name, "token name")->required();
  tc->add_flag("--admin", args.admin, "every permission, and the organization-level routes");
  tc->add_option("--read", args.read, "repository it may query (repeatable)");
  tc->add_option("--ingest", args.ingest, "repository it may ingest into (repeatable)");
  tc->add_option("--manage", args.manage,
                 "repository whose parsers, files, retention and ingest tokens it may manage "
                 "(repeatable)");
  token->add_subcommand("revoke", "revoke an API token")
      ->add_option("name", args.admin_name, "token name")
      ->required();
  return admin;
}

CLI::App* AddIngestCommand(CLI::App& app, ClientArgs& args) {
  auto* ingest =
      app.add_subcommand("ingest", "send log lines (files or stdin) to /api/v1/ingest/raw");
  ingest->add_option("--url", args.url, "server URL (http:// or https://)")
      ->envname("SEDIMENT_URL")
      ->capture_default_str();
  AddCacertOption(*ingest, args);
  ingest->add_option("--token", args.token, "ingest token")
      ->envname("SEDIMENT_INGEST_TOKEN")
      ->required();
  ingest->add_option("--batch-lines", args.batch_lines, "lines per request")->capture_default_str();
  ingest->add_option("files", args.files, "files to send ('-' or none: stdin)");
  return ingest;
}

CLI::App* AddQueryCommand(CLI::App& app, ClientArgs& args) {
  auto* query = app.add_subcommand("query", "run a query and print the result");
  query->add_option("--url", args.url, "server URL (http:// or https://)")
      ->envname("SEDIMENT_URL")
      ->capture_default_str();
  AddCacertOption(*query, args);
  query->add_option("--token", args.token, "API token")->envname("SEDIMENT_API_TOKEN")->required();
  query->add_option("--repo", args.repo, "repository")->capture_default_str();
  query->add_option("--start", args.start, "start: relative (15m, 24h, 7d), epoch ms or ISO-8601")
      ->capture_default_str();
  query->add_option("--end", args.end, "end (default now)");
  query->add_option("--format", args.format, "table, json or ndjson")
      ->check(CLI::IsMember({"table", "json", "ndjson"}))
      ->capture_default_str();
  query->add_option("query", args.query, "LogScale query, e.g. 'error | count()'")->required();
  return query;
}

CLI::App* AddStatusCommand(CLI::App& app, ClientArgs& args) {
  auto* status =
      app.add_subcommand("status",
                         "print the cluster view (GET /api/v1/cluster) as tables: nodes, "
                         "partitions with owner, epoch and lag, warnings; --json: the raw JSON; "
                         "--node: this node's status JSON");
  status->add_option("--url", args.url, "server URL (http:// or https://)")
      ->envname("SEDIMENT_URL")
      ->capture_default_str();
  AddCacertOption(*status, args);
  status->add_option("--token", args.token, "API token")->envname("SEDIMENT_API_TOKEN")->required();
  status->add_flag("--cluster", args.cluster, "the cluster view (the default; kept for scripts)");
  status->add_flag("--node", args.node, "the node's status (GET /api/v1/status) as JSON instead")
      ->excludes("--cluster");
  status->add_flag("--json", args.json, "the cluster view as the raw JSON document");
  return status;
}

int RunIngest(const ClientArgs& args) {
  return IngestLines(args.url, args.cacert, args.token, args.files, args.batch_lines);
}

int RunQuery(const ClientArgs& args) {
  return QueryAndPrint(args.url, args.cacert, args.token, args.repo, args.query, args.start,
                       args.end, args.format);
}

int RunStatus(const ClientArgs& args) {
  return ShowStatus(args.url, args.token, args.cacert, !args.node, args.json);
}

int RunAdmin(const ClientArgs& args, const CLI::App& admin) {
  for (const char* group : {"repo", "ingest-token", "token"}) {
    const CLI::App* g = admin.get_subcommand(group);
    if (!g->parsed()) continue;
    for (const char* action : {"list", "create", "delete", "revoke"}) {
      const CLI::App* a = nullptr;
      try {
        a = g->get_subcommand(action);
      } catch (const CLI::OptionNotFound&) {
        continue;  // the group has no such action
      }
      if (!a->parsed()) continue;
      const std::string group_name = group;
      if (group_name == "repo") return AdminRepo(args, action);
      if (group_name == "ingest-token") return AdminIngestToken(args, action);
      return AdminToken(args, action);
    }
  }
  return Fail("admin: name a command (see sediment admin --help)");
}

}  // namespace sediment::cli
