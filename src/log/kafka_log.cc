#include "log/kafka_log.h"

#include <librdkafka/rdkafka.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <numeric>
#include <optional>
#include <set>
#include <shared_mutex>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

#include "common/background_loop.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "log/kafka_internal.h"

namespace sediment {
namespace {

// Shared with kafka_group.cc.
using kafka_internal::ConfPtr;
using kafka_internal::ErrText;
using kafka_internal::IsBrokerDownError;
using kafka_internal::KafkaStatus;
using kafka_internal::NewConf;
using kafka_internal::NewHandle;
using kafka_internal::Settings;
using kafka_internal::ToMs;

using SteadyClock = std::chrono::steady_clock;

// Topic-level max.message.bytes and the producer's message.max.bytes: one record of
// kKafkaMaxRecordBytes plus the record batch overhead.
constexpr size_t kMaxBatchBytes = kKafkaMaxRecordBytes + (256u << 10);
// Destruction waits at most this long (and at most produce_timeout) for pending appends.
constexpr std::chrono::milliseconds kCloseFlushBound{5000};
// A reader's seek that librdkafka has not carried out within this replaces the reader's handle.
constexpr std::chrono::milliseconds kSeekTimeout{2000};
// Longest wait of one producer poll on an idle log (delivery reports end it at once).
constexpr std::chrono::milliseconds kPollWait{1000};

// Milliseconds until `deadline`, rounded up: a wait for the result does not return before it
// (rounded down, the last fraction of a millisecond became polls with timeout 0, back to back,
// until the deadline passed: a spin of up to 1 ms per idle Read).
int RemainingMs(SteadyClock::time_point deadline) {
  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - SteadyNow());
  return ToMs(left);
}

std::atomic<uint64_t> g_read_polls{0};
std::atomic<uint64_t> g_consumer_handles{0};

// The last problem any client of one log (or one EnsureTopics call) reported; cleared by the next
// successful operation. Thread-safe.
class HealthTracker {
 public:
  void Error(std::string what) {
    std::lock_guard lk(mu_);
    last_error_ = std::move(what);
    error_at_ = SteadyNow();
    has_error_.store(true, std::memory_order_release);
  }
  void Success() {
    if (!has_error_.load(std::memory_order_acquire)) return;
    std::lock_guard lk(mu_);
    has_error_.store(false, std::memory_order_release);
  }
  std::string Get() {
    std::lock_guard lk(mu_);
    return has_error_.load(std::memory_order_relaxed) ? last_error_ : "ok";
  }
  std::string LastError() {
    std::lock_guard lk(mu_);
    return last_error_;
  }
  // The last error when the log is unhealthy and it was recorded less than `window` ago: callers
  // fail fast with it instead of waiting for a broker known to be down.
  std::optional<std::string> RecentError(std::chrono::milliseconds window) {
    if (!has_error_.load(std::memory_order_acquire)) return std::nullopt;
    std::lock_guard lk(mu_);
    if (!has_error_.load(std::memory_order_relaxed)) return std::nullopt;
    if (SteadyNow() - error_at_ > window) return std::nullopt;
    return last_error_;
  }

 private:
  std::mutex mu_;
  std::string last_error_;
  std::chrono::steady_clock::time_point error_at_;
  std::atomic<bool> has_error_{false};
};

struct Producer;

// The opaque of every librdkafka handle this file creates.
struct HandleContext {
  HealthTracker* health = nullptr;
  Producer* producer = nullptr;  // set for the appending producer only
};

// One append in flight: owns the payload until librdkafka reports delivery (no copy is made).
struct PendingAppend {
  std::promise<Result<Offset>> promise;
  std::string data;
};

// One generation of the idempotent producer. A fatal idempotence error retires the generation and
// the poll thread creates a new one.
struct Producer {
  rd_kafka_t* rk = nullptr;
  rd_kafka_topic_t* rkt = nullptr;
  HandleContext ctx;
  std::atomic<bool> fatal{false};
  std::mutex mu;
  std::unordered_set<PendingAppend*> pending;  // guarded by mu

  void Resolve(PendingAppend* pa, Result<Offset> r) {
    {
      std::lock_guard lk(mu);
      pending.erase(pa);
    }
    pa->promise.set_value(std::move(r));
    delete pa;
  }
};

void ErrorCallback(rd_kafka_t* rk, int err_int, const char* reason, void* opaque) {
  auto* ctx = static_cast<HandleContext*>(opaque);
  auto err = static_cast<rd_kafka_resp_err_t>(err_int);
  std::string what;
  if (err == RD_KAFKA_RESP_ERR__FATAL) {
    char buf[512];
    rd_kafka_resp_err_t orig = rd_kafka_fatal_error(rk, buf, sizeof(buf));
    what = std::string("producer fatal error (producer is recreated): ") + buf + " (" +
           rd_kafka_err2name(orig) + ")";
    if (ctx->producer != nullptr) ctx->producer->fatal.store(true);
  } else if (IsBrokerDownError(err)) {
    what = std::string("brokers unreachable: ") + reason;
  } else {
    what = std::string("kafka error: ") + reason;
  }
  spdlog::warn("kafka {}: {}", rd_kafka_name(rk), what);
  if (ctx->health != nullptr) ctx->health->Error(std::move(what));
}

void DeliveryCallback(rd_kafka_t* rk, const rd_kafka_message_t* m, void* opaque) {
  auto* ctx = static_cast<HandleContext*>(opaque);
  auto* pa = static_cast<PendingAppend*>(m->_private);
  if (pa == nullptr || ctx->producer == nullptr) return;
  if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
    ctx->health->Success();
    ctx->producer->Resolve(pa, Offset(m->offset));
    return;
  }
  Status st = KafkaStatus(m->err, "append not acknowledged");
  if (st.code() == StatusCode::kInvalidArgument || st.code() == StatusCode::kNotFound) {
    st = Status::Unavailable(st.message());
  }
  ctx->health->Error(st.message());
  ctx->producer->Resolve(pa, std::move(st));
}

// Builds a configuration: bootstrap servers, the user's properties, then `fixed` (which wins).
// `ctx` must outlive the handle created from it.
Result<ConfPtr> MakeConf(const KafkaOptions& o, const Settings& fixed, HandleContext* ctx) {
  ASSIGN_OR_RETURN(ConfPtr conf, NewConf(o, fixed));
  rd_kafka_conf_set_error_cb(conf.get(), &ErrorCallback);
  rd_kafka_conf_set_opaque(conf.get(), ctx);
  return conf;
}

struct HandleDeleter {
  void operator()(rd_kafka_t* rk) const { rd_kafka_destroy(rk); }
};
using HandlePtr = std::unique_ptr<rd_kafka_t, HandleDeleter>;

// A handle for metadata, admin and watermark requests.
Result<HandlePtr> NewAdminHandle(const KafkaOptions& o, HandleContext* ctx) {
  ASSIGN_OR_RETURN(ConfPtr conf, MakeConf(o, {{"client.id", "sediment-admin"}}, ctx));
  ASSIGN_OR_RETURN(rd_kafka_t * rk, NewHandle(RD_KAFKA_PRODUCER, std::move(conf)));
  return HandlePtr(rk);
}

struct MetadataDeleter {
  void operator()(const rd_kafka_metadata_t* md) const { rd_kafka_metadata_destroy(md); }
};
using MetadataPtr = std::unique_ptr<const rd_kafka_metadata_t, MetadataDeleter>;

Result<MetadataPtr> FetchMetadata(rd_kafka_t* rk, const KafkaOptions& o) {
  const rd_kafka_metadata_t* md = nullptr;
  rd_kafka_resp_err_t err = rd_kafka_metadata(rk, 1, nullptr, &md, ToMs(o.admin_timeout));
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    Status st = KafkaStatus(err, "cannot get metadata from Kafka brokers " + o.brokers);
    if (st.code() == StatusCode::kUnavailable) {
      return Status::Unavailable("Kafka brokers " + o.brokers + " unreachable within " +
                                 std::to_string(o.admin_timeout.count()) +
                                 " ms: check --kafka-brokers and the brokers (" + ErrText(err) +
                                 ")");
    }
    return st;
  }
  return MetadataPtr(md);
}

