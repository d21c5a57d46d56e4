// The settings file of `sediment server --config FILE`: TOML (toml++), read into flat entries
// with the line and column of each. Only the file format lives here: which keys exist, their types
// and bounds, and the precedence against flags and variables are the flag registry's
// (src/cli/config_file_flags.h), so that a new flag is settable in the file without a second list.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/status.h"

namespace sediment::config {

// A value of the file: the TOML types a flag can take.
using ConfigValue = std::variant<bool, int64_t, double, std::string, std::vector<std::string>>;

// "a boolean", "an integer", "a float", "a string", "an array of strings".
std::string ConfigValueTypeName(const ConfigValue& value);

// One top-level `key = value` of the file.
struct ConfigEntry {
  std::string key;  // as written
  int line = 0;     // 1-based
  int column = 0;
  ConfigValue value;
};

struct ConfigFile {
  std::string path;                  // as given; names the file in errors
  std::vector<ConfigEntry> entries;  // in the file's order
};

// Parses TOML `text`. InvalidArgument naming `path:line:column` when it is not TOML, when a key
// holds a table (the file is flat: keys are flag names), an array of anything but strings, or a
// date/time. Pure: reads nothing.
Result<ConfigFile> ParseConfigText(std::string_view text, std::string path);

// Reads and parses the file at `path`; IOError when it cannot be read.
Result<ConfigFile> ReadConfigFile(const std::string& path);

// `s` as a TOML basic string, quoted and escaped ("a\"b").
std::string TomlString(std::string_view s);

}  // namespace sediment::config
