// Parser routes: a repository's custom parsers (parsers/README.md), kept in Global (PutParser /
// DeleteParser) so that every node parses alike. API token, and the repository must exist.
//   PUT    /api/v1/repositories/{repo}/parsers/{name}       {"script": "...", "tagFields": [...]}
//                                                          (or the script as a text body)
//   GET    /api/v1/repositories/{repo}/parsers              [{"name", "script", "tagFields",
//                                                           "builtin"}]: custom, then built-in
//   GET    /api/v1/repositories/{repo}/parsers/{name}       {"name", "script", "tagFields"}
//   DELETE /api/v1/repositories/{repo}/parsers/{name}       204
//   POST   /api/v1/repositories/{repo}/parsers/{name}/test  {"lines": [...]} (or text lines), and
//          optionally "script"/"tagFields" to test an unsaved script: the events the parser
//          would produce, per input line.
#include <simdjson.h>
#include <spdlog/spdlog.h>

#include <optional>

#include "api/node.h"
#include "api/routes.h"
#include "common/json_writer.h"
#include "http/responses.h"
#include "http/status_code.h"
#include "parsers/parsers.h"

namespace sediment::api {
namespace {

constexpr size_t kMaxParserScriptBytes = 64 * 1024;

// A request body: JSON object (when it starts with '{') or plain text.
struct ParserBody {
  std::optional<std::string> script;
  std::vector<std::string> tag_fields;
  std::vector<std::string> lines;
};

Result<ParserBody> ReadBody(std::string_view body, bool text_is_script) {
  ParserBody out;
  size_t first = body.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos || body[first] != '{') {
    if (text_is_script) {
      out.script = std::string(body);
    } else {
      size_t pos = 0;
      while (pos < body.size()) {
        size_t nl = body.find('\n', pos);
        if (nl == std::string_view::npos) nl = body.size();
        std::string_view line = body.substr(pos, nl - pos);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (!line.empty()) out.lines.emplace_back(line);
        pos = nl + 1;
      }
    }
    return out;
  }
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(body.data(), body.size()).get(doc) != simdjson::SUCCESS || !doc.is_object()) {
    return Status::InvalidArgument("the body is not a JSON object");
  }
  for (auto [key, value] : doc.get_object()) {
    if (key == "script") {
      std::string_view s;
      if (value.get_string().get(s) != simdjson::SUCCESS) {
        return Status::InvalidArgument("'script' must be a string");
      }
      out.script = std::string(s);
    } else if (key == "tagFields" || key == "lines") {
      simdjson::dom::array arr;
      if (value.get_array().get(arr) != simdjson::SUCCESS) {
        return Status::InvalidArgument("'" + std::string(key) + "' must be an array of strings");
      }
      for (simdjson::dom::element e : arr) {
        std::string_view s;
        if (e.get_string().get(s) != simdjson::SUCCESS) {
          return Status::InvalidArgument("'" + std::string(key) + "' must be an array of strings");
        }
        (key == "lines" ? out.lines : out.tag_fields).emplace_back(s);
      }
    }
  }
  return out;
}

void WriteDef(JsonWriter& w, const std::string& name, const ParserDef& def, bool builtin) {
  w.BeginObject().Key("name").String(name).Key("script").String(def.script);
  w.Key("tagFields").BeginArray();
  for (const std::string& f : def.tag_fields) w.String(f);
  w.EndArray().Key("builtin").Bool(builtin).EndObject();
}

void WriteEvent(JsonWriter& w, const parsers::TaggedEvent& t) {
  w.BeginObject();
  w.Key("@timestamp").Int(t.event.timestamp_ms);
  w.Key("@rawstring").String(t.event.raw);
  for (const auto& [name, value] : t.tags) w.Key(name).String(value);
  for (const Field& f : t.event.fields) w.Key(f.name).String(f.value);
  w.EndObject();
}

class ParserRoutes : public Node {
 public:
  explicit ParserRoutes(const Node& node) : Node(node) {}

  std::optional<ParserDef> Find(const std::string& repo, const std::string& name) const {
    std::optional<ParserDef> def;
    global->Read([&](const GlobalState& st) {
      auto it = st.repos.find(repo);
      if (it == st.repos.end()) return;
      auto p = it->second.parsers.find(name);
      if (p != it->second.parsers.end()) def = p->second;
    });
    return def;
  }

  http::Response Put(const http::Request& req, const std::string& repo,
                     const std::string& name) const {
    if (!parsers::IsValidParserName(name)) {
      return http::JsonError(400, "invalid parser name '" + name +
                                      "': 1 to 100 letters, digits, '-', '_' or '.', and not a "
                                      "built-in parser's name");
    }
    auto body = ReadBody(req.body, /*text_is_script=*/true);
    if (!body.ok()) return http::JsonErrorFor(body.status());
    if (!body->script) return http::JsonError(400, "no 'script' in the body");
    // One Global event carries it (a commit-log record).
    if (body->script->size() > kMaxParserScriptBytes) {
      return http::JsonError(413, "the script has " + std::to_string(body->script->size()) +
                                      " bytes, more than " + std::to_string(kMaxParserScriptBytes));
    }
    auto compiled = parsers::CompileCustom(name, *body->script, body->tag_fields);
    if (!compiled.ok()) return http::JsonErrorFor(compiled.status());
    ParserDef def{std::move(*body->script), std::move(body->tag_fields)};
    auto r = global->Submit(PutParser{repo, name, def});
    if (!r.ok()) return http::JsonErrorFor(r.status());
    spdlog::info("parser '{}' of repository '{}' stored", name, repo);
    JsonWriter w;
    WriteDef(w, name, def, false);
    return http::JsonBody(w.Take());
  }