const rd_kafka_metadata_topic_t* FindTopic(const rd_kafka_metadata_t* md, const std::string& t) {
  for (int i = 0; i < md->topic_cnt; ++i) {
    if (t == md->topics[i].topic) return &md->topics[i];
  }
  return nullptr;
}

Status ValidateOptions(const KafkaOptions& o) {
  if (o.brokers.empty()) return Status::InvalidArgument("--kafka-brokers is empty");
  if (o.ingest_partitions < 1) return Status::InvalidArgument("--ingest-partitions must be >= 1");
  if (o.replication_factor < 1) {
    return Status::InvalidArgument("--kafka-replication-factor must be >= 1");
  }
  if (o.min_insync_replicas < 1 || o.min_insync_replicas > o.replication_factor) {
    return Status::InvalidArgument(
        "--kafka-min-insync-replicas must be between 1 and "
        "--kafka-replication-factor (" +
        std::to_string(o.replication_factor) + ")");
  }
  if (o.produce_timeout.count() < 1 || o.admin_timeout.count() < 1) {
    return Status::InvalidArgument("kafka timeouts must be positive");
  }
  if (o.produce_linger.count() < 0 || o.produce_linger.count() > 1000) {
    return Status::InvalidArgument("--kafka-produce-linger-ms must be between 0 and 1000");
  }
  return Status::OK();
}

// Runs one admin request whose result arrives on a temporary queue; returns the result event
// (caller destroys) or the request-level error.
template <typename Start>
Result<rd_kafka_event_t*> RunAdmin(rd_kafka_t* rk, rd_kafka_admin_op_t op,
                                   std::chrono::milliseconds timeout, const std::string& what,
                                   Start start) {
  char errstr[512];
  rd_kafka_AdminOptions_t* ao = rd_kafka_AdminOptions_new(rk, op);
  rd_kafka_AdminOptions_set_request_timeout(ao, ToMs(timeout), errstr, sizeof(errstr));
  if (op == RD_KAFKA_ADMIN_OP_CREATETOPICS || op == RD_KAFKA_ADMIN_OP_DELETERECORDS) {
    rd_kafka_AdminOptions_set_operation_timeout(ao, ToMs(timeout), errstr, sizeof(errstr));
  }
  rd_kafka_queue_t* q = rd_kafka_queue_new(rk);
  start(ao, q);
  rd_kafka_event_t* ev = rd_kafka_queue_poll(q, ToMs(timeout) + 2000);
  rd_kafka_queue_destroy(q);
  rd_kafka_AdminOptions_destroy(ao);
  if (ev == nullptr) {
    return Status::Unavailable(what + ": no answer from Kafka within " +
                               std::to_string(timeout.count()) + " ms");
  }
  rd_kafka_resp_err_t err = rd_kafka_event_error(ev);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    Status st = KafkaStatus(err, what);
    const char* es = rd_kafka_event_error_string(ev);
    if (es != nullptr) st = Status(st.code(), st.message() + ": " + es);
    rd_kafka_event_destroy(ev);
    return st;
  }
  return ev;
}

struct TopicSpec {
  std::string name;
  int32_t partitions;
  Settings configs;
  // An existing topic must have retention.ms=-1 and retention.bytes=-1 (CheckRetention).
  bool unbounded_retention = false;
};

Status CheckExistingTopic(const rd_kafka_metadata_topic_t& t, const TopicSpec& spec,
                          const KafkaOptions& o) {
  if (t.err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return KafkaStatus(t.err, "topic " + spec.name);
  }
  if (t.partition_cnt < spec.partitions) {
    std::string msg = "topic " + spec.name + " has " + std::to_string(t.partition_cnt) +
                      " partitions, sediment is configured for " + std::to_string(spec.partitions) +
                      ": raise the topic's partitions (kafka-topics --alter --partitions " +
                      std::to_string(spec.partitions) + ")";
    if (spec.partitions == o.ingest_partitions && spec.name == KafkaIngestTopic(o)) {
      msg += " or set --ingest-partitions " + std::to_string(t.partition_cnt);
    }
    return Status::InvalidArgument(msg);
  }
  int min_rf = INT32_MAX;
  for (int i = 0; i < t.partition_cnt; ++i) min_rf = std::min(min_rf, t.partitions[i].replica_cnt);
  if (t.partition_cnt > 0 && min_rf < o.replication_factor) {
    return Status::InvalidArgument(
        "topic " + spec.name + " has replication factor " + std::to_string(min_rf) +
        ", sediment is configured for " + std::to_string(o.replication_factor) +
        ": raise the topic's replication factor (kafka-reassign-partitions) or set "
        "--kafka-replication-factor " +
        std::to_string(min_rf));
  }
  return Status::OK();
}

// A retention setting of an existing topic that lets Kafka delete records sediment may not have
// stored in segments yet.
struct FiniteRetention {
  std::string topic;
  std::string setting;  // retention.ms or retention.bytes
  std::string value;
  std::string source;  // where the value comes from (topic config, broker default, ...)
};

const char* ConfigSourceName(rd_kafka_ConfigSource_t source) {
  switch (source) {
    case RD_KAFKA_CONFIG_SOURCE_DYNAMIC_TOPIC_CONFIG:
      return "set on the topic";
    case RD_KAFKA_CONFIG_SOURCE_DYNAMIC_BROKER_CONFIG:
    case RD_KAFKA_CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG:
    case RD_KAFKA_CONFIG_SOURCE_STATIC_BROKER_CONFIG:
      return "from the broker configuration";
    case RD_KAFKA_CONFIG_SOURCE_DEFAULT_CONFIG:
      return "Kafka's default";
    default:
      return "source unknown";
  }
}

// Verifies min.insync.replicas of every topic and collects, into `finite`, the finite
// retention.ms / retention.bytes of topics whose spec sets them to -1 and whose records hold data
// (ingest, global) (DescribeConfigs).
Status CheckTopicConfigs(rd_kafka_t* rk, const std::vector<TopicSpec>& specs, const KafkaOptions& o,
                         std::vector<FiniteRetention>* finite) {
  std::vector<rd_kafka_ConfigResource_t*> res;
  for (const auto& s : specs) {
    res.push_back(rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, s.name.c_str()));
  }
  auto ev_or =
      RunAdmin(rk, RD_KAFKA_ADMIN_OP_DESCRIBECONFIGS, o.admin_timeout, "describe topic configs",
               [&](rd_kafka_AdminOptions_t* ao, rd_kafka_queue_t* q) {
                 rd_kafka_DescribeConfigs(rk, res.data(), res.size(), ao, q);
               });
  for (auto* r : res) rd_kafka_ConfigResource_destroy(r);
  if (!ev_or.ok()) return ev_or.status();
  rd_kafka_event_t* ev = ev_or.value();
  Status result;
  size_t cnt = 0;
  const rd_kafka_ConfigResource_t** rs =
      rd_kafka_DescribeConfigs_result_resources(rd_kafka_event_DescribeConfigs_result(ev), &cnt);
  for (size_t i = 0; i < cnt && result.ok(); ++i) {
    std::string topic = rd_kafka_ConfigResource_name(rs[i]);
    rd_kafka_resp_err_t err = rd_kafka_ConfigResource_error(rs[i]);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      result = KafkaStatus(err, "describe configs of topic " + topic);
      break;
    }
    const TopicSpec* spec = nullptr;
    for (const auto& s : specs) {
      if (s.name == topic) spec = &s;
    }
    size_t ncfg = 0;
    const rd_kafka_ConfigEntry_t** entries = rd_kafka_ConfigResource_configs(rs[i], &ncfg);
    for (size_t j = 0; j < ncfg; ++j) {
      const std::string name = rd_kafka_ConfigEntry_name(entries[j]);
      const char* v = rd_kafka_ConfigEntry_value(entries[j]);
      if (name == "retention.ms" || name == "retention.bytes") {
        if (spec == nullptr || !spec->unbounded_retention) continue;
        const std::string value = v != nullptr ? v : "";
        if (value != "-1") {
          finite->push_back(
              FiniteRetention{topic, name, value.empty() ? "(not shown)" : value,
                              ConfigSourceName(rd_kafka_ConfigEntry_source(entries[j]))});
        }
        continue;
      }
      if (name != "min.insync.replicas") continue;
      int value = v != nullptr ? std::atoi(v) : 0;
      if (value < o.min_insync_replicas) {
        result = Status::InvalidArgument(
            "topic " + topic + " has min.insync.replicas=" + std::to_string(value) +
            ", sediment is configured for " + std::to_string(o.min_insync_replicas) +
            ": raise it (kafka-configs --alter --entity-type topics --entity-name " + topic +
            " --add-config min.insync.replicas=" + std::to_string(o.min_insync_replicas) +
            ") or set --kafka-min-insync-replicas " + std::to_string(value));
      }
    }
  }
  rd_kafka_event_destroy(ev);
  return result;
}

