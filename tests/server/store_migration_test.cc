// The store's schema migrations on a database an older version wrote: nothing already
// accepted is lost, and old rows read back in the new form.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include "server/controller_harness.h"
#include "server/store.h"

namespace gantry::testing {
namespace {

void Exec(const std::string& path, const char* sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* error = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, &error), SQLITE_OK) << (error ? error : "");
  sqlite3_free(error);
  sqlite3_close(db);
}

// Schema 3 kept the HTTP status of each audited call; schema 4 keeps its outcome by name.
TEST(StoreMigration, AuditRowsWithAnHttpStatusReadBackAsOutcomes) {
  std::string path = TempPath("migrate.db");
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  ASSERT_TRUE(OpenSqliteStore(path).ok());  // every table, at the newest version
  Exec(path, R"sql(
    DROP TABLE history;
    DROP TABLE audit;
    CREATE TABLE audit(id INTEGER PRIMARY KEY AUTOINCREMENT, ts_ms INTEGER NOT NULL, user TEXT NOT NULL,
                       role TEXT NOT NULL, action TEXT NOT NULL, target TEXT NOT NULL,
                       status INTEGER NOT NULL, detail TEXT NOT NULL);
    INSERT INTO audit(ts_ms, user, role, action, target, status, detail) VALUES
      (1, 'alice', 'user', 'POST /v1/jobs', '7', 201, ''),
      (2, 'bob', 'user', 'DELETE /v1/jobs/7', '7', 403, 'not your team''s job'),
      (3, '-', 'user', 'POST /v1/jobs', '', 413, 'body of 9999999 bytes'),
      (4, 'carol', 'user', 'POST /v1/jobs', '', 422, '');
    PRAGMA user_version = 3;
  )sql");
  auto store = OpenSqliteStore(path);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto rows = (*store)->Audit(10);
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 4u);                     // newest first
  EXPECT_TRUE((*store)->History(0, kNever).ok());  // schema 5's table, made by the migration
  EXPECT_EQ((*rows)[0].outcome, "idempotency_mismatch");
  EXPECT_EQ((*rows)[1].outcome, "payload_too_large");
  EXPECT_EQ((*rows)[2].outcome, "forbidden");
  EXPECT_EQ((*rows)[2].detail, "not your team's job");
  EXPECT_EQ((*rows)[3].outcome, "created");
  EXPECT_EQ((*rows)[3].user, "alice");
  // New rows go in beside them.
  StoreBatch batch;
  batch.audit.push_back({5, "dave", "admin", "POST /v1/nodes/n1/drain", "n1", "ok", ""});
  ASSERT_TRUE((*store)->Commit(batch).ok());
  rows = (*store)->Audit(1);
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ((*rows)[0].outcome, "ok");
}

}  // namespace
}  // namespace gantry::testing
