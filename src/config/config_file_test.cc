#include "config/config_file.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace sediment::config {
namespace {

TEST(ConfigFileReaderTest, ReadsTopLevelKeysWithTypesAndPositionsInFileOrder) {
  auto f = ParseConfigText(
      "# comment\nzeta = \"z\"\nalpha = 3\n  beta = true\ngamma = 2.5\ndelta = [\"a\", \"b\"]\n"
      "\"quoted-key\" = -4\n",
      "x.toml");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->path, "x.toml");
  ASSERT_EQ(f->entries.size(), 6u);
  const auto& e = f->entries;
  EXPECT_EQ(e[0].key, "zeta");
  EXPECT_EQ(std::get<std::string>(e[0].value), "z");
  EXPECT_EQ(e[0].line, 2);
  EXPECT_EQ(e[1].key, "alpha");
  EXPECT_EQ(std::get<int64_t>(e[1].value), 3);
  EXPECT_EQ(e[2].key, "beta");
  EXPECT_EQ(std::get<bool>(e[2].value), true);
  EXPECT_EQ(e[2].line, 4);
  EXPECT_EQ(e[2].column, 3);
  EXPECT_EQ(std::get<double>(e[3].value), 2.5);
  EXPECT_EQ(std::get<std::vector<std::string>>(e[4].value), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(e[5].key, "quoted-key");
  EXPECT_EQ(std::get<int64_t>(e[5].value), -4);
  EXPECT_EQ(ConfigValueTypeName(e[4].value), "an array of strings");
  EXPECT_EQ(ConfigValueTypeName(e[3].value), "a float");
}

TEST(ConfigFileReaderTest, RefusesWhatNoSettingTakes) {
  struct Case {
    std::string text, expect;
  };
  for (const Case& c : std::vector<Case>{
           {"a = 1\n[t]\nb = 2\n", "x.toml:2:1: key 't' is a table"},
           {"a = { b = 1 }\n", "x.toml:1:5: key 'a' is a table"},
           {"a.b = 1\n", "key 'a' is a table"},
           {"a = [1]\n", "x.toml:1:5: key 'a': an array holds strings only, not an integer"},
           {"a = [[\"x\"]]\n", "an array holds strings only, not an array"},
           {"a = 1979-05-27T07:32:00Z\n", "key 'a' is a date-time, which no setting takes"},
           {"a = 1\na = 2\n", "x.toml:2:"},  // TOML: a key defined twice
           {"a = \n", "x.toml:1:"},
       }) {
    auto f = ParseConfigText(c.text, "x.toml");
    ASSERT_FALSE(f.ok()) << c.text;
    EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(f.status().message().find(c.expect), std::string::npos)
        << c.text << " -> " << f.status().message();
  }
}

TEST(ConfigFileReaderTest, ReadsAFileAndNamesAMissingOne) {
  const std::string path = ::testing::TempDir() + "/config_file_test.toml";
  {
    std::ofstream out(path);
    out << "listen = \"127.0.0.1:0\"\n";
  }
  auto f = ReadConfigFile(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_EQ(f->entries.size(), 1u);
  EXPECT_EQ(f->path, path);
  std::remove(path.c_str());
  auto missing = ReadConfigFile(path);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kIOError);
  EXPECT_NE(missing.status().message().find(path), std::string::npos);
}

TEST(ConfigFileReaderTest, TomlStringRoundTrips) {
  for (const std::string& s : {std::string("plain"), std::string("q\"b\\s"),
                               std::string("nl\nt\tc\x01"), std::string("ünï")}) {
    auto f = ParseConfigText("k = " + TomlString(s) + "\n", "x.toml");
    ASSERT_TRUE(f.ok()) << TomlString(s) << ": " << f.status().ToString();
    EXPECT_EQ(std::get<std::string>(f->entries[0].value), s);
  }
  EXPECT_EQ(TomlString("a\"b"), "\"a\\\"b\"");
}

}  // namespace
}  // namespace sediment::config
