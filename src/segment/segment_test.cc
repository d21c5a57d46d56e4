#include "segment/segment.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zstd.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "common/checksum.h"
#include "common/coding.h"
#include "segment/filter.h"

namespace sediment {
namespace {

class SegmentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    env_ = Env::Default();
    std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::replace(test.begin(), test.end(), '/', '_');  // parameterized tests: "Name/0"
    dir_ = "/tmp/segment_test." + std::to_string(getpid()) + "." + test;
    ASSERT_TRUE(env_->RemoveAll(dir_).ok());
    ASSERT_TRUE(env_->CreateDirs(dir_).ok());
  }
  void TearDown() override { (void)env_->RemoveAll(dir_); }

  std::string Path(const std::string& name) const { return JoinPath(dir_, name); }
  void WriteRaw(const std::string& path, std::string_view data) {
    auto f = env_->NewWritableFile(path);
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE((*f)->Append(data).ok());
    ASSERT_TRUE((*f)->Close().ok());
  }

  Env* env_ = nullptr;
  std::string dir_;
};

// Serves the files put into it from memory and forwards everything else to the default Env; keeps
// the byte-flip and truncation tests independent of disk speed.
class MemReadEnv final : public Env {
 public:
  void Put(const std::string& path, std::string data) { files_[path] = std::move(data); }

  Result<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(const std::string& path) override {
    auto it = files_.find(path);
    if (it == files_.end()) return base_->NewRandomAccessFile(path);
    return std::unique_ptr<RandomAccessFile>(new MemFile(it->second));
  }
  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& p) override {
    return base_->NewWritableFile(p);
  }
  Result<std::unique_ptr<WritableFile>> NewAppendableFile(const std::string& p) override {
    return base_->NewAppendableFile(p);
  }
  Result<std::string> ReadFile(const std::string& p) override { return base_->ReadFile(p); }
  Status WriteFileAtomic(const std::string& p, std::string_view d) override {
    return base_->WriteFileAtomic(p, d);
  }
  bool FileExists(const std::string& p) override { return base_->FileExists(p); }
  Result<std::vector<std::string>> ListDir(const std::string& d) override {
    return base_->ListDir(d);
  }
  Status CreateDirs(const std::string& d) override { return base_->CreateDirs(d); }
  Status RemoveFile(const std::string& p) override { return base_->RemoveFile(p); }
  Status RemoveAll(const std::string& p) override { return base_->RemoveAll(p); }
  Status RenameFile(const std::string& a, const std::string& b) override {
    return base_->RenameFile(a, b);
  }
  Status TruncateFile(const std::string& p, uint64_t n) override {
    return base_->TruncateFile(p, n);
  }
  Status SyncDir(const std::string& d) override { return base_->SyncDir(d); }
  Result<uint64_t> FileSize(const std::string& p) override { return base_->FileSize(p); }

 private:
  class MemFile final : public RandomAccessFile {
   public:
    explicit MemFile(const std::string& data) : data_(data) {}
    Status Read(uint64_t offset, size_t n, std::string* out) const override {
      out->clear();
      if (offset < data_.size()) out->assign(data_, offset, n);
      return Status::OK();
    }
    Result<uint64_t> Size() const override { return static_cast<uint64_t>(data_.size()); }

   private:
    const std::string& data_;
  };
  Env* base_ = Env::Default();
  std::map<std::string, std::string> files_;
};

Datasource TestDs() {
  Datasource ds;
  ds.repo = "web";
  ds.tags = {{"#host", "h1"}, {"#type", "access"}};
  return ds;
}

// Apache-combined-like lines with parsed fields (most values are substrings of the raw line).
std::vector<PositionedEvent> AccessLog(size_t n, uint64_t seed, int64_t first_offset = 100) {
  std::mt19937_64 rng(seed);
  static const char* kMethods[] = {"GET", "GET", "GET", "POST", "PUT", "DELETE", "HEAD"};
  static const char* kPaths[] = {"/api/v1/users",     "/api/v1/orders",   "/static/app.js",
                                 "/static/style.css", "/index.html",      "/login",
                                 "/api/v2/search",    "/images/logo.png", "/cart",
                                 "/checkout/confirm"};
  static const char* kStatus[] = {"200", "200", "200", "200", "304", "404", "500", "301", "201"};
  static const char* kAgents[] = {
      "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
      "Chrome/120.0.0.0 Safari/537.36",
      "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) "
      "Version/17.1 Safari/605.1.15",
      "Mozilla/5.0 (X11; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0",
      "curl/8.4.0",
      "Go-http-client/1.1",
      "python-requests/2.31.0"};
  static const char* kRefs[] = {"-", "https://www.example.com/", "https://search.example.org/?q=x",
                                "https://shop.example.com/cart"};
  static const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                  "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  std::vector<PositionedEvent> out;
  out.reserve(n);
  int64_t ts = 1704067200000;
  int64_t offset = first_offset;
  uint32_t index = 0;
  int64_t ingest = 0;
  char line[1024];
  for (size_t i = 0; i < n; ++i) {
    ts += static_cast<int64_t>(rng() % 7);
    if (rng() % 4 == 0) {
      offset += 1 + static_cast<int64_t>(rng() % 3);
      index = 0;
    } else if (i > 0) {
      ++index;
    }
    std::string ip = std::to_string(10 + rng() % 3) + "." + std::to_string(rng() % 8) + "." +
                     std::to_string(rng() % 40) + "." + std::to_string(rng() % 256);
    const char* method = kMethods[rng() % 7];
    std::string path = std::string(kPaths[rng() % 10]);
    if (rng() % 2) path += "/" + std::to_string(rng() % 100000);
    if (rng() % 3 == 0) path += "?page=" + std::to_string(rng() % 20);
    const char* status = kStatus[rng() % 9];
    std::string bytes = std::to_string(rng() % 50000);
    const char* agent = kAgents[rng() % 6];
    const char* ref = kRefs[rng() % 4];
    int64_t sec = ts / 1000;
    std::snprintf(line, sizeof(line),
                  "%s - - [%02d/%s/2024:%02d:%02d:%02d +0000] \"%s %s HTTP/1.1\" %s %s \"%s\" "
                  "\"%s\"",
                  ip.c_str(), static_cast<int>(1 + (sec / 86400) % 28),
                  kMonths[(sec / 86400 / 28) % 12], static_cast<int>((sec / 3600) % 24),
                  static_cast<int>((sec / 60) % 60), static_cast<int>(sec % 60), method,
                  path.c_str(), status, bytes.c_str(), ref, agent);
    PositionedEvent pe;
    pe.pos = Position{Offset(offset), index};
    pe.event.timestamp_ms = ts;
    // One ingest timestamp per message (= per offset), as ingest stamps a request.
    if (i == 0 || index == 0) ingest = ts + 1500 + static_cast<int64_t>(rng() % 100);
    pe.event.ingest_ms = ingest;
    pe.event.raw = line;
    pe.event.fields = {{"client", ip},   {"method", method},   {"url", path},    {"status", status},
                       {"bytes", bytes}, {"useragent", agent}, {"referrer", ref}};
    out.push_back(std::move(pe));
  }
  return out;
}

// Mixed events: non-monotonic and negative timestamps, values not in raw, empty raw and values,
// binary bytes, events without fields.
std::vector<PositionedEvent> MixedEvents(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<PositionedEvent> out;
  int64_t offset = 0;
  uint32_t index = 0;
  for (size_t i = 0; i < n; ++i) {
    if (rng() % 3 == 0) {
      offset += 1 + static_cast<int64_t>(rng() % 1000);
      index = static_cast<uint32_t>(rng() % 5);
    } else if (i > 0) {
      index += 1 + static_cast<uint32_t>(rng() % 3);
    }
    PositionedEvent pe;
    pe.pos = Position{Offset(offset), index};
    pe.event.timestamp_ms = static_cast<int64_t>(rng() % 2000000) - 1000000;
    pe.event.ingest_ms = static_cast<int64_t>(rng());
    size_t len = rng() % 7 == 0 ? 0 : rng() % 300;
    for (size_t k = 0; k < len; ++k) pe.event.raw.push_back(static_cast<char>(rng() % 256));
    size_t nf = rng() % 5;
    for (size_t f = 0; f < nf; ++f) {
      Field field;
      field.name = "f" + std::to_string(rng() % 12);
      bool dup = false;
      for (const Field& g : pe.event.fields) dup |= g.name == field.name;
      if (dup) continue;
      if (!pe.event.raw.empty() && rng() % 2) {
        size_t a = rng() % pe.event.raw.size();
        field.value = pe.event.raw.substr(a, rng() % 20);
      } else {
        field.value = "v" + std::to_string(rng());
      }
      if (rng() % 10 == 0) field.value.clear();
      pe.event.fields.push_back(std::move(field));
    }
    out.push_back(std::move(pe));
  }
  return out;
}

