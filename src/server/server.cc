#include "server/server.h"
#include "geoip/mmdb.h"

#include "server/server_impl.h"

#include <simdjson.h>
#include <spdlog/spdlog.h>

#include <strings.h>
#include <condition_variable>
#include <map>
#include <mutex>
#include <random>
#include <string_view>
#include <thread>

#include "api/routes.h"
#include "cluster/node_identity.h"
#include "common/cidr.h"
#include "common/clock.h"
#include "common/env.h"
#include "common/json_writer.h"
#include "digest/digest.h"
#include "global/global.h"
#include "http/http_server.h"
#include "ingest/ingest.h"
#include "log/kafka_log.h"
#include "log/local_log.h"
#include "query/query.h"

namespace sediment {

namespace {

// HOST:PORT, [IPV6]:PORT or localhost:PORT (as 127.0.0.1); false when malformed.
// The one place that decides how a node calls its peers: over HTTPS when its own listener speaks
// TLS (every node of a cluster is configured alike), verified against --tls-ca (the system's CAs
// when empty); plain HTTP otherwise.
http::PeerTls PeerTlsOf(const ServerConfig& config) {
  http::PeerTls tls;
  tls.https = !config.tls_cert_file.empty();
  tls.ca_file = config.tls_ca_file;
  return tls;
}

bool ParseListen(const std::string& listen, std::string* host, uint16_t* port) {
  auto colon = listen.rfind(':');
  if (colon == std::string::npos) return false;
  *host = listen.substr(0, colon);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
  }
  if (*host == "localhost") *host = "127.0.0.1";
  try {
    int p = std::stoi(listen.substr(colon + 1));
    if (p < 0 || p > 65535) return false;
    *port = static_cast<uint16_t>(p);
  } catch (...) {
    return false;
  }
  return !host->empty();
}

}  // namespace

Server::Server(ServerConfig config) : impl_(std::make_unique<Impl>()) {
  impl_->config = std::move(config);
}

Server::~Server() { Stop(); }

uint16_t Server::port() const { return impl_->http ? impl_->http->port() : 0; }

Status Server::Impl::OpenLogs() {
  if (!kafka()) {
    LocalLogOptions log_options;
    log_options.partitions = config.partitions > 0 ? config.partitions : 8;
    log_options.file_roll_bytes = config.log_file_bytes;
    log_options.file_roll_age = std::chrono::milliseconds(config.log_file_age_ms);
    auto ingest = OpenLocalLog(env, JoinPath(config.data_dir, "log/ingest"), log_options);
    if (!ingest.ok()) return ingest.status().WithContext("opening the ingest log");
    ingest_log = std::move(ingest).value();
    LocalLogOptions one;
    one.partitions = 1;
    one.file_roll_bytes = config.log_file_bytes;
    // By size only: the chatter log gets a heartbeat a second and keeps the newest 10000, so
    // rolling by age would leave hundreds of small files; Global's log is small and cut below its
    // oldest snapshot.
    one.file_roll_age = std::chrono::milliseconds(0);
    auto glog = OpenLocalLog(env, JoinPath(config.data_dir, "log/global"), one);
    if (!glog.ok()) return glog.status().WithContext("opening the global log");
    global_log = std::move(glog).value();
    auto chatter = OpenLocalLog(env, JoinPath(config.data_dir, "log/chatter"), one);
    if (!chatter.ok()) return chatter.status().WithContext("opening the chatter log");
    chatter_log = std::move(chatter).value();
    return Status::OK();
  }
  ASSIGN_OR_RETURN(KafkaOptions ko, KafkaOptionsFromConfig());
  auto ingest_partitions = EnsureTopics(ko);
  if (!ingest_partitions.ok()) {
    return ingest_partitions.status().WithContext("preparing the Kafka topics");
  }
  // The three logs share one admin and one consumer handle (each log has its own producer).
  auto clients = OpenKafkaClients(ko);
  if (!clients.ok()) return clients.status().WithContext("creating the Kafka clients");
  auto ingest = OpenKafkaLog(clients.value(), KafkaIngestTopic(ko), ingest_partitions.value());
  if (!ingest.ok()) return ingest.status().WithContext("opening the Kafka ingest topic");
  ingest_log = std::move(ingest).value();
  auto glog = OpenKafkaLog(clients.value(), KafkaGlobalTopic(ko), 1);
  if (!glog.ok()) return glog.status().WithContext("opening the Kafka global topic");
  global_log = std::move(glog).value();
  auto chatter = OpenKafkaLog(std::move(clients).value(), KafkaChatterTopic(ko), 1);
  if (!chatter.ok()) return chatter.status().WithContext("opening the Kafka chatter topic");
  chatter_log = std::move(chatter).value();
  spdlog::info("commit log: Kafka at {} (topics {}*, {} ingest partitions)", ko.brokers,
               ko.topic_prefix, ingest_log->partition_count());
  return Status::OK();
}

