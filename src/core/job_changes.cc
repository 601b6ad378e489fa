// Parsing a change to a submitted job into typed fields, with a submit's parser (so a
// value is read, and refused, exactly as at submit), and setting them on a spec.
#include "core/job_changes.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>

#include "core/spec_yaml.h"
#include "core/yaml_util.h"

namespace gantry {

const std::vector<std::string>& ChangeableFields() {
  static const std::vector<std::string> kFields = {
      "cost_limit", "dependency", "estimated_duration", "estimated_duration_s", "gpu_types",
      "name",       "priority",   "time_limit",         "time_limit_s"};
  return kFields;
}

std::string StoredFieldName(const std::string& field) {
  if (field == "time_limit" || field == "estimated_duration") return field + "_s";
  return field;
}

bool JobChanges::OnlyTimeLimit() const {
  return std::all_of(fields.begin(), fields.end(),
                     [](const std::string& f) { return StoredFieldName(f) == "time_limit_s"; });
}

Status JobChanges::ApplyTo(JobSpec& spec) const {
  if (name) spec.name = *name;
  if (priority_class) spec.priority_class = *priority_class;
  if (time_limit_ms) spec.time_limit_ms = *time_limit_ms;
  if (estimated_duration_ms) spec.estimated_duration_ms = *estimated_duration_ms;
  if (gpu_types) spec.request.gpu_types = *gpu_types;
  if (cost_limit) spec.cost_limit = *cost_limit;
  if (dependency) spec.dependency = *dependency;
  if (spec.hold_gpus_ms > 0) {  // as a submit's parse has it
    if (time_limit_ms && spec.time_limit_ms > 0 && spec.time_limit_ms < spec.hold_gpus_ms) {
      return Status::Invalid(
          "time_limit", fmt::format("is shorter than the job's hold_gpus ({})", FormatDuration(spec.hold_gpus_ms)));
    }
    if (estimated_duration_ms && spec.estimated_duration_ms == 0) spec.estimated_duration_ms = spec.hold_gpus_ms;
  }
  return Status::Ok();
}

Expected<JobChanges> ParseJobChanges(const YAML::Node& body) {
  if (!body || !body.IsMap() || body.size() == 0) {
    return Status::Invalid("body", "expected a map of the fields to change, e.g. {time_limit: 4h}");
  }
  JobChanges changes;
  const std::vector<std::string>& changeable = ChangeableFields();
  for (const auto& kv : body) {
    if (!kv.first.IsScalar()) {
      return Status::Invalid("body", fmt::format("a field name is a {}: field names are text, e.g. {{time_limit: 4h}}",
                                                 kv.first.IsSequence() ? "list"
                                                 : kv.first.IsMap()    ? "map"
                                                                       : "null"));
    }
    std::string field = kv.first.as<std::string>();
    if (field.empty()) return Status::Invalid("body", "a field name is empty: e.g. {time_limit: 4h}");
    if (std::find(changeable.begin(), changeable.end(), field) == changeable.end()) {
      return Status::Invalid(
          field, fmt::format("cannot be changed after submit (these can: {})", fmt::join(changeable, ", ")));
    }
    changes.fields.push_back(field);
  }
  auto parsed = ParseJobSpec(body);  // the values, read as a submit reads them
  if (!parsed) return parsed.status();
  for (const std::string& field : changes.fields) {
    const std::string stored = StoredFieldName(field);
    if (stored == "name") changes.name = parsed->name;
    if (stored == "priority") changes.priority_class = parsed->priority_class;
    if (stored == "time_limit_s") changes.time_limit_ms = parsed->time_limit_ms;
    if (stored == "estimated_duration_s") changes.estimated_duration_ms = parsed->estimated_duration_ms;
    if (stored == "gpu_types") changes.gpu_types = parsed->request.gpu_types;
    if (stored == "cost_limit") changes.cost_limit = parsed->cost_limit;
    if (stored == "dependency") changes.dependency = parsed->dependency;
  }
  return changes;
}

Expected<JobChanges> ParseJobChangesText(const std::string& text) {
  auto body = LoadYaml(text, "body", "not YAML or JSON");
  if (!body) return body.status();
  return ParseJobChanges(*body);
}

}  // namespace gantry
