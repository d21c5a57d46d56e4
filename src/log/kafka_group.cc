// PartitionGroup over a librdkafka high-level consumer used for group membership only.
//
// Never fetching: every partition the group assigns is handed to incremental_assign (assign for the
// EAGER protocol) with start offset RD_KAFKA_OFFSET_END and paused with rd_kafka_pause_partitions
// in the same rebalance callback, before the poll thread polls again. The explicit start offset
// means no committed offset is ever looked up (no OffsetFetch); the assign call queues the fetcher
// start on the partition's op queue and the pause is queued behind it on the same queue, so the
// partition is paused before its fetcher leaves the start-offset lookup, and a paused partition is
// never fetched. The application pause flag survives librdkafka's own pause/resume around
// rebalances (those use a separate library flag) and we never resume. Should a record arrive anyway
// it would be one produced after the assignment (offset END); the poll thread (and the consume
// callback that serves the close queue) discards it and counts it in DiscardedRecords().
//
// Never committing: enable.auto.commit=false, enable.auto.offset.store=false, and no commit call.
#include "log/kafka_group.h"

#include <librdkafka/rdkafka.h>
#include <simdjson.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <set>
#include <string_view>
#include <thread>
#include <utility>

#include "common/clock.h"
#include "common/mutex.h"
#include "log/kafka_internal.h"

namespace sediment {

using kafka_internal::ConfPtr;
using kafka_internal::ErrText;
using kafka_internal::IsBrokerDownError;
using kafka_internal::KafkaStatus;
using kafka_internal::NewConf;
using kafka_internal::NewHandle;
using kafka_internal::Settings;
using kafka_internal::ToMs;

namespace {

using SteadyClock = std::chrono::steady_clock;

constexpr int kPollMs = 100;
constexpr int kStatsIntervalMs = 1000;
// Consecutive "up and steady" statistics reports that clear a recorded error: the first may have
// been taken just before the error's effect showed; the second is one interval later.
constexpr int kSteadyReportsToClear = 2;
// Leave waits this much longer than session_timeout for librdkafka's close to finish.
constexpr std::chrono::milliseconds kCloseSlack{5000};

struct ListDeleter {
  void operator()(rd_kafka_topic_partition_list_t* l) const {
    rd_kafka_topic_partition_list_destroy(l);
  }
};
using ListPtr = std::unique_ptr<rd_kafka_topic_partition_list_t, ListDeleter>;

std::string FormatIds(const std::vector<PartitionId>& ids) {
  std::string out;
  for (PartitionId p : ids) {
    if (!out.empty()) out += ",";
    out += std::to_string(p.value);
  }
  return out;
}

// Takes and destroys `e`; "" when e is null.
std::string TakeError(rd_kafka_error_t* e) {
  if (e == nullptr) return "";
  std::string s = std::string(rd_kafka_error_string(e)) + " (" + rd_kafka_error_name(e) + ")";
  rd_kafka_error_destroy(e);
  return s;
}

}  // namespace

class PartitionGroup::Impl {
 public:
  Impl(const KafkaOptions& kafka, std::string topic, PartitionGroupOptions options,
       PartitionGroupListener* listener)
      : kafka_(kafka),
        topic_(std::move(topic)),
        options_(std::move(options)),
        listener_(listener) {}

  ~Impl() { Leave(); }

  Status Start() {
    const std::string client_id =
        "sediment-digest" + (options_.member_label.empty() ? "" : "-" + options_.member_label);
    Settings fixed = {
        {"client.id", client_id},
        {"group.id", options_.group_id},
        {"session.timeout.ms", std::to_string(ToMs(options_.session_timeout))},
        {"heartbeat.interval.ms", std::to_string(ToMs(options_.heartbeat_interval))},
        {"max.poll.interval.ms", std::to_string(ToMs(options_.max_poll_interval))},
        {"enable.auto.commit", "false"},
        {"enable.auto.offset.store", "false"},
        {"enable.partition.eof", "false"},
        {"allow.auto.create.topics", "false"},
        // Only used if a fetch ever started without an explicit offset; they never do.
        {"auto.offset.reset", "latest"},
        {"statistics.interval.ms", std::to_string(kStatsIntervalMs)},
    };
    // An eager strategy set in the properties (range, roundrobin) is honoured: the callback below
    // handles both protocols. Cooperative-sticky moves only the partitions that must move.
    if (kafka_.properties.count("partition.assignment.strategy") == 0) {
      fixed.emplace_back("partition.assignment.strategy", "cooperative-sticky");
    }
    ASSIGN_OR_RETURN(ConfPtr conf, NewConf(kafka_, fixed));
    rd_kafka_conf_set_rebalance_cb(conf.get(), &RebalanceCallback);
    rd_kafka_conf_set_error_cb(conf.get(), &ErrorCallback);
    rd_kafka_conf_set_stats_cb(conf.get(), &StatsCallback);
    rd_kafka_conf_set_consume_cb(conf.get(), &ConsumeCallback);
    rd_kafka_conf_set_opaque(conf.get(), this);
    ASSIGN_OR_RETURN(rk_, NewHandle(RD_KAFKA_CONSUMER, std::move(conf)));
    // Error and statistics callbacks are served by rd_kafka_consumer_poll on the poll thread.
    rd_kafka_poll_set_consumer(rk_);

    ListPtr topics(rd_kafka_topic_partition_list_new(1));
    rd_kafka_topic_partition_list_add(topics.get(), topic_.c_str(), RD_KAFKA_PARTITION_UA);
    rd_kafka_resp_err_t err = rd_kafka_subscribe(rk_, topics.get());
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      Status st = KafkaStatus(err, "kafka group " + options_.group_id + ": subscribe to " + topic_);
      rd_kafka_destroy_flags(rk_, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
      rk_ = nullptr;
      return st;
    }
    poller_ = std::thread([this] {
      poll_thread_id_.store(std::this_thread::get_id());
      PollLoop();
    });
    return Status::OK();
  }

