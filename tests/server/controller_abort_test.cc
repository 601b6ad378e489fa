// What the controller does with a bug inside a post: a change that throws half-way ends
// the process before anything of its batch is committed (the store keeps what was
// acknowledged, and a restart recovers from it); a view that throws answers its caller
// with the error and the server goes on; and, in sanitized builds, a batch that leaves an
// index out of step with the jobs ends the process too.
#include <gtest/gtest.h>

#include <stdexcept>

#include "controller_harness.h"
#include "state/state_test_peer.h"

namespace gantry::testing {
namespace {

// A controller whose test posts its own changes and views.
class PostingController : public Controller {
 public:
  using Controller::Controller;
  template <typename F>
  auto Change(F&& f) {
    return Call(std::forward<F>(f));
  }
  template <typename F>
  auto Look(F&& f) {
    return View(std::forward<F>(f));
  }
  ControllerState& State() { return state(); }
};

std::unique_ptr<PostingController> StartOn(const std::string& db) {
  ControllerOptions o = HarnessOptions();
  auto store = OpenSqliteStore(db, {.synchronous_full = false});
  if (!store.ok()) return nullptr;
  auto c = std::make_unique<PostingController>(std::move(o), std::move(*store));
  if (!c->Recover().ok()) return nullptr;
  c->Start();
  return c;
}

JobSpec OneGpu() { return *ParseJobSpecText("gpus: 1\ncommand: sleep 60\ntime_limit: 1h\n"); }

std::vector<std::string> StoredJobIds(const std::string& db) {
  auto store = OpenSqliteStore(db);
  EXPECT_TRUE(store.ok());
  auto loaded = (*store)->Load();
  EXPECT_TRUE(loaded.ok());
  std::vector<std::string> ids;
  for (const StoredJob& j : loaded->jobs) ids.push_back(j.id);
  return ids;
}

TEST(ControllerAbort, AChangeThatThrowsHalfWayEndsTheProcessAndCommitsNothingOfIt) {
  const std::string db = Harness::Fresh();
  // The controller runs in the death test's child only: this process starts no thread.
  EXPECT_DEATH(
      {
        auto c = StartOn(db);
        if (!c || !c->Submit(kAlice, OneGpu(), "").ok()) std::exit(3);  // job 1: acknowledged, so durable
        c->Change([&]() -> int {
          auto second = c->State().Submit(kAlice, OneGpu(), "", "");            // job 2: applied...
          if (second.ok()) throw std::runtime_error("a bug after the submit");  // ...and then a bug
          return 0;
        });
        std::exit(4);  // not reached: the change ends the process
      },
      "a change failed half-way \\(a bug after the submit\\)");
  // What a restart reads back: job 1, and nothing of the change that failed.
  EXPECT_EQ(StoredJobIds(db), std::vector<std::string>{"1"});
  auto again = StartOn(db);
  ASSERT_TRUE(again);
  auto next = again->Submit(kAlice, OneGpu(), "");
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_EQ(next->job.value("id", ""), "2");  // the half-made job 2 never existed
}

TEST(ControllerAbort, AViewThatThrowsAnswersItsCallerAndTheServerGoesOn) {
  auto c = StartOn(Harness::Fresh());
  ASSERT_TRUE(c);
  EXPECT_THROW(c->Look([]() -> int { throw std::runtime_error("a bug in a view"); }), std::runtime_error);
  auto submitted = c->Submit(kAlice, OneGpu(), "");
  ASSERT_TRUE(submitted.ok()) << submitted.status().ToString();
  EXPECT_TRUE(c->GetJob(kAlice, "1").ok());
}

TEST(ControllerAbort, ABatchThatLeavesAnIndexOutOfStepEndsTheProcess) {
#ifndef GANTRY_CHECK_INVARIANTS
  GTEST_SKIP() << "the invariants are checked after every batch in sanitized builds only";
#endif
  const std::string db = Harness::Fresh();
  EXPECT_DEATH(
      {
        auto c = StartOn(db);
        if (!c) std::exit(3);
        c->Change([&] {
          ControllerStateTestPeer::WaitingByTeam(c->State())["vision"]++;  // a job counted that does not wait
          return 0;
        });
        std::exit(4);
      },
      "state invariant: the waiting counts by user or team");
}

}  // namespace
}  // namespace gantry::testing
