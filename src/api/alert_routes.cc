// Saved searches and alerts (alerts/README.md), kept in Global (PutSavedSearch, PutAlert, ...).
// API token, and the repository must exist.
//   GET    /api/v1/repositories/{repo}/savedsearches            [{name, queryString, start, end}]
//   POST   /api/v1/repositories/{repo}/savedsearches            {name, queryString, start?, end?}
//                                                               201; 409 when the name exists
//   GET|PUT|DELETE /api/v1/repositories/{repo}/savedsearches/{name}
//   GET    /api/v1/repositories/{repo}/alerts                   [alert]
//   POST   /api/v1/repositories/{repo}/alerts                   alert with a name: 201; 409
//   GET|PUT|DELETE /api/v1/repositories/{repo}/alerts/{name}
//   GET    /api/v1/repositories/{repo}/alerts/{name}/firings    the recent firings, newest first
// An alert body: {"name", "queryString", "every": "5s" | ms, "window": "5s" | ms (default: every),
// "delay": "1s" | ms (default 0), "threshold": {"field", "op", "value"} (optional), "actions":
// [{"type": "webhook", "url", "headers": {..}, "bodyTemplate"}, {"type": "log", "template"}],
// "enabled": true}.
#include <simdjson.h>
#include <spdlog/spdlog.h>

#include "alerts/alerts.h"
#include "api/node.h"
#include "api/routes.h"
#include "common/json_writer.h"
#include "coordinator/lookup_files.h"
#include "coordinator/saved_queries.h"
#include "http/responses.h"
#include "http/status_code.h"
#include "query/lookup.h"

namespace sediment::api {
namespace {

constexpr size_t kMaxQueryBytes = 64 * 1024;
constexpr size_t kMaxActions = 10;
constexpr int64_t kMinEveryMs = 1000;
constexpr int64_t kMaxDurationMs = 366LL * 24 * 3600 * 1000;

Status Bad(const std::string& what) { return Status::InvalidArgument(what); }

Result<simdjson::dom::object> ParseObject(simdjson::dom::parser& parser, const std::string& body) {
  simdjson::dom::element doc;
  if (parser.parse(body).get(doc) != simdjson::SUCCESS || !doc.is_object()) {
    return Bad("the body is not a JSON object");
  }
  return doc.get_object().value();
}

Result<std::string> StringField(simdjson::dom::object obj, const char* key, bool required,
                                std::string fallback = "") {
  simdjson::dom::element v;
  if (obj[key].get(v) != simdjson::SUCCESS || v.is_null()) {
    if (required) return Bad(std::string("the body needs a string field '") + key + "'");
    return fallback;
  }
  std::string_view s;
  if (v.get_string().get(s) != simdjson::SUCCESS) {
    return Bad(std::string("'") + key + "' must be a string");
  }
  return std::string(s);
}

// A duration: milliseconds as a number, or a relative time such as "5s", "10m", "1h".
Result<std::optional<int64_t>> DurationField(simdjson::dom::object obj, const char* key) {
  simdjson::dom::element v;
  if (obj[key].get(v) != simdjson::SUCCESS || v.is_null()) return std::optional<int64_t>();
  int64_t ms = 0;
  if (v.is_int64()) {
    ms = v.get_int64().value();
  } else if (v.is_string()) {
    constexpr int64_t kNow = 1LL << 50;
    auto t = query::ParseTimeBound(v.get_string().value(), kNow);
    if (!t.ok() || *t > kNow) {
      return Bad(std::string("'") + key + "' must be a duration such as \"5s\", \"10m\" or " +
                 "\"1h\", or milliseconds");
    }
    ms = kNow - *t;
  } else {
    return Bad(std::string("'") + key + "' must be a duration string or milliseconds");
  }
  if (ms < 0 || ms > kMaxDurationMs) {
    return Bad(std::string("'") + key + "' must be between 0 and 366 days");
  }
  return std::optional<int64_t>(ms);
}

void WriteSavedSearch(JsonWriter& w, const std::string& name, const SavedSearch& s) {
  w.BeginObject().Key("name").String(name).Key("queryString").String(s.query);
  w.Key("start").String(s.start).Key("end").String(s.end).EndObject();
}

void WriteAlert(JsonWriter& w, const std::string& repo, const std::string& name,
                const AlertState& a, int32_t partitions) {
  const AlertDef& d = a.def;
  w.BeginObject().Key("name").String(name).Key("id").Int(static_cast<int64_t>(a.id));
  w.Key("queryString").String(d.query).Key("everyMs").Int(d.every_ms);
  w.Key("windowMs").Int(d.window_ms).Key("delayMs").Int(d.delay_ms).Key("enabled").Bool(d.enabled);
  if (d.threshold) {
    w.Key("threshold").BeginObject().Key("field").String(d.threshold->field);
    w.Key("op").String(d.threshold->op).Key("value").Double(d.threshold->value).EndObject();
  }
  w.Key("actions").BeginArray();
  for (const AlertAction& act : d.actions) {
    w.BeginObject();
    if (act.kind == AlertActionKind::kWebhook) {
      w.Key("type").String("webhook").Key("url").String(act.url);
      w.Key("headers").BeginObject();
      for (const auto& [k, v] : act.headers) w.Key(k).String(v);
      w.EndObject().Key("bodyTemplate").String(act.body_template);
    } else {
      w.Key("type").String("log").Key("template").String(act.body_template);
    }
    w.EndObject();
  }
  w.EndArray();
  const alerts::Window next = alerts::NextWindow(a);
  w.Key("doneThroughMs").Int(a.done_through_ms);
  w.Key("nextWindow").BeginObject().Key("start").Int(next.start_ms).Key("end").Int(next.end_ms);
  w.EndObject();
  w.Key("partition").Int(alerts::AlertPartition(repo, name, partitions).value);
  w.EndObject();
}

const char* OutcomeName(AlertOutcome o) {
  switch (o) {
    case AlertOutcome::kFired:
      return "fired";
    case AlertOutcome::kFailed:
      return "failed";
    case AlertOutcome::kQuiet:
      break;
  }
  return "quiet";
}

class AlertRoutes : public Node {
 public:
  explicit AlertRoutes(const Node& node) : Node(node) {}

