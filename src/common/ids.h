// Strong id types: a JobId cannot be passed where a NodeId is expected. Ids are dense small
// integers assigned by whoever owns the objects (the simulator or the store), so they index
// vectors directly; the human-facing name lives in the spec.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <ostream>

namespace gpufleet {

template <typename Tag>
class StrongId {
 public:
  constexpr StrongId() = default;
  constexpr explicit StrongId(int64_t v) : v_(v) {}
  constexpr int64_t value() const { return v_; }
  constexpr bool valid() const { return v_ >= 0; }
  constexpr auto operator<=>(const StrongId&) const = default;

 private:
  int64_t v_ = -1;
};

template <typename Tag>
std::ostream& operator<<(std::ostream& os, StrongId<Tag> id) {
  return os << id.value();
}

using JobId = StrongId<struct JobIdTag>;
using NodeId = StrongId<struct NodeIdTag>;
using TeamId = StrongId<struct TeamIdTag>;

}  // namespace gpufleet

template <typename Tag>
struct std::hash<gpufleet::StrongId<Tag>> {
  size_t operator()(gpufleet::StrongId<Tag> id) const noexcept {
    return std::hash<int64_t>()(id.value());
  }
};