// Reads every event back and checks it equals `events`; also checks block ranges.
void ExpectSameEvents(const SegmentReader& r, const std::vector<PositionedEvent>& events) {
  size_t k = 0;
  DecodedBlock block;
  for (size_t i = 0; i < r.blocks().size(); ++i) {
    const BlockInfo& b = r.blocks()[i];
    ASSERT_TRUE(r.ReadBlock(i, &block).ok()) << i;
    ASSERT_EQ(block.size(), b.event_count);
    ASSERT_EQ(block.field_begin.size(), block.size() + 1);
    int64_t min_ts = INT64_MAX, max_ts = INT64_MIN;
    for (size_t e = 0; e < block.size(); ++e, ++k) {
      ASSERT_LT(k, events.size());
      const PositionedEvent& want = events[k];
      ASSERT_EQ(block.positions[e], want.pos);
      ASSERT_EQ(block.timestamps[e], want.event.timestamp_ms);
      ASSERT_EQ(block.ingest_ts[e], want.event.ingest_ms);
      ASSERT_EQ(block.raw[e], want.event.raw);
      if (e > 0) {
        ASSERT_EQ(block.raw[e].data(), block.raw[e - 1].data() + block.raw[e - 1].size());
      }
      ASSERT_EQ(block.field_begin[e + 1] - block.field_begin[e], want.event.fields.size());
      for (size_t f = 0; f < want.event.fields.size(); ++f) {
        const FieldView& got = block.fields[block.field_begin[e] + f];
        ASSERT_EQ(got.name, want.event.fields[f].name);
        ASSERT_EQ(got.value, want.event.fields[f].value);
      }
      min_ts = std::min(min_ts, want.event.timestamp_ms);
      max_ts = std::max(max_ts, want.event.timestamp_ms);
    }
    EXPECT_EQ(b.min_pos, block.positions.front());
    EXPECT_EQ(b.max_pos, block.positions.back());
    EXPECT_EQ(b.min_ts, min_ts);
    EXPECT_EQ(b.max_ts, max_ts);
    if (r.format_version() == 1) {
      EXPECT_EQ(b.raw_size, block.buffer.size());
    }
  }
  EXPECT_EQ(k, events.size());
}

// Reads every block with `selection` (not all) and checks each event holds exactly the selected
// fields' values (names in any order, values of a name in occurrence order), and no raw string
// unless asked.
void ExpectSelectedFields(const SegmentReader& r, const std::vector<PositionedEvent>& events,
                          const ColumnSelection& selection) {
  size_t k = 0;
  DecodedBlock block;
  for (size_t i = 0; i < r.blocks().size(); ++i) {
    Status st = r.ReadBlockColumns(i, selection, &block);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_EQ(block.size(), r.blocks()[i].event_count);
    if (selection.order) {
      ASSERT_EQ(block.timestamps.size(), block.size());
      ASSERT_EQ(block.positions.size(), block.size());
    } else if (r.format_version() == 2) {
      // Format 2 leaves them undecoded.
      ASSERT_TRUE(block.timestamps.empty());
      ASSERT_TRUE(block.positions.empty());
    }
    for (size_t e = 0; e < block.size(); ++e, ++k) {
      const Event& want = events[k].event;
      if (selection.order) {
        ASSERT_EQ(block.positions[e], events[k].pos);
        ASSERT_EQ(block.timestamps[e], want.timestamp_ms);
      }
      if (selection.raw) {
        ASSERT_EQ(block.raw[e], want.raw);
      } else {
        ASSERT_TRUE(block.raw[e].empty());
      }
      std::vector<std::pair<std::string, std::string>> expect, got;
      for (const std::string& name : selection.fields) {
        for (const Field& f : want.fields) {
          if (f.name == name) expect.emplace_back(f.name, f.value);
        }
      }
      block.ForEachField(e, [&got](std::string_view name, std::string_view value) {
        got.emplace_back(std::string(name), std::string(value));
      });
      if (selection.raw) {
        // A raw read decodes every field, in the event's order.
        ASSERT_EQ(got.size(), want.fields.size());
      } else {
        // Names in any order; values of one name in occurrence order.
        auto by_name = [](const auto& a, const auto& b) { return a.first < b.first; };
        std::stable_sort(expect.begin(), expect.end(), by_name);
        std::stable_sort(got.begin(), got.end(), by_name);
        ASSERT_EQ(got, expect) << "event " << k;
      }
    }
  }
  EXPECT_EQ(k, events.size());
}

// Both formats: version 1 as today's code still writes it (the reader must keep reading files of
// older nodes) and version 2 (columnar, the default).
TEST_F(SegmentTest, RoundTripManyBlocks) {
  for (int variant = 0; variant < 4; ++variant) {
    std::vector<PositionedEvent> events =
        variant % 2 == 0 ? AccessLog(20000, 7) : MixedEvents(8000, 11);
    SegmentWriterOptions opt;
    opt.block_raw_bytes = 64 << 10;
    opt.format_version = variant < 2 ? 2 : 1;
    SCOPED_TRACE("variant " + std::to_string(variant));
    const std::string path = Path("seg" + std::to_string(variant));
    auto info = WriteSegment(env_, path, TestDs(), PartitionId(3), events, opt);
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    EXPECT_FALSE(env_->FileExists(path + ".tmp"));
    auto reader = SegmentReader::Open(env_, path);
    ASSERT_TRUE(reader.ok()) << reader.status().ToString();
    const SegmentReader& r = **reader;
    EXPECT_GT(r.blocks().size(), 5u);

    const SegmentInfo& got = r.info();
    EXPECT_EQ(got.datasource, TestDs());
    EXPECT_EQ(got.partition, PartitionId(3));
    EXPECT_EQ(got.min_pos, events.front().pos);
    EXPECT_EQ(got.max_pos, events.back().pos);
    int64_t min_ts = INT64_MAX, max_ts = INT64_MIN;
    uint64_t raw_bytes = 0;
    for (const auto& e : events) {
      min_ts = std::min(min_ts, e.event.timestamp_ms);
      max_ts = std::max(max_ts, e.event.timestamp_ms);
      raw_bytes += e.event.raw.size();
    }
    EXPECT_EQ(got.min_ts, min_ts);
    EXPECT_EQ(got.max_ts, max_ts);
    EXPECT_EQ(got.event_count, events.size());
    EXPECT_EQ(got.raw_bytes, raw_bytes);
    EXPECT_EQ(got.file_size, *env_->FileSize(path));
    EXPECT_EQ(got.file_size, info->file_size);
    EXPECT_EQ(got.content_hash, info->content_hash);
    auto file = env_->ReadFile(path);
    ASSERT_TRUE(file.ok());
    EXPECT_EQ(got.content_hash, Hash64(file->data(), file->size() - 8));

    uint64_t at = 16;
    for (const BlockInfo& b : r.blocks()) {
      EXPECT_EQ(b.file_offset, at);
      at += b.stored_size;
    }
    EXPECT_EQ(r.format_version(), opt.format_version);
    ExpectSameEvents(r, events);
    EXPECT_TRUE(r.VerifyAll().ok());
    // Selected columns: format 2 decodes only those; format 1 decodes everything (a superset).
    if (opt.format_version == 2) {
      std::set<std::string> names;
      for (const auto& e : events) {
        for (const Field& f : e.event.fields) names.insert(f.name);
      }
      ASSERT_GE(names.size(), 2u);
      ColumnSelection one;
      one.all = false;
      one.fields = {*names.begin()};
      ExpectSelectedFields(r, events, one);
      ColumnSelection two = one;
      two.fields = {*names.begin(), *names.rbegin(), "not-a-field"};
      std::sort(two.fields.begin(), two.fields.end());
      ExpectSelectedFields(r, events, two);
      ColumnSelection none;
      none.all = false;
      ExpectSelectedFields(r, events, none);
      ColumnSelection raw = one;
      raw.raw = true;
      ExpectSelectedFields(r, events, raw);
      // Without @timestamp and positions: the same fields and raw strings.
      for (ColumnSelection sel : {one, two, none, raw}) {
        sel.order = false;
        ExpectSelectedFields(r, events, sel);
      }
    }
  }
}

// The streaming writer writes the same bytes as WriteSegmentFile, holding one block at a time;
// misuse is an error and an unfinished file is removed.
TEST_F(SegmentTest, StreamingWriterWritesTheSameFile) {
  std::vector<PositionedEvent> events = MixedEvents(3000, 21);
  for (uint32_t version : {1u, 2u}) {
    SegmentWriterOptions opt;
    opt.block_raw_bytes = 16 << 10;
    opt.format_version = version;
    const std::string a = Path("whole" + std::to_string(version));
    const std::string b = Path("stream" + std::to_string(version));
    ASSERT_TRUE(WriteSegmentFile(env_, a, TestDs(), PartitionId(2), events, opt).ok());
    auto w = SegmentFileWriter::Create(env_, b, TestDs(), PartitionId(2), opt);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    for (const PositionedEvent& e : events) ASSERT_TRUE((*w)->Add(e).ok());
    auto info = (*w)->Finish();
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    EXPECT_EQ(*env_->ReadFile(a), *env_->ReadFile(b));
    EXPECT_EQ(info->event_count, events.size());
  }
  {
    const std::string path = Path("bad-order");
    auto w = SegmentFileWriter::Create(env_, path, TestDs(), PartitionId(2));
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Add(events[1]).ok());
    EXPECT_EQ((*w)->Add(events[0]).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ((*w)->Finish().status().code(), StatusCode::kInvalidArgument);
    w->reset();
    EXPECT_FALSE(env_->FileExists(path));
  }
  {
    const std::string path = Path("empty");
    auto w = SegmentFileWriter::Create(env_, path, TestDs(), PartitionId(2));
    ASSERT_TRUE(w.ok());
    EXPECT_EQ((*w)->Finish().status().code(), StatusCode::kInvalidArgument);
    w->reset();
    EXPECT_FALSE(env_->FileExists(path));
  }
  SegmentWriterOptions bad;
  bad.format_version = 3;
  EXPECT_EQ(
      SegmentFileWriter::Create(env_, Path("x"), TestDs(), PartitionId(2), bad).status().code(),
      StatusCode::kInvalidArgument);
}

