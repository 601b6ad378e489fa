// The SQLite store: WAL journal, one transaction per group commit, schema migrations
// tracked in PRAGMA user_version. A second connection serves history reads, so they
// never wait behind a commit.
#include <fmt/format.h>
#include <sqlite3.h>

#include <mutex>

#include "server/store.h"

namespace gantry {

namespace {

// Each entry moves the schema from version i to i + 1. Never edit a shipped entry: add one.
const char* const kMigrations[] = {
    R"sql(
    CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE jobs(seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, team TEXT NOT NULL,
                      user TEXT NOT NULL, state TEXT NOT NULL, doc TEXT NOT NULL);
    CREATE INDEX jobs_state ON jobs(state);
    CREATE TABLE job_events(id INTEGER PRIMARY KEY AUTOINCREMENT, job_id TEXT NOT NULL,
                            ts_ms INTEGER NOT NULL, kind TEXT NOT NULL, detail TEXT NOT NULL);
    CREATE INDEX job_events_job ON job_events(job_id);
    CREATE TABLE nodes(id TEXT PRIMARY KEY, doc TEXT NOT NULL);
    CREATE TABLE idempotency(user TEXT NOT NULL, key TEXT NOT NULL, job_id TEXT NOT NULL,
                             request_hash TEXT NOT NULL, created_ms INTEGER NOT NULL,
                             PRIMARY KEY(user, key));
    CREATE TABLE audit(id INTEGER PRIMARY KEY AUTOINCREMENT, ts_ms INTEGER NOT NULL, user TEXT NOT NULL,
                       role TEXT NOT NULL, action TEXT NOT NULL, target TEXT NOT NULL,
                       status INTEGER NOT NULL, detail TEXT NOT NULL);
    )sql",
    R"sql(
    CREATE TABLE node_events(id INTEGER PRIMARY KEY AUTOINCREMENT, node_id TEXT NOT NULL,
                             ts_ms INTEGER NOT NULL, kind TEXT NOT NULL, detail TEXT NOT NULL);
    CREATE INDEX node_events_node ON node_events(node_id);
    )sql",
    R"sql(
    CREATE TABLE allocations(job_id TEXT NOT NULL, run INTEGER NOT NULL, slot INTEGER NOT NULL,
                             user TEXT NOT NULL, team TEXT NOT NULL, project TEXT NOT NULL,
                             priority_class TEXT NOT NULL, node TEXT NOT NULL, pool TEXT NOT NULL,
                             gpu_index INTEGER NOT NULL, gpu_uuid TEXT NOT NULL, gpu_type TEXT NOT NULL,
                             mig_profile TEXT NOT NULL, share REAL NOT NULL, start_ms INTEGER NOT NULL,
                             end_ms INTEGER, util_sum REAL NOT NULL, mem_sum_mib REAL NOT NULL,
                             samples INTEGER NOT NULL, idle INTEGER NOT NULL, PRIMARY KEY(job_id, run, slot));
    CREATE INDEX allocations_start ON allocations(start_ms);
    CREATE INDEX allocations_end ON allocations(end_ms);
    CREATE INDEX job_events_kind_ts ON job_events(kind, ts_ms);
    )sql",
    // The audit log records an outcome by name ("created", "forbidden"), not the HTTP
    // status it was answered with: only the HTTP layer knows those.
    R"sql(
    ALTER TABLE audit ADD COLUMN outcome TEXT NOT NULL DEFAULT '';
    UPDATE audit SET outcome = CASE status WHEN 200 THEN 'ok' WHEN 201 THEN 'created'
        WHEN 400 THEN 'invalid_argument' WHEN 401 THEN 'unauthenticated' WHEN 403 THEN 'forbidden'
        WHEN 404 THEN 'not_found' WHEN 409 THEN 'failed_precondition' WHEN 413 THEN 'payload_too_large'
        WHEN 422 THEN 'idempotency_mismatch' ELSE 'internal' END;
    ALTER TABLE audit DROP COLUMN status;
    )sql",
    // The dashboard's history: one sample of the cluster a minute.
    R"sql(
    CREATE TABLE IF NOT EXISTS history(ts_ms INTEGER PRIMARY KEY, doc TEXT NOT NULL);
    )sql",
    // Sign-in sessions (server/sessions.h): one JSON document each.
    R"sql(
    CREATE TABLE IF NOT EXISTS sessions(id TEXT PRIMARY KEY, doc TEXT NOT NULL);
    )sql",
};

