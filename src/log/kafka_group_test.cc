// Tests of PartitionGroup. Broker tests need SEDIMENT_TEST_KAFKA=host:port (a real broker); without
// it they skip. Every test uses its own topic and group and deletes its topic afterwards.
//
// KafkaPausedProcessLosesAssignment runs one member in a child process (this binary re-executed
// with --gtest_filter=GroupChildProcess.Member and SEDIMENT_GROUP_CHILD set) so that it can be
// stopped with SIGSTOP, heartbeats and all, like a paused node.
#include "log/kafka_group.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <thread>

extern char** environ;

namespace sediment {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr int kPartitions = 6;

std::string Bootstrap() {
  const char* v = std::getenv("SEDIMENT_TEST_KAFKA");
  return v != nullptr ? v : "";
}

std::string UniqueName(const std::string& what) {
  static std::atomic<int> counter{0};
  std::random_device rd;
  return "kgtest-" + std::to_string(getpid()) + "-" + std::to_string(rd() % 100000) + "-" +
         std::to_string(counter++) + "-" + what;
}

std::set<int32_t> AllPartitions() {
  std::set<int32_t> all;
  for (int32_t p = 0; p < kPartitions; ++p) all.insert(p);
  return all;
}

std::string Format(const std::set<int32_t>& s) {
  std::string out = "{";
  for (int32_t p : s) out += (out.size() > 1 ? "," : "") + std::to_string(p);
  return out + "}";
}

// Raw librdkafka access for setting up topics and inspecting the group from outside.
class RawAdmin {
 public:
  RawAdmin() {
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    char errstr[512];
    rd_kafka_conf_set(conf, "bootstrap.servers", Bootstrap().c_str(), errstr, sizeof(errstr));
    rk_ = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
  }
  ~RawAdmin() {
    for (const auto& t : created_) DeleteTopic(t);
    rd_kafka_destroy(rk_);
  }

