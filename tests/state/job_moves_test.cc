// A job's place and state move together (MoveJob): every transition a job can make, one
// after another on the state machine alone, keeps every index in step with the jobs
// (CheckInvariants after each input); and CheckInvariants finds each kind of index that
// disagrees (an index broken on purpose through the test peer).
#include <gtest/gtest.h>

#include "state/controller_state.h"
#include "state/state_test_peer.h"
#include "state/state_under_test.h"
#include "state/state_views.h"

namespace gantry {
namespace testing {
namespace {

using Peer = ControllerStateTestPeer;

// Submits a spec as alice; the job's id.
std::string Submit(StateUnderTest& t, const std::string& yaml, const Actor& who = kAlice) {
  auto spec = ParseJobSpecText(yaml);
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  auto s = t.state->Submit(who, *spec, "", "");
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? s->job.value("id", "") : "";
}

std::string StateOf(StateUnderTest& t, const std::string& id) {
  auto j = StateViews(*t.state).GetJob(kAdmin, id);
  return j ? j->value("state", "?") : "?";
}

// The state after the next second's cycle, with its invariants checked.
void Step(StateUnderTest& t) {
  t.now += 1000;
  t.At(t.now);
  t.state->Cycle();
  t.state->TakeOutput();
}

#define EXPECT_IN_STEP(t)                       \
  do {                                          \
    Status held = (t).state->CheckInvariants(); \
    EXPECT_TRUE(held.ok()) << held.ToString();  \
  } while (0)

TEST(JobMoves, EveryTransitionKeepsEveryIndexInStep) {
  StateUnderTest t;
  ASSERT_TRUE(t.state->AttachNodes({MakeNode("n1", "A100-80GB", 4), MakeNode("n2", "A100-80GB", 4)}, &t.link, {}).ok());
  EXPECT_IN_STEP(t);
  // Queued, kept out by a hold, by a dependency and by an array's limit.
  std::string big = Submit(t, "gpus: 8\ncommand: x\ntime_limit: 1h\npriority: high\nports: [web]\n");
  std::string held = Submit(t, "gpus: 1\ncommand: x\ntime_limit: 1h\nhold: true\n");
  std::string after = Submit(t, "gpus: 1\ncommand: x\ntime_limit: 1h\ndependency: afterok:" + big + "\n");
  std::string array = Submit(t, "gpus: 1\ncommand: x\ntime_limit: 1h\narray: 0-5%2\n");
  EXPECT_IN_STEP(t);
  Step(t);  // the big job and two tasks start (8 GPUs: the big one only)
  EXPECT_IN_STEP(t);
  EXPECT_EQ(StateOf(t, big), "running");
  // A running job's spec changes (its time limit); a kept-out one's priority.
  JobChanges limit;
  limit.fields = {"time_limit"};
  limit.time_limit_ms = 2 * kHourMs;
  ASSERT_TRUE(t.state->Update(kAdmin, big, limit).ok());
  JobChanges priority;
  priority.fields = {"priority"};
  priority.priority_class = "high";
  ASSERT_TRUE(t.state->Update(kAlice, after, priority).ok());
  EXPECT_IN_STEP(t);
  // The big job's two nodes report their exits one by one.
  t.state->RunExited(ExitReport(big, 1, "n1", 0, ""));
  EXPECT_IN_STEP(t);  // one gang member still runs on n2
  t.state->RunExited(ExitReport(big, 1, "n2", 0, ""));
  EXPECT_IN_STEP(t);
  EXPECT_EQ(StateOf(t, big), "succeeded");
  Step(t);
  EXPECT_IN_STEP(t);
  // Held, released, held again; a queued job held; a whole array cancelled while some
  // tasks run, some wait queued and some are kept out by its limit.
  ASSERT_TRUE(t.state->Release(kAlice, held).ok());
  EXPECT_IN_STEP(t);
  Step(t);
  EXPECT_IN_STEP(t);
  std::string queued = Submit(t, "gpus: 8\ncommand: x\ntime_limit: 1h\n");
  ASSERT_TRUE(t.state->Hold(kAlice, queued).ok());
  EXPECT_IN_STEP(t);
  ASSERT_TRUE(t.state->Release(kAlice, queued).ok());
  Step(t);
  EXPECT_IN_STEP(t);
  ASSERT_TRUE(t.state->Cancel(kAlice, array).ok());
  EXPECT_IN_STEP(t);
  Step(t);
  EXPECT_IN_STEP(t);
  // A high-priority job preempts (past the victims' protected minutes); the victims stop,
  // exit and requeue.
  t.now += 11 * kMinuteMs;
  std::string urgent = Submit(t, "gpus: 8\ncommand: x\ntime_limit: 1h\npriority: critical\n", kBob);
  Step(t);
  EXPECT_IN_STEP(t);
  for (int seq = 1; seq <= 12; ++seq) {
    auto view = StateViews(*t.state).GetJob(kAdmin, std::to_string(seq));
    if (view && view->value("state", "") == "stopping") {
      for (const auto& p : (*view)["placement"]) {
        t.state->RunExited(ExitReport(std::to_string(seq), (*view)["runs"], p["node"], 143, "stopped"));
        EXPECT_IN_STEP(t);
      }
    }
  }
  Step(t);
  EXPECT_IN_STEP(t);
  EXPECT_EQ(StateOf(t, urgent), "running") << StateViews(*t.state).Queue(kAdmin)->dump();
  // A running job cancelled; the stop's exit ends it.
  ASSERT_TRUE(t.state->Cancel(kBob, urgent).ok());
  EXPECT_IN_STEP(t);
  EXPECT_EQ(StateOf(t, urgent), "stopping");
  t.state->RunExited(ExitReport(urgent, 1, "n1", 143, ""));
  t.state->RunExited(ExitReport(urgent, 1, "n2", 143, ""));
  EXPECT_IN_STEP(t);
  EXPECT_EQ(StateOf(t, urgent), "cancelled");
  // Time limits reached: the running jobs stop.
  Step(t);
  t.now += 3 * 3600 * 1000;
  t.At(t.now);
  t.state->Tick();
  EXPECT_IN_STEP(t);
  Step(t);
  EXPECT_IN_STEP(t);
}

// A state with one running job (2 GPUs, a named port) and one queued and one held job.
struct Busy {
  Busy() {
    EXPECT_TRUE(t.state->AttachNodes({MakeNode("n1", "A100-80GB", 2)}, &t.link, {}).ok());
    running = Submit(t, "gpus: 2\ncommand: x\ntime_limit: 1h\nports: [web]\n");
    queued = Submit(t, "gpus: 2\ncommand: x\ntime_limit: 1h\n");
    held = Submit(t, "gpus: 1\ncommand: x\ntime_limit: 1h\nhold: true\n");
    Step(t);
    EXPECT_EQ(StateOf(t, running), "running");
    Status held_ok = t.state->CheckInvariants();
    EXPECT_TRUE(held_ok.ok()) << held_ok.ToString();
  }
  StateUnderTest t;
  std::string running, queued, held;
};

// A gang member that exited is not started again when its node's agent registers anew
// (it reports only the runs still going on there).
TEST(JobMoves, AReturningAgentGetsNoStartForAGangPartThatEnded) {
  StateUnderTest t;
  std::vector<Node> nodes = {MakeNode("n1", "A100-80GB", 4), MakeNode("n2", "A100-80GB", 4)};
  ASSERT_TRUE(t.state->AttachNodes(nodes, &t.link, {}).ok());
  std::string gang = Submit(t, "gpus: 8\ncommand: x\ntime_limit: 1h\n");
  Step(t);
  ASSERT_EQ(StateOf(t, gang), "running");
  t.state->RunExited(ExitReport(gang, 1, "n1", 0, ""));  // n1's part is done; n2's goes on
  t.state->TakeOutput();
  RunReport still{gang, 1, "n2", false, -1, "", -1};
  ASSERT_TRUE(t.state->AttachNodes(nodes, &t.link, {still}).ok());
  for (const auto& order : t.state->TakeOutput().effects.orders) {
    const StartOrder* start = std::get_if<StartOrder>(&order.order);
    EXPECT_EQ(start, nullptr) << "started again on " << start->node_id;
  }
  EXPECT_EQ(StateOf(t, gang), "running");
  EXPECT_IN_STEP(t);
  t.state->RunExited(ExitReport(gang, 1, "n2", 0, ""));
  EXPECT_EQ(StateOf(t, gang), "succeeded");
}

TEST(JobMoves, CheckInvariantsFindsEachKindOfIndexOutOfStep) {
  {
    Busy b;  // a held job forgotten by the kept-out set
    Peer::KeptOut(*b.t.state).clear();
    Status s = b.t.state->CheckInvariants();
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("job " + b.held), std::string::npos) << s.ToString();
  }
  {
    Busy b;  // a queued job entered twice
    Snapshot& snap = Peer::Snap(*b.t.state);
    snap.pending.push_back(snap.pending.front());
    Status s = b.t.state->CheckInvariants();
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("job " + b.queued + " (pending) has 2 queue entries"), std::string::npos)
        << s.ToString();
  }
  {
    Busy b;  // a waiting count off by one
    Peer::WaitingByTeam(*b.t.state)["vision"]++;
    Status s = b.t.state->CheckInvariants();
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("waiting counts"), std::string::npos) << s.ToString();
  }
  {
    Busy b;  // a running job with no node left running it
    Peer::RunningNodes(*b.t.state)[b.running].clear();
    Status s = b.t.state->CheckInvariants();
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("job " + b.running + " is running with no node"), std::string::npos) << s.ToString();
  }
  {
    Busy b;  // a port held that no job was lent
    Peer::Ports(*b.t.state).Hold("n1", 1);
    Status s = b.t.state->CheckInvariants();
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("ports held"), std::string::npos) << s.ToString();
  }
  {
    Busy b;  // an ended job still in the queue
    Snapshot& snap = Peer::Snap(*b.t.state);
    ASSERT_TRUE(b.t.state->Cancel(kAlice, b.queued).ok());
    auto spec = std::make_shared<JobSpec>();
    spec->id = b.queued;
    snap.pending.push_back({spec, 0});
    Status s = b.t.state->CheckInvariants();
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("job " + b.queued + " (cancelled) has 1 queue entries"), std::string::npos)
        << s.ToString();
  }
}

}  // namespace
}  // namespace testing
}  // namespace gantry
