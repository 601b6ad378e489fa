// libFuzzer target: a job spec as POST /v1/jobs takes it (YAML or JSON), parsed and then
// validated against the built-in GPU catalog and scheduler config; and the same text as
// PATCH /v1/jobs/ID takes a change, set on a held-GPU job's spec and validated. Nothing
// may crash, hang, leak or read out of bounds; every refusal must name a field.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/gpu_catalog.h"
#include "core/job.h"
#include "core/job_changes.h"
#include "core/scheduler_config.h"
#include "core/spec_yaml.h"

namespace {

void Validated(gantry::JobSpec& spec) {
  if (spec.user.empty()) spec.user = "fuzz";
  if (spec.team.empty()) spec.team = "fuzz";
  gantry::Status s = gantry::ValidateJobSpec(spec, gantry::GpuCatalog::Builtin(), gantry::SchedulerConfig::Builtin());
  if (!s.ok() && s.field().empty()) std::abort();  // a refusal must say which field
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto spec = gantry::ParseJobSpecText(text);
  if (!spec && spec.status().field().empty()) std::abort();
  if (spec) Validated(*spec);
  auto changes = gantry::ParseJobChangesText(text);
  if (!changes) {
    if (changes.status().field().empty()) std::abort();
    return 0;
  }
  gantry::JobSpec held;  // a job that holds its GPUs for an hour (the fields' rules bite)
  held.request.gpus = 1;
  held.hold_gpus_ms = 3'600'000;
  held.time_limit_ms = 7'200'000;
  gantry::Status s = changes->ApplyTo(held);
  if (!s.ok()) {
    if (s.field().empty()) std::abort();
    return 0;
  }
  Validated(held);
  return 0;
}
