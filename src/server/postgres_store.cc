// The PostgreSQL store (libpqxx): the same tables as SQLite, one transaction per group
// commit, schema migrations tracked in a schema_version table and serialised by an
// advisory lock, so two servers starting at once migrate once. A second connection serves
// history reads, so they never wait behind a commit.
#include <fmt/format.h>

#include <cmath>
#include <mutex>
#include <optional>
#include <pqxx/pqxx>

#include "server/store.h"

namespace gantry {

namespace {

// Each entry moves the schema from version i to i + 1. Never edit a shipped entry: add one.
// Version 1 is SQLite's schema as of its fifth migration, in PostgreSQL's types.
const char* const kMigrations[] = {
    R"sql(
    CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE jobs(seq BIGINT PRIMARY KEY, id TEXT NOT NULL UNIQUE, team TEXT NOT NULL,
                      "user" TEXT NOT NULL, state TEXT NOT NULL, doc TEXT NOT NULL);
    CREATE INDEX jobs_state ON jobs(state);
    CREATE TABLE job_events(id BIGSERIAL PRIMARY KEY, job_id TEXT NOT NULL,
                            ts_ms BIGINT NOT NULL, kind TEXT NOT NULL, detail TEXT NOT NULL);
    CREATE INDEX job_events_job ON job_events(job_id);
    CREATE INDEX job_events_kind_ts ON job_events(kind, ts_ms);
    CREATE TABLE nodes(id TEXT PRIMARY KEY, ord BIGSERIAL, doc TEXT NOT NULL);
    CREATE TABLE idempotency("user" TEXT NOT NULL, key TEXT NOT NULL, job_id TEXT NOT NULL,
                             request_hash TEXT NOT NULL, created_ms BIGINT NOT NULL,
                             PRIMARY KEY("user", key));
    CREATE TABLE audit(id BIGSERIAL PRIMARY KEY, ts_ms BIGINT NOT NULL, "user" TEXT NOT NULL,
                       role TEXT NOT NULL, action TEXT NOT NULL, target TEXT NOT NULL,
                       outcome TEXT NOT NULL, detail TEXT NOT NULL);
    CREATE TABLE node_events(id BIGSERIAL PRIMARY KEY, node_id TEXT NOT NULL,
                             ts_ms BIGINT NOT NULL, kind TEXT NOT NULL, detail TEXT NOT NULL);
    CREATE INDEX node_events_node ON node_events(node_id);
    CREATE TABLE allocations(job_id TEXT NOT NULL, run INTEGER NOT NULL, slot INTEGER NOT NULL,
                             "user" TEXT NOT NULL, team TEXT NOT NULL, project TEXT NOT NULL,
                             priority_class TEXT NOT NULL, node TEXT NOT NULL, pool TEXT NOT NULL,
                             gpu_index INTEGER NOT NULL, gpu_uuid TEXT NOT NULL, gpu_type TEXT NOT NULL,
                             mig_profile TEXT NOT NULL, share DOUBLE PRECISION NOT NULL,
                             start_ms BIGINT NOT NULL, end_ms BIGINT, util_sum DOUBLE PRECISION NOT NULL,
                             mem_sum_mib DOUBLE PRECISION NOT NULL, samples BIGINT NOT NULL,
                             idle BOOLEAN NOT NULL, PRIMARY KEY(job_id, run, slot));
    CREATE INDEX allocations_start ON allocations(start_ms);
    CREATE INDEX allocations_end ON allocations(end_ms);
    CREATE TABLE history(ts_ms BIGINT PRIMARY KEY, doc TEXT NOT NULL);
    )sql",
    // Leadership (server/leader_lease.h): one row, and the fence every leader's commit calls.
    R"sql(
    CREATE TABLE leader(id INTEGER PRIMARY KEY CHECK (id = 1), term BIGINT NOT NULL, holder TEXT NOT NULL,
                        url TEXT NOT NULL, expires_at TIMESTAMPTZ NOT NULL);
    INSERT INTO leader VALUES(1, 0, '', '', now() - interval '1 second');
    CREATE FUNCTION gantry_fence(t BIGINT) RETURNS VOID LANGUAGE plpgsql AS $fence$
    BEGIN
      PERFORM 1 FROM leader WHERE id = 1 AND term = t FOR SHARE;
      IF NOT FOUND THEN
        RAISE EXCEPTION 'deposed: term % is over, another server leads now', t;
      END IF;
    END $fence$;
    )sql",
    // How often the leadership passed from one server to another (gantry_leader_takeovers_total).
    R"sql(
    ALTER TABLE leader ADD COLUMN takeovers BIGINT NOT NULL DEFAULT 0;
    )sql",
    // Sign-in sessions (server/sessions.h): one JSON document each.
    R"sql(
    CREATE TABLE IF NOT EXISTS sessions(id TEXT PRIMARY KEY, doc TEXT NOT NULL);
    )sql",
};

