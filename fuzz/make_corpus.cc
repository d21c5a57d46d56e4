// Writes the seed corpora of the fuzz targets (corpus/<target>/<name>) from real encodings made
// by the libraries' own encoders, and the query corpus from the query test cases.
//   fuzz_make_corpus <repo dir>        (writes <repo dir>/fuzz/corpus/...)
// Each seed starts with the selector/flag bytes its target reads (see each target's comment).
#include <zstd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cluster/heartbeat.h"
#include "cluster/node_identity.h"
#include "common/coding.h"
#include "coordinator/internal_query.h"
#include "fuzz/mem_env.h"
#include "global/global.h"
#include "log/local_log.h"
#include "model/event.h"
#include "otlp/otlp_logs.pb.h"
#include "query/query.h"
#include "query/wire.h"
#include "segment/segment.h"

using namespace sediment;
namespace fs = std::filesystem;

namespace {

fs::path g_out;

void Write(const std::string& target, const std::string& name, std::string_view prefix,
           std::string_view bytes) {
  fs::create_directories(g_out / target);
  std::ofstream f(g_out / target / name, std::ios::binary | std::ios::trunc);
  f.write(prefix.data(), static_cast<std::streamsize>(prefix.size()));
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) {
    std::fprintf(stderr, "cannot write %s/%s\n", target.c_str(), name.c_str());
    std::exit(1);
  }
}
std::string Byte(int b) { return std::string(1, static_cast<char>(b)); }

