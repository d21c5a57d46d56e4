// sediment-benchutil: machine baselines for the benchmark driver. Each subcommand prints one JSON
// object on stdout.
//   append-fsync --in F --out G [--batch-lines 1000]: writes F to G in batches of N lines, each
//     batch appended and then fdatasync'ed through Env (the durability point the server pays).
//     Only the write+sync loop is timed; F is read into memory first.
//   zstd-size --in F [--level 3]: size of F compressed as one zstd stream (libzstd), for machines
//     without the zstd command.
//   query --segments DIR --query Q [--repo R] [--threads 2] [--runs 3]: runs Q through the query
//     engine over the segment files in DIR (of repository R, or all), without a server, and
//     reports the best run's wall and process CPU seconds, and the CPU seconds of decompressing
//     every block alone (the floor any query over these segments pays). For profiling the
//     executor: `perf record -g sediment-benchutil query ...`.
//   ack-path --in F [--batch-lines 1000] [--runs 3]: the CPU seconds (best run, this thread) of
//     what a raw ingest request costs before the commit log, as the ingest route takes each F
//     batch as a raw body: ParseLineBatch, the default kv parser, and AppendLines (or, when kv
//     parses a line, the events built, ApplyParsers and AppendAll) onto a log that only counts.
//   post --port P --token T --in F [--path /api/v1/ingest/raw] [--batch-lines 1000]
//     [--clients 8]: POSTs F's lines in batches to a server on 127.0.0.1:P over keep-alive
//     connections and reports what was acknowledged (post.h).
#include <zstd.h>

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench/post.h"
#include "common/env.h"
#include "ingest/ingest.h"
#include "log/commit_log.h"
#include "model/event.h"
#include "parsers/parsers.h"
#include "query/query.h"
#include "segment/segment.h"

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

double ProcessCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

int Query(const std::string& dir, const std::string& text, const std::string& repo, int threads,
          int runs) {
  namespace q = sediment::query;
  Env* env = Env::Default();
  auto names_or = env->ListDir(dir);
  if (!names_or.ok()) return Fail(names_or.status());
  std::vector<std::string> names = std::move(names_or).value();
  std::sort(names.begin(), names.end());
  q::ScanInput input;
  const sediment::DirectorySegmentOpener opener(env, dir);
  std::vector<std::unique_ptr<sediment::SegmentReader>> readers;
  uint64_t raw_bytes = 0, events = 0, blocks = 0;
  int64_t min_ts = INT64_MAX, max_ts = INT64_MIN;
  for (const std::string& name : names) {
    if (name.size() < 4 || name.compare(name.size() - 4, 4, ".seg") != 0) continue;
    const std::string path = dir + "/" + name;
    auto reader_or = sediment::SegmentReader::Open(env, path);
    if (!reader_or.ok()) return Fail(reader_or.status());
    const sediment::SegmentInfo& info = reader_or.value()->info();
    if (!repo.empty() && info.datasource.repo != repo) continue;
    input.segments.push_back(
        q::SegmentSource{&opener, name, sediment::SegmentId(input.segments.size() + 1),
                         info.datasource, info.partition, info.min_ts, info.max_ts});
    raw_bytes += info.raw_bytes;
    events += info.event_count;
    blocks += reader_or.value()->blocks().size();
    min_ts = std::min(min_ts, info.min_ts);
    max_ts = std::max(max_ts, info.max_ts);
    readers.push_back(std::move(reader_or).value());
  }
  if (input.segments.empty()) {
    return Fail(
        Status::NotFound("no segment files" + (repo.empty() ? "" : " of " + repo) + " in " + dir));
  }
  auto query_or = q::Compile(text);
  if (!query_or.ok()) return Fail(query_or.status());
  const q::TimeRange range{min_ts, max_ts + 1};
  q::ExecOptions options;
  options.threads = threads;
  double best_wall = 0, best_cpu = 0;
  size_t rows = 0;
  uint64_t matched = 0;
  for (int i = 0; i < runs; ++i) {
    const double cpu0 = ProcessCpuSeconds();
    const auto t0 = std::chrono::steady_clock::now();
    auto result_or = q::Execute(env, *query_or.value(), range, input, options);
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double cpu = ProcessCpuSeconds() - cpu0;
    if (!result_or.ok()) return Fail(result_or.status());
    rows = result_or.value().rows.size();
    matched = result_or.value().stats.events_matched;
    if (i == 0 || cpu < best_cpu) best_cpu = cpu;
    if (i == 0 || wall < best_wall) best_wall = wall;
  }
  // The floor: decompress and decode every block, single-threaded.
  const double cpu0 = ProcessCpuSeconds();
  sediment::DecodedBlock block;
  for (const auto& reader : readers) {
    for (size_t b = 0; b < reader->blocks().size(); ++b) {
      if (Status s = reader->ReadBlock(b, &block); !s.ok()) return Fail(s);
    }
  }
  const double decode_cpu = ProcessCpuSeconds() - cpu0;
  std::printf(
      "{\"segments\":%zu,\"blocks\":%llu,\"events\":%llu,\"raw_bytes\":%llu,"
      "\"threads\":%d,\"runs\":%d,\"rows\":%zu,\"events_matched\":%llu,"
      "\"best_wall_s\":%.4f,\"best_cpu_s\":%.4f,\"gb_per_cpu_s\":%.3f,\"ns_per_event\":%.1f,"
      "\"decode_cpu_s\":%.4f,\"decode_ns_per_event\":%.1f}\n",
      input.segments.size(), static_cast<unsigned long long>(blocks),
      static_cast<unsigned long long>(events), static_cast<unsigned long long>(raw_bytes), threads,
      runs, rows, static_cast<unsigned long long>(matched), best_wall, best_cpu,
      best_cpu > 0 ? raw_bytes / best_cpu / 1e9 : 0.0, events ? best_cpu * 1e9 / events : 0.0,
      decode_cpu, events ? decode_cpu * 1e9 / events : 0.0);
  return 0;
}

