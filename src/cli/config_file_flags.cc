#include "cli/config_file_flags.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

namespace sediment::cli {
namespace {

std::string Where(const config::ConfigFile& file, const config::ConfigEntry& e) {
  return fmt::format("{}:{}:{}", file.path, e.line, e.column);
}

const char* KindName(const ServerFlag& f) {
  switch (f.kind) {
    case FlagKind::kBool:
      return "a boolean (true or false)";
    case FlagKind::kInteger:
      return "an integer";
    case FlagKind::kFloat:
      return "a number";
    case FlagKind::kString:
      return "a string";
    case FlagKind::kStringList:
      return "an array of strings (or one string)";
  }
  return "?";
}

// The command-line values that give `f` the file's `value`; false when the TOML type is not the
// flag's.
bool ValuesFor(const ServerFlag& f, const config::ConfigValue& value,
               std::vector<std::string>* out) {
  switch (f.kind) {
    case FlagKind::kBool:
      if (const bool* b = std::get_if<bool>(&value)) {
        out->push_back(*b ? "true" : "false");
        return true;
      }
      return false;
    case FlagKind::kInteger:
      if (const int64_t* i = std::get_if<int64_t>(&value)) {
        out->push_back(std::to_string(*i));
        return true;
      }
      return false;
    case FlagKind::kFloat:
      if (const int64_t* i = std::get_if<int64_t>(&value)) {
        out->push_back(std::to_string(*i));
        return true;
      }
      if (const double* d = std::get_if<double>(&value)) {
        out->push_back(fmt::format("{}", *d));
        return true;
      }
      return false;
    case FlagKind::kString:
      if (const std::string* s = std::get_if<std::string>(&value)) {
        out->push_back(*s);
        return true;
      }
      return false;
    case FlagKind::kStringList:
      if (const std::string* s = std::get_if<std::string>(&value)) {
        out->push_back(*s);
        return true;
      }
      if (const auto* list = std::get_if<std::vector<std::string>>(&value)) {
        *out = *list;
        return true;
      }
      return false;
  }
  return false;
}

// Sets f's member of `config` from `values` through a fresh CLI11 option of the flag (its
// conversion and bounds); CLI11's message on failure.
Status SetThroughOption(const ServerFlag& f, const std::vector<std::string>& values,
                        ServerConfig& config) {
  ServerConfig scratch;
  f.set_default(scratch);
  CLI::App app{"config file"};
  f.add(app, scratch, "");
  std::vector<std::string> args;
  for (const std::string& v : values) args.push_back(f.name() + "=" + v);
  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments last first
  try {
    if (!args.empty()) app.parse(args);
  } catch (const CLI::ParseError& e) {
    return Status::InvalidArgument(e.what());
  }
  f.copy(scratch, config);
  return Status::OK();
}

}  // namespace

const ServerFlag* FlagForKey(std::string_view key) {
  std::string name = "--" + std::string(key);
  std::replace(name.begin() + 2, name.end(), '_', '-');
  for (const ServerFlag& f : ServerFlags()) {
    if (std::find(f.names.begin(), f.names.end(), name) != f.names.end()) return &f;
  }
  return nullptr;
}

Status ApplyConfigFile(const config::ConfigFile& file, const CLI::App& app, ServerConfig& config) {
  std::map<const ServerFlag*, const config::ConfigEntry*> seen;
  for (const config::ConfigEntry& e : file.entries) {
    const ServerFlag* f = FlagForKey(e.key);
    if (f == nullptr) {
      return Status::InvalidArgument(fmt::format(
          "{}: unknown key '{}': the keys are the server flags' names without the leading -- "
          "(see sediment server --help)",
          Where(file, e), e.key));
    }
    if (auto [it, fresh] = seen.emplace(f, &e); !fresh) {
      return Status::InvalidArgument(
          fmt::format("{}: key '{}' sets {}, which line {} (key '{}') already set", Where(file, e),
                      e.key, f->name(), it->second->line, it->second->key));
    }
    std::vector<std::string> values;
    if (!ValuesFor(*f, e.value, &values)) {
      return Status::InvalidArgument(fmt::format("{}: key '{}' must be {}, not {}", Where(file, e),
                                                 e.key, KindName(*f),
                                                 config::ConfigValueTypeName(e.value)));
    }
    // The command line and the variable win: CLI11 counted either as a result of the option.
    const CLI::Option* given = app.get_option_no_throw(f->name());
    if (given != nullptr && given->count() > 0) continue;
    Status st = SetThroughOption(*f, values, config);
    if (!st.ok()) {
      return Status::InvalidArgument(
          fmt::format("{}: key '{}': {}", Where(file, e), e.key, st.message()));
    }
  }
  return Status::OK();
}

std::string ConfigFileText(const ServerConfig& config) {
  std::string out =
      "# sediment server configuration (sediment server --print-config): every flag, by its "
      "name\n# without the leading --. Secrets are masked: give them with their flags or "
      "variables.\n";
  const ServerFlag* previous = nullptr;
  for (const ServerFlag& f : ServerFlags()) {
    if (previous == nullptr || previous->section != f.section) {
      out += fmt::format("\n# ---- {} ----\n", SectionTitle(f.section));
    }
    previous = &f;
    std::string help = f.help;
    help.erase(std::remove(help.begin(), help.end(), '`'), help.end());
    out += "# " + help + "\n";
    std::string key = f.name().substr(2);
    std::string value;
    switch (f.kind) {
      case FlagKind::kBool:
      case FlagKind::kInteger:
      case FlagKind::kFloat:
        value = f.value_text(config);
        break;
      case FlagKind::kString:
        value = config::TomlString(f.value_text(config));
        break;
      case FlagKind::kStringList: {
        std::vector<std::string> quoted;
        for (const std::string& v : f.list_value(config)) quoted.push_back(config::TomlString(v));
        value = "[" + fmt::format("{}", fmt::join(quoted, ", ")) + "]";
        break;
      }
    }
    if (f.secret) {
      size_t n = f.kind == FlagKind::kStringList ? f.list_value(config).size()
                                                 : (f.value_text(config).empty() ? 0 : 1);
      out += n == 0 ? fmt::format("# {} = (not set)\n", key)
                    : fmt::format("# {} = <masked: {} value{}>\n", key, n, n == 1 ? "" : "s");
      continue;
    }
    if (f.value_text(config) == f.default_value) {
      // Commented out: a default may be a value the flag refuses (0 = "decide for me").
      out += fmt::format("# {} = {}  (default{})\n", key, value,
                         f.default_described.empty() ? "" : ": " + f.default_described);
      continue;
    }
    out += key + " = " + value + "\n";
  }
  return out;
}

}  // namespace sediment::cli
