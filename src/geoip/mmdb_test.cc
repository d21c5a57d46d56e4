// OpenGeoDatabases' errors and its answers without files. Lookups in real MaxMind DB files
// (written by the mmdb-writer package) are tested end to end: tests/e2e/test_geoip.py.
#include "geoip/mmdb.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace sediment::geoip {
namespace {

std::string TempPath(const std::string& name) {
  return (std::filesystem::path(::testing::TempDir()) / name).string();
}

TEST(OpenGeoDatabases, NoFilesOpensNothing) {
  auto dbs = OpenGeoDatabases("", "");
  ASSERT_TRUE(dbs.ok()) << dbs.status().message();
  EXPECT_FALSE((*dbs)->HasCity());
  EXPECT_FALSE((*dbs)->HasAsn());
  EXPECT_FALSE((*dbs)->Locate("8.8.8.8").has_value());
  EXPECT_FALSE((*dbs)->Asn("8.8.8.8").has_value());
}

TEST(OpenGeoDatabases, MissingFileIsNamed) {
  const std::string path = TempPath("no-such-city.mmdb");
  auto dbs = OpenGeoDatabases(path, "");
  ASSERT_FALSE(dbs.ok());
  EXPECT_EQ(dbs.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(dbs.status().message().find("--geoip-city-db: cannot open the GeoIP city database '" +
                                        path + "'"),
            std::string::npos)
      << dbs.status().message();
}

TEST(OpenGeoDatabases, FileThatIsNotAMaxMindDbIsNamed) {
  const std::string path = TempPath("not-an-mmdb.mmdb");
  {
    std::ofstream f(path, std::ios::binary);
    f << "this is not a MaxMind DB file\n";
  }
  auto dbs = OpenGeoDatabases("", path);
  ASSERT_FALSE(dbs.ok());
  EXPECT_EQ(dbs.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(dbs.status().message().find("--geoip-asn-db: cannot open the GeoIP ASN database '" +
                                        path + "'"),
            std::string::npos)
      << dbs.status().message();
}

}  // namespace
}  // namespace sediment::geoip