// A commit log that takes every record at once and keeps only its size: what an ingest request
// costs before the log is what AppendAll/AppendLines cost on it.
class CountingLog final : public sediment::CommitLog {
 public:
  int32_t partition_count() const override { return 24; }
  std::future<sediment::Result<sediment::Offset>> Append(sediment::PartitionId,
                                                         std::string record) override {
    bytes_ += record.size();
    std::promise<sediment::Result<sediment::Offset>> done;
    done.set_value(sediment::Offset(0));
    return done.get_future();
  }
  sediment::Result<std::vector<sediment::LogRecord>> Read(sediment::PartitionId, sediment::Offset,
                                                          size_t,
                                                          std::chrono::milliseconds) override {
    return std::vector<sediment::LogRecord>{};
  }
  Status DeleteBefore(sediment::PartitionId, sediment::Offset) override { return Status::OK(); }
  sediment::Result<sediment::Offset> StartOffset(sediment::PartitionId) override {
    return sediment::Offset(0);
  }
  sediment::Result<sediment::Offset> EndOffset(sediment::PartitionId) override {
    return sediment::Offset(0);
  }
  std::string Health() override { return "ok"; }
  uint64_t bytes() const { return bytes_; }

 private:
  uint64_t bytes_ = 0;
};

// What a raw ingest request costs the server before the commit log, for each batch of
// `batch_lines` lines of F, on this thread, the way the ingest route takes it: ParseLineBatch,
// and when the default parser (kv) keeps every line as it is AppendLines (encoded straight from
// the lines), else the events built, ApplyParsers and AppendAll (lz4), onto a log that only
// counts. Reports the best run's CPU seconds.
int AckPath(const std::string& in, uint64_t batch_lines, int runs) {
  auto data_or = Env::Default()->ReadFile(in);
  if (!data_or.ok()) return Fail(data_or.status());
  const std::string& data = data_or.value();
  const std::vector<sediment::bench::LineBatchView> batches =
      sediment::bench::SplitBatches(data, batch_lines);
  sediment::parsers::Selection selection;
  selection.format = sediment::ingest::Format::kRaw;
  selection.resolve = [](std::string_view name) { return sediment::parsers::Builtin(name); };
  double best = 0;
  uint64_t events = 0, record_bytes = 0, built = 0;
  for (int r = 0; r < runs; ++r) {
    events = 0;
    built = 0;
    CountingLog log;
    const double cpu0 = ProcessCpuSeconds();
    for (const sediment::bench::LineBatchView& b : batches) {
      const std::string_view body = b.body;
      sediment::ingest::ParseOptions options;
      options.repo = "bench";
      options.now_ms = 1700000000000;
      auto batch = sediment::ingest::ParseLineBatch(sediment::ingest::Format::kRaw, body, options);
      if (!batch.ok()) return Fail(batch.status());
      events += batch->lines.size();
      Status st;
      if (sediment::parsers::KeepsLinesAsIs(selection, *batch)) {
        st = sediment::ingest::AppendLines(&log, *batch);
      } else {
        ++built;
        sediment::ingest::ParseResult parsed = batch->ToEvents();
        sediment::parsers::ApplyParsers(selection, options, &parsed);
        st = sediment::ingest::AppendAll(&log, std::move(parsed.messages));
      }
      if (!st.ok()) return Fail(st);
    }
    const double cpu = ProcessCpuSeconds() - cpu0;
    record_bytes = log.bytes();
    if (r == 0 || cpu < best) best = cpu;
  }
  std::printf(
      "{\"bytes\": %zu, \"batches\": %zu, \"events\": %llu, \"record_bytes\": %llu, "
      "\"batches_built_as_events\": %llu, \"cpu_seconds\": %.4f, \"cpu_seconds_per_gb\": %.3f}\n",
      data.size(), batches.size(), static_cast<unsigned long long>(events),
      static_cast<unsigned long long>(record_bytes), static_cast<unsigned long long>(built), best,
      data.empty() ? 0.0 : best / (static_cast<double>(data.size()) / 1e9));
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
  std::string segments, text, repo;
  int threads = 2, runs = 3;
  auto* qy = app.add_subcommand("query", "run a query over segment files, without a server");
  qy->add_option("--segments", segments, "directory of .seg files")->required();
  qy->add_option("--query", text)->required();
  qy->add_option("--repo", repo, "only this repository's segments");
  qy->add_option("--threads", threads)->check(CLI::PositiveNumber);
  qy->add_option("--runs", runs)->check(CLI::PositiveNumber);
  auto* ap = app.add_subcommand("ack-path", "CPU of parsing, kv and encoding raw ingest batches");
  ap->add_option("--in", in)->required();
  ap->add_option("--batch-lines", batch_lines)->check(CLI::PositiveNumber);
  ap->add_option("--runs", runs)->check(CLI::PositiveNumber);
  sediment::bench::PostOptions post;
  auto* po = app.add_subcommand("post", "POST a file's lines in batches to an ingest endpoint");
  po->add_option("--port", post.port)->required()->check(CLI::Range(1, 65535));
  po->add_option("--token", post.token, "ingest token (Authorization: Bearer)")->required();
  po->add_option("--in", post.in)->required();
  po->add_option("--path", post.path);
  po->add_option("--content-type", post.content_type);
  po->add_option("--batch-lines", post.batch_lines)->check(CLI::PositiveNumber);
  po->add_option("--clients", post.clients)->check(CLI::PositiveNumber);
  po->add_option("--max-retries", post.max_retries)->check(CLI::NonNegativeNumber);
  po->add_option("--timeout", post.timeout_seconds, "seconds per request")
      ->check(CLI::PositiveNumber);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (af->parsed()) return AppendFsync(in, out, batch_lines);
  if (qy->parsed()) return Query(segments, text, repo, threads, runs);
  if (ap->parsed()) return AckPath(in, batch_lines, runs);
  if (po->parsed()) return sediment::bench::Post(post);
  return ZstdSize(in, level);
}