  // Creates `name` and waits until every partition has a leader.
  bool CreateTopic(const std::string& name, int partitions) {
    char errstr[512];
    rd_kafka_NewTopic_t* nt = rd_kafka_NewTopic_new(name.c_str(), partitions, 1, errstr, 512);
    rd_kafka_queue_t* q = rd_kafka_queue_new(rk_);
    rd_kafka_CreateTopics(rk_, &nt, 1, nullptr, q);
    rd_kafka_event_t* ev = rd_kafka_queue_poll(q, 30000);
    rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR__TIMED_OUT;
    if (ev != nullptr) {
      err = rd_kafka_event_error(ev);
      size_t cnt = 0;
      const rd_kafka_topic_result_t** tr =
          rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &cnt);
      if (err == RD_KAFKA_RESP_ERR_NO_ERROR && cnt == 1) err = rd_kafka_topic_result_error(tr[0]);
      rd_kafka_event_destroy(ev);
    }
    rd_kafka_queue_destroy(q);
    rd_kafka_NewTopic_destroy(nt);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      ADD_FAILURE() << "create topic " << name << ": " << rd_kafka_err2str(err);
      return false;
    }
    created_.push_back(name);
    for (int i = 0; i < 200; ++i) {
      const rd_kafka_metadata_t* md = nullptr;
      bool ok = false;
      if (rd_kafka_metadata(rk_, 1, nullptr, &md, 5000) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        for (int t = 0; t < md->topic_cnt; ++t) {
          if (name != md->topics[t].topic || md->topics[t].partition_cnt != partitions) continue;
          ok = true;
          for (int p = 0; p < partitions; ++p) ok = ok && md->topics[t].partitions[p].leader >= 0;
        }
        rd_kafka_metadata_destroy(md);
      }
      if (ok) return true;
      std::this_thread::sleep_for(100ms);
    }
    ADD_FAILURE() << "topic " << name << " got no leaders";
    return false;
  }

  // Members of `group` as the coordinator sees them; -1 on error.
  int GroupMembers(const std::string& group) {
    const rd_kafka_group_list* list = nullptr;
    if (rd_kafka_list_groups(rk_, group.c_str(), &list, 10000) != RD_KAFKA_RESP_ERR_NO_ERROR) {
      return -1;
    }
    int n = list->group_cnt == 1 && list->groups[0].err == RD_KAFKA_RESP_ERR_NO_ERROR
                ? list->groups[0].member_cnt
                : -1;
    rd_kafka_group_list_destroy(list);
    return n;
  }

  // The committed offset of every partition of `topic` in `group` (RD_KAFKA_OFFSET_INVALID: none).
  std::vector<int64_t> Committed(const std::string& group, const std::string& topic) {
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    char errstr[512];
    rd_kafka_conf_set(conf, "bootstrap.servers", Bootstrap().c_str(), errstr, sizeof(errstr));
    rd_kafka_conf_set(conf, "group.id", group.c_str(), errstr, sizeof(errstr));
    rd_kafka_t* c = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
    rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(kPartitions);
    for (int p = 0; p < kPartitions; ++p) rd_kafka_topic_partition_list_add(list, topic.c_str(), p);
    std::vector<int64_t> out;
    rd_kafka_resp_err_t err = rd_kafka_committed(c, list, 10000);
    EXPECT_EQ(err, RD_KAFKA_RESP_ERR_NO_ERROR) << rd_kafka_err2str(err);
    for (int i = 0; i < list->cnt; ++i) out.push_back(list->elems[i].offset);
    rd_kafka_topic_partition_list_destroy(list);
    rd_kafka_destroy(c);
    return out;
  }

  // Produces `n` records to every partition of `topic` and waits for their acknowledgement.
  void Produce(const std::string& topic, int n) {
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    char errstr[512];
    rd_kafka_conf_set(conf, "bootstrap.servers", Bootstrap().c_str(), errstr, sizeof(errstr));
    rd_kafka_t* p = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
    for (int32_t part = 0; part < kPartitions; ++part) {
      for (int i = 0; i < n; ++i) {
        std::string v = "record-" + std::to_string(i);
        rd_kafka_resp_err_t err =
            rd_kafka_producev(p, RD_KAFKA_V_TOPIC(topic.c_str()), RD_KAFKA_V_PARTITION(part),
                              RD_KAFKA_V_VALUE(v.data(), v.size()),
                              RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
        EXPECT_EQ(err, RD_KAFKA_RESP_ERR_NO_ERROR);
      }
    }
    EXPECT_EQ(rd_kafka_flush(p, 30000), RD_KAFKA_RESP_ERR_NO_ERROR);
    rd_kafka_destroy(p);
  }

 private:
  void DeleteTopic(const std::string& name) {
    rd_kafka_DeleteTopic_t* dt = rd_kafka_DeleteTopic_new(name.c_str());
    rd_kafka_queue_t* q = rd_kafka_queue_new(rk_);
    rd_kafka_DeleteTopics(rk_, &dt, 1, nullptr, q);
    rd_kafka_event_t* ev = rd_kafka_queue_poll(q, 30000);
    if (ev != nullptr) rd_kafka_event_destroy(ev);
    rd_kafka_queue_destroy(q);
    rd_kafka_DeleteTopic_destroy(dt);
  }

  rd_kafka_t* rk_ = nullptr;
  std::vector<std::string> created_;
};

// Who owns what, according to the listeners of all members of one test. Records every moment a
// partition was given to a member while another member still held it.
class Ownership {
 public:
  struct State {
    std::map<std::string, std::set<int32_t>> held;
    // Per member: every OnRevoked (partitions, lost).
    std::map<std::string, std::vector<std::pair<std::set<int32_t>, bool>>> revocations;
  };

