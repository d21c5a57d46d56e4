// PartitionGroup: ownership of ingest partitions for the digest through a Kafka consumer group
// (DESIGN section 6, "Ownership"). Kafka does the failure detection and tells each member which
// partitions of one topic it owns. The group's consumer is used only for membership: it never
// hands out records (the digest reads with its own per-partition readers positioned from Global)
// and never commits offsets.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/types.h"
#include "log/kafka_log.h"

namespace sediment {

struct PartitionGroupOptions {
  // Kafka group id, e.g. "<prefix>digest". Every member of one group must subscribe to the same
  // topic.
  std::string group_id;
  // A member whose heartbeats stop for this long (process paused, network partition, crash) is
  // removed by the group coordinator and its partitions go to the others. Brokers accept
  // [group.min.session.timeout.ms, group.max.session.timeout.ms], by default [6 s, 30 min].
  std::chrono::milliseconds session_timeout{6000};
  // Heartbeat period; must be below session_timeout (a third of it or less is usual).
  std::chrono::milliseconds heartbeat_interval{1500};
  // A member whose poll thread has not run for this long (a listener that blocks) leaves the
  // group: its assignment is reported lost when the thread runs again. Must be >= session_timeout.
  std::chrono::milliseconds max_poll_interval{30000};
  // Appended to the client.id ("sediment-digest-<label>") so broker logs name the node.
  std::string member_label;
};

// Receives assignment changes. Both methods are called on the group's poll thread, one at a time,
// and must not block long (hand work to another thread): a blocked poll thread stops rebalances of
// the whole group for up to max_poll_interval and then loses the member its assignment.
class PartitionGroupListener {
 public:
  virtual ~PartitionGroupListener() = default;
  // `partitions` were added to this member's assignment (only the new ones; never empty).
  virtual void OnAssigned(const std::vector<PartitionId>& partitions) = 0;
  // `partitions` are no longer this member's. lost=false: revoked cleanly; no other member is
  // given them before this call returned (the group waits for this member to release them; it
  // only stops waiting after max_poll_interval, and then this member sees lost=true). lost=true:
  // the membership
  // was lost (session expired, e.g. after the process was paused, or max_poll_interval exceeded);
  // other members may have owned them for a while already.
  virtual void OnRevoked(const std::vector<PartitionId>& partitions, bool lost) = 0;
};

// One membership in a Kafka consumer group (librdkafka, classic group protocol, cooperative-sticky
// assignment unless `partition.assignment.strategy` is set in KafkaOptions::properties).
// Thread-safe: Assignment, Health and Leave may be called from any thread (Leave not from the
// listener; see there).
class PartitionGroup {
 public:
  // Joins `options.group_id` subscribed to `topic` (full name, e.g. KafkaIngestTopic(kafka)) with
  // the brokers and client properties (SASL/TLS) of `kafka`, and starts the poll thread that
  // serves the listener. Returns once the poll thread runs; the first assignment arrives later
  // through the listener (a missing topic or unreachable brokers show in Health, the group
  // retries). InvalidArgument: empty brokers/topic/group_id, no listener, heartbeat_interval >=
  // session_timeout, max_poll_interval < session_timeout, or a property librdkafka refuses.
  // `listener` is not owned and must outlive the PartitionGroup.
  static Result<std::unique_ptr<PartitionGroup>> Join(const KafkaOptions& kafka,
                                                      const std::string& topic,
                                                      PartitionGroupOptions options,
                                                      PartitionGroupListener* listener);

  ~PartitionGroup();  // Leave()

  PartitionGroup(const PartitionGroup&) = delete;
  PartitionGroup& operator=(const PartitionGroup&) = delete;

  // Leaves the group cleanly: revokes the assignment (listener OnRevoked, lost=false), sends
  // LeaveGroup so the others are rebalanced at once instead of after session_timeout, stops the
  // poll thread and releases the client. Bounded by about session_timeout + 5 s when the brokers
  // do not answer; whatever is still assigned then is reported revoked with lost=true. When it
  // returns the listener is not called again. Idempotent. Called from inside a listener method it
  // only requests the leave (which runs once the method returned) and returns at once.
  void Leave();

  // The partitions currently assigned to this member (sorted): those reported by OnAssigned and
  // not yet by OnRevoked. Empty after Leave.
  std::vector<PartitionId> Assignment() const;

  // "ok", or the last error of the group ("kafka group <id> on <topic>: ..."): unreachable
  // brokers or coordinator, authorization, missing topic, lost assignment, poll interval exceeded.
  // Cleared once the group has been up and steady for one statistics interval (1 s) after it.
  std::string Health() const;

  // Records the consumer handed out despite never fetching (see kafka_group.cc); always 0 unless
  // librdkafka misbehaves. They are discarded. For tests and diagnostics.
  uint64_t DiscardedRecords() const;

  // Test hook: while stalled the poll thread does not poll (no listener calls, no rebalance
  // participation), as if a listener blocked. Heartbeats continue (librdkafka sends them from its
  // own thread), so the member is dropped after max_poll_interval, not session_timeout.
  void StallPollingForTest(bool stalled);

  class Impl;

 private:
  explicit PartitionGroup(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace sediment
