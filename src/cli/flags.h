// The server's flag registry: every flag of `sediment server` is declared once (flags.cc) with its
// names, environment variable, default, bounds, help text and the ServerConfig member it fills.
// The CLI11 options, the grouped `--help` and the README's flag table are generated from it.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "server/server.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace sediment::cli {

// Sections of the flag table, in the order --help and the README list them.
enum class FlagSection { kNode, kHttp, kCommitLog, kKafka, kQueries, kCluster, kStorage, kBucket };

std::string_view SectionTitle(FlagSection section);

// The type of a flag's member, which is the TOML type its key takes in the config file.
enum class FlagKind { kBool, kInteger, kFloat, kString, kStringList };

// One flag. Built only by the helpers in flags.cc; the functions capture the ServerConfig member.
struct ServerFlag {
  FlagSection section;
  std::vector<std::string> names;  // primary name first ("--ingest-partitions", "--partitions")
  std::string env;                 // environment variable (every server flag has one)
  std::string metavar;             // value placeholder ("N", "DIR"); empty for a switch
  // One line; `code` spans are kept in the README and lose their backticks in --help.
  std::string help;
  // The typed default as value_text() shows it; the registry sets it before parsing.
  std::string default_value;
  // The default as people read it: prose when the value alone says too little (0 = "8 embedded,
  // 24 on Kafka"); empty = default_value.
  std::string default_described;
  std::string bounds;  // "1 to 10000" (inclusive); empty = any value of the member's type
  bool repeatable = false;
  FlagKind kind = FlagKind::kString;  // from the member's type
  // Tokens, keys, secrets: --print-config masks the value.
  bool secret = false;
  // Registers the CLI11 option bound to the member (with its environment variable and bounds).
  std::function<CLI::Option*(CLI::App& app, ServerConfig& config, const std::string& help)> add;
  std::function<void(ServerConfig& config)> set_default;
  std::function<std::string(const ServerConfig& config)> value_text;
  // The member's values (kStringList only; value_text joins them with commas).
  std::function<std::vector<std::string>(const ServerConfig& config)> list_value;
  // Copies the member from one config to another (the config file fills a scratch config through
  // the CLI11 option, then copies).
  std::function<void(const ServerConfig& from, ServerConfig& to)> copy;

  const std::string& name() const { return names.front(); }
};

// Every server flag, grouped by section (sections in enum order). Built once; thread-safe.
const std::vector<ServerFlag>& ServerFlags();

// Sets `config` to the registry's defaults and adds every server flag to `app` as a CLI11 option
// bound to `config`'s member, in its section's help group. `config` must outlive `app`'s parse.
// A value out of bounds or not of the member's type makes the parse throw CLI::ValidationError /
// CLI::ConversionError naming the flag (CLI11_PARSE: message on stderr, non-zero exit).
void AddServerFlags(CLI::App& app, ServerConfig& config);

// The environment variables of the server flags that start with `prefix` (e.g. "SEDIMENT_KAFKA_":
// those are flags, not librdkafka properties).
std::vector<std::string> ServerFlagEnvNames(std::string_view prefix);

// The README's flag tables (markdown, one table per section), as `sediment --print-flag-table`
// prints them; README.md holds this text between <!-- flags:begin --> and <!-- flags:end -->.
std::string FlagTableMarkdown();

}  // namespace sediment::cli
