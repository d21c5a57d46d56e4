#include "digest/event_runs.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace sediment {
namespace {

PositionedEvent Ev(int64_t offset, uint32_t index) {
  PositionedEvent e;
  e.pos = Position{Offset(offset), index};
  e.event.timestamp_ms = offset * 10 + index;
  e.event.raw = "event " + std::to_string(offset) + "/" + std::to_string(index);
  return e;
}

std::vector<std::string> Raws(const std::vector<EventRuns::Run>& runs) {
  std::vector<std::string> out;
  for (const auto& r : runs) {
    for (const auto& e : *r) out.push_back(e.event.raw);
  }
  return out;
}

TEST(EventRunsTest, SealSharesRunsWithoutCopying) {
  EventRuns runs;
  EXPECT_TRUE(runs.empty());
  for (uint32_t i = 0; i < 3; ++i) runs.Append(Ev(1, i));
  std::vector<EventRuns::Run> a = runs.Seal();
  ASSERT_EQ(a.size(), 1u);
  // The same run again, not a copy: a snapshot costs no event copy.
  std::vector<EventRuns::Run> b = runs.Seal();
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(a[0].get(), b[0].get());
  const PositionedEvent* first = &a[0]->front();

  runs.Append(Ev(2, 0));
  std::vector<EventRuns::Run> c = runs.Seal();
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].get(), a[0].get());
  EXPECT_EQ(&c[0]->front(), first);  // earlier events never moved
  EXPECT_EQ(runs.size(), 4u);
  EXPECT_EQ(runs.front().pos, (Position{Offset(1), 0}));
  EXPECT_EQ(Raws(c),
            (std::vector<std::string>{"event 1/0", "event 1/1", "event 1/2", "event 2/0"}));
}

TEST(EventRunsTest, DropThroughReleasesWholeRunsAndKeepsTakenOnesValid) {
  EventRuns runs;
  size_t bytes_run1 = 0;
  for (uint32_t i = 0; i < 3; ++i) {
    PositionedEvent e = Ev(1, i);
    bytes_run1 += e.event.ByteSize();
    runs.Append(std::move(e));
  }
  std::vector<EventRuns::Run> taken = runs.Seal();
  runs.Append(Ev(2, 0));
  runs.Append(Ev(3, 0));  // open run

  EXPECT_EQ(runs.DropThrough(Position{Offset(1), 2}), bytes_run1);
  EXPECT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs.sealed_runs(), 0u);
  EXPECT_EQ(runs.front().pos, (Position{Offset(2), 0}));
  // A query that took the run before the drop still reads it.
  EXPECT_EQ(Raws(taken), (std::vector<std::string>{"event 1/0", "event 1/1", "event 1/2"}));

  // Into the open run.
  EXPECT_EQ(runs.DropThrough(Position{Offset(2), 0}), Ev(2, 0).event.ByteSize());
  EXPECT_EQ(Raws(runs.Seal()), (std::vector<std::string>{"event 3/0"}));
  EXPECT_EQ(runs.DropThrough(Position{Offset(9), 0}), Ev(3, 0).event.ByteSize());
  EXPECT_TRUE(runs.empty());
  EXPECT_TRUE(runs.Seal().empty());
}

TEST(EventRunsTest, DropThroughCutsASealedRunInTheMiddle) {
  EventRuns runs;
  for (uint32_t i = 0; i < 4; ++i) runs.Append(Ev(5, i));
  std::vector<EventRuns::Run> taken = runs.Seal();
  runs.Append(Ev(6, 0));
  EXPECT_EQ(runs.DropThrough(Position{Offset(5), 1}),
            Ev(5, 0).event.ByteSize() + Ev(5, 1).event.ByteSize());
  EXPECT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs.front().pos, (Position{Offset(5), 2}));
  EXPECT_EQ(Raws(runs.Seal()), (std::vector<std::string>{"event 5/2", "event 5/3", "event 6/0"}));
  EXPECT_EQ(taken[0]->size(), 4u);  // the taker's run is untouched
  // Below everything: nothing dropped.
  EXPECT_EQ(runs.DropThrough(Position{Offset(1), 0}), 0u);
  EXPECT_EQ(runs.size(), 3u);
}

TEST(EventRunsTest, DropThroughCountsEachEventsOwnBytes) {
  // Events of different sizes (raw strings and fields), dropped in several cuts of one sealed
  // run and then of the open run: each cut returns exactly the bytes of the events it drops.
  auto ev = [](int64_t offset, uint32_t index) {
    PositionedEvent e = Ev(offset, index);
    e.event.raw.append(index * 7, 'x');
    for (uint32_t k = 0; k < index; ++k) e.event.fields.push_back({"f" + std::to_string(k), "v"});
    return e;
  };
  EventRuns runs;
  std::vector<size_t> sizes;
  for (uint32_t i = 0; i < 6; ++i) {
    const size_t want = ev(7, i).event.ByteSize();
    EXPECT_EQ(runs.Append(ev(7, i)), want);
    sizes.push_back(want);
  }
  std::vector<EventRuns::Run> taken = runs.Seal();
  for (uint32_t i = 0; i < 3; ++i) {
    const size_t want = ev(8, i).event.ByteSize();
    EXPECT_EQ(runs.Append(ev(8, i)), want);
    sizes.push_back(want);
  }
  EXPECT_EQ(runs.DropThrough(Position{Offset(7), 1}), sizes[0] + sizes[1]);
  EXPECT_EQ(runs.DropThrough(Position{Offset(7), 3}), sizes[2] + sizes[3]);
  EXPECT_EQ(runs.DropThrough(Position{Offset(8), 0}), sizes[4] + sizes[5] + sizes[6]);
  EXPECT_EQ(runs.DropThrough(Position{Offset(8), 2}), sizes[7] + sizes[8]);
  EXPECT_TRUE(runs.empty());
  EXPECT_EQ(taken[0]->size(), 6u);
}

}  // namespace
}  // namespace sediment