Status Server::Impl::RetryUnavailableAtStart(const std::string& what,
                                             const std::function<Status()>& step) {
  const auto deadline = SteadyNow() + kStartDependencyWait;
  for (int attempt = 1;; ++attempt) {
    Status st = step();
    if (st.ok() || st.code() != StatusCode::kUnavailable || SteadyNow() >= deadline) {
      if (!st.ok() && st.code() == StatusCode::kUnavailable && attempt > 1) {
        return st.WithContext("still unreachable after " +
                              std::to_string(kStartDependencyWait.count() / 1000) + " s");
      }
      return st;
    }
    spdlog::warn("start: {} (attempt {}): {}; retrying in {} s (for up to {} s)", what, attempt,
                 st.ToString(), kStartRetryDelay.count() / 1000,
                 kStartDependencyWait.count() / 1000);
    std::this_thread::sleep_for(kStartRetryDelay);
  }
}

Result<KafkaOptions> Server::Impl::KafkaOptionsFromConfig() const {
  KafkaOptions ko;
  ko.brokers = config.kafka_brokers;
  ko.topic_prefix = config.kafka_topic_prefix;
  ko.ingest_partitions = config.partitions > 0 ? config.partitions : 24;
  ko.replication_factor = config.kafka_replication_factor;
  ko.min_insync_replicas = config.kafka_min_insync_replicas;
  ko.produce_timeout = std::chrono::milliseconds(config.kafka_produce_timeout_ms);
  ko.produce_linger = std::chrono::milliseconds(config.kafka_produce_linger_ms);
  ko.allow_finite_retention = config.allow_kafka_retention;
  if (!config.kafka_properties_file.empty()) {
    auto text = env->ReadFile(config.kafka_properties_file);
    if (!text.ok()) return text.status().WithContext("reading --kafka-properties-file");
    auto props = ParseKafkaProperties(*text);
    if (!props.ok()) return props.status().WithContext(config.kafka_properties_file);
    ko.properties = *props;
  }
  for (const auto& [k, v] : config.kafka_properties) ko.properties[k] = v;
  return ko;
}