// Any number that fits: the advisory lock that serialises migrations across servers.
constexpr int64_t kMigrationLock = 0x67616e747279;  // "gantry"

constexpr const char* kAllocationColumns =
    "job_id, run, slot, \"user\", team, project, priority_class, node, pool, gpu_index, gpu_uuid, gpu_type, "
    "mig_profile, share, start_ms, end_ms, util_sum, mem_sum_mib, samples, idle";

// The statements a commit runs: $1, $2, ... are replaced by quoted literals, and the
// batch goes to PostgreSQL as one script, in one round trip (a statement at a time was a
// round trip each: about 1,000 submits/s when jobs start at once; docs/BENCHMARKS.md).
const char* const kUpsertJob =
    "INSERT INTO jobs(seq, id, team, \"user\", state, doc) VALUES($1, $2, $3, $4, $5, $6) "
    "ON CONFLICT(seq) DO UPDATE SET state = excluded.state, doc = excluded.doc";
const char* const kInsertEvent = "INSERT INTO job_events(job_id, ts_ms, kind, detail) VALUES($1, $2, $3, $4)";
const char* const kInsertNodeEvent = "INSERT INTO node_events(node_id, ts_ms, kind, detail) VALUES($1, $2, $3, $4)";
const char* const kUpsertNode =
    "INSERT INTO nodes(id, doc) VALUES($1, $2) ON CONFLICT(id) DO UPDATE SET doc = excluded.doc";
const char* const kUpsertIdempotency =
    "INSERT INTO idempotency(\"user\", key, job_id, request_hash, created_ms) VALUES($1, $2, $3, $4, $5) "
    "ON CONFLICT(\"user\", key) DO UPDATE SET job_id = excluded.job_id, request_hash = excluded.request_hash, "
    "created_ms = excluded.created_ms";
const char* const kInsertAudit =
    "INSERT INTO audit(ts_ms, \"user\", role, action, target, outcome, detail) VALUES($1, $2, $3, $4, $5, $6, $7)";
const char* const kUpsertMeta =
    "INSERT INTO meta(key, value) VALUES($1, $2) ON CONFLICT(key) DO UPDATE SET value = excluded.value";
const char* const kUpsertSession =
    "INSERT INTO sessions(id, doc) VALUES($1, $2) ON CONFLICT(id) DO UPDATE SET doc = excluded.doc";
const char* const kDeleteSession = "DELETE FROM sessions WHERE id = $1";
const char* const kUpsertHistory =
    "INSERT INTO history(ts_ms, doc) VALUES($1, $2) ON CONFLICT(ts_ms) DO UPDATE SET doc = excluded.doc";
const char* const kDropHistory = "DELETE FROM history WHERE ts_ms < $1";
const char* const kUpsertAllocation =
    "INSERT INTO allocations VALUES($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, "
    "$18, $19, $20) ON CONFLICT(job_id, run, slot) DO UPDATE SET \"user\" = excluded.\"user\", team = excluded.team, "
    "project = excluded.project, priority_class = excluded.priority_class, node = excluded.node, "
    "pool = excluded.pool, gpu_index = excluded.gpu_index, gpu_uuid = excluded.gpu_uuid, "
    "gpu_type = excluded.gpu_type, mig_profile = excluded.mig_profile, share = excluded.share, "
    "start_ms = excluded.start_ms, end_ms = excluded.end_ms, util_sum = excluded.util_sum, "
    "mem_sum_mib = excluded.mem_sum_mib, samples = excluded.samples, idle = excluded.idle";

// One transaction's statements as a script, values quoted by the connection (PQescapeLiteral).
class Script {
 public:
  explicit Script(pqxx::transaction_base& tx) : tx_(tx) {}

  template <typename... Args>
  void Add(const char* statement, const Args&... args) {
    const std::string values[] = {Literal(args)...};
    for (const char* c = statement; *c; ++c) {
      if (*c != '$') {
        sql_ += *c;
        continue;
      }
      size_t n = 0;
      while (c[1] >= '0' && c[1] <= '9') n = n * 10 + static_cast<size_t>(*++c - '0');
      sql_ += values[n - 1];
    }
    sql_ += ";\n";
  }
  const std::string& sql() const { return sql_; }

