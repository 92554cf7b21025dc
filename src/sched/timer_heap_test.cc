#include "sched/timer_heap.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <tuple>
#include <vector>

namespace gpufleet::sched {
namespace {

using Key = std::tuple<int64_t, int64_t, uint32_t>;  // (time ms, seq, slot)

Key KeyOf(const TimerHeap::Entry& e) { return {e.at.millis(), e.seq, e.slot}; }

// Every entry after the first comes no earlier than its parent.
void ExpectHeapOrder(const TimerHeap& h) {
  const auto& e = h.entries();
  for (size_t i = 1; i < e.size(); ++i) {
    const auto& parent = e[TimerHeap::Parent(i)];
    EXPECT_FALSE(std::tie(e[i].at, e[i].seq) < std::tie(parent.at, parent.seq)) << "entry " << i << " before its parent";
  }
}

TEST(TimerHeapTest, TopIsTheEarliestAndTiesGoToTheLowerSeq) {
  // Given timers at 30, 10 and 10 ms (seqs 5, 9 and 2), expect 10 ms with seq 2 first, then
  // seq 9, then 30 ms; removing the first leaves seq 9's at the top.
  TimerHeap h;
  h.Push(0, Time::FromMillis(30), 5);
  h.Push(1, Time::FromMillis(10), 9);
  h.Push(2, Time::FromMillis(10), 2);
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(h.top().slot, 2u);
  h.Remove(2);
  EXPECT_EQ(h.top().slot, 1u);
  h.Remove(1);
  EXPECT_EQ(h.top().slot, 0u);
  h.Remove(0);
  EXPECT_TRUE(h.empty());
}

TEST(TimerHeapTest, RemovingFromTheMiddleKeepsTheOrderWhenTheLastEntryMustRise) {
  // Given the heap 1 | 20, 2, 30, 40 | 21, 22, 23, 24 (under the 20) | 3 (under the 2), expect
  // removing the 22 to move the 3 into its place under the 20, where it must rise above it:
  // the order stays 1, 2, 3, 20, 21, 23, 24, 30, 40.
  TimerHeap h;
  const std::vector<int64_t> at = {1, 20, 2, 30, 40, 21, 22, 23, 24, 3};
  for (uint32_t s = 0; s < at.size(); ++s) h.Push(s, Time::FromMillis(at[s]), s);
  ASSERT_EQ(h.entries()[1].at, Time::FromMillis(20));
  ASSERT_EQ(h.entries()[6].at, Time::FromMillis(22));
  ASSERT_EQ(h.entries()[9].at, Time::FromMillis(3));
  ASSERT_EQ(TimerHeap::Parent(6), 1u);
  ASSERT_EQ(TimerHeap::Parent(9), 2u);
  h.Remove(6);  // the 22
  ExpectHeapOrder(h);
  std::vector<int64_t> order;
  while (!h.empty()) {
    order.push_back(h.top().at.millis());
    h.Remove(h.top().slot);
  }
  EXPECT_EQ(order, (std::vector<int64_t>{1, 2, 3, 20, 21, 23, 24, 30, 40}));
}

TEST(TimerHeapTest, RandomPushesAndRemovalsMatchAnOrderedSet) {
  // Given 20,000 random operations on 300 slots (set a timer on a free slot, drop one, or take
  // the first), expect the top, the size and the timers due by a random instant to match a
  // std::set of the live timers after every operation, and the heap order to hold throughout.
  TimerHeap h;
  std::set<Key> live;
  std::vector<int64_t> at_of(300, -1);  // per slot: its timer's time, or -1
  std::mt19937 rng(5);
  int64_t next_seq = 0;
  for (int op = 0; op < 20000; ++op) {
    const uint32_t slot = static_cast<uint32_t>(rng() % at_of.size());
    const int kind = static_cast<int>(rng() % 3);
    if (at_of[slot] < 0 && kind != 2) {
      at_of[slot] = static_cast<int64_t>(rng() % 1000);
      const int64_t seq = next_seq++;
      h.Push(slot, Time::FromMillis(at_of[slot]), seq);
      live.insert({at_of[slot], seq, slot});
    } else if (at_of[slot] >= 0 && kind == 1) {
      auto it = std::find_if(live.begin(), live.end(), [&](const Key& k) { return std::get<2>(k) == slot; });
      ASSERT_NE(it, live.end());
      live.erase(it);
      h.Remove(slot);
      at_of[slot] = -1;
    } else if (!live.empty() && kind == 2) {
      const uint32_t first = std::get<2>(*live.begin());
      ASSERT_EQ(h.top().slot, first);
      live.erase(live.begin());
      h.Remove(first);
      at_of[first] = -1;
    }
    ASSERT_EQ(h.size(), live.size());
    if (!live.empty()) {
      ASSERT_EQ(KeyOf(h.top()), *live.begin()) << "after operation " << op;
    }
    if (op % 97 == 0) {
      ExpectHeapOrder(h);
      const int64_t now = static_cast<int64_t>(rng() % 1000);
      std::vector<Key> want, got;
      for (const Key& k : live) {
        if (std::get<0>(k) <= now) want.push_back(k);
      }
      for (const auto& e : h.DueBy(Time::FromMillis(now))) got.push_back(KeyOf(e));
      ASSERT_EQ(got, want) << "due by " << now << " ms after operation " << op;
    }
  }
}

}  // namespace
}  // namespace gpufleet::sched
