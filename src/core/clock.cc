// The real-time clock behind the Clock seam.
#include "core/clock.h"

#include <chrono>

namespace gantry {

namespace {

class SystemClock : public Clock {
 public:
  TimeMs NowMs() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

}  // namespace

const Clock& WallClock() {
  static const SystemClock clock;
  return clock;
}

}  // namespace gantry