// AddAll cuts the same blocks as Add (same bytes, whatever the pieces it is given, mixed with
// Add) while copying only the events of the blocks that cross a piece's ends.
TEST_F(SegmentTest, AddAllWritesTheSameFileWithoutCopyingWholeBlocks) {
  std::vector<PositionedEvent> events = MixedEvents(3000, 23);
  for (uint32_t version : {1u, 2u}) {
    SegmentWriterOptions opt;
    opt.block_raw_bytes = 16 << 10;
    opt.format_version = version;
    const std::string one = Path("one-by-one" + std::to_string(version));
    auto w = SegmentFileWriter::Create(env_, one, TestDs(), PartitionId(2), opt);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    for (const PositionedEvent& e : events) ASSERT_TRUE((*w)->Add(e).ok());
    EXPECT_EQ((*w)->events_copied(), events.size());
    auto info = (*w)->Finish();
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    auto reader = SegmentReader::Open(env_, one);
    ASSERT_TRUE(reader.ok()) << reader.status().ToString();
    const size_t blocks = (*reader)->blocks().size();
    ASSERT_GT(blocks, 10u);
    const size_t per_block = events.size() / blocks + 1;

    const std::string whole = Path("whole" + std::to_string(version));
    w = SegmentFileWriter::Create(env_, whole, TestDs(), PartitionId(2), opt);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->AddAll(events).ok());
    EXPECT_LT((*w)->events_copied(), 4 * per_block);  // the last, partial block only
    ASSERT_TRUE((*w)->Finish().ok());
    EXPECT_TRUE(*env_->ReadFile(one) == *env_->ReadFile(whole)) << "version " << version;

    // Uneven pieces (empty, single events, long runs), some events through Add.
    const std::string pieces = Path("pieces" + std::to_string(version));
    w = SegmentFileWriter::Create(env_, pieces, TestDs(), PartitionId(2), opt);
    ASSERT_TRUE(w.ok());
    std::span<const PositionedEvent> all(events);
    const size_t cuts[] = {0, 0, 1, 2, 700, 701, 702, 1500, 2999, 3000};
    for (size_t k = 0; k + 1 < std::size(cuts); ++k) {
      if (k == 3) {
        ASSERT_TRUE((*w)->Add(events[cuts[k]]).ok());
        ASSERT_TRUE((*w)->AddAll(all.subspan(cuts[k] + 1, cuts[k + 1] - cuts[k] - 1)).ok());
      } else {
        ASSERT_TRUE((*w)->AddAll(all.subspan(cuts[k], cuts[k + 1] - cuts[k])).ok());
      }
    }
    EXPECT_LT((*w)->events_copied(), events.size() / 2);
    ASSERT_TRUE((*w)->Finish().ok());
    EXPECT_TRUE(*env_->ReadFile(one) == *env_->ReadFile(pieces)) << "version " << version;
  }
  // The checks of Add: an event out of order fails the writer and removes its file.
  const std::string path = Path("all-bad-order");
  auto w = SegmentFileWriter::Create(env_, path, TestDs(), PartitionId(2));
  ASSERT_TRUE(w.ok());
  std::vector<PositionedEvent> swapped(events.begin(), events.begin() + 100);
  std::swap(swapped[50], swapped[51]);
  EXPECT_EQ((*w)->AddAll(swapped).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*w)->Finish().status().code(), StatusCode::kInvalidArgument);
  w->reset();
  EXPECT_FALSE(env_->FileExists(path));
}

// Values of every shape a column encoding must keep exactly: integers that are not canonical
// ("007", "-0", "+5", beyond int64), empty values, duplicate names in one event, values absent
// from, overlapping in or repeated in the raw string, binary bytes, and low- and high-cardinality
// columns (dictionary, integer and plain encodings in one block).
TEST_F(SegmentTest, ColumnEncodingsKeepValuesExactly) {
  std::mt19937_64 rng(5);
  const std::vector<std::string> odd_ints = {"007",
                                             "-0",
                                             "+5",
                                             "99999999999999999999",
                                             "1e3",
                                             "-9223372036854775808",
                                             "9223372036854775807",
                                             " 1"};
  std::vector<PositionedEvent> events;
  for (int i = 0; i < 3000; ++i) {
    PositionedEvent pe;
    pe.pos = Position{Offset(100 + i), 0};
    pe.event.timestamp_ms = 1700000000000 + (i * 37) % 5000;
    pe.event.ingest_ms = 1700000000000 + i;
    const std::string status = std::to_string(200 + 100 * (i % 4));
    const std::string size = std::to_string(static_cast<int64_t>(rng() % 100000) - 500);
    const std::string id = "id-" + std::to_string(rng());
    pe.event.raw = "GET /x status=" + status + " size=" + size + " " + id + " " + id;
    pe.event.fields.push_back({"status", status});
    pe.event.fields.push_back({"size", size});
    pe.event.fields.push_back({"id", id});
    if (i % 3 == 0) pe.event.fields.push_back({"id", id});  // duplicate name, same value
    if (i % 5 == 0) pe.event.fields.push_back({"empty", ""});
    pe.event.fields.push_back({"odd", odd_ints[i % odd_ints.size()]});
    if (i % 7 == 0) pe.event.fields.push_back({"bin", std::string("\0\xff\n", 3)});
    if (i % 11 == 0) pe.event.fields.push_back({"absent", "not in the raw text"});
    if (i % 13 == 0) pe.event.fields.push_back({"overlap", pe.event.raw.substr(2, 10)});
    events.push_back(std::move(pe));
  }
  for (size_t block : {size_t{1} << 10, size_t{1} << 20}) {
    SegmentWriterOptions opt;
    opt.block_raw_bytes = block;
    const std::string path = Path("enc" + std::to_string(block));
    ASSERT_TRUE(WriteSegment(env_, path, TestDs(), PartitionId(0), events, opt).ok());
    auto r = SegmentReader::Open(env_, path);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ExpectSameEvents(**r, events);
    for (const char* name : {"status", "size", "id", "odd", "bin", "empty", "absent"}) {
      ColumnSelection sel;
      sel.all = false;
      sel.fields = {name};
      ExpectSelectedFields(**r, events, sel);
    }
  }
}

// BlockMayHaveField: format 2 answers from each block's columns; format 1 always says maybe.
TEST_F(SegmentTest, BlockMayHaveFieldFollowsTheBlocksColumns) {
  std::vector<PositionedEvent> events;
  for (int i = 0; i < 400; ++i) {
    PositionedEvent pe;
    pe.pos = Position{Offset(10 + i), 0};
    pe.event.timestamp_ms = 1700000000000 + i;
    pe.event.ingest_ms = pe.event.timestamp_ms;
    pe.event.raw = "event number " + std::to_string(i) + " with some padding text";
    if (i < 200) pe.event.fields.push_back({"status", std::to_string(200 + i % 3)});
    pe.event.fields.push_back({"level", "info"});
    events.push_back(std::move(pe));
  }
  for (uint32_t version : {1u, 2u}) {
    SegmentWriterOptions opt;
    opt.block_raw_bytes = 1024;
    opt.format_version = version;
    const std::string path = Path("fields" + std::to_string(version));
    ASSERT_TRUE(WriteSegment(env_, path, TestDs(), PartitionId(0), events, opt).ok());
    auto r = SegmentReader::Open(env_, path);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const std::vector<BlockInfo>& blocks = (*r)->blocks();
    ASSERT_GT(blocks.size(), 4u);
    size_t with = 0;
    for (size_t b = 0; b < blocks.size(); ++b) {
      EXPECT_TRUE((*r)->BlockMayHaveField(b, "level")) << b;
      // A block holding one of the first 200 events has the column.
      const bool has = blocks[b].min_ts < 1700000000000 + 200;
      EXPECT_EQ((*r)->BlockMayHaveField(b, "status"), version == 1 || has) << b;
      EXPECT_EQ((*r)->BlockMayHaveField(b, "nosuchfield"), version == 1) << b;
      with += (*r)->BlockMayHaveField(b, "status");
    }
    if (version == 2) {
      EXPECT_LT(with, blocks.size());
    }
  }
}