 private:
  std::string Literal(const std::string& v) const { return tx_.quote(v); }
  static std::string Literal(int64_t v) { return std::to_string(v); }
  static std::string Literal(int v) { return std::to_string(v); }
  static std::string Literal(bool v) { return v ? "TRUE" : "FALSE"; }
  static std::string Literal(double v) {
    if (std::isnan(v)) return "'NaN'::float8";
    if (std::isinf(v)) return v > 0 ? "'Infinity'::float8" : "'-Infinity'::float8";
    return fmt::format("{}::float8", v);  // the shortest text that reads back as the same double
  }
  static std::string Literal(const std::optional<int64_t>& v) { return v ? std::to_string(*v) : "NULL"; }

  pqxx::transaction_base& tx_;
  std::string sql_;
};

std::vector<Allocation> ReadAllocations(const pqxx::result& rows) {
  std::vector<Allocation> out;
  out.reserve(rows.size());
  for (const pqxx::row& r : rows) {
    Allocation a;
    a.job_id = r[0].as<std::string>();
    a.run = r[1].as<int>();
    a.slot = r[2].as<int>();
    a.user = r[3].as<std::string>();
    a.team = r[4].as<std::string>();
    a.project = r[5].as<std::string>();
    a.priority_class = r[6].as<std::string>();
    a.node = r[7].as<std::string>();
    a.pool = r[8].as<std::string>();
    a.gpu_index = r[9].as<int>();
    a.gpu_uuid = r[10].as<std::string>();
    a.gpu_type = r[11].as<std::string>();
    a.mig_profile = r[12].as<std::string>();
    a.share = r[13].as<double>();
    a.start_ms = r[14].as<int64_t>();
    a.end_ms = r[15].is_null() ? -1 : r[15].as<int64_t>();
    a.util_sum = r[16].as<double>();
    a.mem_sum_mib = r[17].as<double>();
    a.samples = r[18].as<int64_t>();
    a.idle = r[19].as<bool>();
    out.push_back(std::move(a));
  }
  return out;
}

std::vector<JobEvent> ReadEvents(const pqxx::result& rows) {
  std::vector<JobEvent> out;
  out.reserve(rows.size());
  for (const pqxx::row& r : rows) {
    out.push_back({r[0].as<std::string>(), r[1].as<int64_t>(), r[2].as<std::string>(), r[3].as<std::string>()});
  }
  return out;
}

class PostgresStore : public Store {
 public:
  Status Open(const std::string& url, PostgresOptions options) {
    try {
      url_ = url;
      options_ = options;
      writer_ = std::make_unique<pqxx::connection>(url);
      reader_ = std::make_unique<pqxx::connection>(url);
      if (Status s = Migrate(); !s.ok()) return s;
      PrepareWriter();
      return Status::Ok();
    } catch (const std::exception& e) {
      return Status::Invalid("db", fmt::format("cannot open {}: {}", RedactDbUrl(url), FirstLine(e.what())));
    }
  }

  Status Commit(const StoreBatch& b) override {
    if (b.empty()) return Status::Ok();
    try {
      if (!writer_->is_open()) {  // PostgreSQL restarted, or the link broke: connect again
        writer_ = std::make_unique<pqxx::connection>(url_);
        PrepareWriter();
      }
      pqxx::work tx(*writer_);
      Script script(tx);
      if (fencing_term_ > 0) script.Add("SELECT gantry_fence($1)", fencing_term_);
      for (const StoredJob& j : b.jobs) {
        script.Add(kUpsertJob, static_cast<int64_t>(j.seq), j.id, j.team, j.user, j.state, j.doc);
      }
      for (const JobEvent& e : b.events) script.Add(kInsertEvent, e.job_id, e.ts_ms, e.kind, e.detail);
      for (const NodeEvent& e : b.node_events) script.Add(kInsertNodeEvent, e.node_id, e.ts_ms, e.kind, e.detail);
      for (const auto& [id, doc] : b.nodes) script.Add(kUpsertNode, id, doc);
      for (const IdempotencyRecord& r : b.idempotency) {
        script.Add(kUpsertIdempotency, r.user, r.key, r.job_id, r.request_hash, r.created_ms);
      }
      for (const AuditRecord& a : b.audit) {
        script.Add(kInsertAudit, a.ts_ms, a.user, a.role, a.action, a.target, a.outcome, a.detail);
      }
      for (const auto& [k, v] : b.meta) script.Add(kUpsertMeta, k, v);
      for (const Allocation& a : b.allocations) {
        script.Add(kUpsertAllocation, a.job_id, a.run, a.slot, a.user, a.team, a.project, a.priority_class, a.node,
                   a.pool, a.gpu_index, a.gpu_uuid, a.gpu_type, a.mig_profile, a.share, a.start_ms,
                   a.open() ? std::nullopt : std::optional<int64_t>(a.end_ms), a.util_sum, a.mem_sum_mib, a.samples,
                   a.idle);
      }
      for (const HistoryRow& h : b.history) script.Add(kUpsertHistory, h.ts_ms, h.doc);
      for (const auto& [id, doc] : b.sessions) {
        if (doc.empty()) {
          script.Add(kDeleteSession, id);
        } else {
          script.Add(kUpsertSession, id, doc);
        }
      }
      if (b.history_drop_before_ms >= 0) script.Add(kDropHistory, b.history_drop_before_ms);
      tx.exec(script.sql());
      tx.commit();
      return Status::Ok();
    } catch (const std::exception& e) {
      return Status::Internal(fmt::format("store write failed: {}", FirstLine(e.what())));
    }
  }

