#include "config/config_file.h"

// Header-only (compiled into this file); errors as values: toml::parse returns a parse_result
// instead of throwing.
#define TOML_HEADER_ONLY 1
#define TOML_EXCEPTIONS 0
#include <toml++/toml.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <utility>

namespace sediment::config {
namespace {

std::string Where(const std::string& path, const toml::source_position& at) {
  return path + ":" + std::to_string(at.line) + ":" + std::to_string(at.column);
}

const char* TomlTypeName(toml::node_type t) {
  switch (t) {
    case toml::node_type::table:
      return "a table";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a float";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::date:
      return "a date";
    case toml::node_type::time:
      return "a time";
    case toml::node_type::date_time:
      return "a date-time";
    case toml::node_type::none:
      break;
  }
  return "nothing";
}

Result<ConfigValue> ToValue(const std::string& path, const std::string& key,
                            const toml::node& node) {
  const auto at = Where(path, node.source().begin);
  switch (node.type()) {
    case toml::node_type::boolean:
      return ConfigValue(node.as_boolean()->get());
    case toml::node_type::integer:
      return ConfigValue(node.as_integer()->get());
    case toml::node_type::floating_point:
      return ConfigValue(node.as_floating_point()->get());
    case toml::node_type::string:
      return ConfigValue(node.as_string()->get());
    case toml::node_type::array: {
      std::vector<std::string> out;
      for (const toml::node& e : *node.as_array()) {
        if (!e.is_string()) {
          return Status::InvalidArgument(at + ": key '" + key +
                                         "': an array holds strings only, not " +
                                         TomlTypeName(e.type()));
        }
        out.push_back(e.as_string()->get());
      }
      return ConfigValue(std::move(out));
    }
    case toml::node_type::table:
      return Status::InvalidArgument(at + ": key '" + key +
                                     "' is a table: the file has top-level keys only (the server "
                                     "flags' names, without the leading --)");
    default:
      return Status::InvalidArgument(at + ": key '" + key + "' is " + TomlTypeName(node.type()) +
                                     ", which no setting takes");
  }
}

}  // namespace

std::string ConfigValueTypeName(const ConfigValue& value) {
  struct Name {
    std::string operator()(bool) const { return "a boolean"; }
    std::string operator()(int64_t) const { return "an integer"; }
    std::string operator()(double) const { return "a float"; }
    std::string operator()(const std::string&) const { return "a string"; }
    std::string operator()(const std::vector<std::string>&) const { return "an array of strings"; }
  };
  return std::visit(Name{}, value);
}

Result<ConfigFile> ParseConfigText(std::string_view text, std::string path) {
  toml::parse_result parsed = toml::parse(text, path);
  if (!parsed) {
    const toml::parse_error& e = parsed.error();
    return Status::InvalidArgument(Where(path, e.source().begin) +
                                   ": not TOML: " + std::string(e.description()));
  }
  ConfigFile out;
  out.path = std::move(path);
  const toml::table& table = parsed.table();
  for (const auto& [k, node] : table) {
    std::string key(k.str());
    ASSIGN_OR_RETURN(ConfigValue value, ToValue(out.path, key, node));
    const auto& at = k.source().begin.line ? k.source().begin : node.source().begin;
    out.entries.push_back(
        ConfigEntry{key, static_cast<int>(at.line), static_cast<int>(at.column), std::move(value)});
  }
  // toml::table is ordered by key; people read errors and dumps in the file's order.
  std::stable_sort(out.entries.begin(), out.entries.end(),
                   [](const ConfigEntry& a, const ConfigEntry& b) {
                     return std::pair(a.line, a.column) < std::pair(b.line, b.column);
                   });
  return out;
}

Result<ConfigFile> ReadConfigFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IOError("cannot read the config file " + path);
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) return Status::IOError("cannot read the config file " + path);
  return ParseConfigText(text.str(), path);
}

std::string TomlString(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (u < 0x20 || u == 0x7f) {
          static constexpr char kHex[] = "0123456789ABCDEF";
          out += "\\u00";
          out += kHex[u >> 4];
          out += kHex[u & 15];
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

}  // namespace sediment::config