Status Server::Impl::OpenGlobal() {
  const std::string snapshot_dir = JoinPath(config.data_dir, "global-snapshots");
  global_source = "local snapshot or log replay";
  if (bucket) {
    if (config.recover_from_bucket) {
      ASSIGN_OR_RETURN(bool recovered, maintenance::RecoverFromBucket(env, global_log.get(),
                                                                      bucket.get(), snapshot_dir));
      if (recovered) global_source = "recovered from the bucket";
    }
  }
  if (kafka()) FetchPeerSnapshot(snapshot_dir);
  GlobalOptions options;
  // In a cluster other nodes may start from older snapshots: the global topic is kept.
  options.truncate_log = !kafka();
  options.snapshot_every = config.global_snapshot_every;
  if (kafka()) {
    // Paused or cut off past the global topic's truncation: continue from a peer's state.
    options.newer_state = [this]() -> Result<std::string> {
      std::string bytes, why_not;
      auto taken = PeerSnapshot(
          [&](const std::string& body) -> Result<Offset> {
            ASSIGN_OR_RETURN(GlobalState st, DecodeGlobalState(body));
            bytes = body;
            return st.applied_through;
          },
          &why_not);
      if (!taken.ok()) return taken.status();
      return bytes;
    };
  }
  auto g = Global::Open(env, global_log.get(), snapshot_dir, options);
  // The global topic was truncated past this node's snapshots while it was down (DESIGN section
  // 5), or it begins with a recovery from the bucket made by another node: start from a live
  // peer's snapshot instead (waiting for one to serve, at most kPeerSnapshotWait).
  auto needs_peer = [](const Status& st) {
    return st.subcode() == StatusSubcode::kLogTruncatedPastState ||
           st.subcode() == StatusSubcode::kLogBeginsWithRecovery;
  };
  const auto deadline = SteadyNow() + std::chrono::seconds(120);
  bool warned = false;
  while (!g.ok() && kafka() && needs_peer(g.status()) && SteadyNow() < deadline) {
    if (!warned) {
      spdlog::warn("global: {}; starting from a peer's snapshot instead", g.status().ToString());
      warned = true;
    }
    auto names = env->ListDir(snapshot_dir);
    if (names.ok()) {
      for (const auto& name : *names) (void)env->RemoveFile(JoinPath(snapshot_dir, name));
    }
    FetchPeerSnapshot(snapshot_dir);
    if (HasGlobalSnapshot(env, snapshot_dir)) {
      g = Global::Open(env, global_log.get(), snapshot_dir, options);
      continue;
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));  // no peer serves one yet
  }
  if (!g.ok()) return g.status().WithContext("loading Global");
  global = std::move(g).value();
  return Status::OK();
}

