// The controller's state machine on its own: no thread, no store, no clock. The test
// gives it the time and the inputs and reads what it returns (store rows, orders to
// nodes), which is what makes a transition testable in isolation.
#include "state/controller_state.h"

#include <gtest/gtest.h>

#include <climits>

#include "state/state_under_test.h"
#include "state/state_views.h"

namespace gantry::testing {
namespace {

// The states of the job rows in an output; the kinds of its job events.
std::vector<std::string> JobStates(const ControllerState::Output& out) {
  std::vector<std::string> states;
  for (const StoredJob& j : out.batch.jobs) states.push_back(j.state);
  return states;
}
std::vector<std::string> EventKinds(const ControllerState::Output& out) {
  std::vector<std::string> kinds;
  for (const JobEvent& e : out.batch.events) kinds.push_back(e.kind);
  return kinds;
}

const char* kOneGpu = "name: train\ngpus: 1\ncommand: python train.py\ntime_limit: 1h\n";

TEST(ControllerState, ASubmitStartsAtTheCycleAsAnOrderInTheOutputNotASentMessage) {
  StateUnderTest t;
  ASSERT_TRUE(t.state->AttachNodes({MakeNode("n1", "A100-80GB", 2)}, &t.link, {}).ok());
  ControllerState::Output attached = t.state->TakeOutput();
  ASSERT_EQ(attached.batch.nodes.size(), 1u);
  EXPECT_EQ(attached.batch.node_events.at(0).kind, "registered");

  auto spec = ParseJobSpecText(kOneGpu);
  ASSERT_TRUE(spec.ok());
  auto submitted = t.state->Submit(kAlice, *spec, "", "");
  ASSERT_TRUE(submitted.ok()) << submitted.status().ToString();
  ControllerState::Output after_submit = t.state->TakeOutput();
  EXPECT_EQ(JobStates(after_submit), std::vector<std::string>{"pending"});
  EXPECT_TRUE(after_submit.effects.orders.empty());
  EXPECT_TRUE(t.state->dirty());

  t.At(t.now + 10);
  t.state->Cycle();
  ControllerState::Output started = t.state->TakeOutput();
  EXPECT_EQ(JobStates(started), std::vector<std::string>{"running"});
  ASSERT_EQ(started.effects.orders.size(), 1u);
  EXPECT_EQ(started.effects.orders[0].link, &t.link);
  const auto& order = std::get<StartOrder>(started.effects.orders[0].order);
  EXPECT_EQ(order.job_id, "1");
  EXPECT_EQ(order.node_id, "n1");
  EXPECT_EQ(order.gpus.size(), 1u);
  // Nothing was sent: the Controller's committer sends orders once the batch is durable.
  EXPECT_TRUE(t.link.starts.empty());
  // The time is the one given, not the wall clock's.
  EXPECT_EQ(started.batch.events.at(0).ts_ms, t.now + 10);
  EXPECT_EQ(started.batch.allocations.size(), 1u);  // the ledger interval opened
}

TEST(ControllerState, TheTimeLimitIsReachedWhenTheGivenTimeSaysSo) {
  StateUnderTest t;
  ASSERT_TRUE(t.state->AttachNodes({MakeNode("n1", "A100-80GB", 1)}, &t.link, {}).ok());
  ASSERT_TRUE(t.state->Submit(kAlice, *ParseJobSpecText(kOneGpu), "", "").ok());
  t.state->Cycle();
  t.state->TakeOutput();

  t.At(t.now + kHourMs - 1);
  t.state->Tick();
  EXPECT_TRUE(t.state->TakeOutput().effects.orders.empty());

  t.At(t.now + kHourMs);
  t.state->Tick();
  ControllerState::Output stopping = t.state->TakeOutput();
  EXPECT_EQ(JobStates(stopping), std::vector<std::string>{"stopping"});
  ASSERT_EQ(stopping.effects.orders.size(), 1u);
  const auto& stop = std::get<StopOrder>(stopping.effects.orders[0].order);
  EXPECT_EQ(stop.grace_ms, 5000);
  EXPECT_NE(stop.reason.find("time limit"), std::string::npos);

  t.At(t.now + kHourMs + 2000);
  t.state->RunExited(ExitReport("1", 1, "n1", 137, "killed"));
  ControllerState::Output ended = t.state->TakeOutput();
  EXPECT_EQ(JobStates(ended), std::vector<std::string>{"failed"});
  std::vector<std::string> kinds = EventKinds(ended);
  EXPECT_NE(std::find(kinds.begin(), kinds.end(), "released"), kinds.end());
  ASSERT_EQ(ended.batch.allocations.size(), 1u);
  EXPECT_EQ(ended.batch.allocations[0].end_ms, t.now + kHourMs + 2000);  // the ledger closes at the given time
}

TEST(ControllerState, ARefusalIsAuditedInTheOutputAndChangesNothingElse) {
  StateUnderTest t;
  ASSERT_TRUE(t.state->AttachNodes({MakeNode("n1", "A100-80GB", 1)}, &t.link, {}).ok());
  t.state->TakeOutput();
  auto refused = t.state->Cancel(kBob, "42");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kNotFound);
  ControllerState::Output out = t.state->TakeOutput();
  ASSERT_EQ(out.batch.audit.size(), 1u);
  EXPECT_EQ(out.batch.audit[0].outcome, "not_found");
  EXPECT_EQ(out.batch.audit[0].action, "cancel 42");  // the state's verb; the server's words are its routes
  EXPECT_TRUE(out.batch.jobs.empty());
  EXPECT_TRUE(out.effects.empty());
}

// The job's record and its scheduler entry are written as one document and read back
// into their two owners: the placement and kill time of a stopping job survive.
// Before: the nodes' page added offset and limit as int; an offset near INT32_MAX overflowed.
TEST(ControllerState, ANodesPageFarPastTheEndIsEmpty) {
  StateUnderTest t;
  ASSERT_TRUE(t.state->AttachNodes({MakeNode("n1", "A100-80GB", 1), MakeNode("n2", "T4", 1)}, &t.link, {}).ok());
  PageQuery page;
  page.limit = 10000;
  page.offset = INT32_MAX;
  auto far = StateViews(*t.state).Nodes(kAlice, page);
  ASSERT_TRUE(far.ok());
  EXPECT_TRUE((*far)["nodes"].empty()) << far->dump();
  EXPECT_EQ((*far)["total"], 2);
  page.limit = 1;
  page.offset = 1;
  auto second = StateViews(*t.state).Nodes(kAlice, page);
  ASSERT_TRUE(second.ok());
  ASSERT_EQ((*second)["nodes"].size(), 1u);
  EXPECT_EQ((*second)["nodes"][0]["id"], "n2");
}

TEST(ControllerState, AStoppingJobsPlacementAndKillTimeComeBackFromItsDocument) {
  StateUnderTest t;
  ASSERT_TRUE(t.state->AttachNodes({MakeNode("n1", "A100-80GB", 2)}, &t.link, {}).ok());
  ASSERT_TRUE(t.state->Submit(kAlice, *ParseJobSpecText(kOneGpu), "", "").ok());
  t.state->Cycle();
  ASSERT_TRUE(t.state->Cancel(kAlice, "1").ok());
  // One output holds the node and the job's latest row, as the store would keep them.
  ControllerState::Output out = t.state->TakeOutput();
  StoredState stored;
  stored.nodes = out.batch.nodes;
  ASSERT_EQ(out.batch.jobs.size(), 1u);
  stored.jobs = out.batch.jobs;
  nlohmann::json before = *StateViews(*t.state).GetJob(kAlice, "1");

  StateUnderTest restarted(stored);
  nlohmann::json after = *StateViews(*restarted.state).GetJob(kAlice, "1");
  EXPECT_EQ(after["state"], "stopping");
  EXPECT_EQ(after["stop_at"], before["stop_at"]);
  EXPECT_EQ(after["stop_at"], FormatUtc(t.now + 5000));
  EXPECT_EQ(after["placement"], before["placement"]);
  EXPECT_EQ(after["placement"][0]["node"], "n1");
}

// Equal jobs keep their submission order however late each is merged into the queue: a
// job keyed a minute after its submit must not pass one keyed a second after its own.
TEST(ControllerState, EqualJobsQueueInSubmissionOrderWhateverTheirMergeTime) {
  StateUnderTest t;
  ASSERT_TRUE(t.state->AttachNodes({MakeNode("n1", "A100-80GB", 1)}, &t.link, {}).ok());
  ASSERT_TRUE(t.state->Submit(kAlice, *ParseJobSpecText(kOneGpu), "", "").ok());  // takes the GPU
  t.state->Cycle();
  std::vector<std::string> ids;
  for (TimeMs merged_after : {1000, 60000, 5000}) {
    t.now += 100;
    t.At(t.now);
    auto job = t.state->Submit(kAlice, *ParseJobSpecText(kOneGpu), "", "");
    ASSERT_TRUE(job.ok());
    ids.push_back(job->job.value("id", ""));
    t.now += merged_after;
    t.At(t.now);
    t.state->Cycle();
  }
  Answer queue = StateViews(*t.state).Queue(kAlice);
  ASSERT_TRUE(queue.ok());
  std::vector<std::string> order;
  for (const auto& q : (*queue)["queue"]) order.push_back(q.value("id", ""));
  EXPECT_EQ(order, ids);
}

// Jobs submitted in the same millisecond keep their order past id 9: "10" is not before "9".
TEST(ControllerState, JobsOfOneMillisecondQueueByNumericId) {
  StateUnderTest t;
  ASSERT_TRUE(t.state->AttachNodes({MakeNode("n1", "A100-80GB", 1)}, &t.link, {}).ok());
  std::vector<std::string> ids;
  for (int i = 0; i < 12; ++i) {
    auto job = t.state->Submit(kAlice, *ParseJobSpecText(kOneGpu), "", "");
    ASSERT_TRUE(job.ok());
    ids.push_back(job->job.value("id", ""));
  }
  t.state->Cycle();  // job 1 takes the GPU; 2..12 wait, all submitted at the same time
  Answer queue = StateViews(*t.state).Queue(kAlice);
  ASSERT_TRUE(queue.ok());
  std::vector<std::string> order;
  for (const auto& q : (*queue)["queue"]) order.push_back(q.value("id", ""));
  EXPECT_EQ(order, std::vector<std::string>(ids.begin() + 1, ids.end()));
}

}  // namespace
}  // namespace gantry::testing