// Refuses finite retention on data topics (FailedPrecondition) unless the operator allowed it;
// then each setting is logged as a warning.
Status CheckRetention(const std::vector<FiniteRetention>& finite, const KafkaOptions& o) {
  if (finite.empty()) return Status::OK();
  std::string found;
  std::set<std::string> topics;
  for (const auto& f : finite) {
    if (!found.empty()) found += ", ";
    found += "topic " + f.topic + " has " + f.setting + "=" + f.value + " (" + f.source + ")";
    topics.insert(f.topic);
  }
  if (o.allow_finite_retention) {
    for (const auto& f : finite) {
      spdlog::warn(
          "kafka: topic {} has {}={} ({}); allowed by --allow-kafka-retention: Kafka deletes "
          "records by age or size even when sediment has not stored them in segments yet (a "
          "digest stall or a long bucket outage then loses acknowledged events; the digest "
          "reports such gaps as lost offsets in /api/v1/status)",
          f.topic, f.setting, f.value, f.source);
    }
    return Status::OK();
  }
  std::string fix;
  for (const auto& t : topics) {
    if (!fix.empty()) fix += "; ";
    fix += "kafka-configs --alter --entity-type topics --entity-name " + t +
           " --add-config retention.ms=-1,retention.bytes=-1";
  }
  return Status::FailedPrecondition(
      found +
      ": Kafka would delete records by age or size even when sediment has not stored them in "
      "segments yet, losing acknowledged events (sediment deletes them itself once they are "
      "safe); set both to -1 (" +
      fix + ") or start with --allow-kafka-retention to accept that risk");
}

Status CreateTopics(rd_kafka_t* rk, const std::vector<const TopicSpec*>& specs,
                    const KafkaOptions& o) {
  char errstr[512];
  std::vector<rd_kafka_NewTopic_t*> nts;
  Status st;
  for (const TopicSpec* s : specs) {
    rd_kafka_NewTopic_t* nt = rd_kafka_NewTopic_new(s->name.c_str(), s->partitions,
                                                    o.replication_factor, errstr, sizeof(errstr));
    if (nt == nullptr) {
      st = Status::InvalidArgument("topic " + s->name + ": " + errstr);
      break;
    }
    nts.push_back(nt);
    Settings cfg = s->configs;
    cfg.emplace_back("min.insync.replicas", std::to_string(o.min_insync_replicas));
    cfg.emplace_back("max.message.bytes", std::to_string(kMaxBatchBytes));
    for (const auto& [k, v] : cfg) {
      if (rd_kafka_NewTopic_set_config(nt, k.c_str(), v.c_str()) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        st = Status::InvalidArgument("topic " + s->name + ": bad config " + k);
      }
    }
  }
  if (st.ok()) {
    auto ev_or = RunAdmin(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS, o.admin_timeout, "create topics",
                          [&](rd_kafka_AdminOptions_t* ao, rd_kafka_queue_t* q) {
                            rd_kafka_CreateTopics(rk, nts.data(), nts.size(), ao, q);
                          });
    if (!ev_or.ok()) {
      st = ev_or.status();
    } else {
      size_t cnt = 0;
      const rd_kafka_topic_result_t** trs = rd_kafka_CreateTopics_result_topics(
          rd_kafka_event_CreateTopics_result(ev_or.value()), &cnt);
      for (size_t i = 0; i < cnt && st.ok(); ++i) {
        rd_kafka_resp_err_t err = rd_kafka_topic_result_error(trs[i]);
        if (err == RD_KAFKA_RESP_ERR_NO_ERROR || err == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
          continue;
        }
        std::string name = rd_kafka_topic_result_name(trs[i]);
        const char* es = rd_kafka_topic_result_error_string(trs[i]);
        st = KafkaStatus(err,
                         "create topic " + name + (es != nullptr ? std::string(": ") + es : ""));
        if (err == RD_KAFKA_RESP_ERR_INVALID_REPLICATION_FACTOR) {
          st = Status::InvalidArgument(st.message() + ": lower --kafka-replication-factor");
        }
      }
      rd_kafka_event_destroy(ev_or.value());
    }
  }
  for (auto* nt : nts) rd_kafka_NewTopic_destroy(nt);
  return st;
}

bool TopicReady(const rd_kafka_metadata_topic_t* t) {
  if (t == nullptr || t->err != RD_KAFKA_RESP_ERR_NO_ERROR || t->partition_cnt == 0) return false;
  for (int i = 0; i < t->partition_cnt; ++i) {
    if (t->partitions[i].err != RD_KAFKA_RESP_ERR_NO_ERROR || t->partitions[i].leader < 0) {
      return false;
    }
  }
  return true;
}

// The consumer handle's settings (simple consumer API: no group, nothing committed).
Settings ConsumerSettings() {
  return {
      {"client.id", "sediment-reader"},
      {"enable.auto.commit", "false"},
      {"enable.auto.offset.store", "false"},
      {"auto.offset.reset", "error"},
      {"enable.partition.eof", "false"},
      {"max.partition.fetch.bytes", std::to_string(kMaxBatchBytes)},
      {"fetch.max.bytes", std::to_string(4 * kMaxBatchBytes)},
      {"receive.message.max.bytes", std::to_string(4 * kMaxBatchBytes + (1 << 20))},
      // Per partition (each has its own fetch queue).
      {"queued.max.messages.kbytes", "16384"},
      // The broker answers a fetch as soon as a record arrives (fetch.min.bytes 1), so a long
      // wait adds no latency; it only makes an idle consumer's fetches (and wakeups) rarer.
      {"fetch.wait.max.ms", "1000"},
  };
}

}  // namespace

// See kafka_log.h. The handles are created by OpenKafkaClients and destroyed with the last
// reference, after every log opened on them (each log holds one) stopped its partitions and
// destroyed its topic handle. Their error callbacks are logged only: each log's health comes from
// the results of its own calls and from its producer.
class KafkaClients {
 public:
  explicit KafkaClients(KafkaOptions options) : options_(std::move(options)) {}
  KafkaClients(const KafkaClients&) = delete;
  KafkaClients& operator=(const KafkaClients&) = delete;
  ~KafkaClients() {
    if (consumer_ != nullptr) rd_kafka_destroy(consumer_);
  }

  Status Start() {
    ASSIGN_OR_RETURN(admin_, NewAdminHandle(options_, &admin_ctx_));
    ASSIGN_OR_RETURN(ConfPtr conf, MakeConf(options_, ConsumerSettings(), &consumer_ctx_));
    ASSIGN_OR_RETURN(consumer_, NewHandle(RD_KAFKA_CONSUMER, std::move(conf)));
    g_consumer_handles.fetch_add(1, std::memory_order_relaxed);
    return Status::OK();
  }