  Expected<StoredState> Load() override {
    try {
      pqxx::read_transaction tx(*writer_);
      StoredState st;
      for (const pqxx::row& r : tx.exec("SELECT seq, id, team, \"user\", state, doc FROM jobs ORDER BY seq")) {
        st.jobs.push_back({r[0].as<uint64_t>(), r[1].as<std::string>(), r[2].as<std::string>(), r[3].as<std::string>(),
                           r[4].as<std::string>(), r[5].as<std::string>()});
      }
      for (const pqxx::row& r : tx.exec("SELECT id, doc FROM nodes ORDER BY ord")) {
        st.nodes.emplace_back(r[0].as<std::string>(), r[1].as<std::string>());
      }
      for (const pqxx::row& r : tx.exec("SELECT \"user\", key, job_id, request_hash, created_ms FROM idempotency")) {
        st.idempotency.push_back({r[0].as<std::string>(), r[1].as<std::string>(), r[2].as<std::string>(),
                                  r[3].as<std::string>(), r[4].as<int64_t>()});
      }
      for (const pqxx::row& r : tx.exec("SELECT key, value FROM meta")) {
        st.meta[r[0].as<std::string>()] = r[1].as<std::string>();
      }
      for (const pqxx::row& r : tx.exec("SELECT doc FROM sessions")) st.sessions.push_back(r[0].as<std::string>());
      return st;
    } catch (const std::exception& e) {
      return Status::Internal(fmt::format("store read failed: {}", FirstLine(e.what())));
    }
  }

  Expected<std::vector<JobEvent>> Events(const std::string& job_id) override {
    return Read<std::vector<JobEvent>>([&](pqxx::read_transaction& tx) {
      return ReadEvents(
          tx.exec_params("SELECT job_id, ts_ms, kind, detail FROM job_events WHERE job_id = $1 ORDER BY id", job_id));
    });
  }

  Expected<std::vector<NodeEvent>> NodeEvents(const std::string& node_id, int limit) override {
    return Read<std::vector<NodeEvent>>([&](pqxx::read_transaction& tx) {
      std::vector<NodeEvent> out;
      for (const pqxx::row& r :
           tx.exec_params("SELECT node_id, ts_ms, kind, detail FROM node_events WHERE node_id = $1 "
                          "ORDER BY id DESC LIMIT $2",
                          node_id, limit)) {
        out.push_back({r[0].as<std::string>(), r[1].as<int64_t>(), r[2].as<std::string>(), r[3].as<std::string>()});
      }
      return out;
    });
  }

  Expected<std::vector<AuditRecord>> Audit(int limit) override {
    return Read<std::vector<AuditRecord>>([&](pqxx::read_transaction& tx) {
      std::vector<AuditRecord> out;
      for (const pqxx::row& r : tx.exec_params(
               "SELECT ts_ms, \"user\", role, action, target, outcome, detail FROM audit ORDER BY id DESC LIMIT $1",
               limit)) {
        out.push_back({r[0].as<int64_t>(), r[1].as<std::string>(), r[2].as<std::string>(), r[3].as<std::string>(),
                       r[4].as<std::string>(), r[5].as<std::string>(), r[6].as<std::string>()});
      }
      return out;
    });
  }

  Expected<std::vector<Allocation>> Allocations(TimeMs from, TimeMs to) override {
    return Read<std::vector<Allocation>>([&](pqxx::read_transaction& tx) {
      return ReadAllocations(
          tx.exec_params(fmt::format("SELECT {} FROM allocations WHERE start_ms < $1 AND (end_ms IS NULL OR end_ms > "
                                     "$2) ORDER BY start_ms, job_id, run, slot",
                                     kAllocationColumns),
                         to, from));
    });
  }

