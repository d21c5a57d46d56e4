#include "cli/alert_commands.h"

#include <simdjson.h>
#include <CLI/CLI.hpp>

#include <cstdio>

#include "common/json_writer.h"
#include "http/http_client.h"

namespace sediment::cli {
namespace {

int Fail(const std::string& what) {
  std::fprintf(stderr, "error: %s\n", what.c_str());
  return 1;
}

// One request with the API token; prints the body of a 2xx answer (when `print`).
int Call(const AlertArgs& args, const std::string& method, const std::string& path,
         const std::string& body, bool print = true) {
  http::FetchOptions o;
  o.ca_file = args.cacert;
  std::vector<std::pair<std::string, std::string>> headers = {
      {"Authorization", "Bearer " + args.token}};
  if (!body.empty()) headers.emplace_back("Content-Type", "application/json");
  auto r =
      http::Fetch(method, args.url + "/api/v1/repositories/" + args.repo + path, headers, body, o);
  if (!r.ok()) return Fail(r.status().ToString());
  if (r->status < 200 || r->status > 299) {
    return Fail("server answered " + std::to_string(r->status) + ": " + r->body);
  }
  if (print && !r->body.empty()) std::printf("%s\n", r->body.c_str());
  return 0;
}

// "FIELD OP VALUE" (spaces optional): the threshold object's members.
bool ParseThreshold(const std::string& text, JsonWriter& w) {
  for (const char* op : {">=", "<=", "==", "!=", ">", "<"}) {
    const size_t at = text.find(op);
    if (at == std::string::npos) continue;
    auto trim = [](std::string s) {
      while (!s.empty() && s.front() == ' ') s.erase(s.begin());
      while (!s.empty() && s.back() == ' ') s.pop_back();
      return s;
    };
    const std::string field = trim(text.substr(0, at));
    const std::string value = trim(text.substr(at + std::string(op).size()));
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    if (field.empty() || value.empty() || *end != '\0') return false;
    w.Key("threshold").BeginObject().Key("field").String(field).Key("op").String(op);
    w.Key("value").Double(v).EndObject();
    return true;
  }
  return false;
}

std::string AlertBody(const AlertArgs& args, bool* ok) {
  JsonWriter w;
  w.BeginObject().Key("name").String(args.name).Key("queryString").String(args.query);
  w.Key("every").String(args.every);
  if (!args.window.empty()) w.Key("window").String(args.window);
  if (!args.delay.empty()) w.Key("delay").String(args.delay);
  w.Key("enabled").Bool(!args.disabled);
  *ok = args.threshold.empty() || ParseThreshold(args.threshold, w);
  w.Key("actions").BeginArray();
  for (const std::string& url : args.webhooks) {
    w.BeginObject().Key("type").String("webhook").Key("url").String(url);
    if (!args.body_template.empty()) w.Key("bodyTemplate").String(args.body_template);
    w.EndObject();
  }
  if (args.log_line) w.BeginObject().Key("type").String("log").EndObject();
  w.EndArray().EndObject();
  return w.Take();
}

void AddCommon(CLI::App& c, AlertArgs& args) {
  c.add_option("--url", args.url, "server URL (http:// or https://)")
      ->envname("SEDIMENT_URL")
      ->capture_default_str();
  c.add_option("--cacert", args.cacert, "https: PEM CA bundle (default: the system's CAs)")
      ->envname("SEDIMENT_CACERT");
  c.add_option("--token", args.token, "API token")->envname("SEDIMENT_API_TOKEN")->required();
  c.add_option("--repo", args.repo, "repository")->capture_default_str();
}

CLI::App* Sub(CLI::App& parent, const char* name, const char* help, AlertArgs& args, bool named) {
  CLI::App* c = parent.add_subcommand(name, help);
  AddCommon(*c, args);
  if (named) c->add_option("name", args.name, "name")->required();
  return c;
}

void AddAlertDefinition(CLI::App& c, AlertArgs& args) {
  c.add_option("--query", args.query, "the query, e.g. 'status=500 | count()'")->required();
  c.add_option("--every", args.every, "interval (5s, 1m, ...); windows end on its multiples")
      ->capture_default_str();
  c.add_option("--window", args.window, "time window of each run (default: the interval)");
  c.add_option("--delay", args.delay, "how long after a window's end it runs (default 0s)");
  c.add_option("--threshold", args.threshold,
               "fire when a result field crosses it, e.g. '_count>3' (default: any result)");
  c.add_option("--webhook", args.webhooks, "webhook URL (repeatable)");
  c.add_option("--body-template", args.body_template,
               "webhook JSON body with {alert_name} {firing_id} {window_start} {window_end} "
               "{result_count} {results} (default: all of them)");
  c.add_flag("--log", args.log_line, "also write a log line on the node");
  c.add_flag("--disabled", args.disabled, "store it disabled");
}

}  // namespace

CLI::App* AddAlertCommands(CLI::App& app, AlertArgs& args) {
  CLI::App* alerts = app.add_subcommand("alerts", "manage a repository's alerts");
  alerts->require_subcommand(1);
  Sub(*alerts, "list", "list the alerts (JSON)", args, false);
  Sub(*alerts, "get", "show one alert (JSON)", args, true);
  AddAlertDefinition(*Sub(*alerts, "create", "create an alert", args, true), args);
  AddAlertDefinition(*Sub(*alerts, "update", "replace an alert's definition", args, true), args);
  Sub(*alerts, "delete", "delete an alert", args, true);
  Sub(*alerts, "firings", "the alert's recent firings (JSON, newest first)", args, true);
  return alerts;
}

CLI::App* AddSavedSearchCommands(CLI::App& app, AlertArgs& args) {
  CLI::App* saved = app.add_subcommand("savedsearches", "manage a repository's saved searches");
  saved->require_subcommand(1);
  Sub(*saved, "list", "list the saved searches (JSON)", args, false);
  Sub(*saved, "get", "show one saved search (JSON)", args, true);
  for (const char* verb : {"create", "update"}) {
    CLI::App* c = Sub(*saved, verb, "store a saved search", args, true);
    c->add_option("--query", args.query, "the query")->required();
    c->add_option("--start", args.start, "window start (24h, 15m, ...)")->capture_default_str();
    c->add_option("--end", args.end, "window end (default now)");
  }
  Sub(*saved, "delete", "delete a saved search", args, true);
  return saved;
}

int RunAlertCommand(CLI::App* command, const AlertArgs& args) {
  const std::string path = "/alerts/" + args.name;
  if (command->got_subcommand("list")) return Call(args, "GET", "/alerts", "");
  if (command->got_subcommand("get")) return Call(args, "GET", path, "");
  if (command->got_subcommand("firings")) return Call(args, "GET", path + "/firings", "");
  if (command->got_subcommand("delete")) {
    const int rc = Call(args, "DELETE", path, "", false);
    if (rc == 0) std::printf("deleted alert %s\n", args.name.c_str());
    return rc;
  }
  bool ok = true;
  const std::string body = AlertBody(args, &ok);
  if (!ok) return Fail("--threshold must be FIELD OP NUMBER, e.g. '_count>3'");
  if (command->got_subcommand("create")) return Call(args, "POST", "/alerts", body);
  return Call(args, "PUT", path, body);
}

int RunSavedSearchCommand(CLI::App* command, const AlertArgs& args) {
  const std::string path = "/savedsearches/" + args.name;
  if (command->got_subcommand("list")) return Call(args, "GET", "/savedsearches", "");
  if (command->got_subcommand("get")) return Call(args, "GET", path, "");
  if (command->got_subcommand("delete")) {
    const int rc = Call(args, "DELETE", path, "", false);
    if (rc == 0) std::printf("deleted saved search %s\n", args.name.c_str());
    return rc;
  }
  JsonWriter w;
  w.BeginObject().Key("name").String(args.name).Key("queryString").String(args.query);
  w.Key("start").String(args.start).Key("end").String(args.end).EndObject();
  if (command->got_subcommand("create")) return Call(args, "POST", "/savedsearches", w.str());
  return Call(args, "PUT", path, w.str());
}

}  // namespace sediment::cli
