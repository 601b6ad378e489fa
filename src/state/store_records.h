// The rows the controller's state writes and reads back: one group commit's batch
// (StoreBatch) and what a restart loads (StoredState). Values only: the store that makes them
// durable is server/store.h, behind an interface the state never sees.
#pragma once

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "billing/ledger.h"
#include "core/time.h"

namespace gantry {

struct StoredJob {
  uint64_t seq = 0;
  std::string id;
  std::string team;
  std::string user;
  std::string state;
  std::string doc;  // JobToDoc as JSON text
};

struct JobEvent {
  std::string job_id;
  TimeMs ts_ms = 0;
  std::string kind;    // submitted, started, exited, preempted, cancelled, requeued, ...
  std::string detail;  // JSON text
};

struct NodeEvent {
  std::string node_id;
  TimeMs ts_ms = 0;
  std::string kind;    // gpu_unhealthy, gpu_healthy, drained, undrained, registered, lost
  std::string detail;  // JSON text
};

struct IdempotencyRecord {
  std::string user;
  std::string key;
  std::string job_id;
  std::string request_hash;
  TimeMs created_ms = 0;
};

struct AuditRecord {
  TimeMs ts_ms = 0;
  std::string user;
  std::string role;
  std::string action;   // "POST /v1/jobs"
  std::string target;   // job or node id
  std::string outcome;  // "created", "ok", or the refusal's CodeName ("forbidden", ...)
  std::string detail;
};

// One sample of the cluster (GPUs, allocation, utilization, queue) at `ts_ms`, as JSON text.
struct HistoryRow {
  TimeMs ts_ms = 0;
  std::string doc;
};

// Everything one group commit writes. Jobs and nodes are upserted whole.
struct StoreBatch {
  std::vector<StoredJob> jobs;
  std::vector<JobEvent> events;
  std::vector<NodeEvent> node_events;
  std::vector<std::pair<std::string, std::string>> nodes;  // id, document
  std::vector<IdempotencyRecord> idempotency;
  std::vector<AuditRecord> audit;
  std::map<std::string, std::string> meta;
  std::vector<Allocation> allocations;  // upserted by (job_id, run, slot)
  std::vector<HistoryRow> history;      // cluster samples for the dashboard's charts
  TimeMs history_drop_before_ms = -1;   // samples older than this are deleted (-1: none)
  // Sign-in sessions (server/sessions.h), upserted by id; an empty document deletes one.
  std::vector<std::pair<std::string, std::string>> sessions;

  // Adds `later`'s writes after this batch's (the committer merges queued batches).
  void Append(StoreBatch&& later) {
    auto append = [](auto& to, auto& from) {
      to.insert(to.end(), std::make_move_iterator(from.begin()), std::make_move_iterator(from.end()));
    };
    append(jobs, later.jobs);
    append(events, later.events);
    append(node_events, later.node_events);
    append(nodes, later.nodes);
    append(idempotency, later.idempotency);
    append(audit, later.audit);
    append(allocations, later.allocations);
    append(history, later.history);
    append(sessions, later.sessions);
    history_drop_before_ms = std::max(history_drop_before_ms, later.history_drop_before_ms);
    for (auto& [k, v] : later.meta) meta[k] = std::move(v);
  }

  bool empty() const {
    return jobs.empty() && events.empty() && node_events.empty() && nodes.empty() && idempotency.empty() &&
           audit.empty() && meta.empty() && allocations.empty() && history.empty() && history_drop_before_ms < 0 &&
           sessions.empty();
  }
};

// What a restart reads back.
struct StoredState {
  std::vector<StoredJob> jobs;  // in seq order
  std::vector<std::pair<std::string, std::string>> nodes;
  std::vector<IdempotencyRecord> idempotency;
  std::map<std::string, std::string> meta;
  std::vector<std::string> sessions;  // session documents
};

}  // namespace gantry
