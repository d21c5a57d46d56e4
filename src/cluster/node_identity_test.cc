#include "cluster/node_identity.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <set>

#include "common/checksum.h"
#include "common/testing/fault_env.h"

namespace sediment {
namespace {

class NodeIdentityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (std::filesystem::temp_directory_path() /
            ("node_identity_test_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string IdPath() const { return JoinPath(dir_, kNodeIdFileName); }

  std::string dir_;
};

TEST(NodeIdFormat, RoundTripAndExactText) {
  EXPECT_EQ(EncodeNodeIdFile(NodeId(42)).substr(0, 23), "sediment-node-id v1 42 ");
  char crc[16];
  std::snprintf(crc, sizeof(crc), "%08x", Crc32c("sediment-node-id v1 42"));
  EXPECT_EQ(EncodeNodeIdFile(NodeId(42)), std::string("sediment-node-id v1 42 ") + crc + "\n");
  for (int64_t id : {int64_t{1}, int64_t{42}, kMaxNodeId}) {
    auto r = DecodeNodeIdFile(EncodeNodeIdFile(NodeId(id)));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->value, id);
  }
  // Trailing newline optional.
  std::string s = EncodeNodeIdFile(NodeId(7));
  s.pop_back();
  auto r = DecodeNodeIdFile(s);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->value, 7);
}

TEST(NodeIdFormat, RejectsMalformed) {
  const std::string good = EncodeNodeIdFile(NodeId(12345));
  std::vector<std::string> bad = {
      "",
      "\n",
      "12345\n",
      "sediment-node-id v2 12345 00000000\n",
      "sediment-node-id v1 12345\n",
      "sediment-node-id v1 12345 zzzzzzzz\n",
      "sediment-node-id v1 12345 0\n",
      good + "x",
      good + "\n",
      " " + good,
      EncodeNodeIdFile(NodeId(0)),
      EncodeNodeIdFile(NodeId(-3)),
      EncodeNodeIdFile(NodeId(kMaxNodeId + 1)),
  };
  // Leading zero with a matching checksum is still non-canonical.
  {
    std::string body = "sediment-node-id v1 012345";
    char crc[16];
    std::snprintf(crc, sizeof(crc), "%08x", Crc32c(body));
    bad.push_back(body + " " + crc + "\n");
  }
  // Upper-case hex checksum.
  {
    std::string u = good;
    for (size_t i = u.rfind(' ') + 1; i < u.size(); ++i) u[i] = std::toupper(u[i]);
    if (u != good) bad.push_back(u);
  }
  // Every single-byte change.
  for (size_t i = 0; i < good.size(); ++i) {
    std::string s = good;
    s[i] = static_cast<char>(s[i] ^ 0x01);
    bad.push_back(s);
  }
  // Every truncation that does not just drop the newline.
  for (size_t n = 0; n + 1 < good.size(); ++n) bad.push_back(good.substr(0, n));
  for (const std::string& s : bad) {
    auto r = DecodeNodeIdFile(s);
    EXPECT_FALSE(r.ok()) << "accepted: '" << s << "'";
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << s;
    }
  }
}

TEST_F(NodeIdentityTest, CreatesOnceThenReloads) {
  ASSERT_FALSE(std::filesystem::exists(dir_));
  auto first = LoadOrCreateNodeId(Env::Default(), dir_);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_GE(first->value, 1);
  EXPECT_LE(first->value, kMaxNodeId);
  auto text = Env::Default()->ReadFile(IdPath());
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, EncodeNodeIdFile(*first));
  for (int i = 0; i < 3; ++i) {
    auto again = LoadOrCreateNodeId(Env::Default(), dir_);
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_EQ(*again, *first);
  }
}

TEST_F(NodeIdentityTest, NewDirectoriesGetDifferentIds) {
  std::set<int64_t> ids;
  for (int i = 0; i < 5; ++i) {
    auto id = LoadOrCreateNodeId(Env::Default(), JoinPath(dir_, "d" + std::to_string(i)));
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    ids.insert(id->value);
  }
  // Five random draws from 2^31-1 values collide with negligible probability.
  EXPECT_EQ(ids.size(), 5u);
}

TEST_F(NodeIdentityTest, CorruptFileIsReportedWithFix) {
  ASSERT_TRUE(LoadOrCreateNodeId(Env::Default(), dir_).ok());
  FaultEnv env;
  ASSERT_TRUE(env.FlipByte(IdPath(), 21).ok());
  auto r = LoadOrCreateNodeId(&env, dir_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_NE(r.status().message().find(IdPath()), std::string::npos) << r.status().ToString();
  EXPECT_NE(r.status().message().find("delete"), std::string::npos) << r.status().ToString();
  // The corrupt file is left for the operator; following the advice gives a new id.
  EXPECT_TRUE(env.FileExists(IdPath()));
  ASSERT_TRUE(env.RemoveFile(IdPath()).ok());
  EXPECT_TRUE(LoadOrCreateNodeId(&env, dir_).ok());
}

TEST_F(NodeIdentityTest, EmptyFileIsCorruption) {
  ASSERT_TRUE(Env::Default()->CreateDirs(dir_).ok());
  ASSERT_TRUE(Env::Default()->WriteFileAtomic(IdPath(), "").ok());
  auto r = LoadOrCreateNodeId(Env::Default(), dir_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
}

TEST_F(NodeIdentityTest, CreatedIdSurvivesCrash) {
  FaultEnv env;
  env.SetStrictDirSync(true);
  ASSERT_TRUE(env.CreateDirs(dir_).ok());
  auto id = LoadOrCreateNodeId(&env, dir_);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  ASSERT_TRUE(env.SimulateCrash().ok());
  env.Restart();
  auto again = LoadOrCreateNodeId(&env, dir_);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, *id);
}

TEST_F(NodeIdentityTest, WriteFailureLeavesNoIdFile) {
  FaultEnv env;
  ASSERT_TRUE(env.CreateDirs(dir_).ok());
  env.FailWritesAfter(0);
  auto r = LoadOrCreateNodeId(&env, dir_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kIOError) << r.status().ToString();
  EXPECT_FALSE(env.FileExists(IdPath()));

  env.FailWritesAfter(-1);
  env.SetSyncFails(true);
  r = LoadOrCreateNodeId(&env, dir_);
  ASSERT_FALSE(r.ok());
  EXPECT_FALSE(env.FileExists(IdPath()));

  env.SetSyncFails(false);
  auto ok = LoadOrCreateNodeId(&env, dir_);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
}

TEST_F(NodeIdentityTest, UnreadableIdIsAnErrorNotANewId) {
  // A directory where the file should be: reading fails with something other than NotFound, and
  // no new id may be made up.
  ASSERT_TRUE(Env::Default()->CreateDirs(IdPath()).ok());
  auto r = LoadOrCreateNodeId(Env::Default(), dir_);
  EXPECT_FALSE(r.ok());
}

}  // namespace
}  // namespace sediment
