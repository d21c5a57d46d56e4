// Fuzz target: the embedded commit log's record framing and recovery (log/FORMAT.md: header scan,
// CRC check, torn-tail truncation, damage resync), then reads of every record and the decoding of
// each record value as an ingest message (model/README.md; also the Kafka record value).
// Input: byte 0 = flags, byte 1 = split choice, the rest = the bytes of partition 0's log file(s).
//   flags bit 0: the target rewrites the CRC of every record whose header and payload fit, so
//                that mutations reach what follows the checksum test;
//   flags bit 1: the bytes are cut at a record boundary (byte 1 picks which) into a sealed file and
//                an active file named by the record count before the cut;
//   flags bit 2: after recovery one record is appended and read back.
// The log runs on a memory Env (fuzz/mem_env.h) with one partition.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "common/coding.h"
#include "fuzz/fuzz_util.h"
#include "fuzz/mem_env.h"
#include "log/local_log.h"
#include "model/event.h"

using namespace sediment;

namespace {

constexpr size_t kRecordHeader = 16;

// LOG_META of a one-partition log, as the library writes it.
const std::string& Meta() {
  static const std::string meta = [] {
    fuzz::MemEnv env;
    LocalLogOptions options;
    options.partitions = 1;
    auto log = OpenLocalLog(&env, "/log", options);
    if (!log.ok()) __builtin_trap();
    log->reset();
    auto m = env.ReadFile("/log/LOG_META");
    if (!m.ok()) __builtin_trap();
    return *m;
  }();
  return meta;
}

std::string FileName(uint64_t base) {
  char name[40];
  std::snprintf(name, sizeof(name), "/log/p-00000/%020llu.log",
                static_cast<unsigned long long>(base));
  return name;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::QuietLogs();
  (void)Meta();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint8_t flags = data[0], split = data[1];
  std::string bytes(fuzz::Bytes(data + 2, size - 2));
  // Record boundaries (by the headers' lengths), CRCs rewritten on request.
  std::vector<size_t> boundaries;
  for (size_t at = 0; at + kRecordHeader <= bytes.size();) {
    const uint64_t len = DecodeFixed32(bytes.data() + at + 4);
    if (len > bytes.size() - at - kRecordHeader) break;
    if (flags & 1) {
      std::string crc;
      PutFixed32(&crc, Crc32c(bytes.data() + at + 4, 12 + len));
      bytes.replace(at, 4, crc);
    }
    at += kRecordHeader + len;
    boundaries.push_back(at);
  }
  fuzz::MemEnv env;
  env.Put("/log/LOG_META", Meta());
  if ((flags & 2) && !boundaries.empty()) {
    const size_t k = split % boundaries.size();
    env.Put(FileName(0), bytes.substr(0, boundaries[k]));
    env.Put(FileName(k + 1), bytes.substr(boundaries[k]));
  } else {
    env.Put(FileName(0), bytes);
  }
  LocalLogOptions options;
  options.partitions = 1;
  auto opened = OpenLocalLog(&env, "/log", options);
  if (!opened.ok()) return 0;
  CommitLog& log = **opened;
  const PartitionId p(0);
  (void)log.Health();
  (void)log.Damage();
  auto start = log.StartOffset(p);
  auto end = log.EndOffset(p);
  if (!start.ok() || !end.ok()) return 0;
  if (flags & 4) {
    auto appended = log.Append(p, "appended").get();
    if (appended.ok()) end = log.EndOffset(p);
  }
  Offset from = *start;
  // Each read returns at least one record and offsets increase, so this ends; the bound guards
  // against a log that would not.
  for (int reads = 0; from < *end && reads < 100000; ++reads) {
    auto records = log.Read(p, from, 1 << 20, std::chrono::milliseconds(0));
    if (!records.ok() || records->empty()) break;
    for (const LogRecord& r : *records) {
      if (r.offset < from) __builtin_trap();  // offsets must increase
      (void)DecodeIngestMessage(r.data);
      from = Offset(r.offset.value + 1);
    }
  }
  return 0;
}