  int32_t Partitions() const { return ingest_log->partition_count(); }

  // ---- saved searches ----
  Result<SavedSearch> ReadSavedSearch(const std::string& body, std::string* name) const {
    simdjson::dom::parser parser;
    ASSIGN_OR_RETURN(simdjson::dom::object obj, ParseObject(parser, body));
    if (name != nullptr) {
      ASSIGN_OR_RETURN(*name, StringField(obj, "name", name->empty()));
    }
    SavedSearch s;
    ASSIGN_OR_RETURN(s.query, StringField(obj, "queryString", true));
    ASSIGN_OR_RETURN(s.start, StringField(obj, "start", false, "24h"));
    ASSIGN_OR_RETURN(s.end, StringField(obj, "end", false));
    return s;
  }

  // `saving`: the name of the saved search whose text this is (its calls of other saved
  // searches must not lead back to it), or "" for an alert's query.
  Status CheckQuery(const std::string& repo, const std::string& text,
                    const std::string& saving = "") const {
    if (text.empty()) return Bad("'queryString' is empty");
    if (text.size() > kMaxQueryBytes) {
      return Bad("'queryString' is longer than " + std::to_string(kMaxQueryBytes) + " bytes");
    }
    // A saved search's parameters may be left to its callers ($name(param=value)).
    auto bound = query::BindParameters(text, {}, /*missing_as_empty=*/!saving.empty());
    if (!bound.ok()) return bound.status();
    const coordinator::GlobalSavedQueries saved(global, repo);
    auto expanded = query::ExpandSavedQueries(*bound, saved, {}, saving);
    if (!expanded.ok()) return expanded.status();
    const coordinator::GlobalLookupFiles files(global, repo, geo);
    auto compiled = query::Compile(*expanded, &files);
    if (!compiled.ok()) return compiled.status();
    return Status::OK();
  }

  static Status CheckName(const std::string& name) {
    if (!IsValidAlertName(name)) {
      return Bad("invalid name '" + name + "': 1 to 100 letters, digits, '-', '_' or '.'");
    }
    return Status::OK();
  }