  void Assigned(const std::string& member, const std::vector<PartitionId>& ps) {
    std::lock_guard lk(mu_);
    for (PartitionId p : ps) {
      for (const auto& [other, held] : st_.held) {
        if (other != member && held.count(p.value) > 0) {
          overlaps_.push_back("partition " + std::to_string(p.value) + " given to " + member +
                              " while " + other + " held it");
        }
      }
      st_.held[member].insert(p.value);
    }
    cv_.notify_all();
  }

  void Revoked(const std::string& member, const std::vector<PartitionId>& ps, bool lost) {
    std::lock_guard lk(mu_);
    std::set<int32_t> set;
    for (PartitionId p : ps) {
      st_.held[member].erase(p.value);
      set.insert(p.value);
    }
    st_.revocations[member].push_back({set, lost});
    cv_.notify_all();
  }

  std::set<int32_t> Held(const std::string& member) {
    std::lock_guard lk(mu_);
    return st_.held[member];
  }

  std::vector<std::pair<std::set<int32_t>, bool>> Revocations(const std::string& member) {
    std::lock_guard lk(mu_);
    return st_.revocations[member];
  }

  std::vector<std::string> Overlaps() {
    std::lock_guard lk(mu_);
    return overlaps_;
  }

  // Waits up to `timeout` until `pred(state)` holds (checked on every listener call); false on
  // timeout.
  bool WaitFor(const std::function<bool(State&)>& pred, std::chrono::milliseconds timeout) {
    std::unique_lock lk(mu_);
    return cv_.wait_for(lk, timeout, [&] { return pred(st_); });
  }

  bool WaitHeld(const std::string& member, const std::set<int32_t>& want,
                std::chrono::milliseconds timeout) {
    return WaitFor([&](State& st) { return st.held[member] == want; }, timeout);
  }

  // Waits until the members in `members` hold disjoint, non-empty sets that cover every partition
  // and nobody else holds any.
  bool WaitSplit(const std::vector<std::string>& members, std::chrono::milliseconds timeout) {
    return WaitFor(
        [&](State& st) {
          std::set<int32_t> all;
          size_t total = 0;
          for (const auto& [m, s] : st.held) {
            if (std::find(members.begin(), members.end(), m) == members.end() && !s.empty()) {
              return false;
            }
          }
          for (const auto& m : members) {
            if (st.held[m].empty()) return false;
            all.insert(st.held[m].begin(), st.held[m].end());
            total += st.held[m].size();
          }
          return all == AllPartitions() && total == all.size();
        },
        timeout);
  }

  std::string Dump() {
    std::lock_guard lk(mu_);
    std::string out;
    for (const auto& [m, s] : st_.held) out += m + "=" + Format(s) + " ";
    return out;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  State st_;
  std::vector<std::string> overlaps_;
};

// Polls `pred` every 50 ms for up to `timeout`.
bool Eventually(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!pred()) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(50ms);
  }
  return true;
}

class Member : public PartitionGroupListener {
 public:
  Member(std::string name, Ownership* ownership) : name_(std::move(name)), own_(ownership) {}

  void OnAssigned(const std::vector<PartitionId>& ps) override {
    EXPECT_FALSE(ps.empty());
    own_->Assigned(name_, ps);
  }
  void OnRevoked(const std::vector<PartitionId>& ps, bool lost) override {
    EXPECT_FALSE(ps.empty());
    PartitionGroup* g = group_ptr_.load();
    if (lost && g != nullptr) health_at_loss_ = g->Health();
    own_->Revoked(name_, ps, lost);
  }

  Status Join(const std::string& topic, const std::string& group, PartitionGroupOptions o,
              std::map<std::string, std::string> properties = {}) {
    KafkaOptions kafka;
    kafka.brokers = Bootstrap();
    kafka.properties = std::move(properties);
    o.group_id = group;
    o.member_label = name_;
    auto g = PartitionGroup::Join(kafka, topic, o, this);
    if (!g.ok()) return g.status();
    group_ = std::move(g).value();
    group_ptr_.store(group_.get());
    return Status::OK();
  }