  http::Response List(const std::string& repo) const {
    JsonWriter w;
    w.BeginArray();
    global->Read([&](const GlobalState& st) {
      auto it = st.repos.find(repo);
      if (it == st.repos.end()) return;
      for (const auto& [name, def] : it->second.parsers) WriteDef(w, name, def, false);
    });
    for (const std::string& name : parsers::BuiltinNames()) WriteDef(w, name, {}, true);
    w.EndArray();
    return http::JsonBody(w.Take());
  }

  http::Response Get(const std::string& repo, const std::string& name) const {
    std::optional<ParserDef> def = Find(repo, name);
    if (!def) {
      if (parsers::IsBuiltinName(name)) {
        JsonWriter w;
        WriteDef(w, name, {}, true);
        return http::JsonBody(w.Take());
      }
      return http::JsonError(404, "no parser '" + name + "' in repository '" + repo + "'");
    }
    JsonWriter w;
    WriteDef(w, name, *def, false);
    return http::JsonBody(w.Take());
  }

  http::Response Delete(const std::string& repo, const std::string& name) const {
    if (!Find(repo, name)) {
      return http::JsonError(404, "no parser '" + name + "' in repository '" + repo + "'");
    }
    auto r = global->Submit(DeleteParser{repo, name});
    // Deleted meanwhile by another request: it is gone either way.
    if (!r.ok() && r.status().code() != StatusCode::kRejected) {
      return http::JsonErrorFor(r.status());
    }
    spdlog::info("parser '{}' of repository '{}' deleted", name, repo);
    http::Response resp;
    resp.status = 204;
    resp.content_type.clear();
    return resp;
  }

  http::Response Test(const http::Request& req, const std::string& repo,
                      const std::string& name) const {
    auto body = ReadBody(req.body, /*text_is_script=*/false);
    if (!body.ok()) return http::JsonErrorFor(body.status());
    std::shared_ptr<const parsers::Parser> parser;
    if (body->script) {
      auto compiled = parsers::CompileCustom(name, *body->script, body->tag_fields);
      if (!compiled.ok()) return http::JsonErrorFor(compiled.status());
      parser = *compiled;
    } else if (std::optional<ParserDef> def = Find(repo, name)) {
      auto compiled = parsers::CompileCustom(name, def->script, def->tag_fields);
      if (!compiled.ok()) return http::JsonErrorFor(compiled.status());
      parser = *compiled;
    } else {
      parser = parsers::Builtin(name);
      if (parser == nullptr) {
        return http::JsonError(404, "no parser '" + name + "' in repository '" + repo +
                                        "' (and no 'script' in the body)");
      }
    }
    const int64_t now = clock->NowMillis();
    JsonWriter w;
    w.BeginObject().Key("parser").String(parser->name()).Key("results").BeginArray();
    std::vector<parsers::TaggedEvent> out;
    for (const std::string& line : body->lines) {
      parsers::TaggedEvent in;
      in.event.raw = line;
      in.event.timestamp_ms = now;
      in.event.ingest_ms = now;
      out.clear();
      parser->Run(in, &out);
      w.BeginObject().Key("input").String(line).Key("events").BeginArray();
      for (const parsers::TaggedEvent& t : out) WriteEvent(w, t);
      w.EndArray().EndObject();
    }
    w.EndArray().EndObject();
    return http::JsonBody(w.Take());
  }
};

}  // namespace

void AddParserRoutes(http::Router& router, const Node& node) {
  auto self = std::make_shared<const ParserRoutes>(node);
  for (const char* prefix : {"/api/v1/repositories/", "/api/v1/dataspaces/"}) {
    const std::string base = std::string(prefix) + "{repo}/parsers";
    router.Add(
        "GET", base,
        [self](const http::Request&, const http::PathParams& p) {
          return self->List(p.find("repo")->second);
        },
        node.RepoGate(Permission::kRead));
    router.Add(
        "GET|PUT|DELETE", base + "/{name}",
        [self](const http::Request& req, const http::PathParams& p) {
          const std::string& repo = p.find("repo")->second;
          const std::string& name = p.find("name")->second;
          if (req.method == "PUT") return self->Put(req, repo, name);
          return req.method == "GET" ? self->Get(repo, name) : self->Delete(repo, name);
        },
        node.RepoGate(Permission::kRead, Permission::kManage));
    router.Add(
        "POST", base + "/{name}/test",
        [self](const http::Request& req, const http::PathParams& p) {
          return self->Test(req, p.find("repo")->second, p.find("name")->second);
        },
        node.RepoGate(Permission::kRead));
  }
}

}  // namespace sediment::api
