// The server's words for the state machine's audited requests: the HTTP route each came
// by ("PATCH /v1/jobs/7"), as audit rows have always stored them. The Controller gives
// them to its state (ControllerOptions::audit_words); the HTTP layer names its own
// refusals of the same requests with them.
#pragma once

#include <string>

#include "state/state_action.h"

namespace gantry {

// `subject`: the job id as the URL wrote it, or the node's id; unused for a submit.
std::string AuditRoute(StateAction action, const std::string& subject);

}  // namespace gantry
