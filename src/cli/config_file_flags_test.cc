// The config file against the flag registry: every flag is a key of the file that gives the same
// effective configuration as the flag; precedence flag > variable > file > default; errors name
// the key, the line and the expected type; --print-config masks secrets and loads back.
#include "cli/config_file_flags.h"

#include <gtest/gtest.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "cli/flags_test_util.h"
#include "config/config_file.h"

namespace sediment::cli {
namespace {

struct FileParsed {
  ServerConfig config;
  Status status;  // of the command line (InvalidArgument with CLI11's message) or the file
};

// `sediment server ARGS --config FILE` where FILE holds `toml`.
FileParsed ParseWithFile(std::vector<std::string> args, const std::string& toml) {
  FileParsed p;
  CLI::App app{"test"};
  AddServerFlags(app, p.config);
  std::reverse(args.begin(), args.end());
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    p.status = Status::InvalidArgument(e.what());
    return p;
  }
  auto file = config::ParseConfigText(toml, "test.toml");
  if (!file.ok()) {
    p.status = file.status();
    return p;
  }
  p.status = ApplyConfigFile(*file, app, p.config);
  return p;
}

// `v` (a command-line value of `f`) as the TOML value of f's key.
std::string TomlValue(const ServerFlag& f, const std::string& v) {
  switch (f.kind) {
    case FlagKind::kBool:
    case FlagKind::kInteger:
    case FlagKind::kFloat:
      return v;
    case FlagKind::kString:
      return config::TomlString(v);
    case FlagKind::kStringList:
      return "[" + config::TomlString(v) + "]";
  }
  return "";
}

void ExpectSameConfig(const ServerConfig& a, const ServerConfig& b, const std::string& what) {
  for (const ServerFlag& g : ServerFlags()) {
    EXPECT_EQ(g.value_text(a), g.value_text(b)) << what << ": " << g.name() << " differs";
  }
}

// The required test: for every flag of the registry, under each of its names (with
// dashes and with underscores), setting it in the file gives the same effective configuration
// as setting it on the command line. A flag the file cannot set fails here.
TEST(ConfigFileTest, EveryFlagThroughTheFileGivesTheSameConfigAsTheFlag) {
  int checked = 0;
  for (const ServerFlag& f : ServerFlags()) {
    // Built by flags.cc's Base(), as every flag must be: the file reaches the member through these.
    ASSERT_TRUE(f.copy && f.set_default && f.add) << f.name();
    ASSERT_EQ(static_cast<bool>(f.list_value), f.kind == FlagKind::kStringList) << f.name();
    const std::string v = NonDefaultValue(f);
    Parsed by_flag = Parse(Args(f, v));
    ASSERT_EQ(by_flag.exit_code, 0) << f.name() << ": " << by_flag.error;
    ASSERT_NE(f.value_text(by_flag.config), f.default_value) << f.name();
    for (const std::string& name : f.names) {
      std::string dashes = name.substr(2), underscores = dashes;
      std::replace(underscores.begin(), underscores.end(), '-', '_');
      for (const std::string& key : {dashes, underscores}) {
        FileParsed by_file = ParseWithFile({}, key + " = " + TomlValue(f, v) + "\n");
        ASSERT_TRUE(by_file.status.ok()) << key << ": " << by_file.status.ToString();
        EXPECT_EQ(f.value_text(by_file.config), v) << key;
        ExpectSameConfig(by_file.config, by_flag.config, key);
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 2 * 70);
}

TEST(ConfigFileTest, RepeatableFlagsTakeArraysOrOneString) {
  FileParsed p = ParseWithFile({}, "ingest-token = [\"a:1\", \"b:2:json\"]\napi-token = \"x\"\n");
  ASSERT_TRUE(p.status.ok()) << p.status.ToString();
  EXPECT_EQ(p.config.ingest_tokens, (std::vector<std::string>{"a:1", "b:2:json"}));
  EXPECT_EQ(p.config.api_tokens, (std::vector<std::string>{"x"}));
  p = ParseWithFile({}, "api-token = []\n");
  ASSERT_TRUE(p.status.ok()) << p.status.ToString();
  EXPECT_TRUE(p.config.api_tokens.empty());
}

TEST(ConfigFileTest, PrecedenceIsFlagThenVariableThenFileThenDefault) {
  const std::string file = "listen = \"127.0.0.1:1111\"\napi-token = [\"from-file\"]\n";
  FileParsed p = ParseWithFile({}, "");
  EXPECT_EQ(p.config.listen, ServerConfig{}.listen);
  p = ParseWithFile({}, file);
  ASSERT_TRUE(p.status.ok()) << p.status.ToString();
  EXPECT_EQ(p.config.listen, "127.0.0.1:1111");
  EXPECT_EQ(p.config.api_tokens, (std::vector<std::string>{"from-file"}));
  {
    ScopedEnv listen("SEDIMENT_LISTEN", "127.0.0.1:2222");
    ScopedEnv token("SEDIMENT_API_TOKEN", "from-env");
    p = ParseWithFile({}, file);
    ASSERT_TRUE(p.status.ok()) << p.status.ToString();
    EXPECT_EQ(p.config.listen, "127.0.0.1:2222");
    EXPECT_EQ(p.config.api_tokens, (std::vector<std::string>{"from-env"}));  // not merged
    p = ParseWithFile({"--listen", "127.0.0.1:3333", "--api-token", "from-flag"}, file);
    ASSERT_TRUE(p.status.ok()) << p.status.ToString();
    EXPECT_EQ(p.config.listen, "127.0.0.1:3333");
    EXPECT_EQ(p.config.api_tokens, (std::vector<std::string>{"from-flag"}));
  }
  // A flag at its default value on the command line still wins over the file.
  p = ParseWithFile({"--listen", ServerConfig{}.listen}, file);
  ASSERT_TRUE(p.status.ok()) << p.status.ToString();
  EXPECT_EQ(p.config.listen, ServerConfig{}.listen);
  // An empty variable is no value (as for the flags): the file applies.
  ScopedEnv empty("SEDIMENT_LISTEN", "");
  p = ParseWithFile({}, file);
  EXPECT_EQ(p.config.listen, "127.0.0.1:1111");
}

TEST(ConfigFileTest, UnknownKeyIsAnErrorNamingKeyAndLine) {
  FileParsed p = ParseWithFile({}, "listen = \"127.0.0.1:1\"\n\n  max-jsn-depth = 3\n");
  ASSERT_EQ(p.status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(p.status.message().find("test.toml:3:3"), std::string::npos) << p.status.message();
  EXPECT_NE(p.status.message().find("unknown key 'max-jsn-depth'"), std::string::npos)
      << p.status.message();
  // The file is flat: a table is no setting, and neither are --config's own options.
  p = ParseWithFile({}, "[kafka]\nbrokers = \"x\"\n");
  EXPECT_NE(p.status.message().find("'kafka' is a table"), std::string::npos) << p.status.message();
  p = ParseWithFile({}, "config = \"other.toml\"\n");
  EXPECT_NE(p.status.message().find("unknown key 'config'"), std::string::npos)
      << p.status.message();
}

TEST(ConfigFileTest, KeyGivenTwiceIsAnError) {
  FileParsed p = ParseWithFile({}, "partitions = 4\ningest_partitions = 5\n");
  ASSERT_EQ(p.status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(p.status.message().find("test.toml:2:1: key 'ingest_partitions' sets "
                                    "--ingest-partitions, which line 1 (key 'partitions')"),
            std::string::npos)
      << p.status.message();
}

TEST(ConfigFileTest, WrongTypesAreErrorsNamingKeyAndExpectedType) {
  struct Case {
    std::string toml, expect;
  };
  for (const Case& c : std::vector<Case>{
           {"max-json-depth = \"64\"", "key 'max-json-depth' must be an integer, not a string"},
           {"listen = 8080", "key 'listen' must be a string, not an integer"},
           {"bucket-create = \"yes\"", "key 'bucket-create' must be a boolean (true or false)"},
           {"bucket-path-style = 1", "key 'bucket-path-style' must be a boolean"},
           {"query-threads = 1.5", "key 'query-threads' must be an integer, not a float"},
           {"api-token = [1, 2]", "key 'api-token': an array holds strings only, not an integer"},
           {"api-token = true", "key 'api-token' must be an array of strings (or one string)"},
           {"cache-max-percent = \"5\"", "key 'cache-max-percent' must be a number"},
           {"data-dir = 1979-05-27", "key 'data-dir' is a date"},
       }) {
    FileParsed p = ParseWithFile({}, "\n" + c.toml + "\n");
    ASSERT_EQ(p.status.code(), StatusCode::kInvalidArgument) << c.toml;
    EXPECT_NE(p.status.message().find("test.toml:2:"), std::string::npos) << p.status.message();
    EXPECT_NE(p.status.message().find(c.expect), std::string::npos) << p.status.message();
  }
  // Floats take integers too.
  FileParsed p = ParseWithFile({}, "cache-max-percent = 5\n");
  ASSERT_TRUE(p.status.ok()) << p.status.ToString();
  EXPECT_EQ(p.config.cache_max_percent, 5.0);
}

TEST(ConfigFileTest, BoundsAreTheFlagsOwn) {
  FileParsed p = ParseWithFile({}, "max-json-depth = 0\n");
  ASSERT_EQ(p.status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(p.status.message().find("test.toml:1:1: key 'max-json-depth': "), std::string::npos)
      << p.status.message();
  EXPECT_NE(p.status.message().find("Value 0 not in range 1 to 10000"), std::string::npos)
      << p.status.message();
  p = ParseWithFile({}, "max-json-depth = 10000\n");
  ASSERT_TRUE(p.status.ok()) << p.status.ToString();
  EXPECT_EQ(p.config.max_json_depth, 10000);
}

TEST(ConfigFileTest, NotTomlNamesTheLine) {
  FileParsed p = ParseWithFile({}, "listen = \"a\"\nthis is not toml\n");
  ASSERT_EQ(p.status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(p.status.message().find("test.toml:2:"), std::string::npos) << p.status.message();
}

TEST(ConfigFileTest, PrintedConfigMasksSecrets) {
  ServerConfig c;
  c.api_tokens = {"api-secret-1", "api-secret-2"};
  c.ingest_tokens = {"repo:ingest-secret"};
  c.cluster_secret = "cluster-secret-value";
  c.bucket_access_key = "AKIAEXAMPLE";
  c.bucket_secret_key = "bucket-secret-value";
  const std::string text = ConfigFileText(c);
  for (const char* secret : {"api-secret-1", "api-secret-2", "ingest-secret",
                             "cluster-secret-value", "AKIAEXAMPLE", "bucket-secret-value"}) {
    EXPECT_EQ(text.find(secret), std::string::npos) << secret << " in\n" << text;
  }
  EXPECT_NE(text.find("# api-token = <masked: 2 values>"), std::string::npos) << text;
  EXPECT_NE(text.find("# cluster-secret = <masked: 1 value>"), std::string::npos) << text;
  EXPECT_NE(text.find("# bucket-secret-key = <masked: 1 value>"), std::string::npos) << text;
  int secrets = 0;
  for (const ServerFlag& f : ServerFlags()) secrets += f.secret ? 1 : 0;
  EXPECT_EQ(secrets, 5);
}

// Every non-secret flag at a value that is not its default: the printed file loads back into the
// same configuration; printing that gives the same text.
TEST(ConfigFileTest, PrintedConfigLoadsBack) {
  std::vector<std::string> args;
  for (const ServerFlag& f : ServerFlags()) {
    if (f.secret || f.name() == "--tls-cert" || f.name() == "--data-dir") continue;
    for (const std::string& a : Args(f, NonDefaultValue(f))) args.push_back(a);
  }
  args.insert(args.end(), {"--tls-cert", "c \"quoted\" \\ path", "--data-dir", "tab\there"});
  Parsed original = Parse(args);
  ASSERT_EQ(original.exit_code, 0) << original.error;
  const std::string text = ConfigFileText(original.config);
  FileParsed loaded = ParseWithFile({}, text);
  ASSERT_TRUE(loaded.status.ok()) << loaded.status.ToString() << "\n" << text;
  ExpectSameConfig(loaded.config, original.config, "loaded back");
  EXPECT_EQ(ConfigFileText(loaded.config), text);
  // At the defaults every line is a comment and loads back to the defaults.
  FileParsed defaults = ParseWithFile({}, ConfigFileText(ServerConfig{}));
  ASSERT_TRUE(defaults.status.ok()) << defaults.status.ToString();
  ExpectSameConfig(defaults.config, ServerConfig{}, "defaults");
}

}  // namespace
}  // namespace sediment::cli