  std::set<int32_t> Assignment() const {
    std::set<int32_t> out;
    for (PartitionId p : group_->Assignment()) out.insert(p.value);
    return out;
  }

  PartitionGroup* group() { return group_.get(); }
  std::string health_at_loss() const { return health_at_loss_; }

 private:
  const std::string name_;
  Ownership* const own_;
  std::unique_ptr<PartitionGroup> group_;
  std::atomic<PartitionGroup*> group_ptr_{nullptr};  // for the listener methods (poll thread)
  std::string health_at_loss_;  // written on the poll thread; read after the loss was observed
};

// Options for quick rebalances: heartbeats every 500 ms, the broker's minimum session timeout.
PartitionGroupOptions FastOptions() {
  PartitionGroupOptions o;
  o.session_timeout = 6000ms;
  o.heartbeat_interval = 500ms;
  return o;
}

class KafkaGroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (Bootstrap().empty()) GTEST_SKIP() << "set SEDIMENT_TEST_KAFKA=host:port to run";
    admin_ = std::make_unique<RawAdmin>();
    topic_ = UniqueName("ingest");
    group_ = UniqueName("digest");
    ASSERT_TRUE(admin_->CreateTopic(topic_, kPartitions));
  }

  std::unique_ptr<RawAdmin> admin_;
  std::string topic_;
  std::string group_;
  Ownership own_;
};

TEST_F(KafkaGroupTest, KafkaSingleMemberGetsAllPartitionsNeverFetchesNorCommits) {
  Member a("a", &own_);
  ASSERT_TRUE(a.Join(topic_, group_, FastOptions()).ok());
  ASSERT_TRUE(own_.WaitHeld("a", AllPartitions(), 30s)) << own_.Dump();
  EXPECT_EQ(a.Assignment(), AllPartitions());

  // Records produced while the partitions are assigned are never fetched. (The pause gives a
  // fetcher that wrongly started from the end time to position itself before the records come.)
  std::this_thread::sleep_for(1s);
  admin_->Produce(topic_, 20);
  std::this_thread::sleep_for(2s);
  EXPECT_EQ(a.group()->DiscardedRecords(), 0u);
  EXPECT_TRUE(Eventually([&] { return a.group()->Health() == "ok"; }, 10s)) << a.group()->Health();
  EXPECT_EQ(admin_->GroupMembers(group_), 1);

  a.group()->Leave();
  EXPECT_TRUE(a.Assignment().empty());
  auto revs = own_.Revocations("a");
  ASSERT_EQ(revs.size(), 1u);
  EXPECT_EQ(revs[0].first, AllPartitions());
  EXPECT_FALSE(revs[0].second) << "a clean leave is not a loss";
  // LeaveGroup was sent: the coordinator does not wait for the session to expire.
  EXPECT_EQ(admin_->GroupMembers(group_), 0);
  a.group()->Leave();  // idempotent
  EXPECT_EQ(own_.Revocations("a").size(), 1u);
  EXPECT_EQ(a.group()->DiscardedRecords(), 0u);

  for (int64_t off : admin_->Committed(group_, topic_)) EXPECT_EQ(off, RD_KAFKA_OFFSET_INVALID);
  EXPECT_TRUE(own_.Overlaps().empty());
}