// @rawstring rebuilt from its template: field values and literal gaps of every length from 0 to
// 40 bytes (the short pieces are copied inline, in 1-3, 4-8, 9-16 and 17-32 byte cases), at the
// start, middle and end of the text, come back byte for byte.
TEST_F(SegmentTest, RawTemplatePiecesOfEveryLengthRoundTrip) {
  std::vector<PositionedEvent> events;
  auto text = [](size_t len, char first) {
    std::string t;
    for (size_t k = 0; k < len; ++k) t.push_back(static_cast<char>(first + k % 23));
    return t;
  };
  for (size_t i = 0; i < 41 * 41; ++i) {
    const size_t value_len = i % 41, gap_len = i / 41;
    PositionedEvent pe;
    pe.pos = Position{Offset(10 + static_cast<int64_t>(i)), 0};
    pe.event.timestamp_ms = 1700000000000 + static_cast<int64_t>(i);
    pe.event.ingest_ms = pe.event.timestamp_ms;
    const std::string value = "v" + text(value_len, 'a');  // non-empty: referenced by the template
    const std::string other = "w" + std::to_string(i);
    pe.event.raw = value + text(gap_len, 'A') + other + text(gap_len, '0') + value;
    pe.event.fields.push_back({"value", value});
    pe.event.fields.push_back({"other", other});
    events.push_back(std::move(pe));
  }
  for (size_t block : {size_t{1} << 12, size_t{1} << 20}) {
    SegmentWriterOptions opt;
    opt.block_raw_bytes = block;
    const std::string path = Path("pieces" + std::to_string(block));
    ASSERT_TRUE(WriteSegment(env_, path, TestDs(), PartitionId(0), events, opt).ok());
    auto r = SegmentReader::Open(env_, path);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ExpectSameEvents(**r, events);
  }
}

// A query that reads one column must not depend on the bytes of the others: a damaged chunk of an
// unread column goes unnoticed by that read, and is reported (never decoded) by a read that needs
// it.
TEST_F(SegmentTest, ColumnReadsCheckOnlyTheChunksTheyRead) {
  std::vector<PositionedEvent> events = AccessLog(2000, 9);
  const std::string path = Path("cols");
  ASSERT_TRUE(WriteSegment(env_, path, TestDs(), PartitionId(0), events).ok());
  auto file = env_->ReadFile(path);
  ASSERT_TRUE(file.ok());
  std::string bytes = *file;
  // The last chunk of block 0 is its last field column; damage its last stored byte.
  auto r0 = SegmentReader::Open(env_, path);
  ASSERT_TRUE(r0.ok());
  const BlockInfo b0 = (*r0)->blocks()[0];
  bytes[b0.file_offset + b0.stored_size - 1] ^= 0x40;
  WriteRaw(path, bytes);
  auto r = SegmentReader::Open(env_, path);
  ASSERT_TRUE(r.ok());
  DecodedBlock block;
  ColumnSelection none;
  none.all = false;
  EXPECT_TRUE((*r)->ReadBlockColumns(0, none, &block).ok());
  EXPECT_EQ(block.size(), b0.event_count);
  Status st = (*r)->ReadBlock(0, &block);
  EXPECT_EQ(st.code(), StatusCode::kCorruption) << st.ToString();
  EXPECT_EQ(block.size(), 0u);
}

// A format 2 read without `order` neither reads nor decodes the @timestamp and position chunks:
// with both chunks damaged it still gives every selected column (and the raw strings), and
// size() is the event count; a read that asks for them reports the damage. Format 1 decodes
// everything whatever is asked, so the same selection gives the timestamps there.
TEST_F(SegmentTest, ReadsWithoutOrderSkipTheTimeAndPositionChunks) {
  std::vector<PositionedEvent> events = AccessLog(3000, 5);
  SegmentWriterOptions opt;
  opt.block_raw_bytes = 64 << 10;
  const std::string path = Path("order");
  ASSERT_TRUE(WriteSegment(env_, path, TestDs(), PartitionId(0), events, opt).ok());
  auto r0 = SegmentReader::Open(env_, path);
  ASSERT_TRUE(r0.ok());
  ASSERT_GT((*r0)->blocks().size(), 2u);
  auto file = env_->ReadFile(path);
  ASSERT_TRUE(file.ok());
  std::string bytes = *file;
  // Damage the first byte of the timestamps and positions chunks of every block.
  StoredBlock stored;
  for (size_t i = 0; i < (*r0)->blocks().size(); ++i) {
    ASSERT_TRUE((*r0)->ReadStoredBlock(i, &stored).ok());
    uint64_t at = (*r0)->blocks()[i].file_offset;
    for (const StoredBlock::Column& c : stored.columns) {
      if (c.id == 0 || c.id == 2) bytes[at] ^= 0x5a;  // @timestamp, positions (FORMAT.md)
      at += c.stored_size;
    }
  }
  WriteRaw(path, bytes);
  auto r = SegmentReader::Open(env_, path);
  ASSERT_TRUE(r.ok());
  ColumnSelection status;
  status.all = false;
  status.order = false;
  status.fields = {"method", "status"};
  ExpectSelectedFields(**r, events, status);
  ColumnSelection raw = status;
  raw.raw = true;
  ExpectSelectedFields(**r, events, raw);
  DecodedBlock block;
  for (size_t i = 0; i < (*r)->blocks().size(); ++i) {
    ColumnSelection ordered = status;
    ordered.order = true;
    Status st = (*r)->ReadBlockColumns(i, ordered, &block);
    EXPECT_EQ(st.code(), StatusCode::kCorruption) << st.ToString();
    EXPECT_EQ(block.size(), 0u);
  }

  SegmentWriterOptions v1 = opt;
  v1.format_version = 1;
  const std::string path1 = Path("order1");
  ASSERT_TRUE(WriteSegment(env_, path1, TestDs(), PartitionId(0), events, v1).ok());
  auto r1 = SegmentReader::Open(env_, path1);
  ASSERT_TRUE(r1.ok());
  size_t k = 0;
  for (size_t i = 0; i < (*r1)->blocks().size(); ++i) {
    ASSERT_TRUE((*r1)->ReadBlockColumns(i, status, &block).ok());
    ASSERT_EQ(block.size(), (*r1)->blocks()[i].event_count);
    ASSERT_EQ(block.timestamps.size(), block.size());
    for (size_t e = 0; e < block.size(); ++e, ++k) {
      ASSERT_EQ(block.timestamps[e], events[k].event.timestamp_ms);
      ASSERT_EQ(block.positions[e], events[k].pos);
    }
  }
  EXPECT_EQ(k, events.size());
}

// A block without field columns (raw ingest) has its raw strings viewed in place in the
// @rawstring chunk, consecutively, with no copy into raw_text; a raw read that does not ask for
// @ingesttimestamp neither reads nor checks that chunk (ingest_ts all zeros) while a full read
// still reports its damage. A DecodedBlock reused across full, partial and raw reads (and a
// block with fields, whose raw strings are rebuilt) always gives the right raw views.
TEST_F(SegmentTest, RawOnlyBlocksAreViewedInPlaceWithoutIngestTimes) {
  std::vector<PositionedEvent> events = MixedEvents(3000, 17);
  for (PositionedEvent& e : events) e.event.fields.clear();
  SegmentWriterOptions opt;
  opt.block_raw_bytes = 32 << 10;
  const std::string path = Path("rawonly");
  ASSERT_TRUE(WriteSegment(env_, path, TestDs(), PartitionId(0), events, opt).ok());
  auto r0 = SegmentReader::Open(env_, path);
  ASSERT_TRUE(r0.ok());
  const size_t nblocks = (*r0)->blocks().size();
  ASSERT_GT(nblocks, 2u);
  ExpectSameEvents(**r0, events);
  // Damage the first byte of every block's ingest-time chunk (column 1, FORMAT.md).
  auto file = env_->ReadFile(path);
  ASSERT_TRUE(file.ok());
  std::string bytes = *file;
  StoredBlock stored;
  for (size_t i = 0; i < nblocks; ++i) {
    ASSERT_TRUE((*r0)->ReadStoredBlock(i, &stored).ok());
    ASSERT_EQ(stored.columns.size(), 5u);  // the built-in columns only
    uint64_t at = (*r0)->blocks()[i].file_offset;
    for (const StoredBlock::Column& c : stored.columns) {
      if (c.id == 1) bytes[at] ^= 0x5a;
      at += c.stored_size;
    }
  }
  const std::string damaged = Path("rawonly-damaged");
  WriteRaw(damaged, bytes);
  auto r = SegmentReader::Open(env_, damaged);
  ASSERT_TRUE(r.ok());

  // A segment with fields, whose raw strings are rebuilt into raw_text, read into the same block.
  std::vector<PositionedEvent> logs = AccessLog(500, 3);
  const std::string with_fields = Path("withfields");
  ASSERT_TRUE(WriteSegment(env_, with_fields, TestDs(), PartitionId(0), logs, opt).ok());
  auto rf = SegmentReader::Open(env_, with_fields);
  ASSERT_TRUE(rf.ok());

  ColumnSelection raw;
  raw.all = false;
  raw.raw = true;
  raw.order = false;
  ColumnSelection none;
  none.all = false;
  none.order = false;
  DecodedBlock block;
  for (int round = 0; round < 2; ++round) {
    size_t k = 0;
    for (size_t i = 0; i < nblocks; ++i) {
      Status st = (*r)->ReadBlockColumns(i, raw, &block);
      ASSERT_TRUE(st.ok()) << st.ToString();
      EXPECT_FALSE(block.raw_omitted);
      EXPECT_TRUE(block.raw_text.empty());
      const std::string& run = block.chunks[4];  // the @rawstring chunk
      const size_t first = k;
      for (size_t e = 0; e < block.size(); ++e, ++k) {
        ASSERT_EQ(block.raw[e], events[k].event.raw) << "event " << k;
        ASSERT_EQ(block.ingest_ts[e], 0);
        ASSERT_GE(block.raw[e].data(), run.data());
        ASSERT_LE(block.raw[e].data() + block.raw[e].size(), run.data() + run.size());
        if (e > 0) {
          ASSERT_EQ(block.raw[e].data(), block.raw[e - 1].data() + block.raw[e - 1].size());
        }
      }
      EXPECT_GT(k, first);
      // A partial read into the same block: every raw view is empty again.
      ASSERT_TRUE((*r)->ReadBlockColumns(i, none, &block).ok());
      EXPECT_TRUE(block.raw_omitted);
      for (size_t e = 0; e < block.size(); ++e) ASSERT_TRUE(block.raw[e].empty());
      // A full read reads the damaged ingest chunk.
      st = (*r)->ReadBlock(i, &block);
      EXPECT_EQ(st.code(), StatusCode::kCorruption) << st.ToString();
    }
    EXPECT_EQ(k, events.size());
    // Raw strings rebuilt from fields, after the in-place views.
    size_t k2 = 0;
    for (size_t i = 0; i < (*rf)->blocks().size(); ++i) {
      ASSERT_TRUE((*rf)->ReadBlockColumns(i, raw, &block).ok());
      EXPECT_FALSE(block.raw_text.empty());
      for (size_t e = 0; e < block.size(); ++e, ++k2) ASSERT_EQ(block.raw[e], logs[k2].event.raw);
    }
    EXPECT_EQ(k2, logs.size());
  }
}

