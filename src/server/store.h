// The controller's durable store: a narrow interface, so SQLite (the embedded default) and
// PostgreSQL (shared by several controllers) are interchangeable. The controller hands it
// one batch per group commit; Commit returns only when the batch is durable.
#pragma once

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "billing/ledger.h"
#include "core/status.h"
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

class Store {
 public:
  virtual ~Store() = default;
  // Writes the batch atomically and durably (all or nothing).
  virtual Status Commit(const StoreBatch& batch) = 0;
  virtual Expected<StoredState> Load() = 0;
  // Job events of one job, oldest first (history, accounting).
  virtual Expected<std::vector<JobEvent>> Events(const std::string& job_id) = 0;
  // A node's history, newest first.
  virtual Expected<std::vector<NodeEvent>> NodeEvents(const std::string& node_id, int limit) = 0;
  // The newest `limit` audit records, newest first.
  virtual Expected<std::vector<AuditRecord>> Audit(int limit) = 0;
  // Ledger intervals overlapping [from, to), intervals still open included.
  virtual Expected<std::vector<Allocation>> Allocations(TimeMs from, TimeMs to) = 0;
  virtual Expected<std::vector<Allocation>> OpenAllocations() = 0;
  // Job events of the given kinds before `to`, oldest first (accounting reconciliation).
  virtual Expected<std::vector<JobEvent>> EventsOfKinds(const std::vector<std::string>& kinds, TimeMs to) = 0;
  // Cluster samples in [from, to), oldest first.
  virtual Expected<std::vector<HistoryRow>> History(TimeMs from, TimeMs to) = 0;
  virtual int schema_version() const = 0;
  // From now on every commit first proves that `term` still holds the leader row, and fails
  // (writing nothing) once another server took it. PostgreSQL only; SQLite has one writer.
  virtual void SetFencingTerm(int64_t /*term*/) {}
};

struct SqliteOptions {
  bool synchronous_full = true;  // fsync on every commit (durable against power loss too)
};

// Opens (creating and migrating as needed) a SQLite database in WAL mode.
Expected<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path, SqliteOptions options = {});

// Whether `db` names a PostgreSQL database (postgresql://user@host:port/db) rather than a file.
bool IsPostgresUrl(const std::string& db);
// `db` with a URL's password replaced by ***, for messages and logs.
std::string RedactDbUrl(const std::string& db);
struct PostgresOptions {
  // Each commit waits for PostgreSQL's WAL flush. Off (`--no-fsync`): a commit survives a
  // crash of gantry, not of the database host (synchronous_commit = off for the writer).
  bool synchronous_commit = true;
};

// Connects to a PostgreSQL database and migrates its schema as needed. A commit returns
// once PostgreSQL has made it durable.
Expected<std::unique_ptr<Store>> OpenPostgresStore(const std::string& url, PostgresOptions options = {});

}  // namespace gantry
