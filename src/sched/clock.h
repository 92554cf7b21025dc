// Clock: the scheduler core's only source of time. The live controller passes the system clock,
// the simulator a clock that its event loop sets, tests a FakeClock (src/testing/).
// Thread-safety: implementations say; the core calls Now() from its single thread.
#pragma once

#include "common/time.h"

namespace gpufleet::sched {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual Time Now() const = 0;
};

}  // namespace gpufleet::sched