  http::Response PutSaved(const http::Request& req, const std::string& repo, std::string name,
                          bool create) const {
    std::string body_name = create ? "" : name;
    auto s = ReadSavedSearch(req.body, &body_name);
    if (!s.ok()) return http::JsonErrorFor(s.status());
    if (create) name = body_name;
    if (!body_name.empty() && body_name != name) {
      return http::JsonError(400, "the body names '" + body_name + "', the path '" + name + "'");
    }
    if (Status st = CheckName(name); !st.ok()) return http::JsonErrorFor(st);
    if (Status st = CheckQuery(repo, s->query, name); !st.ok()) return http::JsonErrorFor(st);
    const int64_t now = clock->NowMillis();
    for (const std::string& bound : {s->start, s->end}) {
      if (!bound.empty() && !query::ParseTimeBound(bound, now).ok()) {
        return http::JsonError(400, "'" + bound + "' is not a time such as \"24h\" or \"now\"");
      }
    }
    if (create && FindSaved(repo, name)) {
      return http::JsonError(409, "saved search '" + name + "' already exists in '" + repo + "'");
    }
    auto r = global->Submit(PutSavedSearch{repo, name, *s});
    if (!r.ok()) return http::JsonErrorFor(r.status());
    JsonWriter w;
    WriteSavedSearch(w, name, *s);
    return http::JsonBody(w.Take(), create ? 201 : 200);
  }

  std::optional<SavedSearch> FindSaved(const std::string& repo, const std::string& name) const {
    std::optional<SavedSearch> out;
    global->Read([&](const GlobalState& st) {
      auto it = st.repos.find(repo);
      if (it == st.repos.end()) return;
      auto s = it->second.saved_searches.find(name);
      if (s != it->second.saved_searches.end()) out = s->second;
    });
    return out;
  }

  http::Response ListSaved(const std::string& repo) const {
    JsonWriter w;
    w.BeginArray();
    global->Read([&](const GlobalState& st) {
      auto it = st.repos.find(repo);
      if (it == st.repos.end()) return;
      for (const auto& [name, s] : it->second.saved_searches) WriteSavedSearch(w, name, s);
    });
    w.EndArray();
    return http::JsonBody(w.Take());
  }

  http::Response Saved(const http::Request& req, const std::string& repo,
                       const std::string& name) const {
    if (req.method == "PUT") return PutSaved(req, repo, name, false);
    std::optional<SavedSearch> s = FindSaved(repo, name);
    if (!s) return http::JsonError(404, "no saved search '" + name + "' in '" + repo + "'");
    if (req.method == "GET") {
      JsonWriter w;
      WriteSavedSearch(w, name, *s);
      return http::JsonBody(w.Take());
    }
    auto r = global->Submit(DeleteSavedSearch{repo, name});
    if (!r.ok() && r.status().code() != StatusCode::kRejected) {
      return http::JsonErrorFor(r.status());
    }
    return http::NoContent();
  }

