// Helpers of the flag registry's tests (flags_test.cc, config_file_flags_test.cc).
#pragma once

#include <gtest/gtest.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli/flags.h"

namespace sediment::cli {

struct Parsed {
  ServerConfig config;
  int exit_code = 0;  // CLI11's exit code; 0 = parsed
  std::string error;
};

// Parses `args` (without a program name) the way `sediment server` does.
inline Parsed Parse(std::vector<std::string> args) {
  Parsed p;
  CLI::App app{"test"};
  AddServerFlags(app, p.config);
  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments last first
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    p.exit_code = e.get_exit_code();
    p.error = e.what();
  }
  return p;
}

// The tests set the flags' variables themselves: none may come from the caller's environment.
class ClearFlagVariables : public ::testing::Environment {
 public:
  void SetUp() override {
    for (const ServerFlag& f : ServerFlags()) unsetenv(f.env.c_str());
  }
};
inline const auto* const kClearFlagVariables =
    ::testing::AddGlobalTestEnvironment(new ClearFlagVariables);

// Sets an environment variable for the scope.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, const std::string& value) : name_(std::move(name)) {
    setenv(name_.c_str(), value.c_str(), 1);
  }
  ~ScopedEnv() { unsetenv(name_.c_str()); }

 private:
  std::string name_;
};

// The command line giving `f` the value `v` (a switch: on).
inline std::vector<std::string> Args(const ServerFlag& f, const std::string& v) {
  if (f.metavar.empty()) return {f.name()};
  return {f.name(), v};
}

// A valid value for `f` that is not its default: its upper bound, or 7, or a string.
inline std::string NonDefaultValue(const ServerFlag& f) {
  if (f.metavar.empty()) return "true";
  if (f.metavar == "BOOL") return f.default_value == "true" ? "false" : "true";
  if (!f.bounds.empty()) return f.bounds.substr(f.bounds.find(" to ") + 4);
  if (f.metavar == "N" || f.metavar == "PERCENT") return "7";
  return "value-of-" + f.name().substr(2);
}

}  // namespace sediment::cli