Status Server::Start() {
  Impl& s = *impl_;
  std::string host;
  uint16_t port = 0;
  if (!ParseListen(s.config.listen, &host, &port)) {
    return Status::InvalidArgument("--listen must be HOST:PORT, got '" + s.config.listen + "'");
  }
  for (const std::string& range : s.config.metrics_allow) {
    if (auto c = Cidr::Parse(range); !c.ok()) return c.status().WithContext("--metrics-allow");
  }
  {
    auto geo = geoip::OpenGeoDatabases(s.config.geoip_city_db, s.config.geoip_asn_db);
    if (!geo.ok()) return geo.status();
    s.geo = std::move(*geo);
  }
  s.started_ms = s.clock->NowMillis();
  s.peer_tls = PeerTlsOf(s.config);
  RETURN_IF_ERROR(s.peer_tls.Check().WithContext("--tls-ca"));
  if (!s.peer_tls.https && !s.config.tls_ca_file.empty()) {
    spdlog::warn("--tls-ca {} is unused: peers are called over HTTPS only when --tls-cert is set",
                 s.config.tls_ca_file);
  }
  // The data dir holds the credentials file and the cluster secret: owner only.
  bool tightened = false;
  RETURN_IF_ERROR(s.env->CreatePrivateDir(s.config.data_dir, &tightened));
  if (tightened) {
    spdlog::warn("data dir {} was readable by other users: its permissions are now 0700",
                 s.config.data_dir);
  }
  RETURN_IF_ERROR(s.LoadClusterSecretFile());
  s.segment_dir = JoinPath(s.config.data_dir, "segments");
  auto node = LoadOrCreateNodeId(s.env, s.config.data_dir);
  if (!node.ok()) return node.status();
  s.node = *node;

  // The HTTP listener binds first (so port 0 resolves and peers learn the real address) but
  // answers 503 until the node is ready.
  http::ServerOptions http_options;
  http_options.host = host;
  http_options.port = port;
  http_options.max_body_bytes = s.config.max_body_bytes;
  http_options.io_threads = s.config.http_threads;
  http_options.handler_threads = s.config.http_handler_threads;
  http_options.max_connections = s.config.max_connections;
  http_options.max_connections_per_address = s.config.max_connections_per_address;
  http_options.header_timeout = std::chrono::milliseconds(s.config.http_header_timeout_ms);
  http_options.body_min_bytes_per_second = s.config.http_body_min_bytes_per_second;
  http_options.idle_timeout = std::chrono::milliseconds(s.config.http_idle_timeout_ms);
  http_options.tls_cert_file = s.config.tls_cert_file;
  http_options.tls_key_file = s.config.tls_key_file;
  // Credentials are checked from the header: a request a route's gate refuses is answered before
  // its body is read.
  http_options.admit = [this](const http::Request& r) { return impl_->Admit(r); };
  s.http = std::make_unique<http::Server>(
      http_options, [this](const http::Request& r) { return impl_->Handle(r); });
  RETURN_IF_ERROR(s.http->Start());
  if (!s.config.advertise.empty()) {
    s.advertise = s.config.advertise;
  } else if (host == "0.0.0.0" || host == "::") {
    return Status::InvalidArgument("--listen " + s.config.listen +
                                   " binds every address: set --advertise HOST:PORT to the "
                                   "address other nodes and clients use to reach this node");
  } else {
    s.advertise = (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
                  std::to_string(s.http->port());
  }

  // A bucket endpoint or Kafka brokers that are briefly unreachable (restarting, a network blip)
  // are waited for rather than ending the start.
  RETURN_IF_ERROR(s.RetryUnavailableAtStart("opening the bucket", [&] { return s.OpenBucket(); }));
  RETURN_IF_ERROR(
      s.RetryUnavailableAtStart("opening the commit log", [&] { return s.OpenLogs(); }));
  RETURN_IF_ERROR(
      s.RetryUnavailableAtStart("starting the heartbeat", [&] { return s.StartMembership(); }));
  RETURN_IF_ERROR(s.RetryUnavailableAtStart("loading Global", [&] { return s.OpenGlobal(); }));
  s.tokens = std::make_unique<TokenLookup>(s.global.get());
  RETURN_IF_ERROR(s.Bootstrap());
  // Never reuse an offset Global recorded as handed out: a log that lost its tail refuses the
  // partition (CommitLog::RefuseBelow) instead of giving those offsets to new events.
  for (int32_t p = 0; p < s.ingest_log->partition_count(); ++p) {
    Offset floor;
    s.global->Read([&](const GlobalState& st) { floor = LogFloor(st, PartitionId(p)); });
    (void)s.ingest_log->RefuseBelow(PartitionId(p), floor);  // logged and reported by Health()
  }

  DigestOptions digest_options;
  digest_options.segment_dir = s.segment_dir;
  digest_options.node = s.node;
  digest_options.flush_age = std::chrono::milliseconds(s.config.flush_age_ms);
  digest_options.flush_bytes = s.config.flush_bytes;
  digest_options.worker_nice = s.config.digest_nice;
  digest_options.truncate_every = std::chrono::milliseconds(s.config.safe_offset_interval_ms);
  // Rebuilding a segment from the commit log needs every holder dead; a node not heard from yet
  // in the first heartbeat timeout after this start counts as alive.
  digest_options.is_alive = [m = s.membership.get(), self = s.node, clock = s.clock,
                             since = s.clock->MonotonicMicros(),
                             warmup_us = s.config.heartbeat_timeout_ms * 1000](NodeId n) {
    if (n == self) return true;
    auto v = m->Find(n);
    if (v) return v->serving();
    return clock->MonotonicMicros() - since < warmup_us;
  };
  // The node's one owner of segment files: the digest writes through it, storage and queries
  // read through it.
  s.store = std::make_unique<SegmentStore>(s.env, s.segment_dir);
  s.digest = std::make_unique<Digest>(s.clock, s.ingest_log.get(), s.global.get(), s.store.get(),
                                      digest_options);
  RETURN_IF_ERROR(s.digest->Start().WithContext("starting the digest"));
  RETURN_IF_ERROR(s.StartStorage().WithContext("starting storage"));
  s.StartCoordinator();
  if (s.kafka()) {
    ASSIGN_OR_RETURN(KafkaOptions ko, s.KafkaOptionsFromConfig());
    PartitionGroupOptions go;
    go.group_id = ko.topic_prefix + "digest";
    go.session_timeout = std::chrono::milliseconds(s.config.digest_session_timeout_ms);
    go.heartbeat_interval =
        std::max<std::chrono::milliseconds>(std::chrono::milliseconds(100), go.session_timeout / 4);
    go.max_poll_interval =
        std::max<std::chrono::milliseconds>(go.session_timeout, std::chrono::milliseconds(30000));
    go.member_label = std::to_string(s.node.value);
    auto group = PartitionGroup::Join(ko, KafkaIngestTopic(ko), go, impl_.get());
    if (!group.ok()) return group.status().WithContext("joining the digest consumer group");
    s.group = std::move(group).value();
  } else {
    s.digest->AssignAll();
    if (!s.digest->WaitClaimed(std::chrono::seconds(60))) {
      return Status::Unavailable("the digest could not claim the partitions within 60 s");
    }
  }

  s.ingest_bounds = std::make_unique<BoundsMonitor>(s.ingest_log.get(), s.clock);
  {
    ingest::ShardingOptions so;
    so.shard_bytes_per_second = s.config.datasource_shard_bytes_per_second;
    so.max_shards = s.config.max_datasource_shards;
    s.sharder = std::make_unique<ingest::DatasourceSharder>(s.clock, so);
  }
  {
    coordinator::QueryJobsOptions jobs_env;
    jobs_env.run = [&s](const std::string& repo, const std::string& query_string,
                        const query::CompiledQuery& compiled, const query::TimeRange& range,
                        const coordinator::QueryControl& control) {
      return api::CountedQueryRun(*s.metrics, "job", [&] {
        return s.coordinator->Run(repo, query_string, compiled, range, control);
      });
    };
    jobs_env.limits = [&s] {
      return coordinator::QueryLimitsFromNow(s.config.query_timeout_ms,
                                             s.config.query_memory_bytes);
    };
    jobs_env.clock = s.clock;
    jobs_env.max_jobs = s.config.max_query_jobs;
    jobs_env.expiry_ms = s.config.query_job_expiry_ms;
    s.query_jobs = coordinator::QueryJobs::Start(std::move(jobs_env));
  }
  s.query_admission =
      std::make_unique<coordinator::QueryAdmission>(s.config.max_concurrent_queries);
  s.StartAlerts();
  api::AddRoutes(s.router, s.ApiNode());
  s.ready = true;
  spdlog::info("node {} ready at {} (data in {})", s.node.value, s.peer_tls.Url(s.advertise, ""),
               s.config.data_dir);
  return Status::OK();
}

void Server::Shutdown(std::chrono::milliseconds bound) {
  Impl& s = *impl_;
  if (s.stopped) return;
  const auto start = std::chrono::steady_clock::now();
  // `ready` stays true while draining: it gates every request, and the ones in progress must be
  // answered as usual (Stop() clears it).
  if (s.query_jobs) s.query_jobs->CancelAll();
  if (s.http) s.http->StopGracefully(start + bound * 2 / 3);
  spdlog::info("shutdown: HTTP drained after {} ms",
               std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::now() - start)
                   .count());
  if (s.digest) {
    auto st = s.digest->FlushAll();
    if (!st.ok()) spdlog::warn("shutdown: flushing the digest buffers: {}", st.ToString());
  }
  Stop();
}

