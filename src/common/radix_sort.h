// Least-significant-digit radix sort of 64-bit keys, for the large one-off sorts of a replay
// (a trace's jobs by submit time, a summary's percentiles): a few linear passes instead of
// n log n comparisons. Stable, so the order it gives is the order std::stable_sort gives.
//
// Keys are unsigned; OrderedBits maps a signed integer or a double to unsigned bits of the same
// order (for doubles: -0.0 comes just before +0.0, and NaNs sort to the ends).
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace gpufleet {

inline uint64_t OrderedBits(int64_t v) { return static_cast<uint64_t>(v) ^ (uint64_t{1} << 63); }

inline uint64_t OrderedBits(double v) {
  const uint64_t bits = std::bit_cast<uint64_t>(v);
  // Negatives: every bit flipped (larger magnitudes first); others: the sign bit set.
  return (bits >> 63) != 0 ? ~bits : bits | (uint64_t{1} << 63);
}

inline double DoubleOfOrderedBits(uint64_t key) {
  const uint64_t bits = (key >> 63) != 0 ? key & ~(uint64_t{1} << 63) : ~key;
  return std::bit_cast<double>(bits);
}

// Sorts `items` by key(item) ascending, stably. `Item` must be copyable; `key` returns uint64_t.
template <class Item, class KeyOf>
void RadixSort(std::vector<Item>& items, KeyOf key) {
  const size_t n = items.size();
  if (n < 2) return;
  constexpr int kBits = 8;
  constexpr size_t kBuckets = size_t{1} << kBits;
  constexpr int kPasses = 64 / kBits;
  // Every digit's counts in one read of the items; a digit all items share needs no pass.
  std::vector<std::array<size_t, kBuckets>> counts(kPasses);
  for (auto& c : counts) c.fill(0);
  for (const Item& it : items) {
    const uint64_t k = key(it);
    for (int d = 0; d < kPasses; ++d) ++counts[d][(k >> (d * kBits)) & (kBuckets - 1)];
  }
  std::vector<Item> buffer(n);
  std::vector<Item>* from = &items;
  std::vector<Item>* to = &buffer;
  for (int d = 0; d < kPasses; ++d) {
    std::array<size_t, kBuckets>& c = counts[d];
    const uint64_t first_digit = (key((*from)[0]) >> (d * kBits)) & (kBuckets - 1);
    if (c[first_digit] == n) continue;
    size_t sum = 0;
    for (size_t& x : c) sum += std::exchange(x, sum);  // counts -> where each bucket starts
    for (const Item& it : *from) (*to)[c[(key(it) >> (d * kBits)) & (kBuckets - 1)]++] = it;
    std::swap(from, to);
  }
  if (from != &items) items.swap(*from);
}

}  // namespace gpufleet
