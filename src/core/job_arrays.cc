// Parsing of array specs and dependency lists.
#include "core/job_arrays.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <string_view>

namespace gantry {

namespace {

std::vector<std::string_view> Split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  while (true) {
    size_t at = text.find(sep);
    parts.push_back(text.substr(0, at));
    if (at == std::string_view::npos) return parts;
    text.remove_prefix(at + 1);
  }
}

// A non-negative integer written with digits only, at most `max`.
bool ReadIndex(std::string_view digits, int64_t max, int64_t* out) {
  if (digits.empty() || digits.size() > 12) return false;
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
  }
  std::from_chars(digits.data(), digits.data() + digits.size(), *out);
  return *out <= max;
}

Status BadArray(const std::string& text, const std::string& why) {
  return Status::Invalid("array", fmt::format("'{}': {} (use e.g. 0-99, 1,5,9, 0-99:2 or 0-99%8)", text, why));
}

// One item of an array spec: "7", "0-99" or "0-99:2", added to `tasks`.
Status AddRange(const std::string& text, std::string_view item, std::vector<int>* tasks) {
  std::string_view range = item;
  int64_t step = 1;
  if (size_t colon = item.find(':'); colon != std::string_view::npos) {
    if (!ReadIndex(item.substr(colon + 1), kMaxArrayIndex, &step) || step == 0) {
      return BadArray(text, "the step after ':' must be a whole number from 1");
    }
    range = item.substr(0, colon);
  }
  int64_t first = 0, last = 0;
  size_t dash = range.find('-');
  if (!ReadIndex(range.substr(0, dash), kMaxArrayIndex, &first)) {
    return BadArray(text, fmt::format("task indices are whole numbers 0..{}", kMaxArrayIndex));
  }
  last = first;
  if (dash != std::string_view::npos && !ReadIndex(range.substr(dash + 1), kMaxArrayIndex, &last)) {
    return BadArray(text, fmt::format("task indices are whole numbers 0..{}", kMaxArrayIndex));
  }
  if (last < first) return BadArray(text, "a range goes up (0-99, not 99-0)");
  if (dash == std::string_view::npos && step != 1) return BadArray(text, "a step needs a range (0-99:2)");
  for (int64_t t = first; t <= last; t += step) {
    if (tasks->size() >= static_cast<size_t>(kMaxArrayTasks) * 2) break;  // refused below
    tasks->push_back(static_cast<int>(t));
  }
  return Status::Ok();
}

}  // namespace

Expected<ArraySpec> ParseArraySpec(const std::string& text) {
  if (text.empty()) return BadArray(text, "empty");
  if (text.size() > 4096) return BadArray(text.substr(0, 40) + "...", "longer than 4096 characters");
  ArraySpec out;
  std::string_view list = text;
  if (size_t pct = list.find('%'); pct != std::string_view::npos) {
    int64_t limit = 0;
    if (!ReadIndex(list.substr(pct + 1), kMaxArrayTasks, &limit) || limit == 0) {
      return BadArray(text, fmt::format("the limit after '%' must be a whole number 1..{}", kMaxArrayTasks));
    }
    out.limit = static_cast<int>(limit);
    list = list.substr(0, pct);
  }
  for (std::string_view item : Split(list, ',')) {
    if (Status s = AddRange(text, item, &out.tasks); !s.ok()) return s;
  }
  std::sort(out.tasks.begin(), out.tasks.end());
  out.tasks.erase(std::unique(out.tasks.begin(), out.tasks.end()), out.tasks.end());
  if (out.tasks.size() > static_cast<size_t>(kMaxArrayTasks)) {
    return BadArray(text, fmt::format("more than {} tasks", kMaxArrayTasks));
  }
  return out;
}

std::string FormatTaskList(const std::vector<int>& tasks) {
  std::string out;
  size_t i = 0;
  while (i < tasks.size()) {
    size_t j = i + 1;
    int step = j < tasks.size() ? tasks[j] - tasks[i] : 1;
    while (j < tasks.size() && tasks[j] - tasks[j - 1] == step) ++j;
    if (!out.empty()) out += ',';
    if (j - i >= 3) {
      out += step == 1 ? fmt::format("{}-{}", tasks[i], tasks[j - 1])
                       : fmt::format("{}-{}:{}", tasks[i], tasks[j - 1], step);
      i = j;
    } else {
      out += std::to_string(tasks[i]);
      ++i;
    }
  }
  return out;
}

const char* ToString(DependencyKind k) {
  static const char* kNames[] = {"after", "afterok", "afternotok", "afterany", "aftercorr", "singleton"};
  return kNames[static_cast<int>(k)];
}

std::string ToString(const DependencyTarget& t) {
  return t.task < 0 ? std::to_string(t.job) : fmt::format("{}_{}", t.job, t.task);
}

Expected<std::vector<DependencyTerm>> ParseDependency(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return Status::Invalid("dependency", fmt::format("'{}': {} (use e.g. afterok:12:13_4,afterany:15,singleton)",
                                                     text.size() > 200 ? text.substr(0, 200) + "..." : text, why));
  };
  if (text.empty()) return bad("empty");
  if (text.size() > 16384) return bad("longer than 16384 characters");
  if (text.find('?') != std::string::npos) return bad("'?' (any of) is not supported: list terms with ','");
  std::vector<DependencyTerm> terms;
  size_t targets = 0;
  for (std::string_view item : Split(text, ',')) {
    std::vector<std::string_view> parts = Split(item, ':');
    DependencyTerm term;
    static const DependencyKind kKinds[] = {DependencyKind::kAfter,      DependencyKind::kAfterOk,
                                            DependencyKind::kAfterNotOk, DependencyKind::kAfterAny,
                                            DependencyKind::kAfterCorr,  DependencyKind::kSingleton};
    auto kind =
        std::find_if(std::begin(kKinds), std::end(kKinds), [&](DependencyKind k) { return parts[0] == ToString(k); });
    if (kind == std::end(kKinds)) {
      return bad(fmt::format("unknown kind '{}' (after, afterok, afternotok, afterany, aftercorr, singleton)",
                             std::string(parts[0]).substr(0, 40)));
    }
    term.kind = *kind;
    if (term.kind == DependencyKind::kSingleton) {
      if (parts.size() > 1) return bad("singleton takes no job ids");
    } else if (parts.size() < 2) {
      return bad(fmt::format("{} needs job ids ({}:ID[:ID...])", ToString(term.kind), ToString(term.kind)));
    }
    for (size_t i = 1; i < parts.size(); ++i) {
      DependencyTarget t;
      std::string_view id = parts[i];
      if (id.find('+') != std::string_view::npos) return bad("a delay after '+' is not supported");
      size_t underscore = id.find('_');
      int64_t job = 0, task = -1;
      if (!ReadIndex(id.substr(0, underscore), INT64_MAX / 2, &job) || job == 0 ||
          (underscore != std::string_view::npos && !ReadIndex(id.substr(underscore + 1), kMaxArrayIndex, &task))) {
        return bad(
            fmt::format("'{}' is not a job id (12, or 12_4 for task 4 of array 12)", std::string(id).substr(0, 40)));
      }
      t.job = static_cast<uint64_t>(job);
      t.task = static_cast<int>(task);
      if (term.kind == DependencyKind::kAfterCorr && t.task >= 0) {
        return bad("aftercorr names a whole array (its task i waits for task i)");
      }
      term.targets.push_back(t);
      if (++targets > 1000) return bad("more than 1000 jobs");
    }
    terms.push_back(std::move(term));
  }
  return terms;
}

}  // namespace gantry
