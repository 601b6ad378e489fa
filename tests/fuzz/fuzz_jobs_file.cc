// libFuzzer target: `gantry submit --jobs-file` input (priority,script,conda_env,arguments,
// allowed_gpus), parsed into job specs; every line it accepts must also parse as a spec.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "client/jobs_file.h"
#include "core/spec_yaml.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto lines = gantry::ParseJobsText(text, "fuzz.txt");
  if (!lines) return 0;
  for (const gantry::JobsFileLine& line : *lines) {
    auto spec = gantry::ParseJobSpec(line.spec);
    if (!spec && spec.status().field().empty()) std::abort();
  }
  return 0;
}
