// The config file of `sediment server --config FILE`, mapped onto the flag registry (flags.h):
// every server flag is a key of the file, by any of its names without the leading "--", with
// dashes or underscores ("max-json-depth" = "max_json_depth"), of the TOML type of its member
// (FlagKind; a repeatable flag takes an array of strings or one string). Nothing here lists
// flags: a flag added to flags.cc is a key of the file and a line of --print-config at once.
#pragma once

#include <string>
#include <string_view>

#include "cli/flags.h"
#include "common/status.h"
#include "config/config_file.h"

namespace sediment::cli {

// The flag a file key names (any of its names; '_' read as '-'), or nullptr.
const ServerFlag* FlagForKey(std::string_view key);

// Fills `config` from `file` after `app` (with AddServerFlags bound to `config`) parsed the
// command line and the environment: an entry sets its flag's member only when neither the
// command line nor the flag's variable gave the flag (precedence flag > variable > file >
// default). The value goes through the flag's own CLI11 option, so bounds and conversions are
// the flag's. InvalidArgument naming `file:line:column` and the key: an unknown key, a key given
// twice (e.g. by two names), a value of the wrong type (naming the expected one), or one the flag
// refuses (CLI11's message). On error `config` may be partly filled.
Status ApplyConfigFile(const config::ConfigFile& file, const CLI::App& app, ServerConfig& config);

// The configuration as a config file (TOML, every flag under its primary name, by section, with
// its help as a comment; a flag at its default is a commented-out line): loading it with --config
// gives the same configuration, except that secret flags (ServerFlag::secret) are printed as
// comments naming how many values they have ("<masked>"), never the values. What
// `sediment server --print-config` prints.
std::string ConfigFileText(const ServerConfig& config);

}  // namespace sediment::cli
