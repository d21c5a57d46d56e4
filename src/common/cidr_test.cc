#include "common/cidr.h"

#include <gtest/gtest.h>

namespace sediment {
namespace {

TEST(Cidr, Ipv4Ranges) {
  auto r = Cidr::Parse("10.1.0.0/16");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->Contains("10.1.2.3"));
  EXPECT_TRUE(r->Contains("10.1.255.255:8080"));  // the server's "ADDRESS:PORT"
  EXPECT_TRUE(r->Contains("::ffff:10.1.0.9"));    // IPv4-mapped, as a dual-stack socket has it
  EXPECT_FALSE(r->Contains("10.2.0.1"));
  EXPECT_FALSE(r->Contains("not an address"));
  EXPECT_FALSE(r->Contains("::1"));
  auto one = Cidr::Parse("127.0.0.1");
  ASSERT_TRUE(one.ok());
  EXPECT_TRUE(one->Contains("127.0.0.1:1"));
  EXPECT_FALSE(one->Contains("127.0.0.2"));
  auto all = Cidr::Parse("0.0.0.0/0");
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->Contains("192.168.1.1"));
  auto odd = Cidr::Parse("192.168.1.128/25");
  ASSERT_TRUE(odd.ok());
  EXPECT_TRUE(odd->Contains("192.168.1.200"));
  EXPECT_FALSE(odd->Contains("192.168.1.127"));
}

TEST(Cidr, Ipv6Ranges) {
  auto r = Cidr::Parse("fd00::/8");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->Contains("fd12:3456::1"));
  EXPECT_TRUE(r->Contains("[fd00::5]:9000"));
  EXPECT_FALSE(r->Contains("fe80::1"));
  EXPECT_FALSE(r->Contains("10.0.0.1"));
  auto lo = Cidr::Parse("::1/128");
  ASSERT_TRUE(lo.ok());
  EXPECT_TRUE(lo->Contains("::1"));
}

TEST(Cidr, BadRangesAreRefused) {
  for (const char* bad : {"", "10.0.0.0/33", "::/129", "10.0.0.0/", "10.0.0.0/x", "host/8",
                          "10.0.0/8", "1.2.3.4/-1"}) {
    auto r = Cidr::Parse(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(bad), std::string::npos);
  }
}

}  // namespace
}  // namespace sediment