  void Leave() {
    if (std::this_thread::get_id() == poll_thread_id_.load()) {
      leave_requested_.store(true);  // from a listener: the poll thread closes after it returns
      return;
    }
    MutexLock lk(&leave_mu_);
    if (left_) return;
    leave_requested_.store(true);
    if (poller_.joinable()) poller_.join();
    if (rk_ != nullptr) {
      // Already closed (or given up on) by the poll thread; do not close again.
      rd_kafka_destroy_flags(rk_, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
      rk_ = nullptr;
    }
    left_ = true;
  }

  std::vector<PartitionId> Assignment() const {
    MutexLock lk(&mu_);
    std::vector<PartitionId> out;
    for (int32_t p : owned_) out.push_back(PartitionId(p));
    return out;
  }

  std::string Health() const {
    MutexLock lk(&mu_);
    if (!has_error_) return "ok";
    return "kafka group " + options_.group_id + " on " + topic_ + ": " + last_error_;
  }

  uint64_t DiscardedRecords() const { return discarded_.load(); }

  void StallPolling(bool stalled) { stalled_.store(stalled); }

 private:
  static void RebalanceCallback(rd_kafka_t* rk, rd_kafka_resp_err_t err,
                                rd_kafka_topic_partition_list_t* partitions, void* opaque) {
    static_cast<Impl*>(opaque)->OnRebalance(err, partitions);
  }

  static void ErrorCallback(rd_kafka_t* rk, int err_int, const char* reason, void* opaque) {
    auto err = static_cast<rd_kafka_resp_err_t>(err_int);
    auto* self = static_cast<Impl*>(opaque);
    if (err == RD_KAFKA_RESP_ERR__FATAL) {
      char buf[512];
      rd_kafka_resp_err_t orig = rd_kafka_fatal_error(rk, buf, sizeof(buf));
      self->NoteError(std::string("fatal consumer error (leave and join again): ") + buf + " (" +
                      rd_kafka_err2name(orig) + ")");
    } else if (IsBrokerDownError(err)) {
      self->NoteError(std::string("brokers unreachable: ") + reason);
    } else {
      self->NoteError(std::string("kafka error: ") + reason);
    }
  }

  static int StatsCallback(rd_kafka_t* rk, char* json, size_t len, void* opaque) {
    static_cast<Impl*>(opaque)->OnStats(json, len);
    return 0;  // librdkafka frees json
  }

  // Serves fetched records only on the close queue (rd_kafka_consumer_poll returns them instead).
  static void ConsumeCallback(rd_kafka_message_t* m, void* opaque) {
    auto* self = static_cast<Impl*>(opaque);
    if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      self->discarded_.fetch_add(1);
    } else if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      self->NoteError(std::string("consumer error: ") + rd_kafka_message_errstr(m));
    }
  }

  void NoteError(std::string what) {
    spdlog::warn("kafka group {} on {}: {}", options_.group_id, topic_, what);
    MutexLock lk(&mu_);
    last_error_ = std::move(what);
    has_error_ = true;
    steady_reports_ = 0;
  }

  // Poll thread only (stats callback).
  void OnStats(const char* json, size_t len) {
    std::string_view state, join_state;
    simdjson::dom::element doc;
    if (stats_parser_.parse(json, len).get(doc) != simdjson::SUCCESS) return;
    if (doc["cgrp"]["state"].get(state) != simdjson::SUCCESS ||
        doc["cgrp"]["join_state"].get(join_state) != simdjson::SUCCESS) {
      return;
    }
    const bool steady = state == "up" && join_state == "steady";
    MutexLock lk(&mu_);
    steady_reports_ = steady ? steady_reports_ + 1 : 0;
    if (has_error_ && steady_reports_ >= kSteadyReportsToClear) has_error_ = false;
  }

