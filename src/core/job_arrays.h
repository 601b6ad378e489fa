// Job arrays and dependencies as Slurm users write them: `--array 0-99:2%8` and
// `--dependency afterok:12:13_4,singleton`. Pure parsers; the controller expands arrays into
// tasks and decides when a dependency is met.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace gantry {

// The most tasks one array may have, and the highest task index.
constexpr int kMaxArrayTasks = 10000;
constexpr int kMaxArrayIndex = 1'000'000;

// "0-99", "1,5,9", "0-99:2", each optionally ending "%8" (at most 8 tasks at once).
struct ArraySpec {
  std::vector<int> tasks;  // ascending, no repeats
  int limit = 0;           // 0: no limit
};
// Errors name the field "array".
Expected<ArraySpec> ParseArraySpec(const std::string& text);
// The tasks as a compact list: "0-99:2" style ranges joined by ','.
std::string FormatTaskList(const std::vector<int>& tasks);

enum class DependencyKind { kAfter, kAfterOk, kAfterNotOk, kAfterAny, kAfterCorr, kSingleton };
const char* ToString(DependencyKind k);

// A job ("12"), one task of an array ("12_4"), or with `task` -1 and an array's id, every
// task of it.
struct DependencyTarget {
  uint64_t job = 0;
  int task = -1;
  bool operator==(const DependencyTarget&) const = default;
};
std::string ToString(const DependencyTarget& t);

struct DependencyTerm {
  DependencyKind kind = DependencyKind::kAfterOk;
  std::vector<DependencyTarget> targets;  // empty for singleton
};

// "afterok:12:13_4,afterany:15,singleton": every term must hold. Errors name the field
// "dependency".
Expected<std::vector<DependencyTerm>> ParseDependency(const std::string& text);

}  // namespace gantry
