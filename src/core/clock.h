// The wall clock as an injected seam: code that needs "now" outside the engine (the node
// agent) is given a Clock, so a test can run it on a clock it moves by hand.
#pragma once

#include "core/time.h"

namespace gantry {

class Clock {
 public:
  virtual ~Clock() = default;
  // Milliseconds since the Unix epoch.
  virtual TimeMs NowMs() const = 0;
};

// The system's real-time clock.
const Clock& WallClock();

}  // namespace gantry
