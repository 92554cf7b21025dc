#include "common/radix_sort.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <utility>
#include <vector>

namespace gpufleet {
namespace {

TEST(RadixSortTest, OrderedBitsKeepTheOrderOfSignedIntegersAndDoubles) {
  // Given values across signs and magnitudes, expect their keys in the values' order, and each
  // double's key to give the double back bit for bit.
  const std::vector<int64_t> ints = {std::numeric_limits<int64_t>::min(), -5, -1, 0, 1, 7,
                                     std::numeric_limits<int64_t>::max()};
  for (size_t i = 1; i < ints.size(); ++i) EXPECT_LT(OrderedBits(ints[i - 1]), OrderedBits(ints[i])) << ints[i];
  const std::vector<double> doubles = {-std::numeric_limits<double>::infinity(), -1e300, -2.5, -1e-300, -0.0, 0.0,
                                       1e-300, 0.5, 3.0, 1e300, std::numeric_limits<double>::infinity()};
  for (size_t i = 1; i < doubles.size(); ++i) {
    EXPECT_LT(OrderedBits(doubles[i - 1]), OrderedBits(doubles[i])) << doubles[i];
  }
  for (double d : doubles) {
    EXPECT_EQ(std::bit_cast<uint64_t>(DoubleOfOrderedBits(OrderedBits(d))), std::bit_cast<uint64_t>(d)) << d;
  }
}

TEST(RadixSortTest, SortsAsStableSortDoes) {
  // Given random keys (few distinct in some runs, so ties are common; spread over all 64 bits in
  // others) each carrying its position, expect the order std::stable_sort gives: the same keys,
  // ties in their first order.
  std::mt19937_64 rng(42);
  for (uint64_t spread : {uint64_t{7}, uint64_t{1} << 20, ~uint64_t{0}}) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{2}, size_t{1000}, size_t{50000}}) {
      std::vector<std::pair<uint64_t, uint32_t>> items(n);
      for (size_t i = 0; i < n; ++i) items[i] = {spread == ~uint64_t{0} ? rng() : rng() % spread, static_cast<uint32_t>(i)};
      auto expected = items;
      std::stable_sort(expected.begin(), expected.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      RadixSort(items, [](const auto& it) { return it.first; });
      EXPECT_EQ(items, expected) << "n=" << n << " spread=" << spread;
    }
  }
}

TEST(RadixSortTest, DoublesComeOutInNumericOrder) {
  // Given random doubles of both signs, zeros and repeats, expect them sorted as std::sort sorts
  // them (bit for bit, -0.0 before +0.0 where std::sort may put either first).
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> any(-1e6, 1e6);
  std::vector<double> values;
  for (int i = 0; i < 20000; ++i) values.push_back(i % 10 == 0 ? std::round(any(rng) / 1e5) : any(rng));
  values.push_back(-0.0);
  values.push_back(0.0);
  std::vector<uint64_t> keys;
  for (double v : values) keys.push_back(OrderedBits(v));
  RadixSort(keys, [](uint64_t k) { return k; });
  std::vector<double> sorted = values;
  std::sort(sorted.begin(), sorted.end());
  ASSERT_EQ(keys.size(), sorted.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(DoubleOfOrderedBits(keys[i]), sorted[i]) << i;
    if (i > 0) {
      EXPECT_LE(keys[i - 1], keys[i]) << i;
    }
  }
}

}  // namespace
}  // namespace gpufleet