  // ---- alerts ----
  Result<AlertDef> ReadAlert(const std::string& repo, const std::string& body,
                             std::string* name) const {
    simdjson::dom::parser parser;
    ASSIGN_OR_RETURN(simdjson::dom::object obj, ParseObject(parser, body));
    ASSIGN_OR_RETURN(*name, StringField(obj, "name", false));
    AlertDef d;
    ASSIGN_OR_RETURN(d.query, StringField(obj, "queryString", true));
    RETURN_IF_ERROR(CheckQuery(repo, d.query));
    ASSIGN_OR_RETURN(std::optional<int64_t> every, DurationField(obj, "every"));
    if (!every) return Bad("the body needs 'every' (a duration such as \"5s\")");
    if (*every < kMinEveryMs) return Bad("'every' must be at least 1s");
    d.every_ms = *every;
    ASSIGN_OR_RETURN(std::optional<int64_t> window, DurationField(obj, "window"));
    d.window_ms = window.value_or(d.every_ms);
    if (d.window_ms <= 0) return Bad("'window' must be positive");
    ASSIGN_OR_RETURN(std::optional<int64_t> delay, DurationField(obj, "delay"));
    d.delay_ms = delay.value_or(0);
    simdjson::dom::element v;
    if (obj["enabled"].get(v) == simdjson::SUCCESS && !v.is_null()) {
      if (v.get(d.enabled) != simdjson::SUCCESS) return Bad("'enabled' must be true or false");
    }
    if (obj["threshold"].get(v) == simdjson::SUCCESS && !v.is_null()) {
      simdjson::dom::object t;
      if (v.get(t) != simdjson::SUCCESS) return Bad("'threshold' must be an object");
      AlertThreshold th;
      ASSIGN_OR_RETURN(th.field, StringField(t, "field", false, "_count"));
      ASSIGN_OR_RETURN(th.op, StringField(t, "op", false, ">"));
      if (!alerts::IsThresholdOp(th.op)) {
        return Bad("threshold 'op' must be one of >, >=, <, <=, ==, !=");
      }
      simdjson::dom::element value;
      if (t["value"].get(value) != simdjson::SUCCESS || !value.is_number()) {
        return Bad("threshold 'value' must be a number");
      }
      th.value = value.is_double()  ? value.get_double().value()
                 : value.is_int64() ? static_cast<double>(value.get_int64().value())
                                    : static_cast<double>(value.get_uint64().value());
      d.threshold = std::move(th);
    }
    simdjson::dom::array actions;
    if (obj["actions"].get(v) == simdjson::SUCCESS && !v.is_null()) {
      if (v.get(actions) != simdjson::SUCCESS) return Bad("'actions' must be an array");
      for (simdjson::dom::element e : actions) {
        simdjson::dom::object a;
        if (e.get(a) != simdjson::SUCCESS) return Bad("each action must be an object");
        AlertAction act;
        ASSIGN_OR_RETURN(std::string type, StringField(a, "type", false, "webhook"));
        if (type == "webhook") {
          ASSIGN_OR_RETURN(act.url, StringField(a, "url", true));
          if (!act.url.starts_with("http://") && !act.url.starts_with("https://")) {
            return Bad("webhook 'url' must start with http:// or https://");
          }
          ASSIGN_OR_RETURN(act.body_template, StringField(a, "bodyTemplate", false));
          simdjson::dom::element h;
          if (a["headers"].get(h) == simdjson::SUCCESS && !h.is_null()) {
            simdjson::dom::object headers;
            if (h.get(headers) != simdjson::SUCCESS) return Bad("'headers' must be an object");
            for (auto [key, value] : headers) {
              std::string_view s;
              if (value.get_string().get(s) != simdjson::SUCCESS) {
                return Bad("header '" + std::string(key) + "' must be a string");
              }
              act.headers.emplace_back(std::string(key), std::string(s));
            }
          }
        } else if (type == "log") {
          act.kind = AlertActionKind::kLogLine;
          ASSIGN_OR_RETURN(act.body_template, StringField(a, "template", false));
        } else {
          return Bad("action 'type' must be \"webhook\" or \"log\", not '" + type + "'");
        }
        d.actions.push_back(std::move(act));
      }
    }
    if (d.actions.size() > kMaxActions) {
      return Bad("at most " + std::to_string(kMaxActions) + " actions");
    }
    return d;
  }

  std::optional<AlertState> FindAlert(const std::string& repo, const std::string& name) const {
    std::optional<AlertState> out;
    global->Read([&](const GlobalState& st) {
      auto it = st.repos.find(repo);
      if (it == st.repos.end()) return;
      auto a = it->second.alerts.find(name);
      if (a != it->second.alerts.end()) out = a->second;
    });
    return out;
  }

  http::Response PutAlertRoute(const http::Request& req, const std::string& repo, std::string name,
                               bool create) const {
    std::string body_name;
    auto d = ReadAlert(repo, req.body, &body_name);
    if (!d.ok()) return http::JsonErrorFor(d.status());
    if (create) {
      if (body_name.empty()) return http::JsonError(400, "the body needs a string field 'name'");
      name = body_name;
    } else if (!body_name.empty() && body_name != name) {
      return http::JsonError(400, "the body names '" + body_name + "', the path '" + name + "'");
    }
    if (Status st = CheckName(name); !st.ok()) return http::JsonErrorFor(st);
    if (create && FindAlert(repo, name)) {
      return http::JsonError(409, "alert '" + name + "' already exists in '" + repo + "'");
    }
    auto r = global->Submit(PutAlert{repo, name, *d, clock->NowMillis()});
    if (!r.ok()) return http::JsonErrorFor(r.status());
    spdlog::info("alert '{}' of repository '{}' stored", name, repo);
    return GetAlert(repo, name, create ? 201 : 200);
  }

