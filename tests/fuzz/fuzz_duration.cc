// libFuzzer target: durations as people write them (units, Slurm's clock forms, bare
// numbers); whatever is accepted lies within 0..kMaxDurationMs, and a refusal says why.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/duration.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  for (gantry::DurationMs bare : {gantry::kSecondMs, gantry::kMinuteMs}) {
    auto d = gantry::ParseDuration(text, bare);
    if (d && (*d < 0 || *d > gantry::kMaxDurationMs)) std::abort();
    if (!d && d.status().message().empty()) std::abort();
  }
  return 0;
}
