// libFuzzer target: array specs ("0-99:2%8") and dependency lists ("afterok:12:13_4,
// singleton"). Accepted arrays stay within the task and index limits, in order; refusals
// name their field.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/job_arrays.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto array = gantry::ParseArraySpec(text);
  if (array) {
    if (array->tasks.empty() || array->tasks.size() > static_cast<size_t>(gantry::kMaxArrayTasks)) std::abort();
    for (size_t i = 1; i < array->tasks.size(); ++i) {
      if (array->tasks[i] <= array->tasks[i - 1]) std::abort();
    }
    if (array->tasks.back() > gantry::kMaxArrayIndex || array->tasks.front() < 0) std::abort();
    gantry::FormatTaskList(array->tasks);
  } else if (array.status().field() != "array") {
    std::abort();
  }
  auto dependency = gantry::ParseDependency(text);
  if (!dependency && dependency.status().field() != "dependency") std::abort();
  return 0;
}
