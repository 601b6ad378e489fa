// `gantry gpus`: what this machine's GPU provider sees (inventory and one reading per
// GPU, as JSON), and optionally the cost of polling it: --measure S polls every
// telemetry interval for S seconds and reports the CPU share the polling used.
#pragma once

#include <iosfwd>
#include <string>

namespace gantry {

struct GpusCommandOptions {
  std::string provider = "auto";  // auto, nvml, nvidia-smi
  double measure_s = 0;
  double interval_s = 1;
};

int RunGpusCommand(const GpusCommandOptions& options, std::ostream& out, std::ostream& err);

}  // namespace gantry
