// A change to a submitted job (PATCH /v1/jobs/ID, `gantry update`, scontrol update): the
// fields it sets, parsed and typed as a submit's are. Which of them a job's state allows
// (a running job: only its time limit) and who may make them are the state machine's rules.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/job.h"
#include "core/status.h"

namespace YAML {
class Node;
}

namespace gantry {

struct JobChanges {
  // The fields as the caller named them, in order ("time_limit" or "time_limit_s").
  std::vector<std::string> fields;
  std::optional<std::string> name;
  std::optional<std::string> priority_class;
  std::optional<DurationMs> time_limit_ms;  // kTimeLimitAsAllowed for "unlimited"
  std::optional<DurationMs> estimated_duration_ms;
  std::optional<std::vector<std::string>> gpu_types;
  std::optional<double> cost_limit;
  std::optional<std::string> dependency;

  // Whether the change sets the time limit only (what a running job may change).
  bool OnlyTimeLimit() const;
  // Sets the fields on `spec`, with the rules a submit's parse applies between them (a
  // GPU hold no longer than the time limit; an estimate of 0 on a hold: the hold's length).
  // The result is checked as a submit is (ValidateJobSpec) by the caller.
  Status ApplyTo(JobSpec& spec) const;
};

// The fields a submitted job may change, as users write them.
const std::vector<std::string>& ChangeableFields();
// The stored spec's name of a field ("time_limit" -> "time_limit_s").
std::string StoredFieldName(const std::string& field);

// A map of the fields to change, e.g. {time_limit: 4h, priority: high}. Refusals name the
// field: one that cannot change after submit, a value a submit would refuse; "body" for
// anything but a non-empty map.
Expected<JobChanges> ParseJobChanges(const YAML::Node& body);
Expected<JobChanges> ParseJobChangesText(const std::string& text);

}  // namespace gantry