  const KafkaOptions& options() const { return options_; }
  // Thread-safe handles, valid while this object lives.
  rd_kafka_t* admin() const { return admin_.get(); }
  rd_kafka_t* consumer() const { return consumer_; }

  // Claims `topic` for one log: a second log of the same topic on these handles would start
  // fetchers of partitions the first one runs. FailedPrecondition when it is claimed.
  Status Claim(const std::string& topic) {
    MutexLock lk(&mu_);
    if (!topics_.insert(topic).second) {
      return Status::FailedPrecondition("kafka topic " + topic +
                                        " is already open on these Kafka clients");
    }
    return Status::OK();
  }
  void Release(const std::string& topic) {
    MutexLock lk(&mu_);
    topics_.erase(topic);
  }

 private:
  const KafkaOptions options_;
  HandleContext admin_ctx_;
  HandleContext consumer_ctx_;
  HandlePtr admin_;
  rd_kafka_t* consumer_ = nullptr;
  Mutex mu_;
  std::set<std::string> topics_ GUARDED_BY(mu_);
};

namespace {

// ---------------------------------------------------------------------------------------------

// The read state of one partition. Every partition of every log opened on one KafkaClients is
// read through its one consumer handle (KafkaLog::consumer_), with librdkafka's simple (legacy)
// consumer API: each partition is started (rd_kafka_consume_start) at a Read's `from`, consumed
// from its own fetch queue (rd_kafka_consume) and moved by seeks; positions come only from Read's
// `from`.
//
// Why the simple consumer and not assign(): with one handle per log, moving one partition would
// take an incremental (un)assign while other partitions are fetched, and a second assignment
// change of a partition before librdkafka served the first one's fetch stop makes librdkafka 2.0.2
// abort the process on the stop's reply (assertion rktp_started in
// rd_kafka_assignment_partition_stopped); that is why each partition had a handle of its own
// before, assigned once. rd_kafka_consume_stop instead returns only once the partition's fetcher
// has stopped, so a restart after it cannot race a pending stop. A seek cannot move a fetcher
// that stopped on an out-of-range offset (auto.offset.reset=error): the partition is then
// stopped and started again at `from`, on the same handle. No consumer group exists.
//
// WakeReaders: the Read holding `mu` marks its waits (BeginWait/EndWait, SleepUntil) under
// `wake_mu`, which WakeReaders takes without `mu`. A wake during a wait moves `wake_gen` and
// yields the partition's fetch queue (rd_kafka_queue_yield: the rd_kafka_consume waiting on it
// returns NULL with __TIMED_OUT, or, yielded before that call, the next one that finds the queue
// empty does); with no wait in progress it is kept in `wake_pending` for the next one.
struct PartitionReader {
  std::mutex mu;
  bool started = false;                // guarded by mu; consume_start'ed, not stopped since
  int64_t next = -1;                   // offset the consumer delivers next; -1 = not positioned
  bool fetching = false;               // the fetcher runs: a seek can move it
  rd_kafka_message_t* held = nullptr;  // consumed but not returned (over max_bytes)

  std::mutex wake_mu;
  std::condition_variable wake_cv;  // SleepUntil waits on it
  uint64_t wake_gen = 0;            // guarded by wake_mu, as the three below
  bool waiting = false;             // a Read is in a wait
  bool wake_pending = false;        // a wake came while no Read waited
  // The partition's fetch queue (rd_kafka_queue_get_partition), taken once its fetcher started;
  // destroyed before the consumer handle.
  rd_kafka_queue_t* fetch_queue = nullptr;

  // A wait of the Read holding mu begins: false when a kept wake cuts it short (do not wait).
  bool BeginWait(uint64_t* gen) {
    std::lock_guard lk(wake_mu);
    if (wake_pending) {
      wake_pending = false;
      return false;
    }
    waiting = true;
    *gen = wake_gen;
    return true;
  }
  // The wait begun with `gen` ended: true when WakeReaders came during it.
  bool EndWait(uint64_t gen) {
    std::lock_guard lk(wake_mu);
    waiting = false;
    return wake_gen != gen;
  }
  // Sleeps (no fetch queue involved) until `deadline` or a wake; true when woken.
  bool SleepUntil(SteadyClock::time_point deadline) {
    std::unique_lock lk(wake_mu);
    if (wake_pending) {
      wake_pending = false;
      return true;
    }
    waiting = true;
    const uint64_t gen = wake_gen;
    wake_cv.wait_until(lk, deadline, [&] { return wake_gen != gen; });
    waiting = false;
    return wake_gen != gen;
  }
  void Wake() {
    std::lock_guard lk(wake_mu);
    if (waiting) {
      ++wake_gen;
    } else {
      wake_pending = true;
    }
    if (fetch_queue != nullptr) rd_kafka_queue_yield(fetch_queue);
    wake_cv.notify_all();
  }
  // Takes the fetch queue of `partition` (called after each consume_start: a toppar recreated
  // by librdkafka would have a new one).
  void TakeFetchQueue(rd_kafka_t* rk, const std::string& topic, int32_t partition) {
    rd_kafka_queue_t* q = rd_kafka_queue_get_partition(rk, topic.c_str(), partition);
    std::lock_guard lk(wake_mu);
    if (fetch_queue != nullptr) rd_kafka_queue_destroy(fetch_queue);
    fetch_queue = q;
  }
  void DropFetchQueue() {
    std::lock_guard lk(wake_mu);
    if (fetch_queue != nullptr) rd_kafka_queue_destroy(fetch_queue);
    fetch_queue = nullptr;
  }
};

class KafkaLog final : public CommitLog {
 public:
  // `clients` must have claimed `topic` for this log (released by the destructor).
  KafkaLog(std::shared_ptr<KafkaClients> clients, std::string topic, int32_t partitions)
      : clients_(std::move(clients)),
        options_(clients_->options()),
        topic_(std::move(topic)),
        partitions_(partitions),
        consumer_(clients_->consumer()) {
    for (int32_t i = 0; i < partitions_; ++i)
      readers_.push_back(std::make_unique<PartitionReader>());
  }

  Status Start() {
    ASSIGN_OR_RETURN(producer_, NewProducer());
    consumer_rkt_ = rd_kafka_topic_new(consumer_, topic_.c_str(), nullptr);
    if (consumer_rkt_ == nullptr) {
      return KafkaStatus(rd_kafka_last_error(), "consumer topic " + topic_);
    }
    (void)poller_.Start();
    return Status::OK();
  }

  ~KafkaLog() override {
    // The poll thread starts no wait once it sees closing_, and the yield of the queue
    // rd_kafka_poll serves ends the wait in progress (or, made before that wait began, makes it
    // return at once).
    closing_.store(true);
    {
      std::shared_lock lk(producer_mu_);
      if (producer_) {
        // rd_kafka_yield would not do: it acts only from a callback on the polling thread.
        rd_kafka_queue_t* main_queue = rd_kafka_queue_get_main(producer_->rk);
        rd_kafka_queue_yield(main_queue);
        rd_kafka_queue_destroy(main_queue);
      }
    }
    poller_.Stop();
    if (producer_) {
      RetireProducer(std::move(producer_), std::min(options_.produce_timeout, kCloseFlushBound));
    }
    // Every message is destroyed and every partition stopped before the handle goes: a message
    // still held keeps references that rd_kafka_destroy would wait for.
    for (int32_t i = 0; i < partitions_; ++i) {
      CloseReader(*readers_[i], PartitionId(i));
      readers_[i]->DropFetchQueue();
    }
    if (consumer_rkt_ != nullptr) rd_kafka_topic_destroy(consumer_rkt_);
    clients_->Release(topic_);
  }

  int32_t partition_count() const override { return partitions_; }