void Server::Stop() {
  Impl& s = *impl_;
  if (s.stopped) return;
  s.stopped = true;
  s.ready = false;
  // Leave the group first so the other nodes take the partitions over at once.
  if (s.group) s.group->Leave();
  if (s.alert_runner) s.alert_runner->Stop();
  // Live queries end (their connections can close) before HTTP stops; jobs end after it.
  if (s.query_jobs) s.query_jobs->CancelAll();
  if (s.http) s.http->Stop();
  if (s.query_jobs) s.query_jobs->Stop();
  if (s.membership) s.membership->Stop();
  s.ingest_bounds.reset();
  s.StopStorage();
  if (s.digest) s.digest->Stop();
  if (s.global) {
    auto st = s.global->Close();
    if (!st.ok()) spdlog::warn("closing Global: {}", st.ToString());
  }
}

Status Server::Impl::WritePrivateFile(const std::string& path, const std::string& text) {
  // A stale temp file would keep its own mode through the rewrite: start without one.
  if (env->FileExists(path + ".tmp")) RETURN_IF_ERROR(env->RemoveFile(path + ".tmp"));
  return env->WriteFileAtomic(path, text);
}

Status Server::Impl::LoadClusterSecretFile() {
  if (!config.cluster_secret.empty()) return Status::OK();  // the flag wins
  const std::string path = JoinPath(config.data_dir, kClusterSecretFile);
  if (!env->FileExists(path)) return Status::OK();
  ASSIGN_OR_RETURN(std::string text, env->ReadFile(path));
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) {
    text.pop_back();
  }
  if (text.empty()) return Status::InvalidArgument(path + " is empty");
  config.cluster_secret = std::move(text);
  return Status::OK();
}