TEST_F(KafkaGroupTest, KafkaSecondMemberSplitsAndLeaveHandsOver) {
  Member a("a", &own_), b("b", &own_);
  ASSERT_TRUE(a.Join(topic_, group_, FastOptions()).ok());
  ASSERT_TRUE(own_.WaitHeld("a", AllPartitions(), 30s)) << own_.Dump();

  ASSERT_TRUE(b.Join(topic_, group_, FastOptions()).ok());
  ASSERT_TRUE(own_.WaitSplit({"a", "b"}, 30s)) << own_.Dump();
  EXPECT_EQ(own_.Held("a").size(), 3u) << own_.Dump();
  EXPECT_EQ(own_.Held("b").size(), 3u) << own_.Dump();
  EXPECT_EQ(a.Assignment(), own_.Held("a"));
  EXPECT_EQ(b.Assignment(), own_.Held("b"));
  for (const auto& [parts, lost] : own_.Revocations("a")) {
    EXPECT_FALSE(lost) << "rebalance revoked " << Format(parts) << " as lost";
  }

  // a leaves: b gets everything; b keeps what it had (sticky, cooperative: never revoked).
  a.group()->Leave();
  ASSERT_TRUE(own_.WaitHeld("b", AllPartitions(), 30s)) << own_.Dump();
  EXPECT_TRUE(own_.Revocations("b").empty());
  EXPECT_FALSE(own_.Revocations("a").back().second);
  EXPECT_TRUE(own_.Held("a").empty());
  EXPECT_EQ(b.Assignment(), AllPartitions());
  EXPECT_EQ(admin_->GroupMembers(group_), 1);

  b.group()->Leave();
  EXPECT_EQ(a.group()->DiscardedRecords() + b.group()->DiscardedRecords(), 0u);
  EXPECT_TRUE(own_.Overlaps().empty()) << own_.Overlaps().front();
}

TEST_F(KafkaGroupTest, KafkaStalledPollThreadLosesAssignment) {
  PartitionGroupOptions o = FastOptions();
  o.max_poll_interval = o.session_timeout;
  Member a("a", &own_), b("b", &own_);
  ASSERT_TRUE(a.Join(topic_, group_, o).ok());
  ASSERT_TRUE(own_.WaitHeld("a", AllPartitions(), 30s)) << own_.Dump();
  ASSERT_TRUE(b.Join(topic_, group_, o).ok());
  ASSERT_TRUE(own_.WaitSplit({"a", "b"}, 30s)) << own_.Dump();
  const std::set<int32_t> a_had = own_.Held("a");
  const size_t a_revocations = own_.Revocations("a").size();
  ASSERT_TRUE(own_.Overlaps().empty()) << own_.Overlaps().front();

  // a stops polling: after max_poll_interval it is out of the group and b gets everything while
  // a, not polling, has not been told (this is what claim epochs fence).
  a.group()->StallPollingForTest(true);
  ASSERT_TRUE(own_.WaitHeld("b", AllPartitions(), 40s)) << own_.Dump();
  EXPECT_EQ(own_.Held("a"), a_had);
  EXPECT_EQ(own_.Revocations("a").size(), a_revocations);

  // a resumes: it learns that its assignment was lost, then rejoins and gets a share again.
  a.group()->StallPollingForTest(false);
  ASSERT_TRUE(
      own_.WaitFor([&](auto& st) { return st.revocations["a"].size() > a_revocations; }, 30s));
  const auto rev = own_.Revocations("a")[a_revocations];
  EXPECT_EQ(rev.first, a_had);
  EXPECT_TRUE(rev.second) << "revocation after a stall must be reported as lost";
  EXPECT_NE(a.health_at_loss(), "ok");
  ASSERT_TRUE(own_.WaitSplit({"a", "b"}, 30s)) << own_.Dump();
  EXPECT_EQ(a.Assignment(), own_.Held("a"));
  EXPECT_EQ(b.Assignment(), own_.Held("b"));
  // Up and steady again: the error clears.
  EXPECT_TRUE(Eventually([&] { return a.group()->Health() == "ok"; }, 15s)) << a.group()->Health();
}

