// sediment-benchutil: machine baselines for the benchmark driver. Each subcommand prints one JSON
// object on stdout.
//   append-fsync --in F --out G [--batch-lines 1000]: writes F to G in batches of N lines, each
//     batch appended and then fdatasync'ed through Env (the durability point the server pays).
//     Only the write+sync loop is timed; F is read into memory first.
//   zstd-size --in F [--level 3]: size of F compressed as one zstd stream (libzstd), for machines
//     without the zstd command.
#include <zstd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "common/env.h"

namespace {

using sediment::Env;
using sediment::Status;

int Fail(const Status& s) {
  std::fprintf(stderr, "sediment-benchutil: %s\n", s.ToString().c_str());
  return 1;
}

int AppendFsync(const std::string& in, const std::string& out, uint64_t batch_lines) {
  Env* env = Env::Default();
  auto data_or = env->ReadFile(in);
  if (!data_or.ok()) return Fail(data_or.status());
  const std::string& data = data_or.value();
  auto f_or = env->NewWritableFile(out);
  if (!f_or.ok()) return Fail(f_or.status());
  std::unique_ptr<sediment::WritableFile> f = std::move(f_or).value();

  uint64_t lines = 0, batches = 0;
  const auto t0 = std::chrono::steady_clock::now();
  size_t pos = 0;
  while (pos < data.size()) {
    size_t end = pos;
    uint64_t n = 0;
    while (end < data.size() && n < batch_lines) {
      size_t nl = data.find('\n', end);
      end = nl == std::string::npos ? data.size() : nl + 1;
      ++n;
    }
    if (Status s = f->Append(std::string_view(data).substr(pos, end - pos)); !s.ok()) {
      return Fail(s);
    }
    if (Status s = f->Sync(); !s.ok()) return Fail(s);
    lines += n;
    ++batches;
    pos = end;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (Status s = f->Close(); !s.ok()) return Fail(s);
  std::printf(
      "{\"bytes\":%zu,\"lines\":%llu,\"batches\":%llu,\"seconds\":%.6f,\"events_per_s\":%.1f,"
      "\"mb_per_s\":%.3f}\n",
      data.size(), static_cast<unsigned long long>(lines), static_cast<unsigned long long>(batches),
      secs, secs > 0 ? lines / secs : 0.0, secs > 0 ? data.size() / secs / 1e6 : 0.0);
  return 0;
}

int ZstdSize(const std::string& in, int level) {
  Env* env = Env::Default();
  auto file_or = env->NewRandomAccessFile(in);
  if (!file_or.ok()) return Fail(file_or.status());
  auto size_or = file_or.value()->Size();
  if (!size_or.ok()) return Fail(size_or.status());
  const uint64_t size = size_or.value();

  std::unique_ptr<ZSTD_CCtx, size_t (*)(ZSTD_CCtx*)> cctx(ZSTD_createCCtx(), ZSTD_freeCCtx);
  if (!cctx) return Fail(Status::Internal("ZSTD_createCCtx"));
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_compressionLevel, level);
  ZSTD_CCtx_setPledgedSrcSize(cctx.get(), size);
  std::string chunk;
  std::string outbuf(ZSTD_CStreamOutSize(), '\0');
  uint64_t compressed = 0;
  uint64_t offset = 0;
  constexpr size_t kChunk = 4 << 20;
  for (;;) {
    if (Status s = file_or.value()->Read(offset, kChunk, &chunk); !s.ok()) return Fail(s);
    offset += chunk.size();
    const bool last = chunk.size() < kChunk || offset >= size;
    ZSTD_inBuffer input{chunk.data(), chunk.size(), 0};
    const ZSTD_EndDirective mode = last ? ZSTD_e_end : ZSTD_e_continue;
    for (;;) {
      ZSTD_outBuffer output{outbuf.data(), outbuf.size(), 0};
      const size_t remaining = ZSTD_compressStream2(cctx.get(), &output, &input, mode);
      if (ZSTD_isError(remaining)) return Fail(Status::Internal(ZSTD_getErrorName(remaining)));
      compressed += output.pos;
      if (last ? remaining == 0 : input.pos == input.size) break;
    }
    if (last) break;
  }
  std::printf("{\"input_bytes\":%llu,\"compressed_bytes\":%llu,\"level\":%d}\n",
              static_cast<unsigned long long>(size), static_cast<unsigned long long>(compressed),
              level);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Machine baselines for sediment benchmarks"};
  app.require_subcommand(1);
  std::string in, out;
  uint64_t batch_lines = 1000;
  int level = 3;
  auto* af = app.add_subcommand("append-fsync", "append batches with fdatasync per batch");
  af->add_option("--in", in)->required();
  af->add_option("--out", out)->required();
  af->add_option("--batch-lines", batch_lines)->check(CLI::PositiveNumber);
  auto* zs = app.add_subcommand("zstd-size", "compressed size of a file");
  zs->add_option("--in", in)->required();
  zs->add_option("--level", level);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (af->parsed()) return AppendFsync(in, out, batch_lines);
  return ZstdSize(in, level);
}