// Moves every position of `events` by `delta` offsets (to lay sources one after another).
std::vector<PositionedEvent> Shifted(std::vector<PositionedEvent> events, int64_t delta) {
  for (PositionedEvent& e : events) e.pos.offset = Offset(e.pos.offset.value + delta);
  return events;
}

// Copies every block of `r` into `w` as stored.
void CopyAllBlocks(const SegmentReader& r, SegmentFileWriter* w) {
  StoredBlock block;
  for (size_t i = 0; i < r.blocks().size(); ++i) {
    Status st = r.ReadStoredBlock(i, &block);
    ASSERT_TRUE(st.ok()) << st.ToString();
    st = w->AddStoredBlock(block);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
}

// A merge copies its inputs' full blocks as stored: the output decodes to exactly the inputs'
// events, whether the copied block's field names keep their ids (same first-use order), get new
// ids (other order: layout re-encoded) or are new to the output (disjoint names), interleaved with
// re-encoded events; every column selection and the block filters still answer correctly.
TEST_F(SegmentTest, CopiedBlocksDecodeAsTheirSources) {
  SegmentWriterOptions opt;
  opt.block_raw_bytes = 32 << 10;
  // a: access log; b: the same names, another first-use order; c: disjoint names (f0..f11).
  std::vector<PositionedEvent> a = AccessLog(800, 1, 100);
  std::vector<PositionedEvent> b = AccessLog(800, 2, 1000000);
  for (PositionedEvent& e : b) std::reverse(e.event.fields.begin(), e.event.fields.end());
  std::vector<PositionedEvent> c = Shifted(MixedEvents(800, 3), 2000000);
  std::vector<PositionedEvent> loose = AccessLog(50, 4, 3000000);  // re-encoded between copies
  std::vector<PositionedEvent> d = AccessLog(400, 5, 4000000);
  for (size_t k = 0; k < d.size(); k += 5) d[k].event.fields.push_back({"", "empty name"});
  std::vector<std::unique_ptr<SegmentReader>> sources;
  for (const auto* events : {&a, &b, &c, &d}) {
    const std::string path = Path("src" + std::to_string(sources.size()));
    ASSERT_TRUE(WriteSegment(env_, path, TestDs(), PartitionId(0), *events, opt).ok());
    auto r = SegmentReader::Open(env_, path);
    ASSERT_TRUE(r.ok());
    ASSERT_GT((*r)->blocks().size(), 2u);
    sources.push_back(std::move(*r));
  }
  const std::string out = Path("out");
  auto w = SegmentFileWriter::Create(env_, out, TestDs(), PartitionId(0), opt);
  ASSERT_TRUE(w.ok());
  // Re-encoded events first: the pending partial block is written before the copied ones.
  std::vector<PositionedEvent> all = AccessLog(30, 8, 10);
  ASSERT_LT(all.back().pos, a.front().pos);
  for (const PositionedEvent& e : all) ASSERT_TRUE((*w)->Add(e).ok());
  CopyAllBlocks(*sources[0], w->get());
  all.insert(all.end(), a.begin(), a.end());
  CopyAllBlocks(*sources[1], w->get());
  all.insert(all.end(), b.begin(), b.end());
  CopyAllBlocks(*sources[2], w->get());
  all.insert(all.end(), c.begin(), c.end());
  for (const PositionedEvent& e : loose) ASSERT_TRUE((*w)->Add(e).ok());
  all.insert(all.end(), loose.begin(), loose.end());
  CopyAllBlocks(*sources[3], w->get());
  all.insert(all.end(), d.begin(), d.end());
  auto info = (*w)->Finish();
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->event_count, all.size());
  EXPECT_EQ(info->min_pos, all.front().pos);
  EXPECT_EQ(info->max_pos, all.back().pos);

  auto r = SegmentReader::Open(env_, out);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  size_t copied_blocks = 0;
  for (const auto& s : sources) copied_blocks += s->blocks().size();
  EXPECT_EQ((*r)->blocks().size(), copied_blocks + 2);  // + the two re-encoded blocks
  EXPECT_TRUE((*r)->VerifyAll().ok());
  ExpectSameEvents(**r, all);
  for (const char* name : {"status", "url", "f3", "useragent"}) {
    ColumnSelection sel;
    sel.all = false;
    sel.fields = {name};
    ExpectSelectedFields(**r, all, sel);
  }
  // Copied filters still admit their events' text.
  size_t k = 0;
  for (size_t i = 0; i < (*r)->blocks().size(); ++i) {
    const PositionedEvent& e = all[k];
    if (e.event.raw.size() >= 8 && e.event.raw.find('\0') == std::string::npos) {
      std::string term = e.event.raw.substr(0, 8);
      for (char& ch : term) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      EXPECT_TRUE((*r)->BlockMayContainAll(i, {term})) << i;
    }
    k += (*r)->blocks()[i].event_count;
  }
  // Copied chunks are byte-identical to their source's (a's names keep their ids).
  StoredBlock src, dst;
  ASSERT_TRUE(sources[0]->ReadStoredBlock(0, &src).ok());
  ASSERT_TRUE((*r)->ReadStoredBlock(1, &dst).ok());
  EXPECT_EQ(src.bytes, dst.bytes);
}

// Copying checks what it copies: a damaged chunk is Corruption at ReadStoredBlock (whichever
// column it hits), a format 1 source has no stored blocks, a format 1 writer takes none, and a
// copied block must follow the events already written.
TEST_F(SegmentTest, StoredBlockCopiesAreChecked) {
  SegmentWriterOptions opt;
  opt.block_raw_bytes = 32 << 10;
  std::vector<PositionedEvent> events = AccessLog(600, 7);
  const std::string path = Path("src");
  ASSERT_TRUE(WriteSegment(env_, path, TestDs(), PartitionId(0), events, opt).ok());
  auto clean = SegmentReader::Open(env_, path);
  ASSERT_TRUE(clean.ok());
  const BlockInfo b0 = (*clean)->blocks()[0];
  const std::string bytes = *env_->ReadFile(path);
  // Flip one byte in each of several places of block 0: first chunk (timestamps), middle, last
  // chunk (a field column).
  for (uint64_t at :
       {b0.file_offset, b0.file_offset + b0.stored_size / 2, b0.file_offset + b0.stored_size - 1}) {
    std::string damaged = bytes;
    damaged[at] ^= 0x10;
    const std::string p = Path("damaged");
    WriteRaw(p, damaged);
    auto r = SegmentReader::Open(env_, p);
    ASSERT_TRUE(r.ok());
    StoredBlock block;
    Status st = (*r)->ReadStoredBlock(0, &block);
    EXPECT_EQ(st.code(), StatusCode::kCorruption) << at << " " << st.ToString();
    EXPECT_TRUE((*r)->ReadStoredBlock(1, &block).ok());
  }
  {
    // A tiny block (short chunks), read first on a fresh thread (fresh per-thread buffers), and
    // copied.
    std::vector<PositionedEvent> two = AccessLog(2, 8);
    ASSERT_TRUE(WriteSegment(env_, Path("two"), TestDs(), PartitionId(0), two, opt).ok());
    auto r = SegmentReader::Open(env_, Path("two"));
    ASSERT_TRUE(r.ok());
    Status st;
    std::thread([&] {
      StoredBlock tiny;
      st = (*r)->ReadStoredBlock(0, &tiny);
      if (!st.ok()) return;
      auto w = SegmentFileWriter::Create(env_, Path("two-copy"), TestDs(), PartitionId(0), opt);
      st = w.ok() ? (*w)->AddStoredBlock(tiny) : w.status();
      if (st.ok()) st = (*w)->Finish().status();
    }).join();
    ASSERT_TRUE(st.ok()) << st.ToString();
    auto copy = SegmentReader::Open(env_, Path("two-copy"));
    ASSERT_TRUE(copy.ok());
    ExpectSameEvents(**copy, two);
  }
  StoredBlock block;
  ASSERT_TRUE((*clean)->ReadStoredBlock(1, &block).ok());
  EXPECT_EQ((*clean)->ReadStoredBlock(99, &block).code(), StatusCode::kInvalidArgument);
  {
    // Out of order: block 1 after block 1's own last event.
    auto w = SegmentFileWriter::Create(env_, Path("order"), TestDs(), PartitionId(0), opt);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Add(events.back()).ok());
    EXPECT_EQ((*w)->AddStoredBlock(block).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ((*w)->Finish().status().code(), StatusCode::kInvalidArgument);
  }
  {
    // A stored block whose columns name one field twice.
    StoredBlock twice = block;
    twice.columns.back().name = twice.columns[twice.columns.size() - 2].name;
    auto w = SegmentFileWriter::Create(env_, Path("twice"), TestDs(), PartitionId(0), opt);
    ASSERT_TRUE(w.ok());
    EXPECT_EQ((*w)->AddStoredBlock(twice).code(), StatusCode::kInvalidArgument);
  }
  {
    SegmentWriterOptions v1 = opt;
    v1.format_version = 1;
    auto w = SegmentFileWriter::Create(env_, Path("v1out"), TestDs(), PartitionId(0), v1);
    ASSERT_TRUE(w.ok());
    EXPECT_EQ((*w)->AddStoredBlock(block).code(), StatusCode::kInvalidArgument);
    ASSERT_TRUE(WriteSegment(env_, Path("v1"), TestDs(), PartitionId(0), events, v1).ok());
    auto r1 = SegmentReader::Open(env_, Path("v1"));
    ASSERT_TRUE(r1.ok());
    EXPECT_EQ((*r1)->ReadStoredBlock(0, &block).code(), StatusCode::kFailedPrecondition);
  }
}

