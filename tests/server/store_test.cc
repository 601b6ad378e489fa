// The store's contract, run against both backends: SQLite (a file) and PostgreSQL (a
// throw-away cluster from scripts/pg-scratch.sh). What a commit writes reads back the same
// after the store is closed and opened again; upserts replace; a failing batch writes
// nothing; the history queries order and filter as the controller expects.
#include "server/store.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>

#include "server/scratch_postgres.h"

namespace gantry {
namespace {

using testing::ScratchPostgres;

// One backend: where its data lives, and how to open a store on it.
class StoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "postgresql") {
      pg_ = std::make_unique<ScratchPostgres>();
      ASSERT_FALSE(pg_->url().empty());
      where_ = pg_->url();
    } else {
      where_ = (std::filesystem::temp_directory_path() / ("store-test-" + std::to_string(getpid()) + ".db")).string();
      for (const char* s : {"", "-wal", "-shm"}) std::filesystem::remove(where_ + s);
    }
    store_ = Open();
    ASSERT_NE(store_, nullptr);
  }
  void TearDown() override {
    store_.reset();
    if (GetParam() == "sqlite") {
      for (const char* s : {"", "-wal", "-shm"}) std::filesystem::remove(where_ + s);
    }
  }
  std::unique_ptr<Store> Open() {
    auto s = GetParam() == "postgresql" ? OpenPostgresStore(where_) : OpenSqliteStore(where_);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(*s) : nullptr;
  }
  // Closes the store and opens it again: what reads back now was on disk.
  void Reopen() {
    store_.reset();
    store_ = Open();
    ASSERT_NE(store_, nullptr);
  }

  std::unique_ptr<ScratchPostgres> pg_;
  std::string where_;
  std::unique_ptr<Store> store_;
};

Allocation MakeAllocation(const std::string& job, int slot, TimeMs start, TimeMs end) {
  Allocation a;
  a.job_id = job;
  a.slot = slot;
  a.user = "ann";
  a.team = "vision";
  a.project = "p";
  a.priority_class = "medium";
  a.node = "n1";
  a.pool = "spot";
  a.gpu_index = slot;
  a.gpu_uuid = "GPU-" + std::to_string(slot);
  a.gpu_type = "A100-80GB";
  a.share = 0.5;
  a.start_ms = start;
  a.end_ms = end;
  a.util_sum = 150.25;
  a.mem_sum_mib = 2048.5;
  a.samples = 3;
  a.idle = slot == 1;
  return a;
}

