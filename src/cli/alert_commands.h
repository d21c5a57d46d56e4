// `sediment alerts ...` and `sediment savedsearches ...`: manage a repository's alerts and saved
// searches through the REST API (api/README.md). Each prints a one-line `error:` message and
// returns 1 on failure, 0 on success.
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}  // namespace CLI

namespace sediment::cli {

struct AlertArgs {
  std::string url = "http://127.0.0.1:8080";
  std::string cacert;
  std::string token;
  std::string repo = "sandbox";
  std::string name;
  std::string query;
  std::string every = "5m", window, delay;  // durations ("5s", "10m") as the API takes them
  std::string threshold;                    // "FIELD OP VALUE", e.g. "_count>3"
  std::vector<std::string> webhooks;        // URLs
  std::string body_template;
  bool log_line = false;
  bool disabled = false;
  std::string start = "24h", end;  // saved searches
  bool json = false;
};

// `alerts` with list|get|create|update|delete|firings, `savedsearches` with
// list|get|create|update|delete. Return the parent commands; `args` must outlive the parse.
CLI::App* AddAlertCommands(CLI::App& app, AlertArgs& args);
CLI::App* AddSavedSearchCommands(CLI::App& app, AlertArgs& args);
// Runs the parsed subcommand of `command` (one of the above).
int RunAlertCommand(CLI::App* command, const AlertArgs& args);
int RunSavedSearchCommand(CLI::App* command, const AlertArgs& args);

}  // namespace sediment::cli
