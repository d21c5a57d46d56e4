#include "api/hec_acks.h"

#include <gtest/gtest.h>

namespace sediment::api {
namespace {

TEST(HecAcksTest, ChannelIsAGuid) {
  EXPECT_TRUE(IsHecChannel("11111111-2222-3333-4444-555555555555"));
  EXPECT_TRUE(IsHecChannel("a0B1c2D3-e4F5-a6b7-C8d9-0123456789ab"));
  EXPECT_FALSE(IsHecChannel(""));
  EXPECT_FALSE(IsHecChannel("foo"));
  EXPECT_FALSE(IsHecChannel("11111111-2222-3333-4444-55555555555"));    // short
  EXPECT_FALSE(IsHecChannel("11111111-2222-3333-4444-5555555555555"));  // long
  EXPECT_FALSE(IsHecChannel("11111111x2222-3333-4444-555555555555"));
  EXPECT_FALSE(IsHecChannel("g1111111-2222-3333-4444-555555555555"));
}

TEST(HecAcksTest, IdsPerChannelAcknowledgedOnceIssued) {
  HecAcks acks;
  const std::string a = "11111111-2222-3333-4444-555555555555";
  const std::string b = "21111111-2222-3333-4444-555555555555";
  EXPECT_FALSE(acks.Acknowledged(a, 0));
  EXPECT_EQ(acks.Issue(a), 0u);
  EXPECT_EQ(acks.Issue(a), 1u);
  EXPECT_EQ(acks.Issue(b), 0u);
  EXPECT_TRUE(acks.Acknowledged(a, 0));
  EXPECT_TRUE(acks.Acknowledged(a, 1));
  EXPECT_FALSE(acks.Acknowledged(a, 2));
  EXPECT_TRUE(acks.Acknowledged(b, 0));
  EXPECT_FALSE(acks.Acknowledged(b, 1));
}

TEST(HecAcksTest, LeastRecentlyUsedChannelIsForgotten) {
  HecAcks acks(2);
  const std::string a = "11111111-2222-3333-4444-555555555555";
  const std::string b = "21111111-2222-3333-4444-555555555555";
  const std::string c = "31111111-2222-3333-4444-555555555555";
  acks.Issue(a);
  acks.Issue(b);
  EXPECT_TRUE(acks.Acknowledged(a, 0));  // a is now the most recently used
  acks.Issue(c);                         // forgets b
  EXPECT_TRUE(acks.Acknowledged(a, 0));
  EXPECT_FALSE(acks.Acknowledged(b, 0));
  EXPECT_TRUE(acks.Acknowledged(c, 0));
  EXPECT_EQ(acks.Issue(b), 0u);  // b starts again
}

}  // namespace
}  // namespace sediment::api