  http::Response GetAlert(const std::string& repo, const std::string& name, int status) const {
    std::optional<AlertState> a = FindAlert(repo, name);
    if (!a) return http::JsonError(404, "no alert '" + name + "' in '" + repo + "'");
    JsonWriter w;
    WriteAlert(w, repo, name, *a, Partitions());
    return http::JsonBody(w.Take(), status);
  }

  http::Response ListAlerts(const std::string& repo) const {
    JsonWriter w;
    w.BeginArray();
    global->Read([&](const GlobalState& st) {
      auto it = st.repos.find(repo);
      if (it == st.repos.end()) return;
      for (const auto& [name, a] : it->second.alerts) WriteAlert(w, repo, name, a, Partitions());
    });
    w.EndArray();
    return http::JsonBody(w.Take());
  }

  http::Response Alert(const http::Request& req, const std::string& repo,
                       const std::string& name) const {
    if (req.method == "PUT") return PutAlertRoute(req, repo, name, false);
    if (req.method == "GET") return GetAlert(repo, name, 200);
    if (!FindAlert(repo, name)) {
      return http::JsonError(404, "no alert '" + name + "' in '" + repo + "'");
    }
    auto r = global->Submit(DeleteAlert{repo, name});
    if (!r.ok() && r.status().code() != StatusCode::kRejected) {
      return http::JsonErrorFor(r.status());
    }
    spdlog::info("alert '{}' of repository '{}' deleted", name, repo);
    return http::NoContent();
  }

  http::Response Firings(const std::string& repo, const std::string& name) const {
    std::optional<AlertState> a = FindAlert(repo, name);
    if (!a) return http::JsonError(404, "no alert '" + name + "' in '" + repo + "'");
    JsonWriter w;
    w.BeginArray();
    for (auto it = a->firings.rbegin(); it != a->firings.rend(); ++it) {
      w.BeginObject().Key("firingId").String(AlertFiringId(a->id, it->window_end_ms));
      w.Key("windowStart").Int(it->window_start_ms).Key("windowEnd").Int(it->window_end_ms);
      w.Key("status").String(OutcomeName(it->outcome));
      w.Key("resultCount").Int(static_cast<int64_t>(it->result_count));
      w.Key("attempts").Int(it->attempts).Key("node").Int(it->node.value);
      w.Key("at").Int(it->at_ms).Key("error").String(it->error).EndObject();
    }
    w.EndArray();
    return http::JsonBody(w.Take());
  }
};

}  // namespace

void AddAlertRoutes(http::Router& router, const Node& node) {
  auto self = std::make_shared<const AlertRoutes>(node);
  for (const char* prefix : {"/api/v1/repositories/", "/api/v1/dataspaces/"}) {
    const std::string saved = std::string(prefix) + "{repo}/savedsearches";
    router.Add(
        "GET|POST", saved,
        [self](const http::Request& req, const http::PathParams& p) {
          const std::string& repo = p.find("repo")->second;
          if (req.method == "POST") return self->PutSaved(req, repo, "", true);
          return self->ListSaved(repo);
        },
        node.RepoGate(Permission::kRead, Permission::kManage));
    router.Add(
        "GET|PUT|DELETE", saved + "/{name}",
        [self](const http::Request& req, const http::PathParams& p) {
          return self->Saved(req, p.find("repo")->second, p.find("name")->second);
        },
        node.RepoGate(Permission::kRead, Permission::kManage));
    const std::string alerts = std::string(prefix) + "{repo}/alerts";
    router.Add(
        "GET|POST", alerts,
        [self](const http::Request& req, const http::PathParams& p) {
          const std::string& repo = p.find("repo")->second;
          if (req.method == "POST") return self->PutAlertRoute(req, repo, "", true);
          return self->ListAlerts(repo);
        },
        node.RepoGate(Permission::kRead, Permission::kManage));
    router.Add(
        "GET|PUT|DELETE", alerts + "/{name}",
        [self](const http::Request& req, const http::PathParams& p) {
          return self->Alert(req, p.find("repo")->second, p.find("name")->second);
        },
        node.RepoGate(Permission::kRead, Permission::kManage));
    router.Add(
        "GET", alerts + "/{name}/firings",
        [self](const http::Request&, const http::PathParams& p) {
          return self->Firings(p.find("repo")->second, p.find("name")->second);
        },
        node.RepoGate(Permission::kRead));
  }
}

}  // namespace sediment::api
