// The job spec as JSON in the submit format (the YAML/JSON field names users write), which
// ParseJobSpec reads back: how start orders carry a spec and how the store keeps one.
#pragma once

#include <nlohmann/json.hpp>

#include "core/job.h"

namespace gantry {

// Dumping JSON that holds user text: invalid UTF-8 is replaced, never thrown on.
constexpr auto kReplaceBadUtf8 = nlohmann::json::error_handler_t::replace;

nlohmann::json SpecToJson(const JobSpec& spec);

}  // namespace gantry
