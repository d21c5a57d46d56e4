#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "common/base64.h"
#include "common/checksum.h"
#include "common/clock.h"
#include "common/coding.h"
#include "common/env.h"
#include "common/json_writer.h"
#include "common/status.h"
#include "common/testing/temp_dir.h"
#include "common/time_parse.h"

namespace sediment {
namespace {

mode_t ModeOf(const std::string& path) {
  struct stat st;
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

// Segments, snapshots and credentials are written through Env: owner-only files, and a data dir
// that is created, or tightened, to 0700.
TEST(PosixEnv, FilesAreOwnerOnlyAndPrivateDirsAreTightened) {
  TempDir tmp;
  Env* env = Env::Default();
  ASSERT_TRUE(env->WriteFileAtomic(tmp.Sub("atomic"), "x").ok());
  EXPECT_EQ(ModeOf(tmp.Sub("atomic")) & 077, 0u);
  {
    auto f = env->NewAppendableFile(tmp.Sub("appended"));
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE((*f)->Close().ok());
  }
  EXPECT_EQ(ModeOf(tmp.Sub("appended")) & 077, 0u);
  bool tightened = true;
  ASSERT_TRUE(env->CreatePrivateDir(tmp.Sub("new/data"), &tightened).ok());
  EXPECT_FALSE(tightened);
  EXPECT_EQ(ModeOf(tmp.Sub("new/data")), 0700u);
  ASSERT_EQ(::chmod(tmp.Sub("new/data").c_str(), 0755), 0);
  ASSERT_TRUE(env->CreatePrivateDir(tmp.Sub("new/data"), &tightened).ok());
  EXPECT_TRUE(tightened);
  EXPECT_EQ(ModeOf(tmp.Sub("new/data")), 0700u);
  ASSERT_TRUE(env->CreatePrivateDir(tmp.Sub("new/data"), &tightened).ok());
  EXPECT_FALSE(tightened);
}

TEST(ThreadCpuMicros, CountsTheCallingThreadsWorkOnly) {
  // A second thread waits while this one works: its CPU time stays near zero (a process-wide
  // clock would count this thread's work there too). The work is a fixed amount, so a loaded
  // machine makes it take longer, not count less.
  std::mutex mu;
  std::condition_variable cv;
  bool started = false, done = false;
  int64_t waiter_cpu = -1;
  std::thread waiter([&] {
    const int64_t a = ThreadCpuMicros();
    std::unique_lock lk(mu);
    started = true;
    cv.notify_all();
    cv.wait(lk, [&] { return done; });
    waiter_cpu = ThreadCpuMicros() - a;
  });
  {
    std::unique_lock lk(mu);
    cv.wait(lk, [&] { return started; });
  }
  const int64_t before = ThreadCpuMicros();
  volatile uint64_t x = 1;
  for (int i = 0; i < 100'000'000; ++i) x = x * 6364136223846793005ULL + 1;
  const int64_t work = ThreadCpuMicros() - before;
  {
    std::lock_guard lk(mu);
    done = true;
  }
  cv.notify_all();
  waiter.join();
  EXPECT_GE(work, 5000) << "10^8 multiply-adds";
  EXPECT_GE(waiter_cpu, 0);
  EXPECT_LT(waiter_cpu, 5000) << "work on this thread: " << work << " us";
}

TEST(Status, SubcodeSurvivesContextAndNeverMarksOk) {
  Status st = Status::Corruption("gone").WithSubcode(StatusSubcode::kLogTruncatedPastState);
  Status wrapped = st.WithContext("loading Global");
  EXPECT_EQ(wrapped.code(), StatusCode::kCorruption);
  EXPECT_EQ(wrapped.subcode(), StatusSubcode::kLogTruncatedPastState);
  EXPECT_EQ(wrapped.message(), "loading Global: gone");
  EXPECT_EQ(Status::Corruption("other").subcode(), StatusSubcode::kNone);
  EXPECT_TRUE(Status::OK().WithSubcode(StatusSubcode::kBucketAlreadyOwned).ok());
  EXPECT_EQ(Status::OK().WithSubcode(StatusSubcode::kBucketAlreadyOwned).subcode(),
            StatusSubcode::kNone);
  Result<int> r = Status::Aborted("x").WithSubcode(StatusSubcode::kLogBeginsWithRecovery);
  EXPECT_EQ(r.status().subcode(), StatusSubcode::kLogBeginsWithRecovery);
  EXPECT_STREQ(StatusSubcodeName(StatusSubcode::kBucketAlreadyOwned), "BucketAlreadyOwned");
}

TEST(Crc32c, KnownVectors) {
  EXPECT_EQ(Crc32c("123456789", 9), 0xE3069283u);
  std::string zeros(32, '\0');
  EXPECT_EQ(Crc32c(zeros), 0x8A9136AAu);
  // Incremental equals one-shot.
  EXPECT_EQ(Crc32c("6789", 4, Crc32c("12345", 5)), 0xE3069283u);
}

TEST(Coding, VarintsRoundTripAndRejectTruncation) {
  std::string buf;
  PutVarint64(&buf, 0);
  PutVarint64(&buf, 300);
  PutVarsint64(&buf, -5);
  PutVarint64(&buf, ~0ull);
  std::string_view in = buf;
  uint64_t a, b, d;
  int64_t c;
  ASSERT_TRUE(GetVarint64(&in, &a) && GetVarint64(&in, &b) && GetVarsint64(&in, &c) &&
              GetVarint64(&in, &d));
  EXPECT_EQ(a, 0u);
  EXPECT_EQ(b, 300u);
  EXPECT_EQ(c, -5);
  EXPECT_EQ(d, ~0ull);
  std::string_view cut = std::string_view(buf).substr(0, 2);
  cut.remove_prefix(1);  // a lone continuation byte of 300
  EXPECT_FALSE(GetVarint64(&cut, &a));
}

TEST(JsonWriter, EscapesAndNests) {
  JsonWriter w;
  w.BeginObject()
      .Key("a")
      .String("x\"y\n\x01")
      .Key("b")
      .BeginArray()
      .Int(1)
      .Double(0.5)
      .Null()
      .EndArray()
      .EndObject();
  EXPECT_EQ(w.str(), R"({"a":"x\"y\n\u0001","b":[1,0.5,null]})");
  std::string s;
  AppendJsonString(&s, "\xff");
  EXPECT_EQ(s, "\"\xEF\xBF\xBD\"");
}

// Whole numbers stay whole: "%.1g"-style shortening once printed 90 as 9e+01.
TEST(JsonWriter, DoublesAreShortestRoundTripNumbers) {
  auto text = [](double v) {
    JsonWriter w;
    w.Double(v);
    return w.str();
  };
  EXPECT_EQ(text(90.0), "90");
  EXPECT_EQ(text(180.0), "180");
  EXPECT_EQ(text(-0.25), "-0.25");
  EXPECT_EQ(text(1.732050807568877), "1.732050807568877");
  EXPECT_EQ(text(0.1), "0.1");
  EXPECT_EQ(text(1e21), "1e+21");
  EXPECT_EQ(text(std::nan("")), "null");
  for (double v : {90.0, 0.1, 1.0 / 3, 123456789.125, 1e-7, 5e-324}) {
    EXPECT_EQ(std::strtod(text(v).c_str(), nullptr), v) << text(v);
  }
}

TEST(TimeParse, Iso8601) {
  EXPECT_EQ(ParseIso8601Millis("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(ParseIso8601Millis("2024-02-29T12:34:56.789Z"), 1709210096789);
  EXPECT_EQ(ParseIso8601Millis("2024-02-29T14:34:56.789+02:00"), 1709210096789);
  EXPECT_EQ(ParseIso8601Millis("2024-02-29 12:34:56"), 1709210096000);
  EXPECT_FALSE(ParseIso8601Millis("2024-13-01T00:00:00Z"));
  EXPECT_FALSE(ParseIso8601Millis("yesterday"));
  EXPECT_EQ(FormatIso8601Millis(1709210096789), "2024-02-29T12:34:56.789Z");
}

}  // namespace
}  // namespace sediment

TEST(Base64, RoundTripsAndRefusesWhatNoEncodingGives) {
  for (std::string raw : {"", "f", "fo", "foo", "foob", "fooba", "foobar"}) {
    EXPECT_EQ(sediment::DecodeBase64(sediment::EncodeBase64(raw)), raw) << raw;
  }
  EXPECT_EQ(sediment::EncodeBase64("foobar"), "Zm9vYmFy");
  EXPECT_EQ(sediment::EncodeBase64("fo"), "Zm8=");
  EXPECT_EQ(sediment::DecodeBase64("Zm8"), "fo");                             // padding optional
  EXPECT_EQ(sediment::DecodeBase64("-_8="), sediment::DecodeBase64("+/8="));  // URL-safe alphabet
  EXPECT_EQ(sediment::DecodeBase64("Zm9v!"), std::nullopt);  // outside both alphabets
  EXPECT_EQ(sediment::DecodeBase64("Zm9vY"), std::nullopt);  // 4n+1 digits
}
