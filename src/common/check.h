// CHECK: an always-on invariant assertion. A failed CHECK is a bug in gpufleet, never bad input:
// it prints the condition, the place and the streamed message, then aborts.
#pragma once

#include <sstream>
#include <string>

namespace gpufleet::internal {

class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition);
  [[noreturn]] ~CheckFailure();
  CheckFailure& self() { return *this; }
  template <typename T>
  CheckFailure& operator<<(const T& v) {
    stream_ << v;
    return *this;
  }

 private:
  std::ostringstream stream_;
};

// Lets `CHECK(x) << "msg"` compile to nothing when x holds.
struct Voidify {
  void operator&(CheckFailure&) {}
};

}  // namespace gpufleet::internal

#define CHECK(cond)                     \
  (cond) ? (void)0                      \
         : ::gpufleet::internal::Voidify() & \
               ::gpufleet::internal::CheckFailure(__FILE__, __LINE__, #cond).self()
