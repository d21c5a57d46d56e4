#include "cli/flags.h"
#include "cli/flags_test_util.h"

#include <gtest/gtest.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

namespace sediment::cli {
namespace {

TEST(ServerFlagsTest, NamesAndVariablesAreUniqueAndFollowTheRule) {
  std::set<std::string> names, envs;
  int last_section = -1;
  for (const ServerFlag& f : ServerFlags()) {
    for (const auto& n : f.names) {
      EXPECT_TRUE(n.starts_with("--")) << n;
      EXPECT_TRUE(names.insert(n).second) << "declared twice: " << n;
    }
    EXPECT_TRUE(envs.insert(f.env).second) << "variable used twice: " << f.env;
    std::string expected = "SEDIMENT_";
    for (char c : f.name().substr(2)) expected += c == '-' ? '_' : static_cast<char>(toupper(c));
    EXPECT_EQ(f.env, expected) << f.name();
    EXPECT_FALSE(f.help.empty()) << f.name();
    // Sections are contiguous and in enum order (--help and the README list them so).
    EXPECT_GE(static_cast<int>(f.section), last_section) << f.name();
    last_section = static_cast<int>(f.section);
  }
  EXPECT_EQ(last_section, static_cast<int>(FlagSection::kBucket));
}

TEST(ServerFlagsTest, DefaultsAreServerConfigDefaults) {
  const ServerConfig defaults{};
  for (const ServerFlag& f : ServerFlags()) {
    EXPECT_EQ(f.value_text(defaults), f.default_value) << f.name();
  }
  Parsed p = Parse({});
  ASSERT_EQ(p.exit_code, 0) << p.error;
  for (const ServerFlag& f : ServerFlags()) {
    EXPECT_EQ(f.value_text(p.config), f.value_text(defaults)) << f.name();
  }
}

TEST(ServerFlagsTest, AddServerFlagsSetsTheDefaults) {
  ServerConfig config;
  config.data_dir = "elsewhere";
  config.query_threads = 99;
  config.bucket_path_style = false;
  CLI::App app{"test"};
  AddServerFlags(app, config);
  EXPECT_EQ(config.data_dir, ServerConfig{}.data_dir);
  EXPECT_EQ(config.query_threads, ServerConfig{}.query_threads);
  EXPECT_EQ(config.bucket_path_style, ServerConfig{}.bucket_path_style);
}

// Each flag (under each of its names) fills its own member and no other.
TEST(ServerFlagsTest, EachFlagFillsItsOwnMember) {
  for (const ServerFlag& f : ServerFlags()) {
    std::string v = NonDefaultValue(f);
    for (const auto& name : f.names) {
      auto args = Args(f, v);
      args[0] = name;
      Parsed p = Parse(args);
      ASSERT_EQ(p.exit_code, 0) << name << " " << v << ": " << p.error;
      EXPECT_EQ(f.value_text(p.config), v) << name;
      for (const ServerFlag& other : ServerFlags()) {
        if (&other == &f) continue;
        EXPECT_EQ(other.value_text(p.config), other.default_value)
            << name << " changed " << other.name();
      }
    }
  }
}

TEST(ServerFlagsTest, VariableSetsTheFlagAndTheCommandLineWins) {
  for (const ServerFlag& f : ServerFlags()) {
    std::string v = NonDefaultValue(f);
    ScopedEnv env(f.env, v);
    Parsed p = Parse({});
    ASSERT_EQ(p.exit_code, 0) << f.env << "=" << v << ": " << p.error;
    EXPECT_EQ(f.value_text(p.config), v) << f.env;
    if (f.metavar.empty() || f.repeatable) continue;
    std::string other = f.metavar == "BOOL" ? f.default_value : f.bounds.empty() ? "3" : "";
    if (other.empty()) other = f.bounds.substr(0, f.bounds.find(' '));
    if (other == v) continue;
    p = Parse({f.name(), other});
    ASSERT_EQ(p.exit_code, 0) << f.name() << " " << other << ": " << p.error;
    EXPECT_EQ(f.value_text(p.config), other) << f.name();
  }
}

TEST(ServerFlagsTest, RepeatableFlagsTakeListsFromBothSources) {
  Parsed p = Parse({"--ingest-token", "a:1", "--ingest-token", "b:2,c:3", "--api-token", "x,y"});
  ASSERT_EQ(p.exit_code, 0) << p.error;
  EXPECT_EQ(p.config.ingest_tokens, (std::vector<std::string>{"a:1", "b:2", "c:3"}));
  EXPECT_EQ(p.config.api_tokens, (std::vector<std::string>{"x", "y"}));
  ScopedEnv env("SEDIMENT_API_TOKEN", "t1,t2");
  p = Parse({});
  ASSERT_EQ(p.exit_code, 0) << p.error;
  EXPECT_EQ(p.config.api_tokens, (std::vector<std::string>{"t1", "t2"}));
}

// Bounds are inclusive; one past either end is refused from the command line and from the
// variable alike, with a message naming the flag and a non-zero exit code.
TEST(ServerFlagsTest, OutOfBoundsValuesAreRefused) {
  int checked = 0;
  for (const ServerFlag& f : ServerFlags()) {
    if (f.bounds.empty()) continue;
    ++checked;
    size_t to = f.bounds.find(" to ");
    std::string lo = f.bounds.substr(0, to), hi = f.bounds.substr(to + 4);
    for (const std::string& ok : {lo, hi}) {
      Parsed p = Parse({f.name(), ok});
      EXPECT_EQ(p.exit_code, 0) << f.name() << " " << ok << ": " << p.error;
      EXPECT_EQ(f.value_text(p.config), ok) << f.name();
    }
    std::string below = std::to_string(std::stoll(lo) - 1);
    std::string above = std::to_string(std::stoull(hi) + 1);
    for (const std::string& bad : {below, above}) {
      Parsed p = Parse({f.name(), bad});
      EXPECT_NE(p.exit_code, 0) << f.name() << " " << bad;
      EXPECT_NE(p.error.find(f.name()), std::string::npos) << p.error;
      ScopedEnv env(f.env, bad);
      p = Parse({});
      EXPECT_NE(p.exit_code, 0) << f.env << "=" << bad;
      EXPECT_NE(p.error.find(f.name()), std::string::npos) << p.error;
    }
  }
  EXPECT_GT(checked, 20);
}

TEST(ServerFlagsTest, NonNumbersAreRefused) {
  for (const ServerFlag& f : ServerFlags()) {
    if (f.metavar != "N" && f.metavar != "PERCENT" && f.metavar != "BOOL") continue;
    Parsed p = Parse({f.name(), "abc"});
    EXPECT_NE(p.exit_code, 0) << f.name();
    EXPECT_NE(p.error.find(f.name()), std::string::npos) << p.error;
  }
}

TEST(ServerFlagsTest, UnknownFlagsAreRefused) {
  for (const char* bad : {"--nope", "--data-dirs", "--partition"}) {
    Parsed p = Parse({bad, "1"});
    EXPECT_NE(p.exit_code, 0) << bad;
    EXPECT_NE(p.error.find(bad), std::string::npos) << p.error;
  }
}

// SEDIMENT_KAFKA_* variables are librdkafka properties except those that are flags.
TEST(ServerFlagsTest, KafkaFlagVariables) {
  EXPECT_EQ(ServerFlagEnvNames("SEDIMENT_KAFKA_"),
            (std::vector<std::string>{
                "SEDIMENT_KAFKA_BROKERS", "SEDIMENT_KAFKA_TOPIC_PREFIX",
                "SEDIMENT_KAFKA_REPLICATION_FACTOR", "SEDIMENT_KAFKA_MIN_INSYNC_REPLICAS",
                "SEDIMENT_KAFKA_PROPERTIES_FILE", "SEDIMENT_KAFKA_PRODUCE_TIMEOUT_MS",
                "SEDIMENT_KAFKA_PRODUCE_LINGER_MS"}));
}

TEST(ServerFlagsTest, HelpIsGroupedBySection) {
  ServerConfig config;
  CLI::App app{"test"};
  AddServerFlags(app, config);
  std::string help = app.help();
  size_t last = 0;
  for (FlagSection s :
       {FlagSection::kNode, FlagSection::kCommitLog, FlagSection::kKafka, FlagSection::kQueries,
        FlagSection::kCluster, FlagSection::kStorage, FlagSection::kBucket}) {
    size_t at = help.find(std::string(SectionTitle(s)) + ":");
    ASSERT_NE(at, std::string::npos) << SectionTitle(s);
    EXPECT_GT(at, last) << SectionTitle(s);
    last = at;
  }
  for (const ServerFlag& f : ServerFlags()) {
    EXPECT_NE(help.find(f.name()), std::string::npos) << f.name();
    EXPECT_EQ(help.find('`'), std::string::npos);
  }
}

TEST(ServerFlagsTest, TableHasEveryFlagOnce) {
  std::string table = FlagTableMarkdown();
  for (const ServerFlag& f : ServerFlags()) {
    std::string cell = "| `" + f.name() + (f.metavar.empty() ? "" : " " + f.metavar) + "`";
    size_t at = table.find(cell);
    ASSERT_NE(at, std::string::npos) << f.name();
    EXPECT_EQ(table.find(cell, at + 1), std::string::npos) << f.name();
    EXPECT_NE(table.find("`" + f.env + "`"), std::string::npos) << f.env;
  }
  EXPECT_NE(table.find("| `--ingest-partitions N`, `--partitions N` |"), std::string::npos);
  EXPECT_NE(table.find("| `33554432` (32 MiB) |"), std::string::npos);
}

}  // namespace
}  // namespace sediment::cli