// An eager strategy from the properties: every rebalance revokes everything first.
TEST_F(KafkaGroupTest, KafkaEagerStrategySplitsAndHandsOver) {
  const std::map<std::string, std::string> eager = {{"partition.assignment.strategy", "range"}};
  Member a("a", &own_), b("b", &own_);
  ASSERT_TRUE(a.Join(topic_, group_, FastOptions(), eager).ok());
  ASSERT_TRUE(own_.WaitHeld("a", AllPartitions(), 30s)) << own_.Dump();
  ASSERT_TRUE(b.Join(topic_, group_, FastOptions(), eager).ok());
  ASSERT_TRUE(own_.WaitSplit({"a", "b"}, 30s)) << own_.Dump();
  EXPECT_EQ(own_.Revocations("a").size(), 1u);
  EXPECT_EQ(own_.Revocations("a")[0].first, AllPartitions());  // eager: all of them
  EXPECT_FALSE(own_.Revocations("a")[0].second);
  EXPECT_EQ(a.Assignment(), own_.Held("a"));
  EXPECT_EQ(b.Assignment(), own_.Held("b"));

  a.group()->Leave();
  ASSERT_TRUE(own_.WaitHeld("b", AllPartitions(), 30s)) << own_.Dump();
  for (const auto& [parts, lost] : own_.Revocations("a")) EXPECT_FALSE(lost) << Format(parts);
  for (const auto& [parts, lost] : own_.Revocations("b")) EXPECT_FALSE(lost) << Format(parts);
  b.group()->Leave();
  EXPECT_TRUE(own_.Overlaps().empty()) << own_.Overlaps().front();
}

// Leave called by the listener itself only requests the leave; the poll thread then leaves.
class LeavingListener : public PartitionGroupListener {
 public:
  void OnAssigned(const std::vector<PartitionId>& ps) override {
    assigned_.store(true);
    PartitionGroup* g;
    while ((g = group_.load()) == nullptr) std::this_thread::sleep_for(1ms);  // Join returning
    g->Leave();                                                               // must not deadlock
  }
  void OnRevoked(const std::vector<PartitionId>& ps, bool lost) override {
    revoked_.store(static_cast<int>(ps.size()));
    lost_.store(lost);
  }
  std::atomic<PartitionGroup*> group_{nullptr};
  std::atomic<bool> assigned_{false};
  std::atomic<int> revoked_{0};
  std::atomic<bool> lost_{true};
};

TEST_F(KafkaGroupTest, KafkaLeaveFromListener) {
  LeavingListener l;
  KafkaOptions kafka;
  kafka.brokers = Bootstrap();
  PartitionGroupOptions o = FastOptions();
  o.group_id = group_;
  auto g = PartitionGroup::Join(kafka, topic_, o, &l);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  l.group_.store(g->get());
  ASSERT_TRUE(Eventually([&] { return l.revoked_.load() == kPartitions; }, 30s));
  EXPECT_TRUE(l.assigned_.load());
  EXPECT_FALSE(l.lost_.load());
  EXPECT_TRUE((*g)->Assignment().empty());
  EXPECT_TRUE(Eventually([&] { return admin_->GroupMembers(group_) == 0; }, 10s));
  (*g)->Leave();
}

// ---------------------------------------------------------------------------------------------
// A member in another process, stopped with SIGSTOP.

// Child side: joins as member "child" and reports listener calls on fd 3 ("A 0,1,2" assigned,
// "R <lost> 0,1,2" revoked); leaves and exits when fd 4 reaches EOF.
class ChildReporter : public PartitionGroupListener {
 public:
  void OnAssigned(const std::vector<PartitionId>& ps) override { Write("A", ps); }
  void OnRevoked(const std::vector<PartitionId>& ps, bool lost) override {
    Write(lost ? "R 1" : "R 0", ps);
  }

 private:
  static void Write(const std::string& head, const std::vector<PartitionId>& ps) {
    std::string line = head + " ";
    for (size_t i = 0; i < ps.size(); ++i) line += (i ? "," : "") + std::to_string(ps[i].value);
    line += "\n";
    EXPECT_EQ(write(3, line.data(), line.size()), static_cast<ssize_t>(line.size()));
  }
};