  std::future<Result<Offset>> Append(PartitionId p, std::string record) override {
    auto ready = [](Status st) {
      std::promise<Result<Offset>> pr;
      pr.set_value(std::move(st));
      return pr.get_future();
    };
    if (Status st = CheckPartition(p); !st.ok()) return ready(std::move(st));
    if (record.size() > kKafkaMaxRecordBytes) {
      return ready(Status::TooLarge("record of " + std::to_string(record.size()) +
                                    " bytes is over the Kafka log's limit of " +
                                    std::to_string(kKafkaMaxRecordBytes)));
    }
    auto* pa = new PendingAppend{{}, std::move(record)};
    std::future<Result<Offset>> fut = pa->promise.get_future();
    std::shared_lock lk(producer_mu_);
    Producer* prod = producer_.get();
    {
      std::lock_guard plk(prod->mu);
      prod->pending.insert(pa);
    }
    rd_kafka_resp_err_t err =
        rd_kafka_producev(prod->rk, RD_KAFKA_V_RKT(prod->rkt), RD_KAFKA_V_PARTITION(p.value),
                          RD_KAFKA_V_VALUE(pa->data.data(), pa->data.size()),
                          RD_KAFKA_V_MSGFLAGS(0), RD_KAFKA_V_OPAQUE(pa), RD_KAFKA_V_END);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      Status st = err == RD_KAFKA_RESP_ERR__QUEUE_FULL
                      ? Status::Unavailable("kafka producer queue is full")
                      : KafkaStatus(err, "append");
      if (st.code() == StatusCode::kNotFound) st = Status::Unavailable(st.message());
      prod->Resolve(pa, std::move(st));
    }
    return fut;
  }