TEST_P(StoreTest, ACommittedBatchReadsBackAfterReopening) {
  StoreBatch b;
  b.jobs = {{1, "1", "vision", "ann", "pending", R"({"id":"1"})"}, {2, "2", "nlp", "bob", "running", "{}"}};
  b.events = {{"1", 100, "submitted", "{}"}, {"2", 101, "submitted", "{}"}, {"2", 102, "started", R"({"n":1})"}};
  b.node_events = {{"n1", 90, "registered", "{}"}};
  b.nodes = {{"n2", R"({"id":"n2"})"}, {"n1", R"({"id":"n1"})"}};
  b.idempotency = {{"ann", "key-1", "1", "hash", 100}};
  // Quotes, backslashes, non-ASCII text and placeholders inside values stay as they are.
  const std::string odd = "it's \"quoted\" \\ back\\slash, \u00fcn\u00efcode \u2713, $1 $2 ?1 '); DROP TABLE jobs; --";
  b.audit = {{100, "ann", "user", "POST /v1/jobs", "1", "created", odd}};
  b.meta = {{"next_seq", "3"}};
  b.allocations = {MakeAllocation("2", 0, 102, -1), MakeAllocation("2", 1, 102, 500)};
  b.history = {{60'000, R"({"gpus":4})"}};
  ASSERT_TRUE(store_->Commit(b).ok());
  Reopen();

  auto st = store_->Load();
  ASSERT_TRUE(st.ok());
  ASSERT_EQ(st->jobs.size(), 2u);
  EXPECT_EQ(st->jobs[0].id, "1");
  EXPECT_EQ(st->jobs[1].user, "bob");
  EXPECT_EQ(st->jobs[1].state, "running");
  EXPECT_EQ(st->jobs[0].doc, R"({"id":"1"})");
  ASSERT_EQ(st->nodes.size(), 2u);
  EXPECT_EQ(st->nodes[0].first, "n2");  // in the order they were first written
  ASSERT_EQ(st->idempotency.size(), 1u);
  EXPECT_EQ(st->idempotency[0].request_hash, "hash");
  EXPECT_EQ(st->meta["next_seq"], "3");

  auto events = store_->Events("2");
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ((*events)[1].kind, "started");
  EXPECT_EQ((*events)[1].detail, R"({"n":1})");
  auto audit = store_->Audit(10);
  ASSERT_TRUE(audit.ok());
  ASSERT_EQ(audit->size(), 1u);
  EXPECT_EQ((*audit)[0].detail, odd);
  EXPECT_EQ((*audit)[0].outcome, "created");

  auto open = store_->OpenAllocations();
  ASSERT_TRUE(open.ok());
  ASSERT_EQ(open->size(), 1u);
  const Allocation& a = (*open)[0];
  EXPECT_EQ(a.slot, 0);
  EXPECT_TRUE(a.open());
  EXPECT_DOUBLE_EQ(a.share, 0.5);
  EXPECT_DOUBLE_EQ(a.util_sum, 150.25);
  EXPECT_DOUBLE_EQ(a.mem_sum_mib, 2048.5);
  EXPECT_EQ(a.samples, 3);
  EXPECT_EQ(a.pool, "spot");
  EXPECT_FALSE(a.idle);
  auto all = store_->Allocations(0, 1000);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[1].end_ms, 500);
  EXPECT_TRUE((*all)[1].idle);
  EXPECT_EQ(store_->Allocations(600, 700)->size(), 1u);  // only the open one overlaps
  EXPECT_EQ(store_->Allocations(0, 102)->size(), 0u);    // [from, to): none started before 102

  auto history = store_->History(0, 120'000);
  ASSERT_TRUE(history.ok());
  ASSERT_EQ(history->size(), 1u);
  EXPECT_EQ((*history)[0].doc, R"({"gpus":4})");
  EXPECT_GE(store_->schema_version(), 1);
}

TEST_P(StoreTest, UpsertsReplaceWhatWasThere) {
  StoreBatch first;
  first.jobs = {{1, "1", "vision", "ann", "pending", "{}"}};
  first.nodes = {{"n1", "old"}, {"n2", "two"}};
  first.meta = {{"k", "1"}};
  first.idempotency = {{"ann", "key", "1", "h1", 1}};
  first.allocations = {MakeAllocation("1", 0, 10, -1)};
  ASSERT_TRUE(store_->Commit(first).ok());
  StoreBatch second;
  second.jobs = {{1, "1", "vision", "ann", "succeeded", R"({"done":true})"}};
  second.nodes = {{"n1", "new"}};
  second.meta = {{"k", "2"}};
  second.idempotency = {{"ann", "key", "1", "h2", 2}};
  second.allocations = {MakeAllocation("1", 0, 10, 99)};  // the interval closes
  ASSERT_TRUE(store_->Commit(second).ok());
  Reopen();
  auto st = store_->Load();
  ASSERT_TRUE(st.ok());
  ASSERT_EQ(st->jobs.size(), 1u);
  EXPECT_EQ(st->jobs[0].state, "succeeded");
  EXPECT_EQ(st->jobs[0].doc, R"({"done":true})");
  ASSERT_EQ(st->nodes.size(), 2u);
  EXPECT_EQ(st->nodes[0], (std::pair<std::string, std::string>{"n1", "new"}));  // keeps its place
  EXPECT_EQ(st->meta["k"], "2");
  ASSERT_EQ(st->idempotency.size(), 1u);
  EXPECT_EQ(st->idempotency[0].request_hash, "h2");
  EXPECT_TRUE(store_->OpenAllocations()->empty());
  ASSERT_EQ(store_->Allocations(0, 1000)->size(), 1u);
  EXPECT_EQ((*store_->Allocations(0, 1000))[0].end_ms, 99);
}

TEST_P(StoreTest, AFailingBatchWritesNothing) {
  StoreBatch good;
  good.jobs = {{1, "1", "vision", "ann", "pending", "{}"}};
  ASSERT_TRUE(store_->Commit(good).ok());
  // Job id "1" again under another seq breaks the unique id, after a valid job and event
  // in the same batch: the whole batch must go.
  StoreBatch bad;
  bad.jobs = {{2, "2", "vision", "ann", "pending", "{}"}, {3, "1", "vision", "ann", "pending", "{}"}};
  bad.events = {{"2", 5, "submitted", "{}"}};
  bad.meta = {{"next_seq", "4"}};
  Status s = store_->Commit(bad);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("store write failed"), std::string::npos) << s.ToString();
  // The store still works after the failure, and holds the first batch only.
  StoreBatch after;
  after.events = {{"1", 6, "started", "{}"}};
  ASSERT_TRUE(store_->Commit(after).ok());
  Reopen();
  auto st = store_->Load();
  ASSERT_TRUE(st.ok());
  ASSERT_EQ(st->jobs.size(), 1u);
  EXPECT_EQ(st->jobs[0].id, "1");
  EXPECT_TRUE(st->meta.empty());
  EXPECT_TRUE(store_->Events("2")->empty());
  EXPECT_EQ(store_->Events("1")->size(), 1u);
}

TEST_P(StoreTest, HistoryQueriesOrderFilterAndLimit) {
  StoreBatch b;
  for (int i = 0; i < 5; ++i) {
    b.node_events.push_back({"n1", 100 + i, "kind" + std::to_string(i), "{}"});
    b.audit.push_back({100 + i, "ann", "user", "POST /v1/jobs", std::to_string(i), "created", ""});
    b.events.push_back({"j", 100 + i, i % 2 ? "exited" : "started", "{}"});
    b.history.push_back({i * 60'000, std::to_string(i)});
  }
  b.node_events.push_back({"n2", 200, "registered", "{}"});
  ASSERT_TRUE(store_->Commit(b).ok());
  auto ne = store_->NodeEvents("n1", 2);
  ASSERT_TRUE(ne.ok());
  ASSERT_EQ(ne->size(), 2u);  // newest first, limited
  EXPECT_EQ((*ne)[0].kind, "kind4");
  EXPECT_EQ((*ne)[1].kind, "kind3");
  auto audit = store_->Audit(3);
  ASSERT_EQ(audit->size(), 3u);
  EXPECT_EQ((*audit)[0].target, "4");
  auto kinds = store_->EventsOfKinds({"exited"}, 104);
  ASSERT_TRUE(kinds.ok());
  ASSERT_EQ(kinds->size(), 2u);  // ts 101 and 103; 104 is not before `to`
  EXPECT_EQ((*kinds)[1].ts_ms, 103);
  EXPECT_EQ(store_->EventsOfKinds({"exited", "started"}, 1000)->size(), 5u);
  // A kind with a quote is a value, not SQL.
  EXPECT_TRUE(store_->EventsOfKinds({"x') OR ('1'='1"}, 1000)->empty());
  auto h = store_->History(60'000, 240'000);
  ASSERT_EQ(h->size(), 3u);
  EXPECT_EQ((*h)[0].doc, "1");
  StoreBatch drop;
  drop.history_drop_before_ms = 180'000;
  ASSERT_TRUE(store_->Commit(drop).ok());
  EXPECT_EQ(store_->History(0, 1'000'000)->size(), 2u);
}

TEST_P(StoreTest, ASecondStoreOnTheSameDatabaseSeesTheFirstOnesCommits) {
  StoreBatch b;
  b.jobs = {{7, "7", "vision", "ann", "pending", "{}"}};
  ASSERT_TRUE(store_->Commit(b).ok());
  auto other = Open();  // opening migrates nothing twice and loses nothing
  ASSERT_NE(other, nullptr);
  auto st = other->Load();
  ASSERT_TRUE(st.ok());
  ASSERT_EQ(st->jobs.size(), 1u);
  EXPECT_EQ(st->jobs[0].seq, 7u);
  EXPECT_EQ(other->schema_version(), store_->schema_version());
}

INSTANTIATE_TEST_SUITE_P(Backends, StoreTest, ::testing::Values("sqlite", "postgresql"),
                         [](const auto& info) { return info.param; });

TEST(PostgresStore, AnUnreachableDatabaseIsAClearError) {
  auto s = OpenPostgresStore("postgresql://gantry:secret@127.0.0.1:1/gantry");
  ASSERT_FALSE(s.ok());
  std::string msg = s.status().ToString();
  EXPECT_NE(msg.find("db"), std::string::npos) << msg;
  EXPECT_NE(msg.find("127.0.0.1:1"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("secret"), std::string::npos) << "the password must not be shown: " << msg;
}

TEST(PostgresStore, RedactDbUrlHidesOnlyThePassword) {
  EXPECT_EQ(RedactDbUrl("postgresql://u:pw@h:5432/db"), "postgresql://u:***@h:5432/db");
  EXPECT_EQ(RedactDbUrl("postgresql://u@h/db"), "postgresql://u@h/db");
  EXPECT_EQ(RedactDbUrl("/var/lib/gantry/a:b@c.db"), "/var/lib/gantry/a:b@c.db");
  EXPECT_TRUE(IsPostgresUrl("postgres://h/db"));
  EXPECT_FALSE(IsPostgresUrl("gantry.db"));
}

}  // namespace
}  // namespace gantry