  // Our topic's partitions in `list`.
  std::vector<PartitionId> Ids(const rd_kafka_topic_partition_list_t* list) const {
    std::vector<PartitionId> out;
    for (int i = 0; list != nullptr && i < list->cnt; ++i) {
      if (topic_ == list->elems[i].topic) out.push_back(PartitionId(list->elems[i].partition));
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  // Poll thread only (rebalance callback). The listener is called without mu_ held.
  void OnRebalance(rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t* partitions) {
    const char* protocol = rd_kafka_rebalance_protocol(rk_);
    const bool cooperative = protocol != nullptr && std::strcmp(protocol, "COOPERATIVE") == 0;
    const bool poll_exceeded = std::exchange(poll_exceeded_, false);

    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
      ListPtr assign(rd_kafka_topic_partition_list_copy(partitions));
      for (int i = 0; i < assign->cnt; ++i) assign->elems[i].offset = RD_KAFKA_OFFSET_END;
      std::string failure;
      if (cooperative) {
        failure = TakeError(rd_kafka_incremental_assign(rk_, assign.get()));
      } else {
        rd_kafka_resp_err_t e = rd_kafka_assign(rk_, assign.get());
        if (e != RD_KAFKA_RESP_ERR_NO_ERROR) failure = ErrText(e);
      }
      if (!failure.empty()) {
        NoteError("cannot take assigned partitions " + FormatIds(Ids(partitions)) + ": " + failure);
        return;
      }
      if (assign->cnt > 0) {
        rd_kafka_resp_err_t e = rd_kafka_pause_partitions(rk_, assign.get());
        for (int i = 0; e == RD_KAFKA_RESP_ERR_NO_ERROR && i < assign->cnt; ++i) {
          e = assign->elems[i].err;
        }
        // Ownership is what matters; a fetch would only bring records that are discarded.
        if (e != RD_KAFKA_RESP_ERR_NO_ERROR) NoteError("cannot pause partitions: " + ErrText(e));
      }
      std::vector<PartitionId> added;
      {
        MutexLock lk(&mu_);
        for (PartitionId p : Ids(partitions)) {
          if (owned_.insert(p.value).second) added.push_back(p);
        }
      }
      spdlog::info("kafka group {} on {}: assigned {} ({})", options_.group_id, topic_,
                   FormatIds(added), protocol != nullptr ? protocol : "?");
      if (!added.empty()) listener_->OnAssigned(added);
      return;
    }

    std::vector<PartitionId> gone;
    bool lost = true;
    if (err == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS) {
      // Read before unassigning: the unassign resets the flag.
      lost = rd_kafka_assignment_lost(rk_) != 0 || poll_exceeded;
      MutexLock lk(&mu_);
      for (PartitionId p : Ids(partitions)) {
        if (owned_.erase(p.value) > 0) gone.push_back(p);
      }
      if (!cooperative) {  // EAGER revokes the whole assignment
        for (int32_t p : owned_) gone.push_back(PartitionId(p));
        owned_.clear();
        std::sort(gone.begin(), gone.end());
      }
    } else {
      NoteError("rebalance failed: " + ErrText(err));
      MutexLock lk(&mu_);
      for (int32_t p : owned_) gone.push_back(PartitionId(p));
      owned_.clear();
    }
    if (lost && !gone.empty()) {
      NoteError("assignment of partitions " + FormatIds(gone) +
                " lost (session expired or poll interval exceeded)");
    }
    spdlog::info("kafka group {} on {}: revoked {}{}", options_.group_id, topic_, FormatIds(gone),
                 lost ? " (lost)" : "");
    if (!gone.empty()) listener_->OnRevoked(gone, lost);

    std::string failure;
    if (cooperative) {
      if (err == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS) {
        failure = TakeError(rd_kafka_incremental_unassign(rk_, partitions));
      } else {
        rd_kafka_topic_partition_list_t* current = nullptr;
        rd_kafka_resp_err_t e = rd_kafka_assignment(rk_, &current);
        if (e == RD_KAFKA_RESP_ERR_NO_ERROR) {
          ListPtr owned(current);
          failure = TakeError(rd_kafka_incremental_unassign(rk_, owned.get()));
        } else {
          failure = ErrText(e);
        }
      }
    } else {
      rd_kafka_resp_err_t e = rd_kafka_assign(rk_, nullptr);
      if (e != RD_KAFKA_RESP_ERR_NO_ERROR) failure = ErrText(e);
    }
    if (!failure.empty()) NoteError("cannot release revoked partitions: " + failure);
  }

  void PollLoop() {
    while (!leave_requested_.load()) {
      if (stalled_.load()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        continue;
      }
      rd_kafka_message_t* m = rd_kafka_consumer_poll(rk_, kPollMs);
      if (m == nullptr) continue;
      if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
        discarded_.fetch_add(1);
      } else if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
        // librdkafka left the group; the revoke that follows is a loss even if a rebalance in
        // flight kept it from flagging the assignment as lost.
        if (m->err == RD_KAFKA_RESP_ERR__MAX_POLL_EXCEEDED) poll_exceeded_ = true;
        NoteError(std::string("consumer error: ") + rd_kafka_message_errstr(m) + " (" +
                  rd_kafka_err2name(m->err) + ")");
      }
      rd_kafka_message_destroy(m);
    }
    Close();
  }

  // Poll thread only. Revokes through the rebalance callback, leaves the group, bounded.
  void Close() {
    rd_kafka_queue_t* q = rd_kafka_queue_new(rk_);
    std::string failure = TakeError(rd_kafka_consumer_close_queue(rk_, q));
    if (failure.empty()) {
      const SteadyClock::time_point deadline = SteadyNow() + options_.session_timeout + kCloseSlack;
      while (!rd_kafka_consumer_closed(rk_) && SteadyNow() < deadline) {
        rd_kafka_queue_poll_callback(q, kPollMs);
      }
      if (!rd_kafka_consumer_closed(rk_)) failure = "no answer from the group coordinator";
    }
    rd_kafka_queue_destroy(q);
    if (!failure.empty()) NoteError("leaving the group: " + failure);
    std::vector<PartitionId> gone;
    {
      MutexLock lk(&mu_);
      for (int32_t p : owned_) gone.push_back(PartitionId(p));
      owned_.clear();
    }
    if (!gone.empty()) {
      spdlog::warn("kafka group {} on {}: left without revoking {}", options_.group_id, topic_,
                   FormatIds(gone));
      listener_->OnRevoked(gone, /*lost=*/true);
    }
  }

  const KafkaOptions kafka_;
  const std::string topic_;
  const PartitionGroupOptions options_;
  PartitionGroupListener* const listener_;

  rd_kafka_t* rk_ = nullptr;  // created by Start, destroyed by Leave after the poll thread ended
  std::thread poller_;
  std::atomic<std::thread::id> poll_thread_id_{};  // set by the poll thread when it starts
  std::atomic<bool> leave_requested_{false};
  std::atomic<bool> stalled_{false};
  std::atomic<uint64_t> discarded_{0};
  bool poll_exceeded_ = false;          // poll thread only
  simdjson::dom::parser stats_parser_;  // poll thread only

  Mutex leave_mu_;  // serializes Leave
  bool left_ GUARDED_BY(leave_mu_) = false;

  mutable Mutex mu_;
  std::set<int32_t> owned_ GUARDED_BY(mu_);  // written on the poll thread only
  std::string last_error_ GUARDED_BY(mu_);
  bool has_error_ GUARDED_BY(mu_) = false;
  int steady_reports_ GUARDED_BY(mu_) = 0;
};