  Expected<std::vector<Allocation>> OpenAllocations() override {
    return Read<std::vector<Allocation>>([&](pqxx::read_transaction& tx) {
      return ReadAllocations(tx.exec(fmt::format(
          "SELECT {} FROM allocations WHERE end_ms IS NULL ORDER BY job_id, run, slot", kAllocationColumns)));
    });
  }

  Expected<std::vector<JobEvent>> EventsOfKinds(const std::vector<std::string>& kinds, TimeMs to) override {
    return Read<std::vector<JobEvent>>([&](pqxx::read_transaction& tx) {
      std::string list;
      for (const std::string& k : kinds) list += (list.empty() ? "" : ", ") + tx.quote(k);
      if (list.empty()) return std::vector<JobEvent>{};
      return ReadEvents(tx.exec_params(
          fmt::format(
              "SELECT job_id, ts_ms, kind, detail FROM job_events WHERE ts_ms < $1 AND kind IN ({}) ORDER BY id", list),
          to));
    });
  }

  Expected<std::vector<HistoryRow>> History(TimeMs from, TimeMs to) override {
    return Read<std::vector<HistoryRow>>([&](pqxx::read_transaction& tx) {
      std::vector<HistoryRow> out;
      for (const pqxx::row& r :
           tx.exec_params("SELECT ts_ms, doc FROM history WHERE ts_ms >= $1 AND ts_ms < $2 ORDER BY ts_ms", from, to)) {
        out.push_back({r[0].as<int64_t>(), r[1].as<std::string>()});
      }
      return out;
    });
  }

  int schema_version() const override { return version_; }
  void SetFencingTerm(int64_t term) override { fencing_term_ = term; }

 private:
  // A read on the reader connection; a broken connection is opened again on the next read.
  template <typename T, typename F>
  Expected<T> Read(F&& query) {
    std::lock_guard<std::mutex> lock(reader_mu_);
    try {
      if (!reader_->is_open()) reader_ = std::make_unique<pqxx::connection>(url_);
      pqxx::read_transaction tx(*reader_);
      return query(tx);
    } catch (const std::exception& e) {
      return Status::Internal(fmt::format("store read failed: {}", FirstLine(e.what())));
    }
  }

  // The writer's commit mode, on each (re)connection.
  void PrepareWriter() {
    if (!options_.synchronous_commit) {
      pqxx::nontransaction tx(*writer_);
      tx.exec("SET synchronous_commit = off");
    }
  }

  Status Migrate() {
    pqxx::work tx(*writer_);
    tx.exec_params("SELECT pg_advisory_xact_lock($1)", kMigrationLock);
    tx.exec("CREATE TABLE IF NOT EXISTS schema_version(version INTEGER NOT NULL)");
    pqxx::result v = tx.exec("SELECT version FROM schema_version");
    if (v.empty()) tx.exec("INSERT INTO schema_version VALUES(0)");
    version_ = v.empty() ? 0 : v[0][0].as<int>();
    const int latest = static_cast<int>(std::size(kMigrations));
    if (version_ > latest) {
      return Status::Invalid("db", fmt::format("schema version {} is newer than this gantry ({})", version_, latest));
    }
    for (; version_ < latest; ++version_) tx.exec(kMigrations[version_]);
    tx.exec_params("UPDATE schema_version SET version = $1", version_);
    tx.commit();
    return Status::Ok();
  }

  // libpqxx's messages run over several lines (with the query); the first says what failed.
  static std::string FirstLine(const std::string& what) { return what.substr(0, what.find('\n')); }

  std::string url_;
  PostgresOptions options_;
  std::unique_ptr<pqxx::connection> writer_;
  std::unique_ptr<pqxx::connection> reader_;
  std::mutex reader_mu_;
  int version_ = 0;
  int64_t fencing_term_ = 0;  // > 0: every commit proves this term still leads
};

}  // namespace

std::string RedactDbUrl(const std::string& db) {
  auto scheme = db.find("://");
  auto at = db.find('@');
  if (!IsPostgresUrl(db) || at == std::string::npos) return db;
  auto colon = db.find(':', scheme + 3);
  if (colon == std::string::npos || colon > at) return db;
  return db.substr(0, colon) + ":***" + db.substr(at);
}

bool IsPostgresUrl(const std::string& db) {
  return db.rfind("postgresql://", 0) == 0 || db.rfind("postgres://", 0) == 0;
}

Expected<std::unique_ptr<Store>> OpenPostgresStore(const std::string& url, PostgresOptions options) {
  auto store = std::make_unique<PostgresStore>();
  if (Status s = store->Open(url, options); !s.ok()) return s;
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace gantry
