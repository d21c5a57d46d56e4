// RecoverState (global.h): the state a cluster recovered from the bucket starts from.
#include <algorithm>
#include <map>
#include <tuple>

#include "global/global.h"

namespace sediment {
namespace {

// Segments of one datasource, partition and generation: positions are comparable only there.
using RunKey = std::tuple<std::string, int32_t, uint32_t>;

RunKey KeyOf(const SegmentRecord& seg) {
  return {seg.datasource.Key(), seg.partition.value, seg.generation};
}

bool Overlaps(const SegmentRecord& a, const SegmentRecord& b) {
  return !(a.max_pos < b.min_pos || b.max_pos < a.min_pos);
}

}  // namespace

GlobalState RecoverState(const GlobalState& snapshot, const std::string& snapshot_key,
                         const std::vector<BucketSegmentFile>& files,
                         std::vector<SegmentRecord> found) {
  std::map<std::string, uint64_t> in_bucket;
  for (const auto& f : files) in_bucket[f.file_name] = f.size;

  GlobalState out = snapshot;
  out.applied_through = Offset(-1);
  out.generation = snapshot.generation + 1;
  out.nodes.clear();
  out.flushed_through.clear();
  for (auto& [p, ps] : out.partitions) {
    ps.owner = NodeId(0);
    ps.epoch = Epoch(ps.epoch.value + 1);
    ps.replay_point = Offset(0);
    ps.truncated_before = Offset(0);
  }

  RecoveryReport report;
  report.generation = out.generation;
  report.snapshot_applied_through = snapshot.applied_through;
  report.snapshot_key = snapshot_key;
  std::vector<LostSegment> lost;
  std::map<RunKey, std::vector<const SegmentRecord*>> kept_by_run;
  out.segments.clear();
  for (const auto& [id, seg] : snapshot.segments) {
    if (seg.staged()) continue;  // its inputs are committed
    auto it = in_bucket.find(seg.file_name);
    if (it == in_bucket.end() || it->second != seg.file_size) {
      LostSegment l;
      l.datasource = seg.datasource.Key();
      l.partition = seg.partition;
      l.min_ts = seg.min_ts;
      l.max_ts = seg.max_ts;
      l.event_count = seg.event_count;
      l.raw_bytes = seg.raw_bytes;
      l.file_name = seg.file_name;
      lost.push_back(std::move(l));
      ++report.lost_segments;
      report.lost_events += seg.event_count;
      report.lost_bytes += seg.file_size;
      continue;
    }
    SegmentRecord kept = seg;
    kept.replicas.clear();
    kept.uploaded = true;
    ++report.kept_segments;
    report.kept_events += seg.event_count;
    report.kept_bytes += seg.file_size;
    auto [pos, inserted] = out.segments.emplace(id, std::move(kept));
    kept_by_run[KeyOf(pos->second)].push_back(&pos->second);
  }

  // Files uploaded after the snapshot, largest first: a merge output present beside some of its
  // inputs (not yet collected) covers them all, so it wins over them.
  std::sort(found.begin(), found.end(), [](const SegmentRecord& a, const SegmentRecord& b) {
    if (a.event_count != b.event_count) return a.event_count > b.event_count;
    return a.file_name < b.file_name;
  });
  std::set<std::string> listed;
  for (const auto& [id, seg] : snapshot.segments) listed.insert(seg.file_name);
  for (SegmentRecord& seg : found) {
    auto it = in_bucket.find(seg.file_name);
    if (listed.count(seg.file_name) != 0 || it == in_bucket.end() || it->second != seg.file_size) {
      continue;
    }
    auto& run = kept_by_run[KeyOf(seg)];
    // A found file that covers every kept segment it overlaps is a merge of them (and maybe of
    // files the bucket no longer has): it replaces them. One that only partly covers them is an
    // input of a kept merge output, or a partial view: skipped.
    bool covers = true;
    std::vector<SegmentId> covered;
    for (const SegmentRecord* k : run) {
      if (!Overlaps(*k, seg)) continue;
      if (k->min_pos < seg.min_pos || seg.max_pos < k->max_pos) {
        covers = false;
        break;
      }
      covered.push_back(k->id);
    }
    if (!covers) continue;
    for (SegmentId id : covered) {
      const SegmentRecord& k = out.segments.at(id);
      const bool was_added = snapshot.segments.count(id) == 0;
      (was_added ? report.added_segments : report.kept_segments) -= 1;
      report.kept_events -= k.event_count;
      report.kept_bytes -= k.file_size;
      std::erase_if(run, [&](const SegmentRecord* r) { return r->id == id; });
      out.segments.erase(id);
    }
    seg.id = out.next_segment_id;
    out.next_segment_id = SegmentId(seg.id.value + 1);
    seg.replicas.clear();
    seg.merge_inputs.clear();
    seg.uploaded = true;
    ++report.added_segments;
    report.kept_events += seg.event_count;
    report.kept_bytes += seg.file_size;
    auto [pos, inserted] = out.segments.emplace(seg.id, std::move(seg));
    run.push_back(&pos->second);
    listed.insert(pos->second.file_name);
  }

  std::sort(lost.begin(), lost.end(), [](const LostSegment& a, const LostSegment& b) {
    return std::tie(a.min_ts, a.file_name) < std::tie(b.min_ts, b.file_name);
  });
  if (lost.size() > RecoveryReport::kMaxLostListed) lost.resize(RecoveryReport::kMaxLostListed);
  report.lost = std::move(lost);
  out.recovery = std::move(report);
  return out;
}

}  // namespace sediment