Result<std::unique_ptr<PartitionGroup>> PartitionGroup::Join(const KafkaOptions& kafka,
                                                             const std::string& topic,
                                                             PartitionGroupOptions options,
                                                             PartitionGroupListener* listener) {
  if (kafka.brokers.empty()) return Status::InvalidArgument("--kafka-brokers is empty");
  if (topic.empty()) return Status::InvalidArgument("partition group: empty topic");
  if (options.group_id.empty()) return Status::InvalidArgument("partition group: empty group id");
  if (listener == nullptr) return Status::InvalidArgument("partition group: no listener");
  if (options.heartbeat_interval.count() < 1 ||
      options.heartbeat_interval >= options.session_timeout) {
    return Status::InvalidArgument(
        "partition group: heartbeat interval must be positive and below the session timeout");
  }
  if (options.max_poll_interval < options.session_timeout) {
    return Status::InvalidArgument(
        "partition group: max poll interval must be at least the session timeout");
  }
  auto impl = std::make_unique<Impl>(kafka, topic, std::move(options), listener);
  RETURN_IF_ERROR(impl->Start());
  return std::unique_ptr<PartitionGroup>(new PartitionGroup(std::move(impl)));
}

PartitionGroup::PartitionGroup(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PartitionGroup::~PartitionGroup() { impl_->Leave(); }
void PartitionGroup::Leave() { impl_->Leave(); }
std::vector<PartitionId> PartitionGroup::Assignment() const { return impl_->Assignment(); }
std::string PartitionGroup::Health() const { return impl_->Health(); }
uint64_t PartitionGroup::DiscardedRecords() const { return impl_->DiscardedRecords(); }
void PartitionGroup::StallPollingForTest(bool stalled) { impl_->StallPolling(stalled); }

}  // namespace sediment
