#include "merge/merge.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>
#include <random>
#include <set>
#include <tuple>
#include <utility>

#include "global/segment_record.h"
#include "segment/file_name.h"

namespace sediment {
namespace {

// How long an input that failed to read (corrupt, unreachable) is left out of planning.
constexpr int64_t kRetryFailedInputUs = 60'000'000;

// "web{#host=a,#app=b}" for logs.
std::string Describe(const Datasource& ds) {
  std::string out = ds.repo + "{";
  for (size_t i = 0; i < ds.tags.size(); ++i) {
    if (i > 0) out += ",";
    out += ds.tags[i].first + "=" + ds.tags[i].second;
  }
  return out + "}";
}

std::string Str(const Position& p) {
  return std::to_string(p.offset.value) + "/" + std::to_string(p.index);
}

}  // namespace

int MergeSizeClass(uint64_t file_size, uint64_t top, size_t fan_in) {
  const uint64_t f = std::max<uint64_t>(fan_in, 2);
  int c = 0;
  for (uint64_t bound = top; file_size < bound; bound /= f) ++c;
  return c;
}

std::vector<std::pair<size_t, size_t>> PlanRunMerges(const std::vector<RunMember>& run,
                                                     const MergeOptions& options, int64_t now_us) {
  std::vector<std::pair<size_t, size_t>> out;
  std::vector<int> cls(run.size());
  for (size_t i = 0; i < run.size(); ++i) {
    cls[i] = MergeSizeClass(run[i].file_size, options.small_bytes, options.fan_in);
  }
  const int64_t min_age_us = options.min_age.count() * 1000;

  // Cuts group [lo, hi) of class c into chunks, oldest first, and keeps those due now. A chunk is
  // full when it holds fan_in members of class c, reached target_bytes, could not take the next
  // segment (target_bytes) or holds max_inputs segments.
  auto chunk_group = [&](size_t lo, size_t hi, int c) {
    size_t begin = lo;
    uint64_t total = 0;
    size_t members = 0;
    // Due by age: each maximal sequence of consecutive members that are not merge outputs, with
    // at least min_inputs members, whose oldest has been known for min_age.
    auto by_age = [&](size_t from, size_t to) {
      for (size_t k = from; k < to;) {
        if (run[k].merged) {
          ++k;
          continue;
        }
        size_t e = k;
        int64_t oldest = now_us;
        for (; e < to && !run[e].merged; ++e) oldest = std::min(oldest, run[e].first_seen_us);
        if (e - k >= options.min_inputs && now_us - oldest >= min_age_us) out.emplace_back(k, e);
        k = e;
      }
    };
    auto close = [&](size_t end, bool full) {
      if (full && end - begin >= options.min_inputs) {
        out.emplace_back(begin, end);
      } else if (!full) {
        by_age(begin, end);
      }
      begin = end;
      total = 0;
      members = 0;
    };
    for (size_t m = lo; m < hi; ++m) {
      if (m > begin &&
          (total + run[m].file_size > options.target_bytes || m - begin >= options.max_inputs)) {
        close(m, true);
      }
      total += run[m].file_size;
      if (cls[m] == c) ++members;
      if (members >= options.fan_in || total >= options.target_bytes) close(m + 1, true);
    }
    close(hi, false);
  };

  // [lo, hi): the biggest class c present forms one group from its first to its last member
  // (smaller segments between them are merged with them: no neighbour of their own class can
  // ever reach them); what lies before and after is planned the same way. The recursion depth is
  // bounded by the number of classes (each level has a strictly smaller class).
  auto partition = [&](auto& self, size_t lo, size_t hi) -> void {
    if (lo >= hi) return;
    const int c = *std::min_element(cls.begin() + static_cast<std::ptrdiff_t>(lo),
                                    cls.begin() + static_cast<std::ptrdiff_t>(hi));
    size_t first = lo, last = hi - 1;
    while (cls[first] != c) ++first;
    while (cls[last] != c) --last;
    self(self, lo, first);
    chunk_group(first, last + 1, c);
    self(self, last + 1, hi);
  };
  partition(partition, 0, run.size());
  return out;
}

// One input being read: its record and its open reader (of the local file, or of a fetched
// copy whose temporary file goes with the reader).
struct Merger::Input {
  const SegmentRecord* seg = nullptr;
  std::unique_ptr<SegmentReader> reader;
};

Merger::Merger(Env* env, Clock* clock, Global* global, SegmentStore* store, SegmentFetcher* fetcher,
               PeerView* peers, std::function<std::vector<PartitionId>()> owned_partitions,
               MergeOptions options)
    : env_(env),
      clock_(clock),
      global_(global),
      store_(store),
      fetcher_(fetcher),
      peers_(peers),
      owned_partitions_(std::move(owned_partitions)),
      options_(std::move(options)),
      self_(peers->Self()),
      rng_state_(std::random_device{}() ^ (static_cast<uint64_t>(std::random_device{}()) << 32)),
      loop_("merge", {.interval = options_.interval}, [this] {
        (void)RunOnce();  // failures are logged and kept in stats
      }) {
  options_.fan_in = std::max<size_t>(options_.fan_in, 2);
  options_.min_inputs = std::max<size_t>(options_.min_inputs, 2);
  options_.max_inputs = std::max(options_.max_inputs, options_.min_inputs);
  if (options_.copy_block_raw_bytes == 0)
    options_.copy_block_raw_bytes = std::max<uint64_t>(options_.segment.block_raw_bytes / 4, 1);
}

Merger::~Merger() { Stop(); }

Status Merger::Start() {
  RETURN_IF_ERROR(env_->CreateDirs(store_->dir()));
  if (!loop_.Start()) return Status::InvalidArgument("merger already started");
  return Status::OK();
}

void Merger::Stop() { loop_.Stop(); }

Merger::Stats Merger::stats() const {
  std::lock_guard lock(stats_mu_);
  return stats_;
}

void Merger::Fail(const Status& st) {
  spdlog::warn("merge: {}", st.ToString());
  std::lock_guard lock(stats_mu_);
  stats_.last_error = st.ToString();
}

uint32_t Merger::RandomU32() {
  // splitmix64
  uint64_t z = (rng_state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return static_cast<uint32_t>(z);
}

Status Merger::RunOnce() {
  std::lock_guard run(run_mu_);
  Status first;
  auto note = [&](const Status& st) {
    if (!st.ok() && first.ok()) first = st;
  };
  SweepUnknown();
  note(ResolveStaged());
  for (const Plan& plan : MakePlans()) {
    if (loop_.stopping()) break;
    const int64_t cpu_start = ThreadCpuMicros();
    note(Execute(plan));
    const int64_t cpu = ThreadCpuMicros() - cpu_start;
    std::lock_guard lock(stats_mu_);
    stats_.cpu_micros += static_cast<uint64_t>(std::max<int64_t>(cpu, 0));
  }
  return first;
}

void Merger::SweepUnknown() {
  if (unknown_.empty()) return;
  std::set<std::string> known;
  global_->Read([&](const GlobalState& s) {
    for (const auto& [id, seg] : s.segments) {
      if (unknown_.count(seg.file_name) != 0) known.insert(seg.file_name);
    }
  });
  const int64_t now = clock_->MonotonicMicros();
  for (auto it = unknown_.begin(); it != unknown_.end();) {
    if (known.count(it->first) != 0) {
      it = unknown_.erase(it);  // staged after all: handled like any staged output
    } else if (now - it->second >= options_.grace.count() * 1000) {
      // Never staged (or staged after this point: then its commit finds the file missing and
      // the merge is aborted, see ResolveStaged).
      spdlog::info("merge: deleting {} (its StageMerge was never applied)", it->first);
      store_->DeleteWhenUnpinned(it->first);
      it = unknown_.erase(it);
    } else {
      ++it;
    }
  }
}

Status Merger::ResolveStaged() {
  struct Staged {
    SegmentRecord seg;
    std::vector<std::string> input_files;  // of the inputs still present
    std::string gone;                      // description of a vanished input, empty if none
  };
  std::vector<Staged> mine, abandoned;
  uint32_t r = 1;
  std::set<int32_t> owned;
  for (PartitionId p : owned_partitions_()) owned.insert(p.value);
  global_->Read([&](const GlobalState& s) {
    r = EffectiveReplicationFactor(s);
    for (const auto& [id, seg] : s.segments) {
      if (!seg.staged()) continue;
      if (seg.node == self_) {
        Staged st{seg, {}, {}};
        for (SegmentId in : seg.merge_inputs) {
          auto it = s.segments.find(in);
          if (it == s.segments.end()) {
            if (st.gone.empty()) st.gone = "input segment " + std::to_string(in.value) + " is gone";
          } else {
            st.input_files.push_back(it->second.file_name);
          }
        }
        mine.push_back(std::move(st));
      } else if (owned.count(seg.partition.value) != 0) {
        abandoned.push_back(Staged{seg, {}, {}});
      }
    }
  });

  Status first;
  for (const Staged& st : mine) {
    if (loop_.stopping()) break;
    const SegmentRecord& seg = st.seg;
    if (!st.gone.empty()) {
      Status s = Abort(seg, st.gone);
      if (!s.ok() && first.ok()) first = s;
      continue;
    }
    // A replica listed for this node counts only while the file is really here.
    size_t copies = 0;
    bool self_listed = false;
    for (NodeId n : seg.replicas) {
      if (n == self_) {
        self_listed = true;
      } else {
        ++copies;
      }
    }
    const bool here = self_listed && store_->Has(seg.file_name);
    if (here) ++copies;
    if (copies < r) {
      if (copies == 0) {
        Status s = Abort(seg, "its output file is lost");
        if (!s.ok() && first.ok()) first = s;
      }
      continue;  // waiting for the replicator
    }
    auto outcome = global_->Submit(CommitMerge{seg.id});
    if (!outcome.ok()) {
      if (outcome.status().code() == StatusCode::kRejected) {
        // Lost a race (an input removed meanwhile): the next pass aborts it.
        spdlog::info("merge: commit of segment {} not applied: {}", seg.id.value,
                     outcome.status().ToString());
      } else {
        Status s = outcome.status().WithContext("committing merge " + std::to_string(seg.id.value));
        Fail(s);
        if (first.ok()) first = s;
      }
      continue;
    }
    spdlog::info("merge: committed segment {} replacing {} segments of {} partition {}",
                 seg.id.value, seg.merge_inputs.size(), Describe(seg.datasource),
                 seg.partition.value);
    {
      std::lock_guard lock(stats_mu_);
      ++stats_.merges_committed;
      stats_.segments_merged_away += seg.merge_inputs.size();
    }
    // Merged-away copies are deleted by the storage layer after its deletion delay: a
    // coordinator that read Global before the swap may still ask this node to read them.
  }

  for (const Staged& st : abandoned) {
    if (loop_.stopping()) break;
    if (peers_->IsPresent(st.seg.node, options_.grace)) continue;
    Status s = Abort(
        st.seg, "its writer, node " + std::to_string(st.seg.node.value) + ", is gone (abandoned)");
    if (!s.ok() && first.ok()) first = s;
  }
  return first;
}

Status Merger::Abort(const SegmentRecord& seg, const std::string& why) {
  auto outcome = global_->Submit(RemoveSegments{{seg.id}});
  if (!outcome.ok()) {
    Status s = outcome.status().WithContext("aborting merge " + std::to_string(seg.id.value));
    Fail(s);
    return s;
  }
  spdlog::info("merge: aborted staged segment {} of {} partition {}: {}", seg.id.value,
               Describe(seg.datasource), seg.partition.value, why);
  {
    std::lock_guard lock(stats_mu_);
    ++stats_.merges_aborted;
  }
  DeleteLocalUnlessReferenced(seg.file_name);
  return Status::OK();
}

void Merger::DeleteLocalUnlessReferenced(const std::string& file_name) {
  bool referenced = false;
  global_->Read([&](const GlobalState& s) {
    for (const auto& [id, seg] : s.segments) {
      if (seg.file_name == file_name) {
        referenced = true;
        break;
      }
    }
  });
  if (!referenced) store_->DeleteWhenUnpinned(file_name);
}

std::vector<Merger::Plan> Merger::MakePlans() {
  std::set<int32_t> owned;
  for (PartitionId p : owned_partitions_()) owned.insert(p.value);
  const int64_t now = clock_->MonotonicMicros();
  std::vector<Plan> plans;

  global_->Read([&](const GlobalState& s) {
    // Partitions this node may merge: owned here and in Global.
    std::set<int32_t> mergeable;
    for (int32_t p : owned) {
      auto it = s.partitions.find(p);
      if (it != s.partitions.end() && it->second.owner == self_) mergeable.insert(p);
    }
    std::set<SegmentId> staged_inputs;
    for (const auto& [id, seg] : s.segments) {
      for (SegmentId in : seg.merge_inputs) staged_inputs.insert(in);
    }
    // Committed segments per (datasource, partition, commit-log generation): positions of
    // different generations are unrelated, so a run never spans two.
    std::map<std::tuple<std::string, int32_t, uint32_t>, std::vector<const SegmentRecord*>> groups;
    for (const auto& [id, seg] : s.segments) {
      if (seg.staged() || mergeable.count(seg.partition.value) == 0) continue;
      if (seg.file_size < options_.small_bytes) first_seen_us_.try_emplace(id, now);
      groups[{seg.datasource.Key(), seg.partition.value, seg.generation}].push_back(&seg);
    }
    // Forget segments that left Global and expired exclusions.
    for (auto it = first_seen_us_.begin(); it != first_seen_us_.end();) {
      it = s.segments.count(it->first) == 0 ? first_seen_us_.erase(it) : std::next(it);
    }
    for (auto it = excluded_until_.begin(); it != excluded_until_.end();) {
      it = (s.segments.count(it->first) == 0 || it->second <= now) ? excluded_until_.erase(it)
                                                                   : std::next(it);
    }

    for (auto& [key, segs] : groups) {
      std::sort(segs.begin(), segs.end(), [](const SegmentRecord* a, const SegmentRecord* b) {
        return a->min_pos < b->min_pos;
      });
      // Runs: maximal sequences of consecutive candidates; each is planned by PlanRunMerges.
      std::vector<const SegmentRecord*> run;
      auto plan_run = [&] {
        std::vector<RunMember> members;
        members.reserve(run.size());
        for (const SegmentRecord* seg : run) {
          auto name = ParseSegmentFileName(seg->file_name);
          members.push_back(RunMember{seg->file_size, first_seen_us_[seg->id],
                                      name.ok() && name->kind == SegmentFileKind::kMerged});
        }
        for (const auto& [begin, end] : PlanRunMerges(members, options_, now)) {
          Plan plan;
          plan.size_class = std::numeric_limits<int>::max();
          for (size_t k = begin; k < end; ++k) {
            plan.inputs.push_back(*run[k]);
            plan.input_bytes += run[k]->file_size;
            plan.size_class =
                std::min(plan.size_class,
                         MergeSizeClass(run[k]->file_size, options_.small_bytes, options_.fan_in));
          }
          plans.push_back(std::move(plan));
        }
        run.clear();
      };
      for (const SegmentRecord* seg : segs) {
        // A segment without any copy (only in the bucket, evicted everywhere) is left alone.
        const bool candidate = seg->file_size < options_.small_bytes && !seg->replicas.empty() &&
                               staged_inputs.count(seg->id) == 0 &&
                               excluded_until_.count(seg->id) == 0;
        if (candidate) {
          run.push_back(seg);
        } else {
          plan_run();  // a run never spans a segment that is not merged with it
        }
      }
      plan_run();
    }
  });
  return plans;
}

Result<std::unique_ptr<SegmentReader>> Merger::OpenInput(const SegmentRecord& seg) {
  if (store_->Has(seg.file_name)) return store_->Open(seg.file_name);
  Status last = Status::Unavailable("no live node holds it");
  for (NodeId holder : seg.replicas) {
    if (holder == self_ || fetcher_ == nullptr || !peers_->IsAlive(holder)) continue;
    auto bytes = fetcher_->Fetch(holder, seg);
    if (!bytes.ok()) {
      last = bytes.status().WithContext("fetching from node " + std::to_string(holder.value));
      continue;
    }
    Status verified = VerifySegmentBytes(seg, *bytes);
    if (!verified.ok()) {
      last = verified.WithContext("copy of node " + std::to_string(holder.value));
      continue;
    }
    return store_->OpenCopy(*bytes);
  }
  return last;
}

Status Merger::InputFailed(const SegmentRecord& seg, const Status& st) {
  // Fail on the input at fault: a corrupt or unreachable one is left out of planning for a while.
  excluded_until_[seg.id] = clock_->MonotonicMicros() + kRetryFailedInputUs;
  return st.WithContext("input segment " + std::to_string(seg.id.value) + " ('" + seg.file_name +
                        "')");
}

Status Merger::OpenInputs(const Plan& plan, std::vector<std::unique_ptr<Input>>* inputs) {
  // Every input is opened first (fetching missing ones) so that an unreachable input costs no
  // decoding.
  for (const SegmentRecord& seg : plan.inputs) {
    auto in = std::make_unique<Input>();
    in->seg = &seg;
    auto reader = OpenInput(seg);
    if (!reader.ok()) return InputFailed(seg, reader.status());
    const SegmentInfo& info = (*reader)->info();
    if (!(info.datasource == seg.datasource) || info.partition != seg.partition ||
        info.min_pos != seg.min_pos || info.max_pos != seg.max_pos ||
        info.event_count != seg.event_count || info.content_hash != seg.content_hash) {
      return InputFailed(seg, Status::Corruption("the file does not match its Global record"));
    }
    in->reader = std::move(*reader);
    inputs->push_back(std::move(in));
  }
  return Status::OK();
}

Status Merger::CopyEvents(std::vector<std::unique_ptr<Input>>& inputs, SegmentFileWriter* out) {
  DecodedBlock block;
  StoredBlock stored;
  PositionedEvent pe;  // reused: its strings keep their capacity
  bool have_last = false;
  Position last;
  const bool v2_output = options_.segment.format_version == 2;
  for (auto& in : inputs) {
    const SegmentRecord& seg = *in->seg;
    uint64_t n = 0;
    const bool v2_input = in->reader->format_version() == 2;
    for (size_t b = 0; b < in->reader->blocks().size(); ++b) {
      const BlockInfo& info = in->reader->blocks()[b];
      if (v2_output && v2_input && info.raw_bytes >= options_.copy_block_raw_bytes) {
        // A full block: copied as stored (chunk checksums verified, timestamps and positions
        // checked against its index entry), its range checked here as each event's is below.
        Status st = in->reader->ReadStoredBlock(b, &stored);
        if (!st.ok()) return InputFailed(seg, st);
        if (stored.info.min_pos < seg.min_pos || seg.max_pos < stored.info.max_pos ||
            (have_last && stored.info.min_pos <= last)) {
          return InputFailed(
              seg, Status::Corruption("block at positions " + Str(stored.info.min_pos) + ".." +
                                      Str(stored.info.max_pos) +
                                      " out of order or outside the segment's range"));
        }
        st = out->AddStoredBlock(stored);
        // Corruption: the block's layout chunk passed its checksum but does not decode.
        if (st.code() == StatusCode::kCorruption) return InputFailed(seg, st);
        RETURN_IF_ERROR(st);
        last = stored.info.max_pos;
        have_last = true;
        n += stored.info.event_count;
        std::lock_guard lock(stats_mu_);
        ++stats_.blocks_copied;
        continue;
      }
      {
        std::lock_guard lock(stats_mu_);
        ++stats_.blocks_reencoded;
      }
      Status st = in->reader->ReadBlock(b, &block);
      if (!st.ok()) return InputFailed(seg, st);
      for (size_t i = 0; i < block.size(); ++i) {
        const Position pos = block.positions[i];
        if (pos < seg.min_pos || seg.max_pos < pos || (have_last && pos <= last)) {
          return InputFailed(seg,
                             Status::Corruption("event at position " + Str(pos) +
                                                " out of order or outside the segment's range"));
        }
        pe.pos = pos;
        pe.event.timestamp_ms = block.timestamps[i];
        pe.event.ingest_ms = block.ingest_ts[i];
        pe.event.raw.assign(block.raw[i]);
        const size_t nf = block.field_begin[i + 1] - block.field_begin[i];
        pe.event.fields.resize(nf);
        for (size_t j = 0; j < nf; ++j) {
          const FieldView& f = block.fields[block.field_begin[i] + j];
          pe.event.fields[j].name.assign(f.name);
          pe.event.fields[j].value.assign(f.value);
        }
        RETURN_IF_ERROR(out->Add(pe));
        last = pos;
        have_last = true;
        ++n;
      }
    }
    if (n != seg.event_count) {
      return InputFailed(seg,
                         Status::Corruption("holds " + std::to_string(n) + " events, Global says " +
                                            std::to_string(seg.event_count)));
    }
    in->reader.reset();
  }
  return Status::OK();
}

Status Merger::Execute(const Plan& plan) {
  const SegmentRecord& first = plan.inputs.front();
  const SegmentRecord& back = plan.inputs.back();
  auto failed = [&](const Status& st) {
    {
      std::lock_guard lock(stats_mu_);
      ++stats_.merges_failed;
    }
    Status s = st.WithContext("merging " + std::to_string(plan.inputs.size()) + " segments of " +
                              Describe(first.datasource) + " partition " +
                              std::to_string(first.partition.value));
    Fail(s);
    return s;
  };

  const std::string name =
      MergedSegmentFileName(first.partition, first.min_pos, self_, RandomU32());
  Result<SegmentInfo> info = Status::Internal("not written");
  std::unique_ptr<SegmentStore::NewSegment> output;
  {
    // Inputs are pinned while they are read, which is while the output is written.
    std::vector<std::string> names;
    for (const SegmentRecord& seg : plan.inputs) names.push_back(seg.file_name);
    SegmentStore::PinHandle pin = store_->Pin(names);
    std::vector<std::unique_ptr<Input>> inputs;
    Status st = OpenInputs(plan, &inputs);
    if (!st.ok()) return failed(st);
    auto created = store_->Create(name);
    if (!created.ok()) return failed(created.status().WithContext("writing " + name));
    output = std::move(*created);
    info = output->WriteFrom(first.datasource, first.partition, options_.segment,
                             [&](SegmentFileWriter* w) { return CopyEvents(inputs, w); });
    if (!info.ok()) return failed(info.status().WithContext("writing " + name));
  }
  {
    std::lock_guard lock(stats_mu_);
    stats_.bytes_read += plan.input_bytes;
  }
  if (info->min_pos != first.min_pos || info->max_pos != back.max_pos) {
    // Never published: the handle removes the file.
    return failed(Status::Internal("output range " + Str(info->min_pos) + ".." +
                                   Str(info->max_pos) + " is not the inputs' range"));
  }
  Status published = output->Publish();
  if (!published.ok()) return failed(published.WithContext("writing " + name));
  {
    std::lock_guard lock(stats_mu_);
    stats_.bytes_written += info->file_size;
  }

  SegmentRecord rec = SegmentRecordFor(*info, name, self_, Epoch(0));
  global_->Read([&](const GlobalState& s) {
    auto it = s.partitions.find(first.partition.value);
    if (it != s.partitions.end()) rec.epoch = it->second.epoch;
  });
  std::vector<SegmentId> ids;
  for (const SegmentRecord& seg : plan.inputs) ids.push_back(seg.id);

  auto outcome = global_->Submit(StageMerge{rec, ids});
  if (!outcome.ok()) {
    if (outcome.status().code() == StatusCode::kRejected) {
      store_->DeleteWhenUnpinned(name);
    } else {
      // It may still be applied: keep the file for `grace` (SweepUnknown).
      unknown_[name] = clock_->MonotonicMicros();
    }
    return failed(outcome.status().WithContext("staging " + name));
  }
  spdlog::info(
      "merge: staged segment {} from {} segments ({} bytes, class {}) of {} partition {}: {} bytes",
      outcome->segment_id.value, plan.inputs.size(), plan.input_bytes, plan.size_class,
      Describe(first.datasource), first.partition.value, info->file_size);
  std::lock_guard lock(stats_mu_);
  ++stats_.merges_staged;
  return Status::OK();
}

}  // namespace sediment