  Result<std::vector<LogRecord>> Read(PartitionId p, Offset from, size_t max_bytes,
                                      std::chrono::milliseconds max_wait) override {
    RETURN_IF_ERROR(CheckPartition(p));
    if (from.value < 0) return Status::InvalidArgument("negative offset");
    const SteadyClock::time_point deadline = SteadyNow() + max_wait;
    PartitionReader& r = *readers_[p.value];
    std::lock_guard lk(r.mu);
    if (!r.started || r.next != from.value) RETURN_IF_ERROR(Position(r, p, from));

    std::vector<LogRecord> out;
    size_t bytes = 0;
    // Returns false when m did not fit and is held for the next call.
    auto take = [&](rd_kafka_message_t* m) {
      if (!out.empty() && bytes + m->len > max_bytes) {
        r.held = m;
        return false;
      }
      out.push_back(
          LogRecord{Offset(m->offset), std::string(static_cast<const char*>(m->payload), m->len)});
      bytes += m->len;
      r.next = m->offset + 1;
      rd_kafka_message_destroy(m);
      return true;
    };
    if (r.held != nullptr) {
      rd_kafka_message_t* m = r.held;
      r.held = nullptr;
      take(m);
    }
    bool woken = false;  // by WakeReaders: no further wait
    while (out.empty() || bytes < max_bytes) {
      g_read_polls.fetch_add(1, std::memory_order_relaxed);
      // Only a Read that has nothing yet waits; a kept wake makes that wait a look (timeout 0),
      // which also clears the queue's yield flag when nothing is queued.
      int wait_ms = 0;
      uint64_t gen = 0;
      bool waited = false;
      if (out.empty() && !woken && SteadyNow() < deadline) {
        waited = r.BeginWait(&gen);
        if (waited) {
          wait_ms = RemainingMs(deadline);
        } else {
          woken = true;
        }
      }
      rd_kafka_message_t* m = rd_kafka_consume(consumer_rkt_, p.value, wait_ms);
      const rd_kafka_resp_err_t consume_err =
          m == nullptr ? rd_kafka_last_error() : RD_KAFKA_RESP_ERR_NO_ERROR;
      if (waited && r.EndWait(gen)) woken = true;
      if (m == nullptr) {
        if (consume_err != RD_KAFKA_RESP_ERR__TIMED_OUT) {
          // Not a wait that ended (librdkafka does not know the partition): position again on the
          // next call, and wait out max_wait (or until woken) rather than asking again at once.
          r.next = -1;
          health_.Error("read partition " + std::to_string(p.value) + ": " +
                        rd_kafka_err2str(consume_err));
          if (out.empty() && !woken) r.SleepUntil(deadline);
          break;
        }
        // __TIMED_OUT: the wait ended, or the queue was yielded (by a wake, which `woken` tells
        // from an earlier wake's leftover yield: that one is waited past).
        if (out.empty() && !woken && SteadyNow() < deadline) continue;
        break;
      }
      if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        rd_kafka_resp_err_t err = m->err;
        std::string es = rd_kafka_message_errstr(m);
        rd_kafka_message_destroy(m);
        if (err == RD_KAFKA_RESP_ERR__PARTITION_EOF) continue;
        if (err == RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET ||
            err == RD_KAFKA_RESP_ERR_OFFSET_OUT_OF_RANGE) {
          r.next = -1;  // the fetcher stopped: position again on the next call
          r.fetching = false;
          if (!out.empty()) break;
          return OutOfRange(r, p, from, woken ? SteadyNow() : deadline);
        }
        health_.Error("read partition " + std::to_string(p.value) + ": " + es);
        continue;
      }
      // Below `from`, or a record this call already returned (a fetcher that restarted after a
      // leader change may deliver it again): never hand out a record twice.
      if (m->offset < from.value || (!out.empty() && m->offset <= out.back().offset.value)) {
        rd_kafka_message_destroy(m);
        continue;
      }
      health_.Success();
      if (!take(m)) break;
    }
    return out;
  }

  void WakeReaders(PartitionId p) override {
    if (!CheckPartition(p).ok()) return;
    readers_[p.value]->Wake();
  }

  Status DeleteBefore(PartitionId p, Offset offset) override {
    RETURN_IF_ERROR(CheckPartition(p));
    ASSIGN_OR_RETURN(Offset end, EndOffset(p));
    int64_t off = std::min(offset.value, end.value);
    if (off <= 0) return Status::OK();
    rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(list, topic_.c_str(), p.value)->offset = off;
    rd_kafka_DeleteRecords_t* dr = rd_kafka_DeleteRecords_new(list);
    rd_kafka_topic_partition_list_destroy(list);
    const std::string what = "delete records of " + topic_ + "/" + std::to_string(p.value) +
                             " below " + std::to_string(off);
    auto ev_or =
        RunAdmin(clients_->admin(), RD_KAFKA_ADMIN_OP_DELETERECORDS, options_.admin_timeout, what,
                 [&](rd_kafka_AdminOptions_t* ao, rd_kafka_queue_t* q) {
                   rd_kafka_DeleteRecords(clients_->admin(), &dr, 1, ao, q);
                 });
    rd_kafka_DeleteRecords_destroy(dr);
    if (!ev_or.ok()) return NoteFailure(ev_or.status());
    const rd_kafka_topic_partition_list_t* res =
        rd_kafka_DeleteRecords_result_offsets(rd_kafka_event_DeleteRecords_result(ev_or.value()));
    Status st;
    for (int i = 0; res != nullptr && i < res->cnt; ++i) {
      if (res->elems[i].err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        st = KafkaStatus(res->elems[i].err, what);
      }
    }
    rd_kafka_event_destroy(ev_or.value());
    if (st.ok()) health_.Success();
    return NoteFailure(st);
  }

  Result<Offset> StartOffset(PartitionId p) override {
    ASSIGN_OR_RETURN(auto wm, Watermarks(p));
    return Offset(wm.first);
  }
  Result<Offset> EndOffset(PartitionId p) override {
    ASSIGN_OR_RETURN(auto wm, Watermarks(p));
    return Offset(wm.second);
  }

  // Two ListOffsets calls over every partition, unless the brokers are known to be down. A
  // partition they did not answer, or all of them when they were not made or a call failed, is
  // asked alone as StartOffset/EndOffset ask (failing fast while the brokers are down, retrying
  // while a leader settles), so one partition's trouble stays its own.
  std::vector<Result<OffsetBounds>> AllBounds() override {
    std::vector<int32_t> parts(static_cast<size_t>(partitions_));
    std::iota(parts.begin(), parts.end(), 0);
    std::vector<int64_t> low, high;
    std::vector<rd_kafka_resp_err_t> low_errs, high_errs;
    bool batched = false;
    if (!health_.RecentError(std::chrono::milliseconds(2000))) {
      const SteadyClock::time_point deadline =
          SteadyNow() + std::min<std::chrono::milliseconds>(options_.admin_timeout,
                                                            std::chrono::milliseconds(2000));
      batched = ListOffsets(parts, RD_KAFKA_OFFSET_BEGINNING, deadline, &low, &low_errs) ==
                    RD_KAFKA_RESP_ERR_NO_ERROR &&
                ListOffsets(parts, RD_KAFKA_OFFSET_END, deadline, &high, &high_errs) ==
                    RD_KAFKA_RESP_ERR_NO_ERROR;
      if (batched) health_.Success();
    }
    std::vector<Result<OffsetBounds>> out;
    out.reserve(parts.size());
    for (size_t i = 0; i < parts.size(); ++i) {
      if (batched && low_errs[i] == RD_KAFKA_RESP_ERR_NO_ERROR &&
          high_errs[i] == RD_KAFKA_RESP_ERR_NO_ERROR) {
        out.emplace_back(OffsetBounds{Offset(low[i]), Offset(high[i])});
        continue;
      }
      Result<std::pair<int64_t, int64_t>> wm = Watermarks(PartitionId(parts[i]));
      if (wm.ok()) {
        out.emplace_back(OffsetBounds{Offset(wm->first), Offset(wm->second)});
      } else {
        out.emplace_back(wm.status());
      }
    }
    return out;
  }

  std::string Health() override {
    std::string h = health_.Get();
    return h == "ok" ? h : "kafka " + topic_ + ": " + h;
  }

 private:
  Status CheckPartition(PartitionId p) const {
    if (p.value < 0 || p.value >= partitions_) {
      return Status::InvalidArgument("partition " + std::to_string(p.value) + " of topic " +
                                     topic_ + " does not exist (" + std::to_string(partitions_) +
                                     " partitions)");
    }
    return Status::OK();
  }

  Status NoteFailure(Status st) {
    if (!st.ok() && st.code() == StatusCode::kUnavailable) health_.Error(st.message());
    return st;
  }

  // Low and high watermark. Errors that mean "metadata not settled yet" (a fresh topic, a leader
  // change) are retried until the deadline: min(admin_timeout, 2 s). While the brokers are known
  // to be unreachable (an Unavailable error in the last 2 s), fails fast without asking them, so
  // status pages and loops over partitions do not stall for a timeout per partition.
  Result<std::pair<int64_t, int64_t>> Watermarks(PartitionId p) {
    RETURN_IF_ERROR(CheckPartition(p));
    if (auto recent = health_.RecentError(std::chrono::milliseconds(2000))) {
      return Status::Unavailable("watermarks of " + topic_ + "/" + std::to_string(p.value) + ": " +
                                 *recent);
    }
    const SteadyClock::time_point deadline =
        SteadyNow() + std::min<std::chrono::milliseconds>(options_.admin_timeout,
                                                          std::chrono::milliseconds(2000));
    while (true) {
      int64_t low = 0, high = 0;
      rd_kafka_resp_err_t err = ListOffset(p, RD_KAFKA_OFFSET_BEGINNING, deadline, &low);
      if (err == RD_KAFKA_RESP_ERR_NO_ERROR) {
        err = ListOffset(p, RD_KAFKA_OFFSET_END, deadline, &high);
      }
      if (err == RD_KAFKA_RESP_ERR__TIMED_OUT) {
        // Most likely the leader the handle knows died: this partition's problem (as below), not
        // a sign that every broker is down. Ask for fresh metadata without waiting for it.
        RefreshMetadata(1);
        return Status::Unavailable("watermarks of " + topic_ + "/" + std::to_string(p.value) +
                                   ": no answer in time (leader down or changing)");
      }
      if (err == RD_KAFKA_RESP_ERR_NO_ERROR) {
        health_.Success();
        return std::make_pair(low, high);
      }
      const bool settling = err == RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION ||
                            err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ||
                            err == RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE ||
                            err == RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION ||
                            err == RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC;
      if (!settling) {
        return NoteFailure(
            KafkaStatus(err, "watermarks of " + topic_ + "/" + std::to_string(p.value)));
      }
      if (SteadyNow() + std::chrono::milliseconds(100) >= deadline) {
        // A leader change the handle has not learnt about is this partition's problem, not a
        // sign that the brokers are down: it must not make other partitions' queries fail fast.
        return Status::Unavailable("watermarks of " + topic_ + "/" + std::to_string(p.value) +
                                   ": " + rd_kafka_err2str(err) + " (leader changing)");
      }
      // The handle's metadata may name a leader that is gone (librdkafka refreshes it lazily):
      // ask for the topic's metadata now, then retry.
      RefreshMetadata(RemainingMs(deadline));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  // One offset of partition p by ListOffsets: `which` RD_KAFKA_OFFSET_BEGINNING for the log start,
  // RD_KAFKA_OFFSET_END for the end. Uses rd_kafka_offsets_for_times, which returns by the
  // deadline: librdkafka 2.0.2's rd_kafka_query_watermark_offsets waits forever for a leader that
  // died (its timeout is not applied once the requests are sent; fixed upstream in 2.3.0), which
  // hung a node's start on a broker kill.
  rd_kafka_resp_err_t ListOffset(PartitionId p, int64_t which, SteadyClock::time_point deadline,
                                 int64_t* out) {
    std::vector<int64_t> offsets;
    std::vector<rd_kafka_resp_err_t> errs;
    rd_kafka_resp_err_t err = ListOffsets({p.value}, which, deadline, &offsets, &errs);
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR) err = errs[0];
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR) *out = offsets[0];
    return err;
  }

  // ListOffset of several partitions in one call (one ListOffsets request per leader). On a
  // request-level error returns it; otherwise (*offsets)[i], (*errs)[i] answer parts[i] (an
  // offset the brokers did not answer is an error: __UNKNOWN_PARTITION).
  rd_kafka_resp_err_t ListOffsets(const std::vector<int32_t>& parts, int64_t which,
                                  SteadyClock::time_point deadline, std::vector<int64_t>* offsets,
                                  std::vector<rd_kafka_resp_err_t>* errs) {
    rd_kafka_topic_partition_list_t* list =
        rd_kafka_topic_partition_list_new(static_cast<int>(parts.size()));
    for (int32_t p : parts)
      rd_kafka_topic_partition_list_add(list, topic_.c_str(), p)->offset = which;
    rd_kafka_resp_err_t err =
        rd_kafka_offsets_for_times(clients_->admin(), list, std::max(RemainingMs(deadline), 1));
    offsets->assign(parts.size(), -1);
    errs->assign(parts.size(), RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION);
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      for (size_t i = 0; i < parts.size(); ++i) {
        const rd_kafka_topic_partition_t* e =
            rd_kafka_topic_partition_list_find(list, topic_.c_str(), parts[i]);
        if (e == nullptr) continue;
        (*errs)[i] = e->err;
        if (e->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
          if (e->offset < 0) {
            (*errs)[i] = RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION;
          } else {
            (*offsets)[i] = e->offset;
          }
        }
      }
    }
    rd_kafka_topic_partition_list_destroy(list);
    return err;
  }

  void RefreshMetadata(int timeout_ms) {
    rd_kafka_topic_t* rkt = rd_kafka_topic_new(clients_->admin(), topic_.c_str(), nullptr);
    if (rkt == nullptr) return;
    const rd_kafka_metadata_t* md = nullptr;
    if (rd_kafka_metadata(clients_->admin(), 0, rkt, &md, std::max(timeout_ms, 1)) ==
            RD_KAFKA_RESP_ERR_NO_ERROR &&
        md != nullptr) {
      rd_kafka_metadata_destroy(md);
    }
    rd_kafka_topic_destroy(rkt);
  }

  // `from` was out of the partition's range: NotFound below the start; otherwise it is past the
  // end, which is not an error (the record does not exist yet): empty after waiting.
  // Caller holds r.mu.
  Result<std::vector<LogRecord>> OutOfRange(PartitionReader& r, PartitionId p, Offset from,
                                            SteadyClock::time_point deadline) {
    ASSIGN_OR_RETURN(auto wm, Watermarks(p));
    if (from.value < wm.first) {
      return Status::NotFound("offset " + std::to_string(from.value) + " of " + topic_ + "/" +
                              std::to_string(p.value) + " was deleted (start offset " +
                              std::to_string(wm.first) + ")");
    }
    if (SteadyNow() < deadline) r.SleepUntil(deadline);
    return std::vector<LogRecord>{};
  }

  // Moves partition p's fetcher to `from`: a seek while it runs, else a stop (if started) and a
  // start at `from` (see PartitionReader). Caller holds r.mu.
  Status Position(PartitionReader& r, PartitionId p, Offset from) {
    if (r.held != nullptr) {
      rd_kafka_message_destroy(r.held);
      r.held = nullptr;
    }
    r.next = -1;
    const std::string what = "position consumer of " + topic_ + "/" + std::to_string(p.value);
    if (r.started && r.fetching) {
      rd_kafka_resp_err_t err =
          rd_kafka_seek(consumer_rkt_, p.value, from.value, static_cast<int>(kSeekTimeout.count()));
      if (err == RD_KAFKA_RESP_ERR_NO_ERROR) {
        r.next = from.value;
        return Status::OK();
      }
      // The fetcher could not be moved (stopping, stopped, or slow to answer): restart it.
      spdlog::debug("{}: seek to {} failed ({}); restarting the partition's fetcher", what,
                    from.value, rd_kafka_err2str(err));
    }
    CloseReader(r, p);
    if (rd_kafka_consume_start(consumer_rkt_, p.value, from.value) != 0) {
      return KafkaStatus(rd_kafka_last_error(), what);
    }
    r.TakeFetchQueue(consumer_, topic_, p.value);
    r.started = true;
    r.fetching = true;
    r.next = from.value;
    return Status::OK();
  }

  // Drops r's held message and stops partition p's fetcher (waiting until it stopped; its queued
  // messages are purged). Caller holds r.mu (or is the destructor).
  void CloseReader(PartitionReader& r, PartitionId p) {
    if (r.held != nullptr) {
      rd_kafka_message_destroy(r.held);
      r.held = nullptr;
    }
    if (r.started) {
      if (rd_kafka_consume_stop(consumer_rkt_, p.value) != 0) {
        spdlog::warn("kafka {}/{}: stopping the fetcher failed: {}", topic_, p.value,
                     rd_kafka_err2str(rd_kafka_last_error()));
      }
      r.started = false;
    }
    r.fetching = false;
    r.next = -1;
  }

  Result<std::unique_ptr<Producer>> NewProducer() {
    auto prod = std::make_unique<Producer>();
    prod->ctx.health = &health_;
    prod->ctx.producer = prod.get();
    ASSIGN_OR_RETURN(ConfPtr conf, MakeConf(options_, KafkaProducerSettings(options_), &prod->ctx));
    rd_kafka_conf_set_dr_msg_cb(conf.get(), &DeliveryCallback);
    ASSIGN_OR_RETURN(prod->rk, NewHandle(RD_KAFKA_PRODUCER, std::move(conf)));
    prod->rkt = rd_kafka_topic_new(prod->rk, topic_.c_str(), nullptr);
    if (prod->rkt == nullptr) {
      rd_kafka_destroy(prod->rk);
      return KafkaStatus(rd_kafka_last_error(), "producer topic " + topic_);
    }
    return prod;
  }

  // Flushes for at most `flush`, then purges what is left (those appends fail: their outcome is
  // unknown to us) and destroys the producer.
  void RetireProducer(std::unique_ptr<Producer> prod, std::chrono::milliseconds flush) {
    if (!prod->fatal.load()) rd_kafka_flush(prod->rk, ToMs(flush));
    rd_kafka_purge(prod->rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
    rd_kafka_flush(prod->rk, 1000);  // serves the purge delivery reports
    rd_kafka_topic_destroy(prod->rkt);
    rd_kafka_destroy(prod->rk);
    std::unordered_set<PendingAppend*> left;
    {
      std::lock_guard lk(prod->mu);
      left.swap(prod->pending);
    }
    for (PendingAppend* pa : left) {
      pa->promise.set_value(
          Status::Unavailable("kafka producer closed before the record was acknowledged"));
      delete pa;
    }
  }

  // The poll thread's pass: serves the producer's delivery reports (waiting up to kPollWait: a
  // report ends the wait at once, and the destructor cuts it short by yielding the main queue)
  // and the consumer's error callbacks, and recreates the producer after a fatal error (again 1 s
  // later when that failed). Only this thread (and the destructor, after joining it) replaces
  // producer_.
  BackgroundLoop::Duration PollPass() {
    if (closing_.load()) return BackgroundLoop::kNoPeriod;  // the destructor stops the loop
    rd_kafka_poll(producer_->rk, ToMs(kPollWait));
    // The consumer's error callbacks (its Reads serve only their partitions' fetch queues).
    rd_kafka_poll(consumer_, 0);
    if (!producer_->fatal.load()) return BackgroundLoop::Duration::zero();
    auto fresh = NewProducer();
    if (!fresh.ok()) {
      health_.Error("cannot recreate kafka producer: " + fresh.status().message());
      return std::chrono::seconds(1);
    }
    std::unique_ptr<Producer> old;
    {
      std::unique_lock lk(producer_mu_);
      old = std::move(producer_);
      producer_ = std::move(fresh).value();
    }
    spdlog::warn("kafka {}: producer recreated after a fatal error", topic_);
    RetireProducer(std::move(old), std::chrono::milliseconds(0));
    return BackgroundLoop::Duration::zero();
  }

  // The admin and consumer handles, shared with the other logs opened on them. First member: it
  // outlives everything below.
  const std::shared_ptr<KafkaClients> clients_;
  const KafkaOptions& options_;  // clients_'s
  const std::string topic_;
  const int32_t partitions_;
  HealthTracker health_;
  std::shared_mutex producer_mu_;  // shared: producing; exclusive: replacing producer_
  std::unique_ptr<Producer> producer_;
  // clients_'s consumer handle (its errors are logged, not recorded in health_; reads report
  // their own errors) and this log's topic on it, created by Start() and destroyed by the
  // destructor after every partition was stopped. Both are thread-safe; each partition's state is
  // guarded by its reader's mu.
  rd_kafka_t* const consumer_;
  rd_kafka_topic_t* consumer_rkt_ = nullptr;
  std::vector<std::unique_ptr<PartitionReader>> readers_;
  std::atomic<bool> closing_{false};  // set by the destructor before it stops poller_
  // Started by Start(), stopped by the destructor before the producer is retired. Last member.
  BackgroundLoop poller_{"kafka-poll",
                         {.first_pass = BackgroundLoop::FirstPass::kAtStart},
                         BackgroundLoop::DelayFromPass{},
                         [this] { return PollPass(); }};
};