Status Server::Impl::EnsureClusterSecret() {
  const std::string path = JoinPath(config.data_dir, kClusterSecretFile);
  std::string verifier, legacy;
  global->Read([&](const GlobalState& st) {
    verifier = st.cluster_secret_verifier;
    legacy = st.legacy_cluster_secret;
  });
  if (verifier.empty()) {
    // The first node: the cluster's secret is the one given, else a new one kept in the data dir
    // (written before Global records its verifier, so that it cannot be lost).
    if (config.cluster_secret.empty()) {
      config.cluster_secret = NewSecret(32);
      RETURN_IF_ERROR(WritePrivateFile(path, config.cluster_secret + "\n"));
      spdlog::info(
          "generated the cluster secret, saved in {}: start every other node of this cluster "
          "with --cluster-secret set to it",
          path);
    }
    auto r = global->Submit(SetClusterSecret{HashToken(config.cluster_secret), ""});
    if (!r.ok() && r.status().code() != StatusCode::kRejected) return r.status();
    global->Read([&](const GlobalState& st) { verifier = st.cluster_secret_verifier; });
  }
  if (config.cluster_secret.empty() && !legacy.empty() && TokenMatches(verifier, legacy)) {
    // Upgraded from a release that kept the secret in Global: it moves to the data dir.
    config.cluster_secret = legacy;
    RETURN_IF_ERROR(WritePrivateFile(path, legacy + "\n"));
    spdlog::warn(
        "the cluster secret is no longer kept in Global: saved in {} (pass it to new "
        "nodes with --cluster-secret)",
        path);
  }
  if (config.cluster_secret.empty()) {
    return Status::InvalidArgument(
        "this cluster has a cluster secret and this node was given none: start it with "
        "--cluster-secret (SEDIMENT_CLUSTER_SECRET) set to the cluster's secret (the node that "
        "generated it saved it in its data dir's " +
        std::string(kClusterSecretFile) + " file)");
  }
  if (!TokenMatches(verifier, config.cluster_secret)) {
    return Status::InvalidArgument(
        "the cluster secret this node was given (--cluster-secret or " + path +
        ") is not this cluster's: start it with --cluster-secret set to the cluster's secret");
  }
  return Status::OK();
}

