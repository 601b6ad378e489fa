// Kubernetes pods as jobs on the state machine alone (ControllerState::ApplyKubePod): a
// Node with GPUs and no agent becomes a node for pods only; a pod is queued, placed and its
// start goes to the pod link; a gang becomes one job when all its members exist, and waits
// again whole when one is deleted before it is placed; a pod's end ends its job; a job
// cancelled in Gantry has its pod deleted; a restart finds the pods' jobs again.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "state/state_under_test.h"
#include "state/state_views.h"

namespace gantry::testing {
namespace {

KubeNodeFacts PodsNodeFacts(const std::string& product, int gpus) {
  KubeNodeFacts facts;
  facts.labels = {{"nvidia.com/gpu.product", product}};
  facts.gpus = gpus;
  facts.cpus = 32;
  facts.memory_mib = 256 * 1024;
  return facts;
}

WatchedPod Pod(const std::string& ns, const std::string& name, int gpus, const std::string& gang = "",
               int gang_min = 0) {
  KubePodJob pod;
  pod.ns = ns;
  pod.name = name;
  pod.uid = "uid-" + name;
  pod.phase = "Pending";
  pod.gang = gang;
  pod.gang_min_members = gang_min;
  pod.spec.team = ns;
  pod.spec.user = "default@" + ns;
  pod.spec.project = ns;
  pod.spec.name = ns + "/" + name;
  pod.spec.request.gpus = gpus;
  pod.spec.request.num_nodes = 1;
  return {ns + "/" + name, ns, name, pod.uid, pod, false};
}

struct PodsState : StateUnderTest {
  explicit PodsState(const StoredState& stored = {}) : StateUnderTest(stored) {
    state->SetPodLink(&pods);
    for (int i = 0; i < 3; ++i)
      state->ApplyKubeNode("k" + std::to_string(i), PodsNodeFacts("NVIDIA-A100-SXM4-80GB", 8));
  }
  // A scheduling cycle; its orders in `orders`, its rows kept as a store would keep them.
  void Cycle() {
    state->Cycle();
    ControllerState::Output out = state->TakeOutput();
    orders = std::move(out.effects.orders);
    for (auto& [id, doc] : out.batch.nodes) nodes[id] = doc;
    for (StoredJob& j : out.batch.jobs) jobs[j.seq] = j;
  }
  StoredState StoredRows() const {
    StoredState stored;
    stored.nodes.assign(nodes.begin(), nodes.end());
    for (const auto& [seq, j] : jobs) stored.jobs.push_back(j);
    return stored;
  }
  std::vector<Effects::Order> orders;
  std::map<std::string, std::string> nodes;
  std::map<uint64_t, StoredJob> jobs;
  RecordingLink pods;
};

TEST(KubePodState, APodIsAJobPlacedOnANodeForPodsAndItsStartGoesToThePodLink) {
  PodsState t;
  Answer nodes = StateViews(*t.state).Nodes(kAdmin);
  ASSERT_TRUE(nodes.ok());
  ASSERT_EQ((*nodes)["nodes"].size(), 3u);
  EXPECT_EQ((*nodes)["nodes"][0]["taints"], nlohmann::json({"gantry.io/pods-only"}));
  t.state->ApplyKubePod(Pod("vision", "train", 2));
  t.Cycle();
  ASSERT_EQ(t.orders.size(), 1u) << StateViews(*t.state).Queue(kAdmin)->dump()
                                 << StateViews(*t.state).Nodes(kAdmin)->dump()
                                 << (t.state->KubePodWaits().empty() ? "" : t.state->KubePodWaits()[0].message);
  EXPECT_EQ(t.orders[0].link, &t.pods);
  const StartOrder& start = std::get<StartOrder>(t.orders[0].order);
  EXPECT_EQ(start.spec->kube_pods, std::vector<std::string>{"vision/train/uid-train"});
  EXPECT_EQ(start.gpus.size(), 2u);
  Answer job = StateViews(*t.state).GetJob(kAdmin, start.job_id);
  EXPECT_EQ((*job)["state"], "running");
  EXPECT_EQ((*job)["team"], "vision");

  // The pod succeeds: the job does, and its GPUs are free.
  WatchedPod done = Pod("vision", "train", 2);
  done.job->node = start.node_id;
  done.job->phase = "Succeeded";
  t.state->ApplyKubePod(done);
  EXPECT_EQ((*StateViews(*t.state).GetJob(kAdmin, start.job_id))["state"], "succeeded");
  t.Cycle();
  EXPECT_TRUE(t.orders.empty()) << "an ended pod is not deleted";
}

// A deleted pod whose object stays (a finalizer, or a kubelet that leaves a deleted pod's
// phase Running) still frees its GPUs: when its containers are all stopped, or at the
// latest half a minute past its grace period.
TEST(KubePodState, ADeletedPodsGpusAreFreeOnceItsContainersStopOrItsGraceIsLongOver) {
  PodsState t;
  t.state->ApplyKubePod(Pod("nlp", "held", 8));
  t.state->ApplyKubePod(Pod("nlp", "kept", 8));
  t.Cycle();
  ASSERT_EQ(t.orders.size(), 2u);
  std::map<std::string, StartOrder> started;
  for (const auto& o : t.orders) {
    const StartOrder& s = std::get<StartOrder>(o.order);
    started[s.spec->name] = s;
  }
  auto deleting = [&](const std::string& name) {
    WatchedPod pod = Pod("nlp", name, 8);
    pod.job->node = started["nlp/" + name].node_id;
    pod.job->phase = "Running";
    pod.job->deleting = true;
    pod.job->deletion_ms = t.now + 5000;  // a 5 s grace period
    return pod;
  };
  auto state_of = [&](const std::string& name) {
    return (*StateViews(*t.state).GetJob(kAdmin, started["nlp/" + name].job_id))["state"].get<std::string>();
  };
  // Its containers stopped, its phase still Running, a finalizer keeps the object: it ended.
  WatchedPod stopped = deleting("held");
  stopped.job->containers_ended = true;
  t.state->ApplyKubePod(stopped);
  EXPECT_EQ(state_of("held"), "failed");
  // No word from the kubelet at all: the run ends 30 s past the grace period, not before.
  t.state->ApplyKubePod(deleting("kept"));
  t.At(t.now + 20'000);
  t.state->Tick();
  EXPECT_EQ(state_of("kept"), "running");
  t.At(t.now + 40'000);
  t.state->Tick();
  EXPECT_EQ(state_of("kept"), "failed");
  nlohmann::json job = *StateViews(*t.state).GetJob(kAdmin, started["nlp/kept"].job_id);
  EXPECT_NE(job.dump().find("the pod is still there"), std::string::npos) << job.dump();
}

TEST(KubePodState, ABareJobNeverGoesToANodeForPods) {
  PodsState t;
  JobSpec spec;
  spec.command = "true";
  spec.request.gpus = 1;
  ASSERT_TRUE(t.state->Submit(kAlice, spec, "", "").ok());
  t.Cycle();
  EXPECT_TRUE(t.orders.empty());
  nlohmann::json queue = *StateViews(*t.state).Queue(kAdmin);
  ASSERT_EQ(queue["queue"].size(), 1u) << queue.dump();
  EXPECT_NE(queue["queue"][0]["reason"].get<std::string>().find("untolerated taint"), std::string::npos)
      << queue.dump();
}

TEST(KubePodState, AGangIsOneJobOnceAllItsMembersExistAndWaitsAgainWholeWhenOneGoes) {
  PodsState t;
  t.state->ApplyKubePod(Pod("vision", "ddp-0", 8, "ddp", 3));
  t.state->ApplyKubePod(Pod("vision", "ddp-1", 8, "ddp", 3));
  // Another namespace's gang of the same name is another gang.
  t.state->ApplyKubePod(Pod("nlp", "ddp-2", 8, "ddp", 3));
  t.Cycle();
  EXPECT_TRUE(t.orders.empty());
  auto waits = t.state->KubePodWaits();
  ASSERT_EQ(waits.size(), 3u);
  EXPECT_EQ(waits[0].code, "gang_incomplete");
  EXPECT_NE(waits[0].message.find("1 of 3"), std::string::npos) << waits[0].message;  // nlp/ddp first
  EXPECT_NE(waits[1].message.find("2 of 3"), std::string::npos) << waits[1].message;

  // The third member: one job of three parts, each on its own node (all of the cluster).
  t.state->ApplyKubePod(Pod("nlp", "hog", 8));  // takes one node first
  t.Cycle();
  ASSERT_EQ(t.orders.size(), 1u);
  t.state->ApplyKubePod(Pod("vision", "ddp-2", 8, "ddp", 3));
  t.Cycle();
  EXPECT_TRUE(t.orders.empty()) << "never a part of the gang: it waits whole";
  EXPECT_TRUE(t.state->KubePodWaits().size() == 1) << "only nlp's lone member: the gang's job just came";
  t.now += 5000;  // a job waiting moments is not told yet; one waiting seconds is
  t.At(t.now);
  waits = t.state->KubePodWaits();
  int gang_waits = 0;
  for (const auto& w : waits) gang_waits += w.ns == "vision" && w.message.find("Gantry job") != std::string::npos;
  EXPECT_EQ(gang_waits, 3);
  // A member is deleted while the gang waits: the job goes, the others wait for a new one.
  WatchedPod gone = Pod("vision", "ddp-1", 8, "ddp", 3);
  gone.deleted = true;
  t.state->ApplyKubePod(gone);
  waits = t.state->KubePodWaits();
  int incomplete = 0;
  for (const auto& w : waits) incomplete += w.ns == "vision" && w.message.find("2 of 3") != std::string::npos;
  EXPECT_EQ(incomplete, 2);
  t.Cycle();
  EXPECT_TRUE(t.orders.empty()) << "a cancelled gang's pods are not deleted: they wait again";
  // Its replacement comes, the hog ends: the gang is placed whole, one member a node.
  t.state->ApplyKubePod(Pod("vision", "ddp-9", 8, "ddp", 3));
  WatchedPod hog_done = Pod("nlp", "hog", 8);
  hog_done.deleted = true;
  t.state->ApplyKubePod(hog_done);
  t.Cycle();
  std::set<std::string> nodes;
  std::set<int> ranks;
  for (const auto& o : t.orders) {
    const StartOrder& s = std::get<StartOrder>(o.order);
    nodes.insert(s.node_id);
    ranks.insert(s.node_rank);
    EXPECT_EQ(s.spec->kube_pods.size(), 3u);
  }
  EXPECT_EQ(nodes.size(), 3u);
  EXPECT_EQ(ranks, (std::set<int>{0, 1, 2}));
}

TEST(KubePodState, AJobCancelledInGantryHasItsPodDeleted) {
  PodsState t;
  t.state->ApplyKubePod(Pod("vision", "big", 16));  // no node has 16
  auto waits = t.state->KubePodWaits();
  ASSERT_EQ(waits.size(), 1u);
  EXPECT_EQ(waits[0].code, "refused");
  t.state->ApplyKubePod(Pod("vision", "wait", 8));
  t.state->ApplyKubePod(Pod("vision", "wait2", 8));
  t.state->ApplyKubePod(Pod("vision", "wait3", 8));
  t.state->ApplyKubePod(Pod("vision", "wait4", 8));
  t.Cycle();
  ASSERT_EQ(t.orders.size(), 3u);
  nlohmann::json queue = *StateViews(*t.state).Queue(kAdmin);
  ASSERT_EQ(queue["queue"].size(), 1u);
  const std::string id = queue["queue"][0]["id"];
  ASSERT_TRUE(t.state->Cancel(kAdmin, id).ok());
  t.Cycle();
  ASSERT_EQ(t.orders.size(), 1u);
  EXPECT_EQ(t.orders[0].link, &t.pods);
  const StopOrder& stop = std::get<StopOrder>(t.orders[0].order);
  EXPECT_EQ(stop.kube_pod, "vision/wait4/uid-wait4");
}

TEST(KubePodState, ARestartFindsThePodsJobsAgainAndBindsAgainWhatWasNotBound) {
  StoredState stored;
  std::string placed_node;
  {
    PodsState t;
    t.state->ApplyKubePod(Pod("vision", "a", 8));
    t.Cycle();
    ASSERT_EQ(t.orders.size(), 1u);
    placed_node = std::get<StartOrder>(t.orders[0].order).node_id;
    // What the store holds now: the state's rows, as Recover reads them.
    stored = t.StoredRows();
  }
  PodsState t(stored);
  // The list after the restart: the pod is still unbound (the bind was lost): bound again,
  // to the same node; no second job.
  t.state->ApplyKubePods({Pod("vision", "a", 8)});
  t.Cycle();
  ASSERT_EQ(t.orders.size(), 1u);
  EXPECT_EQ(std::get<StartOrder>(t.orders[0].order).node_id, placed_node);
  nlohmann::json jobs = *StateViews(*t.state).ListJobs(kAdmin, JobFilter{});
  EXPECT_EQ(jobs["jobs"].size(), 1u) << jobs.dump();
  // The pod is gone from the next list: its job ends.
  t.state->ApplyKubePods({});
  jobs = *StateViews(*t.state).ListJobs(kAdmin, JobFilter{});
  EXPECT_NE(jobs["jobs"][0]["state"], "running") << jobs.dump();
}

}  // namespace
}  // namespace gantry::testing