constexpr const char* kAllocationColumns =
    "job_id, run, slot, user, team, project, priority_class, node, pool, gpu_index, gpu_uuid, gpu_type, "
    "mig_profile, share, start_ms, end_ms, util_sum, mem_sum_mib, samples, idle";

// A prepared statement that resets itself after each use.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) { sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr); }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  bool ok() const { return stmt_ != nullptr; }
  Statement& Bind(int i, const std::string& v) {
    sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Statement& Bind(int i, int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  Statement& Bind(int i, double v) {
    sqlite3_bind_double(stmt_, i, v);
    return *this;
  }
  Statement& BindNull(int i) {
    sqlite3_bind_null(stmt_, i);
    return *this;
  }
  // Runs a statement that returns no rows; SQLITE_DONE on success.
  int Run() {
    int rc = sqlite3_step(stmt_);
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    return rc;
  }
  bool Step() { return sqlite3_step(stmt_) == SQLITE_ROW; }
  void Reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  std::string Text(int col) const {
    const unsigned char* t = sqlite3_column_text(stmt_, col);
    return t ? std::string(reinterpret_cast<const char*>(t), sqlite3_column_bytes(stmt_, col)) : std::string();
  }
  int64_t Int(int col) const { return sqlite3_column_int64(stmt_, col); }
  double Real(int col) const { return sqlite3_column_double(stmt_, col); }
  bool Null(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }

 private:
  sqlite3_stmt* stmt_ = nullptr;
};

class SqliteStore : public Store {
 public:
  ~SqliteStore() override {
    statements_.clear();
    if (reader_) sqlite3_close(reader_);
    if (db_) sqlite3_close(db_);
  }

  Status Open(const std::string& path, SqliteOptions options) {
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                        nullptr) != SQLITE_OK) {
      return Status::Invalid("db", fmt::format("cannot open {}: {}", path, db_ ? sqlite3_errmsg(db_) : "?"));
    }
    sqlite3_busy_timeout(db_, 5000);
    if (Status s = Exec("PRAGMA journal_mode=WAL"); !s.ok()) return s;
    if (Status s = Exec(options.synchronous_full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL"); !s.ok()) {
      return s;
    }
    if (Status s = Migrate(); !s.ok()) return s;
    if (sqlite3_open_v2(path.c_str(), &reader_, SQLITE_OPEN_READONLY | SQLITE_OPEN_FULLMUTEX, nullptr) != SQLITE_OK) {
      return Status::Internal(fmt::format("cannot open a reader on {}", path));
    }
    sqlite3_busy_timeout(reader_, 5000);
    upsert_job_ = Prepare(
        "INSERT INTO jobs(seq, id, team, user, state, doc) VALUES(?1, ?2, ?3, ?4, ?5, ?6) "
        "ON CONFLICT(seq) DO UPDATE SET state = excluded.state, doc = excluded.doc");
    insert_event_ = Prepare("INSERT INTO job_events(job_id, ts_ms, kind, detail) VALUES(?1, ?2, ?3, ?4)");
    insert_node_event_ = Prepare("INSERT INTO node_events(node_id, ts_ms, kind, detail) VALUES(?1, ?2, ?3, ?4)");
    // An upsert, not INSERT OR REPLACE: a node keeps its rowid, so Load lists nodes in the
    // order they first registered (as PostgreSQL does).
    upsert_node_ =
        Prepare("INSERT INTO nodes(id, doc) VALUES(?1, ?2) ON CONFLICT(id) DO UPDATE SET doc = excluded.doc");
    insert_idem_ = Prepare(
        "INSERT OR REPLACE INTO idempotency(user, key, job_id, request_hash, created_ms) VALUES(?1, ?2, ?3, ?4, ?5)");
    insert_audit_ = Prepare(
        "INSERT INTO audit(ts_ms, user, role, action, target, outcome, detail) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)");
    upsert_history_ = Prepare("INSERT OR REPLACE INTO history(ts_ms, doc) VALUES(?1, ?2)");
    drop_history_ = Prepare("DELETE FROM history WHERE ts_ms < ?1");
    upsert_meta_ = Prepare("INSERT OR REPLACE INTO meta(key, value) VALUES(?1, ?2)");
    upsert_session_ = Prepare("INSERT OR REPLACE INTO sessions(id, doc) VALUES(?1, ?2)");
    delete_session_ = Prepare("DELETE FROM sessions WHERE id = ?1");
    upsert_allocation_ = Prepare(
        "INSERT OR REPLACE INTO allocations VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, "
        "?16, ?17, ?18, ?19, ?20)");
    for (const auto& st : statements_) {
      if (!st->ok()) return Status::Internal(fmt::format("prepare: {}", sqlite3_errmsg(db_)));
    }
    return Status::Ok();
  }

  Status Commit(const StoreBatch& b) override {
    if (b.empty()) return Status::Ok();
    if (Status s = Exec("BEGIN IMMEDIATE"); !s.ok()) return s;
    bool ok = true;
    for (const StoredJob& j : b.jobs) {
      ok = ok && upsert_job_->Bind(1, static_cast<int64_t>(j.seq))
                         .Bind(2, j.id)
                         .Bind(3, j.team)
                         .Bind(4, j.user)
                         .Bind(5, j.state)
                         .Bind(6, j.doc)
                         .Run() == SQLITE_DONE;
    }
    for (const JobEvent& e : b.events) {
      ok = ok &&
           insert_event_->Bind(1, e.job_id).Bind(2, e.ts_ms).Bind(3, e.kind).Bind(4, e.detail).Run() == SQLITE_DONE;
    }
    for (const NodeEvent& e : b.node_events) {
      ok = ok && insert_node_event_->Bind(1, e.node_id).Bind(2, e.ts_ms).Bind(3, e.kind).Bind(4, e.detail).Run() ==
                     SQLITE_DONE;
    }
    for (const auto& [id, doc] : b.nodes) ok = ok && upsert_node_->Bind(1, id).Bind(2, doc).Run() == SQLITE_DONE;
    for (const IdempotencyRecord& r : b.idempotency) {
      ok = ok && insert_idem_->Bind(1, r.user)
                         .Bind(2, r.key)
                         .Bind(3, r.job_id)
                         .Bind(4, r.request_hash)
                         .Bind(5, r.created_ms)
                         .Run() == SQLITE_DONE;
    }
    for (const AuditRecord& a : b.audit) {
      ok = ok && insert_audit_->Bind(1, a.ts_ms)
                         .Bind(2, a.user)
                         .Bind(3, a.role)
                         .Bind(4, a.action)
                         .Bind(5, a.target)
                         .Bind(6, a.outcome)
                         .Bind(7, a.detail)
                         .Run() == SQLITE_DONE;
    }
    for (const auto& [k, v] : b.meta) ok = ok && upsert_meta_->Bind(1, k).Bind(2, v).Run() == SQLITE_DONE;
    for (const Allocation& a : b.allocations) ok = ok && WriteAllocation(a);
    for (const auto& [id, doc] : b.sessions) {
      ok = ok && (doc.empty() ? delete_session_->Bind(1, id).Run() : upsert_session_->Bind(1, id).Bind(2, doc).Run()) ==
                     SQLITE_DONE;
    }
    for (const HistoryRow& h : b.history)
      ok = ok && upsert_history_->Bind(1, h.ts_ms).Bind(2, h.doc).Run() == SQLITE_DONE;
    if (b.history_drop_before_ms >= 0) ok = ok && drop_history_->Bind(1, b.history_drop_before_ms).Run() == SQLITE_DONE;
    if (!ok) {
      std::string why = sqlite3_errmsg(db_);
      Exec("ROLLBACK");
      return Status::Internal("store write failed: " + why);
    }
    return Exec("COMMIT");
  }

  Expected<StoredState> Load() override {
    StoredState st;
    Statement jobs(db_, "SELECT seq, id, team, user, state, doc FROM jobs ORDER BY seq");
    while (jobs.Step()) {
      st.jobs.push_back(
          {static_cast<uint64_t>(jobs.Int(0)), jobs.Text(1), jobs.Text(2), jobs.Text(3), jobs.Text(4), jobs.Text(5)});
    }
    Statement nodes(db_, "SELECT id, doc FROM nodes ORDER BY rowid");
    while (nodes.Step()) st.nodes.emplace_back(nodes.Text(0), nodes.Text(1));
    Statement idem(db_, "SELECT user, key, job_id, request_hash, created_ms FROM idempotency");
    while (idem.Step()) st.idempotency.push_back({idem.Text(0), idem.Text(1), idem.Text(2), idem.Text(3), idem.Int(4)});
    Statement meta(db_, "SELECT key, value FROM meta");
    while (meta.Step()) st.meta[meta.Text(0)] = meta.Text(1);
    Statement sessions(db_, "SELECT doc FROM sessions");
    while (sessions.Step()) st.sessions.push_back(sessions.Text(0));
    return st;
  }

  Expected<std::vector<JobEvent>> Events(const std::string& job_id) override {
    std::lock_guard<std::mutex> lock(reader_mu_);
    Statement q(reader_, "SELECT job_id, ts_ms, kind, detail FROM job_events WHERE job_id = ?1 ORDER BY id");
    q.Bind(1, job_id);
    std::vector<JobEvent> out;
    while (q.Step()) out.push_back({q.Text(0), q.Int(1), q.Text(2), q.Text(3)});
    return out;
  }

  Expected<std::vector<NodeEvent>> NodeEvents(const std::string& node_id, int limit) override {
    std::lock_guard<std::mutex> lock(reader_mu_);
    Statement q(reader_,
                "SELECT node_id, ts_ms, kind, detail FROM node_events WHERE node_id = ?1 ORDER BY id DESC LIMIT ?2");
    q.Bind(1, node_id).Bind(2, static_cast<int64_t>(limit));
    std::vector<NodeEvent> out;
    while (q.Step()) out.push_back({q.Text(0), q.Int(1), q.Text(2), q.Text(3)});
    return out;
  }

  Expected<std::vector<AuditRecord>> Audit(int limit) override {
    std::lock_guard<std::mutex> lock(reader_mu_);
    Statement q(reader_,
                "SELECT ts_ms, user, role, action, target, outcome, detail FROM audit ORDER BY id DESC LIMIT ?1");
    q.Bind(1, static_cast<int64_t>(limit));
    std::vector<AuditRecord> out;
    while (q.Step()) {
      out.push_back({q.Int(0), q.Text(1), q.Text(2), q.Text(3), q.Text(4), q.Text(5), q.Text(6)});
    }
    return out;
  }

  Expected<std::vector<Allocation>> Allocations(TimeMs from, TimeMs to) override {
    std::lock_guard<std::mutex> lock(reader_mu_);
    Statement q(reader_,
                fmt::format("SELECT {} FROM allocations WHERE start_ms < ?1 AND (end_ms IS NULL OR end_ms > ?2) "
                            "ORDER BY start_ms, job_id, run, slot",
                            kAllocationColumns)
                    .c_str());
    q.Bind(1, to).Bind(2, from);
    return ReadAllocations(q);
  }

  Expected<std::vector<Allocation>> OpenAllocations() override {
    std::lock_guard<std::mutex> lock(reader_mu_);
    Statement q(reader_, fmt::format("SELECT {} FROM allocations WHERE end_ms IS NULL ORDER BY job_id, run, slot",
                                     kAllocationColumns)
                             .c_str());
    return ReadAllocations(q);
  }

  Expected<std::vector<JobEvent>> EventsOfKinds(const std::vector<std::string>& kinds, TimeMs to) override {
    std::lock_guard<std::mutex> lock(reader_mu_);
    std::string marks;
    for (size_t i = 0; i < kinds.size(); ++i) marks += fmt::format("{}?{}", i ? ", " : "", i + 2);
    Statement q(reader_, fmt::format("SELECT job_id, ts_ms, kind, detail FROM job_events WHERE ts_ms < ?1 AND kind IN "
                                     "({}) ORDER BY id",
                                     marks)
                             .c_str());
    q.Bind(1, to);
    for (size_t i = 0; i < kinds.size(); ++i) q.Bind(static_cast<int>(i + 2), kinds[i]);
    std::vector<JobEvent> out;
    while (q.Step()) out.push_back({q.Text(0), q.Int(1), q.Text(2), q.Text(3)});
    return out;
  }

  Expected<std::vector<HistoryRow>> History(TimeMs from, TimeMs to) override {
    std::lock_guard<std::mutex> lock(reader_mu_);
    Statement q(reader_, "SELECT ts_ms, doc FROM history WHERE ts_ms >= ?1 AND ts_ms < ?2 ORDER BY ts_ms");
    q.Bind(1, from).Bind(2, to);
    std::vector<HistoryRow> out;
    while (q.Step()) out.push_back({q.Int(0), q.Text(1)});
    return out;
  }

  int schema_version() const override { return version_; }

 private:
  bool WriteAllocation(const Allocation& a) {
    Statement& s = *upsert_allocation_;
    s.Bind(1, a.job_id).Bind(2, int64_t{a.run}).Bind(3, int64_t{a.slot}).Bind(4, a.user).Bind(5, a.team);
    s.Bind(6, a.project).Bind(7, a.priority_class).Bind(8, a.node).Bind(9, a.pool).Bind(10, int64_t{a.gpu_index});
    s.Bind(11, a.gpu_uuid).Bind(12, a.gpu_type).Bind(13, a.mig_profile).Bind(14, a.share).Bind(15, a.start_ms);
    if (a.open()) {
      s.BindNull(16);
    } else {
      s.Bind(16, a.end_ms);
    }
    s.Bind(17, a.util_sum).Bind(18, a.mem_sum_mib).Bind(19, a.samples).Bind(20, int64_t{a.idle ? 1 : 0});
    return s.Run() == SQLITE_DONE;
  }

  static std::vector<Allocation> ReadAllocations(Statement& q) {
    std::vector<Allocation> out;
    while (q.Step()) {
      Allocation a;
      a.job_id = q.Text(0);
      a.run = static_cast<int>(q.Int(1));
      a.slot = static_cast<int>(q.Int(2));
      a.user = q.Text(3);
      a.team = q.Text(4);
      a.project = q.Text(5);
      a.priority_class = q.Text(6);
      a.node = q.Text(7);
      a.pool = q.Text(8);
      a.gpu_index = static_cast<int>(q.Int(9));
      a.gpu_uuid = q.Text(10);
      a.gpu_type = q.Text(11);
      a.mig_profile = q.Text(12);
      a.share = q.Real(13);
      a.start_ms = q.Int(14);
      a.end_ms = q.Null(15) ? -1 : q.Int(15);
      a.util_sum = q.Real(16);
      a.mem_sum_mib = q.Real(17);
      a.samples = q.Int(18);
      a.idle = q.Int(19) != 0;
      out.push_back(std::move(a));
    }
    return out;
  }

  Status Exec(const char* sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
      std::string msg = err ? err : "?";
      sqlite3_free(err);
      return Status::Internal(fmt::format("sqlite: {}: {}", msg, sql));
    }
    return Status::Ok();
  }

  Status Migrate() {
    Statement v(db_, "PRAGMA user_version");
    version_ = v.Step() ? static_cast<int>(v.Int(0)) : 0;
    v.Reset();
    const int latest = static_cast<int>(std::size(kMigrations));
    if (version_ > latest) {
      return Status::Invalid("db", fmt::format("schema version {} is newer than this gantry ({})", version_, latest));
    }
    for (; version_ < latest; ++version_) {
      std::string sql = fmt::format("BEGIN; {} PRAGMA user_version = {}; COMMIT;", kMigrations[version_], version_ + 1);
      if (Status s = Exec(sql.c_str()); !s.ok()) {
        Exec("ROLLBACK");
        return s;
      }
    }
    return Status::Ok();
  }

  Statement* Prepare(const char* sql) {
    statements_.push_back(std::make_unique<Statement>(db_, sql));
    return statements_.back().get();
  }

  sqlite3* db_ = nullptr;
  sqlite3* reader_ = nullptr;
  std::mutex reader_mu_;
  int version_ = 0;
  std::vector<std::unique_ptr<Statement>> statements_;
  Statement* upsert_job_ = nullptr;
  Statement* insert_event_ = nullptr;
  Statement* insert_node_event_ = nullptr;
  Statement* upsert_node_ = nullptr;
  Statement* insert_idem_ = nullptr;
  Statement* insert_audit_ = nullptr;
  Statement* upsert_meta_ = nullptr;
  Statement* upsert_session_ = nullptr;
  Statement* delete_session_ = nullptr;
  Statement* upsert_allocation_ = nullptr;
  Statement* upsert_history_ = nullptr;
  Statement* drop_history_ = nullptr;
};

}  // namespace

Expected<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path, SqliteOptions options) {
  auto store = std::make_unique<SqliteStore>();
  if (Status s = store->Open(path, options); !s.ok()) return s;
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace gantry