TEST_F(SegmentTest, SingleEventAndDefaultOptions) {
  std::vector<PositionedEvent> events = AccessLog(1, 1);
  const std::string path = Path("one");
  ASSERT_TRUE(WriteSegment(env_, path, TestDs(), PartitionId(0), events).ok());
  auto r = SegmentReader::Open(env_, path);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ((*r)->blocks().size(), 1u);
  ExpectSameEvents(**r, events);
}

TEST_F(SegmentTest, RejectsBadInput) {
  const std::string path = Path("bad");
  std::vector<PositionedEvent> none;
  EXPECT_EQ(WriteSegment(env_, path, TestDs(), PartitionId(0), none).status().code(),
            StatusCode::kInvalidArgument);
  std::vector<PositionedEvent> events = AccessLog(10, 1);
  std::swap(events[3], events[4]);
  EXPECT_EQ(WriteSegment(env_, path, TestDs(), PartitionId(0), events).status().code(),
            StatusCode::kInvalidArgument);
  events = AccessLog(10, 1);
  events[5].pos = events[4].pos;  // duplicate position
  EXPECT_EQ(WriteSegment(env_, path, TestDs(), PartitionId(0), events).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_FALSE(env_->FileExists(path));
  EXPECT_FALSE(env_->FileExists(path + ".tmp"));
}

// zstd_level sets the @rawstring chunks alone and column_zstd_level every other chunk: changing
// one leaves the other's chunks byte for byte as they were, and both files read the same events.
TEST_F(SegmentTest, RawAndOtherColumnsTakeTheirOwnZstdLevel) {
  const std::vector<PositionedEvent> events = AccessLog(4000, 9);
  struct Chunks {
    std::vector<std::pair<uint32_t, uint32_t>> raw, other;  // (stored size, CRC) per chunk
    uint64_t raw_bytes = 0, other_bytes = 0;
  };
  auto write = [&](int raw_level, int column_level) {
    SegmentWriterOptions opt;
    opt.block_raw_bytes = 128 << 10;
    opt.zstd_level = raw_level;
    opt.column_zstd_level = column_level;
    const std::string path =
        Path("levels-" + std::to_string(raw_level) + "-" + std::to_string(column_level));
    EXPECT_TRUE(WriteSegment(env_, path, TestDs(), PartitionId(0), events, opt).ok());
    auto r = SegmentReader::Open(env_, path);
    EXPECT_TRUE(r.ok());
    ExpectSameEvents(**r, events);
    Chunks out;
    StoredBlock stored;
    for (size_t i = 0; i < (*r)->blocks().size(); ++i) {
      EXPECT_TRUE((*r)->ReadStoredBlock(i, &stored).ok());
      for (const StoredBlock::Column& c : stored.columns) {
        const bool raw = c.id == 4;  // @rawstring (FORMAT.md)
        (raw ? out.raw : out.other).emplace_back(c.stored_size, c.crc);
        (raw ? out.raw_bytes : out.other_bytes) += c.stored_size;
      }
    }
    EXPECT_GT(out.raw.size(), 3u);
    return out;
  };
  const Chunks base = write(6, 3);
  const Chunks columns_at_1 = write(6, 1);
  const Chunks raw_at_1 = write(1, 3);
  EXPECT_EQ(columns_at_1.raw, base.raw);
  EXPECT_NE(columns_at_1.other, base.other);  // small columns: level 1 is not always larger
  EXPECT_EQ(raw_at_1.other, base.other);
  EXPECT_NE(raw_at_1.raw, base.raw);
  EXPECT_GT(raw_at_1.raw_bytes, base.raw_bytes);

  SegmentWriterOptions bad;
  bad.column_zstd_level = 100;
  EXPECT_EQ(
      WriteSegment(env_, Path("bad-level"), TestDs(), PartitionId(0), events, bad).status().code(),
      StatusCode::kInvalidArgument);
}

TEST_F(SegmentTest, ConcurrentReads) {
  std::vector<PositionedEvent> events = AccessLog(5000, 3);
  SegmentWriterOptions opt;
  opt.block_raw_bytes = 32 << 10;
  const std::string path = Path("conc");
  ASSERT_TRUE(WriteSegment(env_, path, TestDs(), PartitionId(1), events, opt).ok());
  auto r = SegmentReader::Open(env_, path);
  ASSERT_TRUE(r.ok());
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      DecodedBlock block;
      for (int round = 0; round < 3; ++round) {
        size_t k = 0;
        for (size_t i = 0; i < (*r)->blocks().size(); ++i) {
          if (!(*r)->ReadBlock(i, &block).ok()) ++failures;
          for (size_t e = 0; e < block.size(); ++e, ++k) {
            if (block.raw[e] != events[k].event.raw || block.positions[e] != events[k].pos)
              ++failures;
          }
          if (!(*r)->BlockMayContainAll(i, {"http/1.1"})) ++failures;
        }
        (void)t;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}

std::string Lower(std::string s) {
  for (char& c : s)
    c = static_cast<char>(segment_filter::FoldByte(static_cast<uint8_t>(c)) == 0x80
                              ? c
                              : segment_filter::FoldByte(static_cast<uint8_t>(c)));
  return s;
}

TEST_F(SegmentTest, FilterNeverRejectsPresentTerms) {
  std::vector<PositionedEvent> events = AccessLog(6000, 5);
  // Non-ASCII text: a term lower-cased with Unicode rules must still pass.
  events[10].event.raw += " CAFÉ ÉTÉ";
  events[20].event.fields.push_back({"msg", "Größe ÜBER"});
  SegmentWriterOptions opt;
  opt.block_raw_bytes = 32 << 10;
  const std::string path = Path("filter");
  ASSERT_TRUE(WriteSegment(env_, path, TestDs(), PartitionId(1), events, opt).ok());
  auto r = SegmentReader::Open(env_, path);
  ASSERT_TRUE(r.ok());
  ASSERT_GT((*r)->blocks().size(), 5u);
  EXPECT_TRUE((*r)->BlockMayContainAll(0, {"café été"}));
  EXPECT_TRUE((*r)->BlockMayContainAll(0, {"größe über"}));

  std::mt19937_64 rng(99);
  size_t k = 0, checked = 0;
  for (size_t b = 0; b < (*r)->blocks().size(); ++b) {
    const size_t n = (*r)->blocks()[b].event_count;
    for (int trial = 0; trial < 300; ++trial) {
      std::vector<std::string> terms;
      for (int t = 0; t < 1 + static_cast<int>(rng() % 3); ++t) {
        // All terms from one event: the block holds an event containing all of them.
        const Event& e = events[k + (trial % n)].event;
        std::string src = e.raw;
        if (rng() % 2 && !e.fields.empty()) src = e.fields[rng() % e.fields.size()].value;
        if (src.empty()) continue;
        size_t len = 1 + rng() % 16;
        size_t a = rng() % src.size();
        std::string term = src.substr(a, len);
        for (char& c : term)
          if (rng() % 2) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        terms.push_back(Lower(term));
      }
      ASSERT_TRUE((*r)->BlockMayContainAll(b, terms)) << "block " << b << " term " << terms[0];
      ++checked;
    }
    k += n;
  }
  EXPECT_GT(checked, 1000u);
  EXPECT_TRUE((*r)->BlockMayContainAll(0, {"zq"}));  // shorter than a gram: always passes
  EXPECT_TRUE((*r)->BlockMayContainAll(0, {}));
}

// Format 2 adds to the filter only the field values its @rawstring template did not find in the
// raw string; the filter must still be exactly the one of every raw string and every value.
TEST_F(SegmentTest, FilterEqualsFilterOfRawAndEveryValue) {
  std::vector<PositionedEvent> events = AccessLog(3000, 9);
  for (size_t i = 0; i < events.size(); i += 7) {
    events[i].event.fields.push_back({"extra", "NotInRaw-" + std::to_string(i * 7919)});
  }
  events[3].event.fields.push_back({"dup", events[3].event.fields[0].value});  // found twice
  events[5].event.fields.push_back({"short", "zq"});
  SegmentWriterOptions opt;
  opt.block_raw_bytes = 64 << 10;
  const std::string path = Path("filter-values");
  ASSERT_TRUE(WriteSegment(env_, path, TestDs(), PartitionId(1), events, opt).ok());
  auto r = SegmentReader::Open(env_, path);
  ASSERT_TRUE(r.ok());
  ASSERT_GT((*r)->blocks().size(), 2u);
  size_t k = 0;
  for (size_t b = 0; b < (*r)->blocks().size(); ++b) {
    StoredBlock stored;
    ASSERT_TRUE((*r)->ReadStoredBlock(b, &stored).ok());
    segment_filter::FilterBuilder want;
    for (uint32_t i = 0; i < stored.info.event_count; ++i, ++k) {
      want.Add(events[k].event.raw);
      for (const Field& f : events[k].event.fields) want.Add(f.value);
    }
    std::string expected;
    want.Finish(opt.filter_bits_per_gram, opt.filter_hashes, &expected);
    EXPECT_EQ(stored.filter, expected) << "block " << b;
  }
  EXPECT_EQ(k, events.size());
  EXPECT_TRUE((*r)->BlockMayContainAll(0, {Lower("NotInRaw-0")}));
}

TEST_F(SegmentTest, FilterRejectsMostAbsentTerms) {
  std::vector<PositionedEvent> events = AccessLog(20000, 6);
  SegmentWriterOptions opt;
  opt.block_raw_bytes = 256 << 10;
  const std::string path = Path("reject");
  ASSERT_TRUE(WriteSegment(env_, path, TestDs(), PartitionId(1), events, opt).ok());
  auto r = SegmentReader::Open(env_, path);
  ASSERT_TRUE(r.ok());
  std::string all;
  for (const auto& e : events) all += Lower(e.event.raw) + "\n";
  std::mt19937_64 rng(1234);
  const char kAlpha[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  size_t tries = 0, rejected = 0;
  for (int t = 0; t < 300; ++t) {
    std::string term;
    for (int c = 0; c < 10; ++c) term.push_back(kAlpha[rng() % 36]);
    if (all.find(term) != std::string::npos) continue;
    for (size_t b = 0; b < (*r)->blocks().size(); ++b) {
      ++tries;
      if (!(*r)->BlockMayContainAll(b, {term})) ++rejected;
    }
  }
  ASSERT_GT(tries, 0u);
  EXPECT_GT(static_cast<double>(rejected) / tries, 0.9) << rejected << "/" << tries;
}

// Small multi-block file for the corruption tests.
std::vector<PositionedEvent> SmallEvents() {
  std::vector<PositionedEvent> ev = AccessLog(24, 21);
  std::vector<PositionedEvent> mixed = MixedEvents(8, 22);
  for (auto& m : mixed) {
    m.pos.offset = Offset(m.pos.offset.value + ev.back().pos.offset.value + 1);
    ev.push_back(std::move(m));
  }
  return ev;
}

// Opens `path` and reads everything: returns true when some step reported Corruption. Fails the
// test if any returned event differs from `want`.
bool DetectsCorruption(Env* env, const std::string& path, const std::vector<PositionedEvent>& want,
                       size_t* wrong) {
  auto r = SegmentReader::Open(env, path);
  if (!r.ok()) {
    EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << r.status().ToString();
    return true;
  }
  bool detected = false;
  DecodedBlock block;
  std::vector<size_t> starts;
  size_t k = 0;
  for (const BlockInfo& b : (*r)->blocks()) {
    starts.push_back(k);
    k += b.event_count;
  }
  for (size_t i = 0; i < (*r)->blocks().size(); ++i) {
    Status st = (*r)->ReadBlock(i, &block);
    if (!st.ok()) {
      EXPECT_EQ(st.code(), StatusCode::kCorruption) << st.ToString();
      EXPECT_EQ(block.size(), 0u);
      detected = true;
      continue;
    }
    for (size_t e = 0; e < block.size(); ++e) {
      size_t at = starts[i] + e;
      bool same = at < want.size() && block.positions[e] == want[at].pos &&
                  block.timestamps[e] == want[at].event.timestamp_ms &&
                  block.ingest_ts[e] == want[at].event.ingest_ms &&
                  block.raw[e] == want[at].event.raw &&
                  block.field_begin[e + 1] - block.field_begin[e] == want[at].event.fields.size();
      for (size_t f = 0; same && f < want[at].event.fields.size(); ++f) {
        same = block.fields[block.field_begin[e] + f].name == want[at].event.fields[f].name &&
               block.fields[block.field_begin[e] + f].value == want[at].event.fields[f].value;
      }
      if (!same) ++*wrong;
    }
  }
  Status st = (*r)->VerifyAll();
  if (!st.ok()) {
    EXPECT_EQ(st.code(), StatusCode::kCorruption) << st.ToString();
    detected = true;
  }
  return detected;
}

// Over events with fields and over the same events without (blocks of raw strings only, which
// are read in place).
class EveryByteFlip : public SegmentTest, public ::testing::WithParamInterface<bool> {};

TEST_P(EveryByteFlip, IsDetected) {
  std::vector<PositionedEvent> events = SmallEvents();
  if (!GetParam()) {
    for (PositionedEvent& e : events) e.event.fields.clear();
  }
  SegmentWriterOptions opt;
  opt.block_raw_bytes = 1024;
  const std::string good = Path("good");
  ASSERT_TRUE(WriteSegment(env_, good, TestDs(), PartitionId(2), events, opt).ok());
  auto bytes = env_->ReadFile(good);
  ASSERT_TRUE(bytes.ok());
  {
    auto r = SegmentReader::Open(env_, good);
    ASSERT_TRUE(r.ok());
    ASSERT_GE((*r)->blocks().size(), 3u);
  }
  const std::string bad = Path("bad");
  MemReadEnv mem;
  size_t wrong = 0, undetected = 0;
  for (size_t pos = 0; pos < bytes->size(); ++pos) {
    for (uint8_t mask : {uint8_t{0x01}, uint8_t{0xff}}) {
      std::string copy = *bytes;
      copy[pos] = static_cast<char>(copy[pos] ^ mask);
      mem.Put(bad, std::move(copy));
      if (!DetectsCorruption(&mem, bad, events, &wrong)) ++undetected;
    }
  }
  // One pass through real files, as the server reads them.
  std::string copy = *bytes;
  copy[copy.size() / 2] ^= 0x10;
  WriteRaw(bad, copy);
  EXPECT_TRUE(DetectsCorruption(env_, bad, events, &wrong));
  EXPECT_EQ(wrong, 0u);
  EXPECT_EQ(undetected, 0u);
}

INSTANTIATE_TEST_SUITE_P(WithAndWithoutFields, EveryByteFlip, ::testing::Bool());

TEST_F(SegmentTest, TruncationIsDetected) {
  std::vector<PositionedEvent> events = SmallEvents();
  SegmentWriterOptions opt;
  opt.block_raw_bytes = 1024;
  const std::string good = Path("good");
  ASSERT_TRUE(WriteSegment(env_, good, TestDs(), PartitionId(2), events, opt).ok());
  auto bytes = env_->ReadFile(good);
  ASSERT_TRUE(bytes.ok());
  const std::string bad = Path("bad");
  MemReadEnv mem;
  for (size_t len = 0; len < bytes->size(); ++len) {
    mem.Put(bad, bytes->substr(0, len));
    auto r = SegmentReader::Open(&mem, bad);
    ASSERT_FALSE(r.ok()) << len;
    EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << len;
  }
  // Appended garbage moves the trailer: also rejected.
  WriteRaw(bad, *bytes + "xyz");
  EXPECT_EQ(SegmentReader::Open(env_, bad).status().code(), StatusCode::kCorruption);
}

// A file with a valid header, a footer with a correct CRC, and the given footer bytes.
std::string FileWithFooter(std::string_view footer, uint64_t footer_len_field) {
  std::string f("SEDIMSEG", 8);
  PutFixed32(&f, 1);
  PutFixed32(&f, 0);
  uint64_t off = f.size();
  f.append(footer);
  PutFixed64(&f, off);
  PutFixed64(&f, footer_len_field);
  PutFixed32(&f, Crc32c(footer));
  PutFixed32(&f, 1);
  f.append("SEDIMEND", 8);
  PutFixed64(&f, Hash64(f.data(), f.size()));
  return f;
}

TEST_F(SegmentTest, GarbageAndHugeLengths) {
  const std::string path = Path("garbage");
  WriteRaw(path, "");
  EXPECT_EQ(SegmentReader::Open(env_, path).status().code(), StatusCode::kCorruption);
  EXPECT_EQ(SegmentReader::Open(env_, Path("missing")).status().code(), StatusCode::kNotFound);
  std::mt19937_64 rng(5);
  for (size_t n : {1, 16, 55, 56, 57, 100, 4096, 100000}) {
    std::string g;
    for (size_t i = 0; i < n; ++i) g.push_back(static_cast<char>(rng()));
    WriteRaw(path, g);
    EXPECT_EQ(SegmentReader::Open(env_, path).status().code(), StatusCode::kCorruption) << n;
  }
  // Huge footer length / offset fields.
  std::string minimal;
  PutLengthPrefixed(&minimal, "repo");
  for (uint64_t bogus : {uint64_t{1} << 62, ~uint64_t{0}, uint64_t{1} << 31}) {
    WriteRaw(path, FileWithFooter(minimal, bogus));
    EXPECT_EQ(SegmentReader::Open(env_, path).status().code(), StatusCode::kCorruption);
  }
  // Footer with a valid checksum but absurd counts: must fail without allocating them.
  for (int which = 0; which < 3; ++which) {
    std::string footer;
    PutLengthPrefixed(&footer, "repo");
    PutVarint64(&footer, which == 0 ? (uint64_t{1} << 60) : 0);  // tag count
    PutVarsint64(&footer, 0);
    for (int i = 0; i < 2; ++i) {
      PutVarsint64(&footer, 0);
      PutVarint32(&footer, 0);
    }
    PutVarsint64(&footer, 0);
    PutVarsint64(&footer, 0);
    PutVarint64(&footer, 1);
    PutVarint64(&footer, 10);
    PutVarint64(&footer, which == 1 ? (uint64_t{1} << 50) : 1);  // block count
    // One index entry claiming an enormous block.
    PutVarint64(&footer, 16);
    PutVarint32(&footer, 0xffffffffu);
    PutVarint32(&footer, 0xffffffffu);
    PutVarint32(&footer, which == 2 ? 0xffffffffu : 1);
    for (int i = 0; i < 2; ++i) PutVarsint64(&footer, 0);
    for (int i = 0; i < 2; ++i) {
      PutVarsint64(&footer, 0);
      PutVarint32(&footer, 0);
    }
    PutFixed32(&footer, 0);
    PutVarint64(&footer, 0);
    PutVarint64(&footer, 0);
    footer.push_back(0);
    PutVarint64(&footer, 0);
    WriteRaw(path, FileWithFooter(footer, footer.size()));
    auto r = SegmentReader::Open(env_, path);
    EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << which;
  }
}

// Measures the figures quoted in FORMAT.md on a generated access log.
TEST_F(SegmentTest, SizeReport) {
  std::vector<PositionedEvent> events = AccessLog(60000, 77);
  std::string text;
  for (const auto& e : events) text += e.event.raw + "\n";
  const size_t zstd3 = [&] {
    std::string out(ZSTD_compressBound(text.size()), '\0');
    return ZSTD_compress(out.data(), out.size(), text.data(), text.size(), 3);
  }();
  std::printf("access log: %zu events, %zu raw bytes, zstd -3 of the text: %zu bytes (%.2fx)\n",
              events.size(), text.size(), zstd3, double(text.size()) / zstd3);
  std::printf("%5s %6s %5s | %10s %8s %8s %9s %9s %9s %9s\n", "level", "bits/g", "probes", "file",
              "vs zstd3", "filter%", "reject10", "rejectMut", "write MB/s", "read MB/s");
  // Near-miss terms: an 8-byte substring of a line with one byte replaced, absent from the text.
  std::vector<std::string> near_miss;
  {
    std::string lowered = Lower(text);
    std::mt19937_64 rng(8765);
    while (near_miss.size() < 200) {
      const std::string& raw = events[rng() % events.size()].event.raw;
      std::string t = Lower(raw.substr(rng() % (raw.size() - 8), 8));
      t[3 + rng() % 2] = "abcdefghijklmnopqrstuvwxyz"[rng() % 26];
      if (lowered.find(t) == std::string::npos) near_miss.push_back(t);
    }
  }
  struct Config {
    int level;
    double bpg;
    int hashes;
    bool fields = true;
  };
  const SegmentWriterOptions defaults;
  const Config configs[] = {{1, 6, 2}, {3, 6, 2}, {6, 6, 2}, {7, 6, 2},  {8, 6, 2},
                            {9, 6, 2}, {8, 3, 1}, {8, 4, 2}, {8, 10, 3}, {8, 6, 2, false}};
  std::vector<PositionedEvent> no_fields = events;
  for (auto& e : no_fields) e.event.fields.clear();
  const char kAlpha[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  for (const Config& c : configs) {
    SegmentWriterOptions opt;
    opt.zstd_level = c.level;
    opt.filter_bits_per_gram = c.bpg;
    opt.filter_hashes = c.hashes;
    const std::string path = Path("report");
    auto t0 = std::chrono::steady_clock::now();
    auto info =
        WriteSegment(env_, path, TestDs(), PartitionId(0), c.fields ? events : no_fields, opt);
    auto t1 = std::chrono::steady_clock::now();
    ASSERT_TRUE(info.ok());
    auto r = SegmentReader::Open(env_, path);
    ASSERT_TRUE(r.ok());
    uint64_t stored = 0;
    for (const BlockInfo& b : (*r)->blocks()) stored += b.stored_size;
    const uint64_t footer = info->file_size - stored - 16;
    DecodedBlock block;
    auto t2 = std::chrono::steady_clock::now();
    for (size_t i = 0; i < (*r)->blocks().size(); ++i) ASSERT_TRUE((*r)->ReadBlock(i, &block).ok());
    auto t3 = std::chrono::steady_clock::now();
    std::mt19937_64 rng(4321);
    size_t tries = 0, rejected = 0;
    for (int t = 0; t < 200; ++t) {
      std::string term;
      for (int k = 0; k < 10; ++k) term.push_back(kAlpha[rng() % 36]);
      for (size_t b = 0; b < (*r)->blocks().size(); ++b, ++tries)
        rejected += !(*r)->BlockMayContainAll(b, {term});
    }
    size_t mut_tries = 0, mut_rejected = 0;
    for (const std::string& t : near_miss) {
      for (size_t b = 0; b < (*r)->blocks().size(); ++b, ++mut_tries)
        mut_rejected += !(*r)->BlockMayContainAll(b, {t});
    }
    const double secs_w = std::chrono::duration<double>(t1 - t0).count();
    const double secs_r = std::chrono::duration<double>(t3 - t2).count();
    std::printf("%5d %6.1f %5d%s| %10llu %7.3fx %7.2f%% %8.1f%% %8.1f%% %9.0f %9.0f\n", c.level,
                c.bpg, c.hashes, c.fields ? " " : "*",
                static_cast<unsigned long long>(info->file_size), double(info->file_size) / zstd3,
                100.0 * footer / stored, 100.0 * rejected / tries, 100.0 * mut_rejected / mut_tries,
                text.size() / secs_w / 1e6, text.size() / secs_r / 1e6);
    if (c.fields && c.level == defaults.zstd_level && c.bpg == defaults.filter_bits_per_gram &&
        c.hashes == defaults.filter_hashes) {
      EXPECT_LE(double(info->file_size), 1.1 * zstd3);
      EXPECT_LE(100.0 * footer / stored, 10.0);
      EXPECT_GE(double(rejected) / tries, 0.9);
    }
  }
  // Decode cost per block: the whole block in format 1 and 2, and one field column of format 2
  // (what a query reading one field pays).
  auto ms_per_block = [&](uint32_t version, const ColumnSelection& sel) {
    SegmentWriterOptions opt;
    opt.format_version = version;
    const std::string path = Path("decode" + std::to_string(version));
    EXPECT_TRUE(WriteSegment(env_, path, TestDs(), PartitionId(0), events, opt).ok());
    auto r = SegmentReader::Open(env_, path);
    EXPECT_TRUE(r.ok());
    DecodedBlock block;
    double best = 1e9;
    for (int round = 0; round < 3; ++round) {
      auto t0 = std::chrono::steady_clock::now();
      for (size_t i = 0; i < (*r)->blocks().size(); ++i) {
        EXPECT_TRUE((*r)->ReadBlockColumns(i, sel, &block).ok());
      }
      best = std::min(best,
                      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return 1e3 * best / static_cast<double>((*r)->blocks().size());
  };
  ColumnSelection one;
  one.all = false;
  one.fields = {"status"};
  std::printf(
      "ReadBlock per ~1 MiB block: format 1 %.2f ms, format 2 %.2f ms, format 2 one "
      "field %.3f ms\n",
      ms_per_block(1, ColumnSelection{}), ms_per_block(2, ColumnSelection{}), ms_per_block(2, one));
  {
    SegmentWriterOptions v1;
    v1.format_version = 1;
    auto info = WriteSegment(env_, Path("v1"), TestDs(), PartitionId(0), events, v1);
    ASSERT_TRUE(info.ok());
    std::printf("format 1 at the defaults: %llu bytes (%.3fx zstd -3)\n",
                static_cast<unsigned long long>(info->file_size), double(info->file_size) / zstd3);
  }
}

}  // namespace
}  // namespace sediment
