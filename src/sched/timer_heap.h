// TimerHeap: the scheduler's pending rank-change timers, one per slot (a job holding a timer
// holds a slot). A 4-ary min-heap of (time, seq, slot) that keeps each slot's position in it,
// so that a dropped timer leaves at once instead of lingering as a dead entry: the heap holds
// only live timers, the first entry is the next one, and a LAS replay, which sets and drops a
// timer at every start and stop, keeps it as small as the number of jobs with timers.
// Entries are ordered by (time, seq); a seq is unique to a slot's holder, so no two tie.
// Four children per entry: half the levels of a binary heap for a timer that fires (taken from
// the top, the last entry sifts down from the root), with a node's children side by side.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "common/time.h"

namespace gpufleet::sched {

class TimerHeap {
 public:
  struct Entry {
    Time at;
    int64_t seq = 0;
    uint32_t slot = 0;
  };

  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  // The next timer; only when not empty.
  const Entry& top() const { return heap_.front(); }

  // Adds the timer of `slot`, which has none in the heap.
  void Push(uint32_t slot, Time at, int64_t seq) {
    if (pos_.size() <= slot) pos_.resize(slot + 1, 0);
    heap_.push_back(Entry{at, seq, slot});
    pos_[slot] = static_cast<uint32_t>(heap_.size() - 1);
    SiftUp(heap_.size() - 1);
  }

  // Removes the timer of `slot`, which has one in the heap.
  void Remove(uint32_t slot) {
    const size_t i = pos_[slot];
    const Entry last = heap_.back();
    heap_.pop_back();
    if (i == heap_.size()) return;  // it was the last entry
    // The last entry takes the removed one's place, then moves up or down to where it belongs.
    Put(i, last);
    if (i > 0 && Before(last, heap_[Parent(i)])) {
      SiftUp(i);
    } else {
      SiftDown(i);
    }
  }

  // The timers due at `now` (at or before it), in order. The entries due form a subtree at the
  // root: only it and its edge are read.
  std::vector<Entry> DueBy(Time now) const {
    std::vector<Entry> due;
    std::vector<size_t> stack;
    if (!heap_.empty()) stack.push_back(0);
    while (!stack.empty()) {
      const size_t i = stack.back();
      stack.pop_back();
      if (heap_[i].at > now) continue;
      due.push_back(heap_[i]);
      for (size_t c = kArity * i + 1; c <= kArity * i + kArity && c < heap_.size(); ++c) stack.push_back(c);
    }
    std::sort(due.begin(), due.end(), Before);
    return due;
  }

  // The entries in heap order (entry i's children are kArity * i + 1 .. kArity * i + kArity),
  // for checks.
  const std::vector<Entry>& entries() const { return heap_; }
  static constexpr size_t kArity = 4;
  static size_t Parent(size_t i) { return (i - 1) / kArity; }

 private:
  static bool Before(const Entry& a, const Entry& b) { return a.at != b.at ? a.at < b.at : a.seq < b.seq; }
  void Put(size_t i, const Entry& e) {
    heap_[i] = e;
    pos_[e.slot] = static_cast<uint32_t>(i);
  }
  void SiftUp(size_t i) {
    const Entry e = heap_[i];
    while (i > 0) {
      const size_t parent = Parent(i);
      if (!Before(e, heap_[parent])) break;
      Put(i, heap_[parent]);
      i = parent;
    }
    Put(i, e);
  }
  void SiftDown(size_t i) {
    const Entry e = heap_[i];
    const size_t n = heap_.size();
    for (;;) {
      const size_t first = kArity * i + 1;
      if (first >= n) break;
      size_t child = first;
      const size_t end = std::min(first + kArity, n);
      for (size_t c = first + 1; c < end; ++c) {
        if (Before(heap_[c], heap_[child])) child = c;
      }
      if (!Before(heap_[child], e)) break;
      Put(i, heap_[child]);
      i = child;
    }
    Put(i, e);
  }

  std::vector<Entry> heap_;
  std::vector<uint32_t> pos_;  // per slot: its entry's index in heap_ (while it has one)
};

}  // namespace gpufleet::sched