Status Server::Impl::Bootstrap() {
  bool has_cluster = false;
  bool has_repos = false;
  global->Read([&](const GlobalState& st) {
    has_cluster = !st.cluster_id.empty();
    has_repos = !st.repos.empty();
  });
  if (!has_cluster) {
    auto r = global->Submit(SetClusterId{RandomHex(16)});
    if (!r.ok() && r.status().code() != StatusCode::kRejected) return r.status();
  }
  RETURN_IF_ERROR(EnsureClusterSecret());
  auto ensure_repo = [&](const std::string& repo) -> Status {
    bool exists = false;
    global->Read([&](const GlobalState& st) { exists = st.repos.count(repo) > 0; });
    if (exists) return Status::OK();
    auto r = global->Submit(CreateRepo{repo});
    if (!r.ok() && r.status().code() != StatusCode::kRejected) return r.status();
    spdlog::info("created repository '{}'", repo);
    return Status::OK();
  };
  auto ensure_ingest_token = [&](const std::string& repo, const std::string& token) -> Status {
    RETURN_IF_ERROR(ensure_repo(repo));
    auto owner_of = [&] {
      std::string owner;
      global->Read(
          [&](const GlobalState& st) { owner = IngestRepoForToken(st, token).value_or(""); });
      return owner;
    };
    std::string owner = owner_of();
    if (owner.empty()) {
      // Only a salted hash of the token goes into Global (global/tokens.h).
      auto r = global->Submit(AddIngestToken{repo, HashToken(token), ""});
      if (r.ok()) return Status::OK();
      if (r.status().code() != StatusCode::kRejected) return r.status();
      owner = owner_of();  // another node added it first (nodes of a cluster start together)
    }
    if (owner == repo) return Status::OK();
    return Status::InvalidArgument("ingest token is already used by repository '" + owner + "'");
  };
  auto ensure_api_token = [&](const std::string& token) -> Status {
    bool exists = false;
    // Only an unnamed (admin) token counts: a named token with the same secret has its own rights.
    global->Read([&](const GlobalState& st) {
      auto who = ApiPrincipalForToken(st, token);
      exists = who && who->name == kStartupTokenName;
    });
    if (exists) return Status::OK();
    auto r = global->Submit(AddApiToken{HashToken(token), ""});
    return r.ok() || r.status().code() == StatusCode::kRejected ? Status::OK() : r.status();
  };

  for (const auto& spec : config.ingest_tokens) {
    IngestTokenSpec parsed;
    if (!ParseIngestTokenSpec(spec, &parsed)) {
      return Status::InvalidArgument(
          "--ingest-token must be REPO:TOKEN or REPO:TOKEN:PARSER, got '" + spec + "'");
    }
    RETURN_IF_ERROR(ensure_ingest_token(parsed.repo, parsed.token));
  }
  for (const auto& token : config.api_tokens) RETURN_IF_ERROR(ensure_api_token(token));

  if (!has_repos && config.ingest_tokens.empty() && config.api_tokens.empty()) {
    std::string ingest_token = NewSecret(16);
    std::string api_token = NewSecret(16);
    // Saved (owner-only, in the owner-only data dir) before Global records their hashes: a
    // token whose hash is recorded is never lost.
    std::string creds =
        "repository=sandbox\ningest_token=" + ingest_token + "\napi_token=" + api_token + "\n";
    RETURN_IF_ERROR(WritePrivateFile(JoinPath(config.data_dir, kCredentialsFile), creds));
    RETURN_IF_ERROR(ensure_ingest_token("sandbox", ingest_token));
    RETURN_IF_ERROR(ensure_api_token(api_token));
    std::string url = peer_tls.Url(config.listen, "");
    fmt::print(
        "\nCreated repository 'sandbox' with new tokens (also saved in {}/credentials.txt):\n"
        "  ingest token: {}\n  API token:    {}\n\n"
        "Send logs:\n  curl -X POST {}/api/v1/ingest/raw -H 'Authorization: Bearer {}' "
        "--data-binary $'hello sediment\\nsecond line'\n"
        "Search them:\n  curl -X POST {}/api/v1/repositories/sandbox/query -H 'Authorization: "
        "Bearer {}' -H 'Content-Type: application/json' -d '{{\"queryString\": \"hello\", "
        "\"start\": \"1h\"}}'\n"
        "Or open {}/ in a browser and sign in with the API token.\n\n",
        config.data_dir, ingest_token, api_token, url, ingest_token, url, api_token, url);
    std::fflush(stdout);
  }

  // Storage: this node counts for the default replication factor; an explicit factor is the
  // cluster's (the last node started with a different one sets it).
  bool known = false;
  uint32_t factor = 0;
  global->Read([&](const GlobalState& st) {
    known = st.nodes.count(node) != 0;
    factor = st.replication_factor;
  });
  if (!known) {
    auto r = global->Submit(RegisterNode{node});
    if (!r.ok() && r.status().code() != StatusCode::kRejected) {
      return r.status().WithContext("registering node " + std::to_string(node.value));
    }
  }
  // Bucket storage is the cluster's: once on, every node must use the bucket.
  std::string cluster_bucket;
  global->Read([&](const GlobalState& st) { cluster_bucket = st.bucket; });
  if (!bucket && !cluster_bucket.empty()) {
    return Status::InvalidArgument("this cluster keeps its segments in bucket storage (" +
                                   cluster_bucket +
                                   "): start the node with --bucket-endpoint, "
                                   "--bucket-name and the other --bucket-* settings");
  }
  if (bucket && cluster_bucket != bucket_location) {
    auto r = global->Submit(SetBucket{bucket_location});
    if (!r.ok() && r.status().code() != StatusCode::kRejected) {
      return r.status().WithContext("recording the bucket");
    }
    spdlog::info("bucket storage of the cluster: {}", bucket_location);
  }
  if (config.replication_factor > 0 && factor != static_cast<uint32_t>(config.replication_factor)) {
    auto r = global->Submit(SetReplicationFactor{static_cast<uint32_t>(config.replication_factor)});
    if (!r.ok()) return r.status().WithContext("setting the replication factor");
    spdlog::info("segment replication factor set to {}", config.replication_factor);
  }
  return Status::OK();
}

