// The sediment binary: `sediment server|ingest|query|status|admin`. The server's flags (also
// settable as SEDIMENT_<NAME> environment variables) are declared in flags.cc; the client
// subcommands are in client_commands.cc. `sediment --print-flag-table` (not listed in --help)
// prints the README's flag tables.
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <thread>

#include "cli/alert_commands.h"
#include "cli/client_commands.h"
#include "cli/config_file_flags.h"
#include "cli/flags.h"
#include "config/config_file.h"
#include "log/kafka_log.h"
#include "server/server.h"

namespace {

using sediment::Status;

// Runs a node until SIGINT or SIGTERM, then shuts it down gracefully (Server::Shutdown) within
// --shutdown-timeout-ms: 0 then; 1 when it cannot start, or when the bound passes or a second
// signal comes first (it exits at once: acknowledged ingest is in the commit log regardless).
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
  const std::chrono::milliseconds bound(config.shutdown_timeout_ms);
  spdlog::info("received signal {}, shutting down (at most {} ms)", sig, bound.count());
  std::atomic<bool> done{false};
  std::thread watchdog([&signals, &done, bound] {
    const auto until = std::chrono::steady_clock::now() + bound;
    while (!done) {
      const timespec tick{0, 100'000'000};
      if (sigtimedwait(&signals, nullptr, &tick) > 0) {
        spdlog::error("a second signal during the shutdown: exiting now");
        std::fflush(nullptr);
        std::_Exit(1);
      }
      if (std::chrono::steady_clock::now() >= until) {
        spdlog::error("the shutdown took longer than {} ms (--shutdown-timeout-ms): exiting now",
                      bound.count());
        std::fflush(nullptr);
        std::_Exit(1);
      }
    }
  });
  server.Shutdown(bound);
  done = true;
  watchdog.join();
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
  std::string config_file;
  bool print_config = false;
  server
      ->add_option("--config", config_file,
                   "TOML file of settings: keys are the flags' names without the leading --; a "
                   "flag or its variable wins over the file")
      ->envname("SEDIMENT_CONFIG");
  server->add_flag("--print-config", print_config,
                   "print the effective configuration (as a --config file, secrets masked) and "
                   "exit");
  sediment::cli::ClientArgs client;
  auto* ingest = sediment::cli::AddIngestCommand(app, client);
  auto* query = sediment::cli::AddQueryCommand(app, client);
  auto* status = sediment::cli::AddStatusCommand(app, client);
  auto* admin = sediment::cli::AddAdminCommand(app, client);
  sediment::cli::AlertArgs alert_args;
  auto* alerts = sediment::cli::AddAlertCommands(app, alert_args);
  auto* saved = sediment::cli::AddSavedSearchCommands(app, alert_args);

  CLI11_PARSE(app, argc, argv);
  if (server->parsed()) {
    if (!config_file.empty()) {
      auto file = sediment::config::ReadConfigFile(config_file);
      Status st =
          file.ok() ? sediment::cli::ApplyConfigFile(*file, *server, config) : file.status();
      if (!st.ok()) {
        std::fprintf(stderr, "error: %s\n", st.message().c_str());
        return 2;
      }
    }
    if (print_config) {
      std::fputs(sediment::cli::ConfigFileText(config).c_str(), stdout);
      return 0;
    }
    // SEDIMENT_KAFKA_<NAME> variables are librdkafka properties, except the flags' own.
    config.kafka_properties = sediment::KafkaPropertiesFromEnv(
        environ, sediment::cli::ServerFlagEnvNames("SEDIMENT_KAFKA_"));
    return RunServer(config);
  }
  if (ingest->parsed()) return sediment::cli::RunIngest(client);
  if (query->parsed()) return sediment::cli::RunQuery(client);
  if (status->parsed()) return sediment::cli::RunStatus(client);
  if (admin->parsed()) return sediment::cli::RunAdmin(client, *admin);
  if (alerts->parsed()) return sediment::cli::RunAlertCommand(alerts, alert_args);
  if (saved->parsed()) return sediment::cli::RunSavedSearchCommand(saved, alert_args);
  return 1;
}
