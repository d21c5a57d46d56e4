// The client subcommands of the sediment binary: `ingest`, `query`, `status` and `admin` talk to a
// running node over HTTP or HTTPS (`--cacert FILE` like curl's). Each prints a one-line `error:`
// message and returns 1 on failure, 0 on success.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace CLI {
class App;
}  // namespace CLI

namespace sediment::cli {

// The client subcommands' arguments (url, token and cacert are shared by them).
struct ClientArgs {
  std::string url = "http://127.0.0.1:8080";  // http:// or https://
  std::string cacert;  // https: PEM CA bundle to verify the server against; empty = system CAs
  std::string token;
  std::vector<std::string> files;  // ingest: files to send; none or "-": stdin
  size_t batch_lines = 1000;
  std::string repo = "sandbox", query, start = "24h", end, format = "table";
  // status: the cluster view as tables (the default; --cluster says so explicitly) or, with
  // json, as its JSON (json also makes admin print JSON); node: the node's status JSON instead.
  bool cluster = false, json = false, node = false;
  // admin: the positional names (repository, token) and the token create options.
  std::string admin_repo, admin_name, parser;
  bool admin = false;
  std::vector<std::string> read, ingest, manage;
};

// Add the subcommand with its options bound to `args` (which must outlive the parse).
CLI::App* AddIngestCommand(CLI::App& app, ClientArgs& args);
CLI::App* AddQueryCommand(CLI::App& app, ClientArgs& args);
CLI::App* AddStatusCommand(CLI::App& app, ClientArgs& args);
// `sediment admin repo list|create NAME|delete NAME`, `admin ingest-token list REPO|create REPO
// NAME [--parser P]|revoke REPO NAME`, `admin token list|create NAME [--admin] [--read R]...
// [--ingest R]... [--manage R]...|revoke NAME`: the management API (api/README.md) as tables.
CLI::App* AddAdminCommand(CLI::App& app, ClientArgs& args);

// Run the subcommand after a successful parse.
int RunIngest(const ClientArgs& args);
int RunQuery(const ClientArgs& args);
int RunStatus(const ClientArgs& args);
// `admin`: the command returned by AddAdminCommand, after a parse that selected it.
int RunAdmin(const ClientArgs& args, const CLI::App& admin);

}  // namespace sediment::cli
