// libFuzzer target: a job spec as POST /v1/jobs takes it (YAML or JSON), parsed and then
// validated against the built-in GPU catalog and scheduler config. Nothing may crash,
// hang, leak or read out of bounds; every refusal must name a field.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/gpu_catalog.h"
#include "core/job.h"
#include "core/scheduler_config.h"
#include "core/spec_yaml.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const gantry::SchedulerConfig& config = gantry::SchedulerConfig::Builtin();
  std::string text(reinterpret_cast<const char*>(data), size);
  auto spec = gantry::ParseJobSpecText(text);
  if (!spec) {
    if (spec.status().field().empty()) std::abort();  // a refusal must say which field
    return 0;
  }
  if (spec->user.empty()) spec->user = "fuzz";
  if (spec->team.empty()) spec->team = "fuzz";
  gantry::Status s = gantry::ValidateJobSpec(*spec, gantry::GpuCatalog::Builtin(), config);
  if (!s.ok() && s.field().empty()) std::abort();
  return 0;
}
