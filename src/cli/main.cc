// The sediment binary: `sediment server|ingest|query|status`. The server's flags (also settable as
// SEDIMENT_<NAME> environment variables) are declared in flags.cc; the client subcommands are in
// client_commands.cc. `sediment --print-flag-table` (not listed in --help) prints the README's
// flag tables.
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <string_view>

#include "cli/alert_commands.h"
#include "cli/client_commands.h"
#include "cli/flags.h"
#include "log/kafka_log.h"
#include "server/server.h"

namespace {

using sediment::Status;

// Runs a node until SIGINT or SIGTERM; 1 when it cannot start.
int RunServer(const sediment::ServerConfig& config) {
  // Block the termination signals in every thread; the main thread waits for them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  sediment::Server server(config);
  Status st = server.Start();
  if (!st.ok()) {
    spdlog::critical("sediment cannot start: {}", st.ToString());
    return 1;
  }
  std::string host = config.listen.substr(0, config.listen.rfind(':'));
  spdlog::info("sediment ready: listening on http://{}:{} (data dir {})", host, server.port(),
               config.data_dir);
  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("received signal {}, shutting down", sig);
  server.Stop();
  spdlog::info("stopped");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::string_view(argv[1]) == "--print-flag-table") {
    std::fputs(sediment::cli::FlagTableMarkdown().c_str(), stdout);
    return 0;
  }
  CLI::App app{"sediment: a durable, fast log management server"};
  app.require_subcommand(1);

  sediment::ServerConfig config;
  auto* server = app.add_subcommand("server", "run a sediment node");
  sediment::cli::AddServerFlags(*server, config);
  sediment::cli::ClientArgs client;
  auto* ingest = sediment::cli::AddIngestCommand(app, client);
  auto* query = sediment::cli::AddQueryCommand(app, client);
  auto* status = sediment::cli::AddStatusCommand(app, client);
  sediment::cli::AlertArgs alert_args;
  auto* alerts = sediment::cli::AddAlertCommands(app, alert_args);
  auto* saved = sediment::cli::AddSavedSearchCommands(app, alert_args);

  CLI11_PARSE(app, argc, argv);
  if (server->parsed()) {
    // SEDIMENT_KAFKA_<NAME> variables are librdkafka properties, except the flags' own.
    config.kafka_properties = sediment::KafkaPropertiesFromEnv(
        environ, sediment::cli::ServerFlagEnvNames("SEDIMENT_KAFKA_"));
    return RunServer(config);
  }
  if (ingest->parsed()) return sediment::cli::RunIngest(client);
  if (query->parsed()) return sediment::cli::RunQuery(client);
  if (status->parsed()) return sediment::cli::RunStatus(client);
  if (alerts->parsed()) return sediment::cli::RunAlertCommand(alerts, alert_args);
  if (saved->parsed()) return sediment::cli::RunSavedSearchCommand(saved, alert_args);
  return 1;
}