std::string Trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

}  // namespace

std::string KafkaIngestTopic(const KafkaOptions& o) { return o.topic_prefix + "ingest"; }
std::string KafkaGlobalTopic(const KafkaOptions& o) { return o.topic_prefix + "global"; }
std::string KafkaChatterTopic(const KafkaOptions& o) { return o.topic_prefix + "chatter"; }

Result<int32_t> EnsureTopics(const KafkaOptions& o) {
  RETURN_IF_ERROR(ValidateOptions(o));
  HealthTracker health;
  HandleContext ctx{&health, nullptr};
  ASSIGN_OR_RETURN(HandlePtr admin, NewAdminHandle(o, &ctx));
  ASSIGN_OR_RETURN(MetadataPtr md, FetchMetadata(admin.get(), o));
  // Kafka never deletes by age or size: sediment deletes what it no longer needs with
  // DeleteRecords (digest: below the safe offset; Global: below its oldest kept snapshot;
  // membership: chatter records beyond the newest 10000). The chatter topic's retention is created
  // unbounded too but not checked: it holds heartbeats only, losing old ones loses no event.
  const Settings unbounded = {
      {"cleanup.policy", "delete"}, {"retention.ms", "-1"}, {"retention.bytes", "-1"}};
  const std::vector<TopicSpec> specs = {
      {KafkaIngestTopic(o), o.ingest_partitions, unbounded, true},
      {KafkaGlobalTopic(o), 1, unbounded, true},
      {KafkaChatterTopic(o), 1, unbounded, false},
  };
  std::vector<const TopicSpec*> missing;
  for (const auto& s : specs) {
    const rd_kafka_metadata_topic_t* t = FindTopic(md.get(), s.name);
    if (t == nullptr || t->err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) {
      missing.push_back(&s);
    } else {
      RETURN_IF_ERROR(CheckExistingTopic(*t, s, o));
    }
  }
  if (!missing.empty()) {
    // Only creating a topic needs that many brokers up: existing topics keep their replica lists
    // while a broker is down, and the metadata lists live brokers only.
    if (md->broker_cnt < o.replication_factor) {
      return Status::InvalidArgument("replication factor " + std::to_string(o.replication_factor) +
                                     " needs " + std::to_string(o.replication_factor) +
                                     " brokers, the cluster has " + std::to_string(md->broker_cnt) +
                                     ": lower --kafka-replication-factor");
    }
    RETURN_IF_ERROR(CreateTopics(admin.get(), missing, o));
    // Wait until every topic is visible with leaders; then check them as existing topics (another
    // node may have created one concurrently with other settings).
    const SteadyClock::time_point deadline = SteadyNow() + o.admin_timeout;
    while (true) {
      ASSIGN_OR_RETURN(md, FetchMetadata(admin.get(), o));
      bool ready = true;
      for (const auto& s : specs) ready = ready && TopicReady(FindTopic(md.get(), s.name));
      if (ready) break;
      if (SteadyNow() >= deadline) {
        return Status::Unavailable("created topics did not get partition leaders within " +
                                   std::to_string(o.admin_timeout.count()) + " ms");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    for (const auto& s : specs)
      RETURN_IF_ERROR(CheckExistingTopic(*FindTopic(md.get(), s.name), s, o));
  }
  // `md` lists every topic now, checked.
  const int32_t ingest_partitions = FindTopic(md.get(), specs[0].name)->partition_cnt;
  // Right after creation a broker may not know the topic yet (metadata propagates
  // asynchronously); DescribeConfigs then answers UNKNOWN_TOPIC_OR_PART for a while.
  const SteadyClock::time_point describe_deadline = SteadyNow() + o.admin_timeout;
  while (true) {
    std::vector<FiniteRetention> finite;
    Status st = CheckTopicConfigs(admin.get(), specs, o, &finite);
    if (st.ok()) {
      RETURN_IF_ERROR(CheckRetention(finite, o));
      return ingest_partitions;
    }
    if (st.code() != StatusCode::kNotFound || SteadyNow() >= describe_deadline) return st;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

Result<std::shared_ptr<KafkaClients>> OpenKafkaClients(const KafkaOptions& options) {
  RETURN_IF_ERROR(ValidateOptions(options));
  auto clients = std::make_shared<KafkaClients>(options);
  RETURN_IF_ERROR(clients->Start());
  return clients;
}

Result<std::unique_ptr<CommitLog>> OpenKafkaLog(std::shared_ptr<KafkaClients> clients,
                                                const std::string& topic,
                                                int32_t known_partition_count) {
  if (clients == nullptr) return Status::InvalidArgument("OpenKafkaLog: no Kafka clients");
  int32_t partitions = known_partition_count;
  if (partitions <= 0) {
    ASSIGN_OR_RETURN(MetadataPtr md, FetchMetadata(clients->admin(), clients->options()));
    const rd_kafka_metadata_topic_t* t = FindTopic(md.get(), topic);
    if (t == nullptr || t->err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) {
      return Status::NotFound("kafka topic " + topic + " does not exist");
    }
    if (t->err != RD_KAFKA_RESP_ERR_NO_ERROR) return KafkaStatus(t->err, "topic " + topic);
    partitions = t->partition_cnt;
  }
  RETURN_IF_ERROR(clients->Claim(topic));
  auto log = std::make_unique<KafkaLog>(std::move(clients), topic, partitions);
  RETURN_IF_ERROR(log->Start());
  return std::unique_ptr<CommitLog>(std::move(log));
}

Result<std::unique_ptr<CommitLog>> OpenKafkaLog(const KafkaOptions& options,
                                                const std::string& topic,
                                                int32_t known_partition_count) {
  ASSIGN_OR_RETURN(std::shared_ptr<KafkaClients> clients, OpenKafkaClients(options));
  return OpenKafkaLog(std::move(clients), topic, known_partition_count);
}

uint64_t KafkaLogReadPolls() { return g_read_polls.load(std::memory_order_relaxed); }
uint64_t KafkaLogConsumerHandles() { return g_consumer_handles.load(std::memory_order_relaxed); }

Settings KafkaProducerSettings(const KafkaOptions& options) {
  const int timeout_ms = std::max(ToMs(options.produce_timeout), 10);
  const int linger_ms = std::min(ToMs(options.produce_linger), timeout_ms - 1);
  return {
      {"client.id", "sediment-producer"},
      {"acks", "all"},
      {"enable.idempotence", "true"},
      {"compression.type", "none"},
      {"linger.ms", std::to_string(linger_ms)},
      {"batch.num.messages", "10000"},
      {"batch.size", std::to_string(kMaxBatchBytes)},
      {"message.max.bytes", std::to_string(kMaxBatchBytes)},
      {"message.timeout.ms", std::to_string(timeout_ms)},
      {"request.timeout.ms", std::to_string(std::clamp(timeout_ms, 1000, 30000))},
  };
}

Result<std::map<std::string, std::string>> ParseKafkaProperties(std::string_view text) {
  std::map<std::string, std::string> out;
  size_t line_no = 0;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string line = Trim(text.substr(0, nl));
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++line_no;
    if (line.empty() || line[0] == '#' || line[0] == '!') continue;
    size_t eq = line.find('=');
    if (eq == std::string::npos || eq == 0) {
      return Status::InvalidArgument("kafka properties line " + std::to_string(line_no) +
                                     ": expected key=value");
    }
    out[Trim(std::string_view(line).substr(0, eq))] = Trim(std::string_view(line).substr(eq + 1));
  }
  return out;
}

std::map<std::string, std::string> KafkaPropertiesFromEnv(char** environ_entries,
                                                          const std::vector<std::string>& exclude) {
  static constexpr std::string_view kPrefix = "SEDIMENT_KAFKA_";
  std::map<std::string, std::string> out;
  for (char** e = environ_entries; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry(*e);
    size_t eq = entry.find('=');
    if (eq == std::string_view::npos || entry.substr(0, kPrefix.size()) != kPrefix) continue;
    std::string var(entry.substr(0, eq));
    if (var.size() == kPrefix.size()) continue;
    if (std::find(exclude.begin(), exclude.end(), var) != exclude.end()) continue;
    std::string key = var.substr(kPrefix.size());
    for (char& c : key) {
      c = c == '_' ? '.' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    out[key] = std::string(entry.substr(eq + 1));
  }
  return out;
}

}  // namespace sediment