TEST(GroupChildProcess, Member) {
  const char* topic = std::getenv("SEDIMENT_GROUP_CHILD_TOPIC");
  const char* group = std::getenv("SEDIMENT_GROUP_CHILD_GROUP");
  if (std::getenv("SEDIMENT_GROUP_CHILD") == nullptr || topic == nullptr || group == nullptr) {
    GTEST_SKIP() << "helper of KafkaPausedProcessLosesAssignment (runs in its child process)";
  }
  ChildReporter reporter;
  KafkaOptions kafka;
  kafka.brokers = Bootstrap();
  PartitionGroupOptions o = FastOptions();
  o.group_id = group;
  o.member_label = "child";
  auto g = PartitionGroup::Join(kafka, topic, o, &reporter);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  char c;
  while (read(4, &c, 1) > 0) {
  }
  (*g)->Leave();
}

// Parent side of a child member: starts it, turns its reports into Ownership calls.
class ChildMember {
 public:
  ChildMember(Ownership* own, const std::string& topic, const std::string& group) : own_(own) {
    int report[2], control[2];
    EXPECT_EQ(pipe2(report, O_CLOEXEC), 0);
    EXPECT_EQ(pipe2(control, O_CLOEXEC), 0);
    // Everything the child needs is prepared before fork: only async-signal-safe calls after it.
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
    env.push_back("SEDIMENT_GROUP_CHILD=1");
    env.push_back("SEDIMENT_GROUP_CHILD_TOPIC=" + topic);
    env.push_back("SEDIMENT_GROUP_CHILD_GROUP=" + group);
    std::vector<char*> envp;
    for (auto& s : env) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::string self = "/proc/self/exe", filter = "--gtest_filter=GroupChildProcess.Member";
    char* argv[] = {self.data(), filter.data(), nullptr};
    int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(report[1], 3);
      dup2(control[0], 4);
      dup2(devnull, 1);
      execve(self.c_str(), argv, envp.data());
      _exit(127);
    }
    close(devnull);
    close(report[1]);
    close(control[0]);
    report_fd_ = report[0];
    control_fd_ = control[1];
    reader_ = std::thread([this] { ReadReports(); });
  }

  ~ChildMember() {
    close(control_fd_);  // the child leaves and exits
    int status = 0;
    bool exited = false;
    for (int i = 0; i < 300 && !exited; ++i) {
      exited = waitpid(pid_, &status, WNOHANG) == pid_;
      if (!exited) std::this_thread::sleep_for(100ms);
    }
    if (!exited) {
      ADD_FAILURE() << "child member did not exit";
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
    } else {
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
    }
    reader_.join();
    close(report_fd_);
  }

  void Stop() { ASSERT_EQ(kill(pid_, SIGSTOP), 0); }
  void Continue() { ASSERT_EQ(kill(pid_, SIGCONT), 0); }

 private:
  void ReadReports() {
    FILE* f = fdopen(dup(report_fd_), "r");
    char buf[1024];
    while (fgets(buf, sizeof(buf), f) != nullptr) {
      std::string line(buf);
      std::vector<PartitionId> ps;
      size_t sp = line.rfind(' ');
      std::stringstream list(line.substr(sp + 1));
      std::string item;
      while (std::getline(list, item, ',')) {
        if (!item.empty() && item != "\n") ps.push_back(PartitionId(std::stoi(item)));
      }
      if (line[0] == 'A') {
        own_->Assigned("child", ps);
      } else {
        own_->Revoked("child", ps, line.compare(0, 3, "R 1") == 0);
      }
    }
    fclose(f);
  }

  Ownership* const own_;
  pid_t pid_ = -1;
  int report_fd_ = -1;
  int control_fd_ = -1;
  std::thread reader_;
};