api::Node Server::Impl::ApiNode() const {
  api::Node n;
  n.config = config;
  n.env = env;
  n.clock = clock;
  n.node = node;
  n.advertise = advertise;
  n.started_ms = started_ms;
  n.global_source = global_source;
  n.ingest_log = ingest_log.get();
  n.global_log = global_log.get();
  n.ingest_bounds = ingest_bounds.get();
  n.sharder = sharder.get();
  n.global = global.get();
  n.geo = geo;
  n.digest = digest.get();
  n.membership = membership.get();
  n.group = group.get();
  n.store = store.get();
  n.peers = peers.get();
  n.replicator = replicator.get();
  n.merger = merger.get();
  n.bucket = bucket.get();
  n.bucket_location = bucket_location;
  n.cache_bound_bytes = bucket ? CacheBoundBytes() : 0;
  n.uploader = uploader.get();
  n.bucket_collector = bucket_collector.get();
  n.bucket_snapshots = bucket_snapshots.get();
  n.coordinator = coordinator.get();
  n.leaf = leaf.get();
  n.query_jobs = query_jobs.get();
  n.query_admission = query_admission.get();
  n.tokens = tokens.get();
  n.http_server = http.get();
  n.metrics = metrics;
  return n;
}

http::Response Server::Impl::NotReady(const http::Request& req) const {
  if (auto health = api::HealthAnswer(req, false)) return *health;
  http::Response r = http::JsonError(503, "node " + std::to_string(node.value) + " is starting");
  r.headers.emplace_back("Retry-After", "1");
  return r;
}

std::optional<http::Response> Server::Impl::Admit(const http::Request& req) const {
  // The routes are added before `ready` is set and never after.
  std::optional<http::Response> refused = ready ? router.Admit(req) : NotReady(req);
  if (refused) CountHttpAnswer(refused->status);
  return refused;
}

http::Response Server::Impl::Handle(const http::Request& req) {
  http::Response r = !ready ? NotReady(req) : [&] {
    if (auto d = router.Dispatch(req)) return std::move(*d);
    return http::Router::NoSuchEndpoint(req);
  }();
  CountHttpAnswer(r.status);
  return r;
}

void Server::Impl::CountHttpAnswer(int status) const {
  metrics->http_requests.With({std::to_string(status)}).Inc();
}

}  // namespace sediment
