// Fuzz target: the ingest message decoder (DecodeIngestMessage, model/README.md), the value of
// every commit-log record (embedded log or Kafka) that the digest and the query buffers read.
// Input: byte 0 = flags, the rest = the message. Flags bit 0: the target writes the correct CRC
// (header bytes 10..14, over the body) so that mutations reach the decompression and the decoder.
// A message that decodes must encode and decode to the same value.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/coding.h"
#include "fuzz/fuzz_util.h"
#include "model/event.h"

using namespace sediment;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::QuietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  std::string msg(fuzz::Bytes(data + 1, size - 1));
  constexpr size_t kHeader = 14;
  if ((data[0] & 1) && msg.size() >= kHeader) {
    std::string crc;
    PutFixed32(&crc, Crc32c(std::string_view(msg).substr(kHeader)));
    msg.replace(10, 4, crc);
  }
  auto decoded = DecodeIngestMessage(msg);
  if (!decoded.ok()) return 0;
  auto again = DecodeIngestMessage(EncodeIngestMessage(*decoded, Codec::kZstd));
  if (!again.ok() || again->id != decoded->id ||
      again->datasource.repo != decoded->datasource.repo ||
      again->datasource.tags != decoded->datasource.tags || again->events != decoded->events) {
    __builtin_trap();
  }
  return 0;
}