TEST_F(KafkaGroupTest, KafkaPausedProcessLosesAssignment) {
  Member a("a", &own_);
  ASSERT_TRUE(a.Join(topic_, group_, FastOptions()).ok());
  ASSERT_TRUE(own_.WaitHeld("a", AllPartitions(), 30s)) << own_.Dump();
  {
    ChildMember child(&own_, topic_, group_);
    ASSERT_TRUE(own_.WaitSplit({"a", "child"}, 30s)) << own_.Dump();
    ASSERT_TRUE(own_.Overlaps().empty()) << own_.Overlaps().front();
    const std::set<int32_t> child_had = own_.Held("child");

    // The whole child process stops (heartbeats too): after session_timeout the coordinator drops
    // it and a gets everything.
    child.Stop();
    ASSERT_TRUE(own_.WaitHeld("a", AllPartitions(), 40s)) << own_.Dump();
    EXPECT_TRUE(own_.Revocations("a").empty() || !own_.Revocations("a").back().second);

    // Resumed, the child learns that its assignment was lost, then rejoins.
    child.Continue();
    ASSERT_TRUE(own_.WaitFor([](auto& st) { return !st.revocations["child"].empty(); }, 30s));
    const auto rev = own_.Revocations("child").front();
    EXPECT_EQ(rev.first, child_had);
    EXPECT_TRUE(rev.second) << "revocation after a pause must be reported as lost";
    ASSERT_TRUE(own_.WaitSplit({"a", "child"}, 30s)) << own_.Dump();
  }
  // The child left cleanly: a has everything again.
  ASSERT_TRUE(own_.WaitHeld("a", AllPartitions(), 30s)) << own_.Dump();
  EXPECT_FALSE(own_.Revocations("child").back().second);
}

// ---------------------------------------------------------------------------------------------
// Without a broker.

class NullListener : public PartitionGroupListener {
 public:
  void OnAssigned(const std::vector<PartitionId>&) override { ADD_FAILURE() << "assigned"; }
  void OnRevoked(const std::vector<PartitionId>&, bool) override { ADD_FAILURE() << "revoked"; }
};

TEST(KafkaGroupOptions, RejectsInvalidOptions) {
  NullListener l;
  KafkaOptions kafka;
  kafka.brokers = "127.0.0.1:1";
  PartitionGroupOptions o;
  o.group_id = "g";
  auto code = [&](const KafkaOptions& k, const std::string& topic, PartitionGroupOptions opt,
                  PartitionGroupListener* listener) {
    return PartitionGroup::Join(k, topic, opt, listener).status().code();
  };
  EXPECT_EQ(code(kafka, "", o, &l), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(kafka, "t", o, nullptr), StatusCode::kInvalidArgument);
  KafkaOptions no_brokers;
  no_brokers.brokers = "";
  EXPECT_EQ(code(no_brokers, "t", o, &l), StatusCode::kInvalidArgument);
  PartitionGroupOptions bad = o;
  bad.group_id = "";
  EXPECT_EQ(code(kafka, "t", bad, &l), StatusCode::kInvalidArgument);
  bad = o;
  bad.heartbeat_interval = bad.session_timeout;
  EXPECT_EQ(code(kafka, "t", bad, &l), StatusCode::kInvalidArgument);
  bad = o;
  bad.max_poll_interval = bad.session_timeout - 1ms;
  EXPECT_EQ(code(kafka, "t", bad, &l), StatusCode::kInvalidArgument);
  KafkaOptions bad_prop = kafka;
  bad_prop.properties["no.such.property"] = "1";
  EXPECT_EQ(code(bad_prop, "t", o, &l), StatusCode::kInvalidArgument);
}

TEST(KafkaGroupUnreachable, HealthReportsBrokersAndLeaveReturns) {
  NullListener l;
  KafkaOptions kafka;
  kafka.brokers = "127.0.0.1:1";
  PartitionGroupOptions o;
  o.group_id = "g";
  auto g = PartitionGroup::Join(kafka, "t", o, &l);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto deadline = Clock::now() + 20s;
  while ((*g)->Health() == "ok" && Clock::now() < deadline) std::this_thread::sleep_for(50ms);
  EXPECT_NE((*g)->Health().find("g on t"), std::string::npos) << (*g)->Health();
  EXPECT_TRUE((*g)->Assignment().empty());
  (*g)->Leave();
  (*g)->Leave();
}

}  // namespace
}  // namespace sediment