template <typename T>
T Must(Result<T> r, const char* what) {
  if (!r.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, r.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(*r);
}

std::vector<PositionedEvent> SampleEvents() {
  std::vector<PositionedEvent> out;
  const char* raws[] = {
      R"({"a":{"b":[1,2]},"status":200,"msg":"ok"})",
      "GET /index.html 404 user=bob ms=17",
      "ERROR disk full on /dev/sda1",
  };
  for (int i = 0; i < 3; ++i) {
    Event e;
    e.timestamp_ms = 1700000000000 + i * 1000;
    e.ingest_ms = e.timestamp_ms + 3;
    e.raw = raws[i];
    e.fields = {{"host", "web-" + std::to_string(i % 2)}, {"status", i == 1 ? "404" : "200"}};
    out.push_back(PositionedEvent{Position{Offset(100 + i), 0}, std::move(e)});
  }
  return out;
}

void IngestSeeds() {
  struct Seed {
    int format;  // ingest_fuzz's byte 0 (% 5), +0x80 for the HEC URL parameters
    const char* name;
    const char* body;
  };
  const Seed seeds[] = {
      {0, "structured",
       R"([{"tags":{"host":"h1","#repo":"fuzz"},"events":[{"timestamp":"2024-01-02T03:04:05.678+02:00","timezone":"Europe/Oslo","attributes":{"a":{"b":1},"list":[1,"x",null,true,{}],"e":[]},"rawstring":"r"},{"timestamp":1700000000.5},{"timestamp":"1700000000123"}]}])"},
      {0, "structured-nested",
       R"([{"events":[{"attributes":{"a":{"b":{"c":{"d":[[[{"e":"f"}]]]}}},"a.b":2}}]}])"},
      {1, "unstructured",
       R"([{"fields":{"host":"web-1"},"tags":{"dc":"eu"},"type":"accesslog","messages":["GET / 200","GET /x 404"]}])"},
      {2, "raw", "line one\r\nline two\n\nline three"},
      {3, "hec",
       R"({"time":1700000000.123,"host":"h","source":"s","sourcetype":"st","index":"web","fields":{"region":"eu"},"event":"text"}{"event":{"a":1,"b":[true]},"time":"1700000000.5"} {"event":12})"},
      {0x83, "hec-params", R"({"event":"x","timezone":"UTC","channel":"c"})"},
      {4, "hec-raw", "a\rb\r\nc\n"},
      {0x84, "hec-raw-params", "one event"},
  };
  for (const Seed& s : seeds) Write("ingest_fuzz", s.name, Byte(s.format), s.body);
}

// bulk_fuzz: byte 0 bit 0 = JSON (else Elastic bulk), bit 7 = a path {index}.
void BulkSeeds() {
  struct Seed {
    int flags;
    const char* name;
    const char* body;
  };
  const Seed seeds[] = {
      {0, "bulk",
       "{\"index\":{\"_index\":\"web\",\"_id\":\"1\"}}\n{\"@timestamp\":\"2024-01-02T03:04:05Z\","
       "\"message\":\"GET / "
       "200\",\"http\":{\"status\":200}}\n{\"create\":{}}\n{\"a\":[1,{\"b\":null}]}\n"},
      {0x80, "bulk-errors",
       "{\"index\":{}}\n{\"message\": "
       "\"x\n{\"delete\":{\"_id\":\"7\"}}\n{\"update\":{\"_id\":\"8\"}}\n"
       "{\"doc\":{}}\n{\"index\":{}}\n[1]\n{\"index\":{}}\n{\"@timestamp\":1704164645678}\n"},
      {1, "json-array", R"([{"msg":"event 1"},{"msg":"event 2","n":{"a":[1,true]}}])"},
      {1, "json-object", R"({"msg":"one","@timestamp":"x"})"},
  };
  for (const Seed& s : seeds) Write("bulk_fuzz", s.name, Byte(s.flags), s.body);
}

void QuerySeeds(const fs::path& repo) {
  int n = 0;
  for (const auto& entry : fs::directory_iterator(repo / "tests/query/cases")) {
    std::ifstream f(entry.path());
    std::string line, text;
    bool in_query = false;
    while (std::getline(f, line)) {
      if (line.rfind("query ", 0) == 0) {
        in_query = true;
        text.clear();
      } else if (in_query && line == "----") {
        in_query = false;
        char name[32];
        std::snprintf(name, sizeof(name), "case-%03d", n++);
        Write("query_fuzz", name, "", text);
      } else if (in_query) {
        if (!text.empty()) text += '\n';
        text += line;
      }
    }
  }
  std::printf("query_fuzz: %d queries from tests/query/cases\n", n);
}

void SegmentSeeds() {
  fuzz::MemEnv env;
  Datasource ds{"fuzz", {{"#host", "h"}}};
  auto events = SampleEvents();
  SegmentWriterOptions options;
  Must(WriteSegment(&env, "/seg", ds, PartitionId(3), events, options), "segment");
  const std::string file = Must(env.ReadFile("/seg"), "read segment");
  Write("segment_fuzz", "segment-3-events", Byte(0), file);
  // Two blocks, no filters.
  options.block_raw_bytes = 64;
  options.filter_hashes = 0;
  Must(WriteSegment(&env, "/seg2", ds, PartitionId(3), events, options), "segment");
  Write("segment_fuzz", "segment-blocks-nofilter", Byte(0), Must(env.ReadFile("/seg2"), "read"));
  // Format 1, as older nodes wrote it.
  options.format_version = 1;
  Must(WriteSegment(&env, "/seg3", ds, PartitionId(3), events, options), "segment");
  Write("segment_fuzz", "segment-format1", Byte(0), Must(env.ReadFile("/seg3"), "read"));
  options.format_version = 2;
  // Mode 1: the decompressed columns of each block of the format 1 file.
  {
    const std::string file1 = Must(env.ReadFile("/seg3"), "read segment");
    auto reader = Must(SegmentReader::Open(&env, "/seg3"), "open segment");
    for (size_t i = 0; i < reader->blocks().size(); ++i) {
      const BlockInfo& b = reader->blocks()[i];
      std::string raw(b.raw_size, '\0');
      const size_t got =
          ZSTD_decompress(raw.data(), raw.size(), file1.data() + b.file_offset, b.stored_size);
      if (ZSTD_isError(got) || got != raw.size()) std::exit(1);
      Write("segment_fuzz", "block-columns-" + std::to_string(i), Byte(1), raw);
    }
  }
  // Mode 3: the chunks of a format 2 block, decompressed (events `a=1 b=x`, `a=2`, `c=zz 3`).
  {
    std::vector<PositionedEvent> ev(3);
    const char* raws[] = {"a=1 b=xyz", "a=22", "c=zz 3"};
    for (int i = 0; i < 3; ++i) {
      ev[i].pos = Position{Offset(i), 0};
      ev[i].event.timestamp_ms = 100 + i;
      ev[i].event.raw = raws[i];
    }
    ev[0].event.fields = {{"a", "1"}, {"b", "xyz"}};
    ev[1].event.fields = {{"a", "22"}};
    ev[2].event.fields = {{"c", "zz"}, {"c", "3"}};
    SegmentWriterOptions one_block;
    Must(WriteSegment(&env, "/seg4", ds, PartitionId(0), ev, one_block), "segment");
    const std::string file4 = Must(env.ReadFile("/seg4"), "read segment");
    // The chunks follow the header in id order; their sizes are in the footer, which the
    // reader exposes only through reads: decode them by decompressing frame after frame.
    std::string body = file4.substr(16);
    std::string input;
    PutVarint64(&input, 3);   // events
    PutVarint64(&input, 25);  // raw bytes
    PutVarint64(&input, 3);   // names a, b, c (ids in first-use order)
    PutLengthPrefixed(&input, "a");
    PutLengthPrefixed(&input, "b");
    PutLengthPrefixed(&input, "c");
    std::string_view rest = body;
    for (int k = 0; k < 8 && !rest.empty(); ++k) {
      const size_t frame = ZSTD_findFrameCompressedSize(rest.data(), rest.size());
      std::string chunk;
      if (ZSTD_isError(frame)) break;
      const unsigned long long size = ZSTD_getFrameContentSize(rest.data(), frame);
      chunk.resize(size);
      ZSTD_decompress(chunk.data(), chunk.size(), rest.data(), frame);
      rest.remove_prefix(frame);
      input.push_back(0);
      PutLengthPrefixed(&input, chunk);
    }
    Write("segment_fuzz", "chunks-v2", Byte(3), input);
  }
  // Mode 2: events as lines (byte 1: block size).
  Write("segment_fuzz", "roundtrip-kv", Byte(2) + Byte(4),
        "GET /a status=200 user=bob ms=17\nERROR disk full dev=sda1\n\nuser=bob user=eve "
        "x=\nPOST /b?q=1 status=500 ms=1200 agent=Mozilla/5.0\n\xc3\xa9t\xc3\xa9 k=\xff");
  Write("segment_fuzz", "roundtrip-one", Byte(2) + Byte(0), "a=b");
}

IngestMessage SampleMessage() {
  IngestMessage m;
  m.id = 0x1234567890abcdefull;
  m.datasource = Datasource{"fuzz", {{"#host", "h"}, {"#type", "t"}}};
  for (auto& pe : SampleEvents()) m.events.push_back(std::move(pe.event));
  return m;
}

void CommitLogSeeds() {
  fuzz::MemEnv env;
  LocalLogOptions options;
  options.partitions = 1;
  {
    auto log = Must(OpenLocalLog(&env, "/log", options), "open log");
    IngestMessage m = SampleMessage();
    for (int i = 0; i < 3; ++i) {
      m.events.resize(static_cast<size_t>(3 - i));
      Must(log->Append(PartitionId(0), EncodeIngestMessage(m, Codec::kNone)).get(), "append");
    }
  }
  const std::string bytes =
      Must(env.ReadFile("/log/p-00000/00000000000000000000.log"), "read log file");
  Write("commit_log_fuzz", "three-records", Byte(0) + Byte(0), bytes);
  Write("commit_log_fuzz", "three-records-fixcrc", Byte(1) + Byte(0), bytes);
  Write("commit_log_fuzz", "two-files-append", Byte(7) + Byte(1), bytes);
  Write("commit_log_fuzz", "torn-tail", Byte(1) + Byte(0), bytes.substr(0, bytes.size() - 5));
}

void IngestMessageSeeds() {
  const IngestMessage m = SampleMessage();
  Write("ingest_message_fuzz", "none", Byte(0), EncodeIngestMessage(m, Codec::kNone));
  Write("ingest_message_fuzz", "lz4", Byte(1), EncodeIngestMessage(m, Codec::kLz4));
  Write("ingest_message_fuzz", "zstd", Byte(1), EncodeIngestMessage(m, Codec::kZstd));
}

SegmentRecord SampleSegment() {
  SegmentRecord s;
  s.id = SegmentId(7);
  s.datasource = Datasource{"fuzz", {{"#host", "h"}}};
  s.partition = PartitionId(2);
  s.min_pos = Position{Offset(10), 0};
  s.max_pos = Position{Offset(20), 3};
  s.min_ts = 1700000000000;
  s.max_ts = 1700000009000;
  s.event_count = 12;
  s.raw_bytes = 900;
  s.file_size = 4096;
  s.content_hash = 0xfeedfacecafebeefull;
  s.epoch = Epoch(1);
  s.file_name = "seg-7.sdm";
  s.node = NodeId(1);
  return s;
}

void GlobalSeeds() {
  const SegmentRecord seg = SampleSegment();
  const std::vector<GlobalEvent> events = {
      SetClusterId{"cluster-1"},
      CreateRepo{"fuzz"},
      AddIngestToken{"fuzz", "token-1", ""},
      AddApiToken{"api-1", ""},
      SetClusterSecret{"secret", ""},
      RegisterNode{NodeId(1)},
      ClaimPartition{PartitionId(2), NodeId(1), Epoch(0)},
      RegisterSegment{seg, Offset(21)},
      AdvanceReplayPoint{PartitionId(2), Epoch(1), Offset(30)},
      SetTruncationPoint{PartitionId(2), Epoch(1), Offset(5)},
      AddSegmentReplica{SegmentId(1), NodeId(2)},
      RemoveSegmentReplica{SegmentId(1), NodeId(2), 1},
      StageMerge{seg, {SegmentId(1), SegmentId(2)}},
      CommitMerge{SegmentId(3)},
      SetReplicationFactor{2},
      SetRetention{"fuzz", 86400000, 1 << 30},
      ReplaceSegment{SegmentId(1), seg},
      SetBucket{"s3://bucket/prefix at http://127.0.0.1:9000"},
      SegmentUploaded{SegmentId(1)},
      RemoveSegments{{SegmentId(1), SegmentId(9)}},
      BeginRecovery{1},
      BucketObjectsCollected{NodeId(1), 1700000000000, {{"seg-9.sdm", 100}}},
  };
  GlobalState state;
  int i = 0;
  for (const GlobalEvent& ev : events) {
    const std::string enc = EncodeGlobalEvent(ev);
    // Flag bit 1 set: the target appends the CRC, so the seed leaves it out.
    Write("global_codec_fuzz", "event-" + std::to_string(i++) + "-" + GlobalEventName(ev), Byte(2),
          std::string_view(enc).substr(0, enc.size() - 4));
    (void)ApplyGlobalEvent(&state, ev);
  }
  const std::string snap = EncodeGlobalState(state);
  Write("global_codec_fuzz", "snapshot", Byte(3),
        std::string_view(snap).substr(0, snap.size() - 4));
  Write("global_codec_fuzz", "snapshot-with-crc", Byte(1), snap);
}

void QueryWireSeeds() {
  auto events = std::make_shared<const std::vector<PositionedEvent>>(SampleEvents());
  query::ScanInput input;
  input.buffered.push_back(
      query::BufferedSource{Datasource{"fuzz", {{"#host", "h"}}}, PartitionId(1), events});
  const query::TimeRange range{0, 1800000000000};
  query::ExecOptions options;
  options.threads = 1;
  auto filter = Must(query::Compile("status=*"), "compile");
  query::MatchSet set =
      Must(query::CollectMatches(Env::Default(), *filter, range, input, options), "collect");
  set.warnings.push_back("segment 9: unreadable");
  for (Codec c : {Codec::kNone, Codec::kLz4}) {
    const std::string enc = query::EncodeMatchSet(set, c);
    Write("query_wire_fuzz", "matchset-codec" + std::to_string(static_cast<int>(c)), Byte(2),
          std::string_view(enc).substr(0, enc.size() - 4));
  }
  // The queries of query_wire_fuzz.cc, in its order (flag bits 2.. pick one).
  const char* queries[] = {
      "error",
      "count()",
      "groupBy(host)",
      "groupBy([host, status], function=[count(), sum(bytes), avg(bytes), max(bytes)])",
      "sort(bytes, limit=5)",
      "table([host, status])",
      "top(host)",
      "head(3)",
      "tail(3)",
      "count(host, distinct=true)",
      "timeChart(span=1h)",
      "bucket(span=1m)",
      "min(bytes) | eval(x=_min*2)",
      "stats([count(), percentile(bytes, percentiles=[50, 99])])",
      "select([host])",
  };
  int index = 0;
  for (const char* text : queries) {
    auto q = query::Compile(text);
    if (!q.ok()) {
      std::printf("query_wire_fuzz: skipped (does not compile): %s\n", text);
      continue;
    }
    query::PartialResult partial =
        Must(query::ExecutePartial(Env::Default(), **q, range, input, options), "partial");
    partial.warnings.push_back("w");
    const std::string enc = query::EncodePartial(partial, Codec::kNone);
    Write("query_wire_fuzz", "partial-" + std::to_string(index), Byte(1 | 2 | (index << 2)),
          std::string_view(enc).substr(0, enc.size() - 4));
    ++index;
  }
}

void InternalSeeds() {
  coordinator::InternalQuery q;
  q.repo = "fuzz";
  q.query_string = "status=404 | count()";
  q.range = {1700000000000, 1700003600000};
  q.partitions = {{PartitionId(0), Epoch(1)}, {PartitionId(3), Epoch(2)}};
  q.segments = {SegmentId(4), SegmentId(5)};
  q.segment_files = {"a.sdm", "b.sdm"};
  q.max_events = 1000;
  q.query_id = "q-1";
  q.timeout_ms = 30000;
  q.max_memory_bytes = 1 << 20;
  Write("internal_fuzz", "internal-query", Byte(0), coordinator::EncodeInternalQuery(q));
  Write("internal_fuzz", "cancel", Byte(1), coordinator::EncodeCancel("q-1"));
  Write("internal_fuzz", "ids", Byte(2), coordinator::JoinIds({1, -2, 3, 4}, 2));
  Heartbeat hb;
  hb.node = NodeId(2);
  hb.address = "127.0.0.1:8080";
  hb.sent_ms = 1700000000000;
  hb.started_ms = 1699999999000;
  hb.version = "0.1";
  hb.global_applied = Offset(12);
  hb.oldest_snapshot = Offset(3);
  hb.partitions.push_back(PartitionProgress{PartitionId(1), Epoch(2), Offset(40), Offset(30), 5});
  const std::string enc = EncodeHeartbeat(hb);
  Write("internal_fuzz", "heartbeat", Byte(3), enc);
  Write("internal_fuzz", "heartbeat-fixcrc", Byte(3 | 0x80),
        std::string_view(enc).substr(0, enc.size() - 4));
  Write("internal_fuzz", "node-id", Byte(4), EncodeNodeIdFile(NodeId(17)));
  Write("internal_fuzz", "time-relative", Byte(5), "15m ago\nnow");
  Write("internal_fuzz", "time-iso", Byte(5), "2024-01-02T03:04:05.678+02:00\n1700000000000");
  Write("internal_fuzz", "time-words", Byte(5), "2 hours\n1 w");
}

// event_fuzz: byte 0 picks one of its 20 queries; each raw text is given to a few of them.
void EventSeeds() {
  const char* raws[] = {
      R"q({"a":[1,{"b":"x"},[true,null]],"c":{"d":-1.5e3},"e":"","f":"u\u00e9\n"})q",
      R"q(user=bob v=12 k="quoted value" a=b=c ;x='y' empty= =novalue)q",
      "2024-01-02T03:04:05.678Z 1700000000123 -42 3.25 1e400 nan 0x10",
      "GET /index.html?q=a%20b HTTP/1.1\t404 \xc3\xa9\xff ERROR x+y",
  };
  for (int r = 0; r < 4; ++r) {
    for (int q = r; q < 20; q += 4) {
      Write("event_fuzz", "raw" + std::to_string(r) + "-query" + std::to_string(q), Byte(q),
            raws[r]);
    }
  }
}

}  // namespace

// otlp_fuzz: byte 0 bit 0 = JSON, bit 1 = small bounds.
void OtlpSeeds() {
  namespace pb = ::sediment::otlp;
  pb::ExportLogsServiceRequest req;
  pb::ResourceLogs* rl = req.add_resource_logs();
  pb::KeyValue* svc = rl->mutable_resource()->add_attributes();
  svc->set_key("service.name");
  svc->mutable_value()->set_string_value("checkout");
  pb::ScopeLogs* sl = rl->add_scope_logs();
  sl->mutable_scope()->set_name("app");
  sl->mutable_scope()->set_version("1.0");
  pb::LogRecord* rec = sl->add_log_records();
  rec->set_time_unix_nano(1700000000123456789);
  rec->set_severity_number(17);
  rec->set_severity_text("ERROR");
  rec->set_trace_id(std::string(16, '\x5b'));
  rec->set_span_id(std::string(8, '\xee'));
  rec->set_flags(1);
  rec->mutable_body()->set_string_value("payment failed");
  pb::AnyValue* v = rec->add_attributes()->mutable_value();
  rec->mutable_attributes(0)->set_key("map");
  pb::KeyValue* inner = v->mutable_kvlist_value()->add_values();
  inner->set_key("list");
  pb::ArrayValue* arr = inner->mutable_value()->mutable_array_value();
  arr->add_values()->set_int_value(-5);
  arr->add_values()->set_double_value(1.5);
  arr->add_values()->set_bool_value(true);
  arr->add_values()->set_bytes_value("\x01\x02");
  arr->add_values();
  pb::LogRecord* structured = sl->add_log_records();
  structured->set_observed_time_unix_nano(1700000000000000000);
  pb::KeyValue* member = structured->mutable_body()->mutable_kvlist_value()->add_values();
  member->set_key("msg");
  member->mutable_value()->set_string_value("structured");
  const std::string bytes = req.SerializeAsString();
  Write("otlp_fuzz", "protobuf", Byte(0), bytes);
  Write("otlp_fuzz", "protobuf-small-bounds", Byte(2), bytes);
  const char* json =
      R"({"resourceLogs":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"s"}}]},)"
      R"("scopeLogs":[{"scope":{"name":"lib","version":"1","attributes":[{"key":"k","value":{"intValue":"7"}}]},)"
      R"("logRecords":[{"timeUnixNano":"1544712660300000000","observedTimeUnixNano":1544712660300000000,)"
      R"("severityNumber":10,"severityText":"Information","traceId":"5B8EFFF798038103D269B633813FC60C",)"
      R"("spanId":"EEE19B7EC3C1B174","flags":1,"body":{"stringValue":"Example"},"attributes":[)"
      R"({"key":"b","value":{"boolValue":true}},{"key":"d","value":{"doubleValue":"NaN"}},)"
      R"({"key":"by","value":{"bytesValue":"AP9oaQ=="}},{"key":"a","value":{"arrayValue":{"values":[{"stringValue":"x"}]}}},)"
      R"({"key":"m","value":{"kvlistValue":{"values":[{"key":"k","value":{"intValue":3}}]}}}]},)"
      R"({"time_unix_nano":0,"body":{"kvlist_value":{"values":[{"key":"n","value":null}]}}}]}]}]})";
  Write("otlp_fuzz", "json", Byte(1), json);
  Write("otlp_fuzz", "json-small-bounds", Byte(3), json);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <repo dir>\n", argv[0]);
    return 2;
  }
  const fs::path repo = argv[1];
  g_out = repo / "fuzz/corpus";
  IngestSeeds();
  BulkSeeds();
  QuerySeeds(repo);
  SegmentSeeds();
  CommitLogSeeds();
  IngestMessageSeeds();
  GlobalSeeds();
  QueryWireSeeds();
  InternalSeeds();
  EventSeeds();
  OtlpSeeds();
  return 0;
}
