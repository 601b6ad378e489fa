// The verbs of the state machine's audited requests: what a caller asked of it (submit,
// cancel, hold...) and of what (a job's id as the caller wrote it, a node's id). The words
// an audit row stores are the front end's (ControllerOptions::audit_words: the server's
// HTTP routes, server/audit_routes.h); the state knows only the verb.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace gantry {

enum class StateAction : uint8_t {
  kSubmit,
  kSubmitBatch,
  kCancel,
  kCheckpointDone,
  kHold,
  kRelease,
  kUpdate,
  kDrain,
  kUndrain,
};

inline const char* ToString(StateAction a) {
  switch (a) {
    case StateAction::kSubmit: return "submit";
    case StateAction::kSubmitBatch: return "submit_batch";
    case StateAction::kCancel: return "cancel";
    case StateAction::kCheckpointDone: return "checkpoint_done";
    case StateAction::kHold: return "hold";
    case StateAction::kRelease: return "release";
    case StateAction::kUpdate: return "update";
    case StateAction::kDrain: return "drain";
    case StateAction::kUndrain: return "undrain";
  }
  return "?";
}

// An audit row's words for `action` on `subject` ("" for a submit).
using AuditWords = std::function<std::string(StateAction action, const std::string& subject)>;

}  // namespace gantry
