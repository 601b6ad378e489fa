// The HTTP routes of the state machine's audited requests (audit_routes.h).
#include "server/audit_routes.h"

namespace gantry {

std::string AuditRoute(StateAction action, const std::string& subject) {
  switch (action) {
    case StateAction::kSubmit: return "POST /v1/jobs";
    case StateAction::kSubmitBatch: return "POST /v1/jobs/batch";
    case StateAction::kCancel: return "DELETE /v1/jobs/" + subject;
    case StateAction::kCheckpointDone: return "POST /v1/jobs/" + subject + "/checkpoint-done";
    case StateAction::kHold: return "POST /v1/jobs/" + subject + "/hold";
    case StateAction::kRelease: return "POST /v1/jobs/" + subject + "/release";
    case StateAction::kUpdate: return "PATCH /v1/jobs/" + subject;
    case StateAction::kDrain: return "POST /v1/nodes/" + subject + "/drain";
    case StateAction::kUndrain: return "POST /v1/nodes/" + subject + "/undrain";
  }
  return ToString(action);
}

}  // namespace gantry
