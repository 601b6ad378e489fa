// The controller's durable store: a narrow interface, so SQLite (the embedded default) and
// PostgreSQL (shared by several controllers) are interchangeable. The controller hands it
// one batch per group commit; Commit returns only when the batch is durable.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/time.h"
#include "state/store_records.h"

namespace gantry {

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
