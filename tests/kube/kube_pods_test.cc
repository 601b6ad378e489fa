// Gantry as the scheduler of Kubernetes pods, against a real API server: 50 GPU Node objects
// of three models (no agent: nodes for pods), two namespaces as two teams, pods made as a
// user makes them. A pod that fits is bound with the GPUs Gantry chose written on it; one
// that cannot fit says Gantry's reason where `kubectl describe` shows it; a gang is bound
// whole or not at all; a higher class's pod preempts (the victim is told, then evicted,
// its PodDisruptionBudget honoured for a bounded wait);
// two half-GPU pods share one GPU; a pod that ends frees its GPUs; a pending pod deleted
// leaves the queue; bound pods are billed. No kubelet runs here: the test sets the phases
// a kubelet would and ends pods being deleted as a kubelet would.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include "kube/kube_fixture.h"

namespace gantry::testing {
namespace {

namespace fs = std::filesystem;

// Eventually, with room for a sanitized build on a busy CI machine (a pass takes what it
// takes; only a failure waits the whole time).
bool Soon(const std::function<bool()>& ok, int seconds = 30) { return Eventually(ok, std::max(seconds, 30)); }

struct PodAsk {
  std::string gpus;      // nvidia.com/gpu limit ("" for none)
  std::string fraction;  // gantry.io/gpu-fraction
  std::string product;   // nodeSelector nvidia.com/gpu.product
  std::string gang;
  int gang_min = 0;
  std::string priority_class;
};

PodAsk Whole(const std::string& gpus, const std::string& product) {
  PodAsk ask;
  ask.gpus = gpus;
  ask.product = product;
  return ask;
}
PodAsk Share(const std::string& fraction, const std::string& product) {
  PodAsk ask;
  ask.fraction = fraction;
  ask.product = product;
  return ask;
}
PodAsk Member(const std::string& gpus, const std::string& product, const std::string& gang, int gang_min) {
  PodAsk ask = Whole(gpus, product);
  ask.gang = gang;
  ask.gang_min = gang_min;
  return ask;
}
PodAsk OfClass(const std::string& gpus, const std::string& product, const std::string& priority_class) {
  PodAsk ask = Whole(gpus, product);
  ask.priority_class = priority_class;
  return ask;
}

nlohmann::json GantryPod(const std::string& name, const PodAsk& ask) {
  nlohmann::json annotations = nlohmann::json::object(), labels = nlohmann::json::object();
  if (!ask.fraction.empty()) annotations["gantry.io/gpu-fraction"] = ask.fraction;
  if (!ask.gang.empty()) {
    labels["gantry.io/gang"] = ask.gang;
    annotations["gantry.io/gang-min-members"] = std::to_string(ask.gang_min);
  }
  nlohmann::json resources = nlohmann::json::object();
  if (!ask.gpus.empty()) resources["limits"] = {{"nvidia.com/gpu", ask.gpus}};
  nlohmann::json spec = {{"schedulerName", "gantry"},
                         {"automountServiceAccountToken", false},  // no controller manager makes tokens here
                         {"containers", {{{"name", "main"}, {"image", "pytorch"}, {"resources", resources}}}}};
  if (!ask.product.empty()) spec["nodeSelector"] = {{"nvidia.com/gpu.product", ask.product}};
  if (!ask.priority_class.empty()) spec["priorityClassName"] = ask.priority_class;
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"labels", labels}, {"annotations", annotations}}},
          {"spec", spec}};
}

class KubePods : public OnKube {
 protected:
  void SetUp() override {
    OnKube::SetUp();
    std::string out;
    for (const char* ns : {"vision", "nlp"}) {
      ASSERT_EQ(kube_.Kubectl(fmt::format("create namespace {}", ns), &out), 0) << out;
      ASSERT_EQ(kube_.Kubectl(fmt::format("-n {} create serviceaccount default", ns), &out), 0) << out;
    }
    // A PriorityClass as a cluster has them; Gantry maps it to its own class.
    ASSERT_EQ(kube_.Kubectl("create priorityclass urgent --value=100000", &out), 0) << out;
    dir_ = TempPath("kube-pods");
    fs::remove_all(dir_);
    fs::create_directories(dir_ + "/config");
    // Victims need not have run ten minutes, and have two seconds to checkpoint; a team
    // under its guarantee reclaims at once; shares time-slice one GPU together (nodes
    // without an agent run no MPS daemon).
    std::string config = ReadFileNoThrow(GANTRY_SOURCE_DIR "/config/scheduler_config.yaml").value_or("");
    for (auto [from, to] : {std::pair{"min_runtime: 10m", "min_runtime: 0s"},
                            {"grace_period: 120s", "grace_period: 2s"},
                            {"time_slice_packing: false", "time_slice_packing: true"},
                            {"reclaim_after: 30m", "reclaim_after: 0s"},
                            {"reclaim_patience: 20m", "reclaim_patience: 0s"}}) {
      size_t at = config.find(from);
      ASSERT_NE(at, std::string::npos) << from;
      config.replace(at, std::string(from).size(), to);
    }
    std::ofstream(dir_ + "/config/scheduler_config.yaml") << config;
  }

  void StartGantry(ServerProcess& server) {
    StartOnKube(server, kube_, dir_, {"--kube-pods", "--kube-priority-class", "urgent=high"});
  }

  nlohmann::json Pod(const std::string& ns, const std::string& name) const {
    return kube_.Api("GET", fmt::format("/api/v1/namespaces/{}/pods/{}", ns, name)).second;
  }
  std::string NodeOf(const std::string& ns, const std::string& name) const {
    nlohmann::json pod = Pod(ns, name);
    return pod.is_object() && pod.contains("spec") ? pod["spec"].value("nodeName", "") : "";  // gone: ""
  }
  std::string Annotation(const nlohmann::json& pod, const std::string& key) const {
    const nlohmann::json& a = pod["metadata"].value("annotations", nlohmann::json::object());
    return a.value(key, "");
  }
  // The PodScheduled condition's message ("" when there is none).
  std::string WaitMessage(const std::string& ns, const std::string& name) const {
    nlohmann::json pod = Pod(ns, name);
    if (!pod.is_object() || !pod.contains("status")) return "";
    for (const auto& c : pod["status"].value("conditions", nlohmann::json::array())) {
      if (c.value("type", "") == "PodScheduled" && c.value("status", "") == "False") return c.value("message", "");
    }
    return "";
  }
  void Make(const std::string& ns, const std::string& name, const PodAsk& ask) {
    auto [status, body] = kube_.Api("POST", fmt::format("/api/v1/namespaces/{}/pods", ns), GantryPod(name, ask));
    ASSERT_EQ(status, 201) << body.dump();
  }
  // What a kubelet does when a pod it runs ends.
  void SetPhase(const std::string& ns, const std::string& name, const std::string& phase) {
    httplib::Client c(kube_.url());
    c.set_ca_cert_path(kube_.ca().c_str());
    c.enable_server_certificate_verification(true);
    c.set_bearer_token_auth(ReadFileNoThrow(kube_.dir() + "/admin-token").value_or(""));
    nlohmann::json patch = {{"status", {{"phase", phase}}}};
    auto r = c.Patch(fmt::format("/api/v1/namespaces/{}/pods/{}/status", ns, name), patch.dump(),
                     "application/merge-patch+json");
    ASSERT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
  }
  // What a kubelet does for a pod being deleted: its containers stop, and the pod goes.
  int FinishDeletions(const std::string& ns) {
    auto [status, list] = kube_.Api("GET", fmt::format("/api/v1/namespaces/{}/pods", ns));
    int finished = 0;
    for (const auto& pod : list.value("items", nlohmann::json::array())) {
      if (!pod["metadata"].contains("deletionTimestamp")) continue;
      std::string out;
      kube_.Kubectl(
          fmt::format("-n {} delete pod {} --grace-period=0 --force", ns, pod["metadata"]["name"].get<std::string>()),
          &out);
      ++finished;
    }
    return finished;
  }
  // Event reasons on a pod, in order.
  std::vector<std::string> EventReasons(const std::string& ns, const std::string& name) const {
    auto [status, list] =
        kube_.Api("GET", fmt::format("/api/v1/namespaces/{}/events?fieldSelector=involvedObject.name%3D{}", ns, name));
    std::vector<std::string> reasons;
    for (const auto& e : list.value("items", nlohmann::json::array())) reasons.push_back(e.value("reason", ""));
    return reasons;
  }

  // Node objects gpu-0..gpu-(n-1), each of four T4s (beside the fixture's node-a).
  void MakeT4Nodes(int n) {
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(kube_.Api("POST", "/api/v1/nodes", GpuNode(fmt::format("gpu-{}", i), "Tesla-T4", 4)).first, 201);
    }
  }
  // Gantry started, once it has made a node of every Node object (n and node-a).
  void StartWhenNodes(ServerProcess& server, size_t n) {
    StartGantry(server);
    auto c = server.Client(kRootToken);
    ASSERT_TRUE(Soon([&] { return Json(c.Get("/v1/nodes"))["nodes"].size() == n; })) << ServerLog();
  }

  std::string ServerLog() const { return ReadFileNoThrow(dir_ + "/server.log").value_or(""); }

  std::string dir_;
};

TEST_F(KubePods, PodsAreBoundWaitWithGantrysReasonGoWholeInGangsArePreemptedShareGpusAndAreBilled) {
  // 50 nodes: 20 x 8 A100, 20 x 4 T4, 10 x 8 H100 (node-a, the fixture's, is a 1-GPU H100).
  for (int i = 0; i < 50; ++i) {
    const char* product = i < 20 ? "NVIDIA-A100-SXM4-80GB" : i < 40 ? "Tesla-T4" : "NVIDIA-H100-80GB-HBM3";
    auto [status, body] =
        kube_.Api("POST", "/api/v1/nodes", GpuNode(fmt::format("gpu-{:02}", i), product, i >= 20 && i < 40 ? 4 : 8));
    ASSERT_EQ(status, 201) << body.dump();
  }
  ServerProcess server(dir_, "");
  StartGantry(server);
  auto c = server.Client(kRootToken);
  ASSERT_TRUE(Soon([&] { return Json(c.Get("/v1/nodes")).value("nodes", nlohmann::json::array()).size() == 51; }))
      << c.Get("/v1/nodes")->body;

  // A pod that fits is bound, with the GPUs Gantry chose written on it.
  auto made = std::chrono::steady_clock::now();
  Make("vision", "fits", Whole("2", "NVIDIA-A100-SXM4-80GB"));
  ASSERT_TRUE(Soon([&] { return !NodeOf("vision", "fits").empty(); })) << ServerLog();
  std::printf(
      "[ measured ] a pod that fits was bound %lld ms after it was made\n",
      static_cast<long long>(
          std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - made).count()));
  nlohmann::json fits = Pod("vision", "fits");
  EXPECT_EQ(fits["spec"]["nodeName"].get<std::string>().rfind("gpu-", 0), 0u) << fits.dump();
  EXPECT_EQ(Annotation(fits, "gantry.io/gpus"), "0,1") << fits.dump();
  EXPECT_EQ(Annotation(fits, "gantry.io/visible-devices"), "0,1") << fits.dump();
  const std::string fits_job = Annotation(fits, "gantry.io/job");
  ASSERT_FALSE(fits_job.empty());
  nlohmann::json job = Json(c.Get("/v1/jobs/" + fits_job));
  EXPECT_EQ(job.value("team", ""), "vision") << job.dump();
  EXPECT_EQ(job.value("state", ""), "running") << job.dump();
  EXPECT_EQ(job.value("name", ""), "vision/fits") << job.dump();
  ASSERT_TRUE(Soon([&] {
    auto reasons = EventReasons("vision", "fits");
    return std::find(reasons.begin(), reasons.end(), "Scheduled") != reasons.end();
  }));

  // nlp fills the H100s (10 nodes of 8, and node-a's one); the eleventh 8-GPU pod waits,
  // saying why where a Kubernetes user looks.
  for (int i = 0; i < 11; ++i) Make("nlp", fmt::format("h100-{}", i), Whole("8", "NVIDIA-H100-80GB-HBM3"));
  std::string waiting;
  ASSERT_TRUE(Soon([&] {
    int bound = 0;
    waiting.clear();
    for (int i = 0; i < 11; ++i) {
      if (NodeOf("nlp", fmt::format("h100-{}", i)).empty()) {
        waiting = fmt::format("h100-{}", i);
      } else {
        ++bound;
      }
    }
    return bound == 10 && !waiting.empty() && !WaitMessage("nlp", waiting).empty();
  })) << ServerLog();
  std::string message = WaitMessage("nlp", waiting);
  EXPECT_NE(message.find("Gantry job"), std::string::npos) << message;
  nlohmann::json queue = Json(c.Get("/v1/queue"));
  ASSERT_EQ(queue["queue"].size(), 1u) << queue.dump();
  EXPECT_NE(message.find(queue["queue"][0].value("reason", "?")), std::string::npos)
      << message << " vs " << queue.dump();
  std::string described;
  ASSERT_EQ(kube_.Kubectl("-n nlp describe pod " + waiting, &described), 0) << described;
  EXPECT_NE(described.find("FailedScheduling"), std::string::npos) << described;
  EXPECT_NE(described.find("Gantry job"), std::string::npos) << described;

  // A gang of 4 (8 A100s each) waits whole while 3 members exist, and is bound whole.
  for (int i = 0; i < 3; ++i) {
    Make("vision", fmt::format("ddp-{}", i), Member("8", "NVIDIA-A100-SXM4-80GB", "ddp", 4));
  }
  ASSERT_TRUE(Soon([&] { return WaitMessage("vision", "ddp-0").find("3 of 4") != std::string::npos; }))
      << WaitMessage("vision", "ddp-0");
  for (int i = 0; i < 3; ++i) EXPECT_EQ(NodeOf("vision", fmt::format("ddp-{}", i)), "");
  Make("vision", "ddp-3", Member("8", "NVIDIA-A100-SXM4-80GB", "ddp", 4));
  std::set<std::string> gang_nodes;
  ASSERT_TRUE(Soon([&] {
    gang_nodes.clear();
    for (int i = 0; i < 4; ++i) gang_nodes.insert(NodeOf("vision", fmt::format("ddp-{}", i)));
    return gang_nodes.size() == 4 && !gang_nodes.count("");
  })) << ServerLog();
  std::set<std::string> ranks, gang_jobs;
  for (int i = 0; i < 4; ++i) {
    nlohmann::json member = Pod("vision", fmt::format("ddp-{}", i));
    ranks.insert(Annotation(member, "gantry.io/gang-rank"));
    gang_jobs.insert(Annotation(member, "gantry.io/job"));
    EXPECT_EQ(Annotation(member, "gantry.io/gang-size"), "4");
  }
  EXPECT_EQ(ranks, (std::set<std::string>{"0", "1", "2", "3"}));
  EXPECT_EQ(gang_jobs.size(), 1u) << "the gang is one Gantry job";

  // Two half-GPU pods share one T4 GPU, each told its share.
  Make("vision", "half-a", Share("0.5", "Tesla-T4"));
  Make("nlp", "half-b", Share("0.5", "Tesla-T4"));
  ASSERT_TRUE(Soon([&] { return !NodeOf("vision", "half-a").empty() && !NodeOf("nlp", "half-b").empty(); }));
  nlohmann::json half_a = Pod("vision", "half-a"), half_b = Pod("nlp", "half-b");
  EXPECT_EQ(half_a["spec"]["nodeName"], half_b["spec"]["nodeName"]);
  EXPECT_EQ(Annotation(half_a, "gantry.io/gpus"), Annotation(half_b, "gantry.io/gpus"));
  EXPECT_EQ(Annotation(half_a, "gantry.io/gpu-share"), "0.5") << half_a.dump();
  EXPECT_NE(Annotation(half_a, "gantry.io/sharing"), "exclusive") << half_a.dump();

  // A higher class preempts: vision's urgent 8-H100 pod evicts one of nlp's (told first,
  // then deleted with its grace period), and is bound where it ran.
  Make("vision", "urgent", OfClass("8", "NVIDIA-H100-80GB-HBM3", "urgent"));
  std::string victim;
  ASSERT_TRUE(Soon(
      [&] {
        for (int i = 0; i < 11 && victim.empty(); ++i) {
          nlohmann::json pod = Pod("nlp", fmt::format("h100-{}", i));
          if (pod.is_object() && pod["metadata"].contains("deletionTimestamp")) victim = fmt::format("h100-{}", i);
        }
        return !victim.empty();
      },
      20))
      << ServerLog();
  auto victim_events = EventReasons("nlp", victim);
  EXPECT_NE(std::find(victim_events.begin(), victim_events.end(), "Preempted"), victim_events.end());
  const std::string victim_node = NodeOf("nlp", victim);
  EXPECT_EQ(FinishDeletions("nlp"), 1);
  ASSERT_TRUE(Soon([&] { return NodeOf("vision", "urgent") == victim_node; })) << ServerLog();

  // A pod that ends frees its GPUs: the waiting H100 pod is bound once one of nlp's succeeds.
  std::string done;
  for (int i = 0; i < 11 && done.empty(); ++i) {
    std::string name = fmt::format("h100-{}", i);
    if (name != victim && name != waiting && !NodeOf("nlp", name).empty()) done = name;
  }
  ASSERT_FALSE(done.empty());
  const std::string done_job = Annotation(Pod("nlp", done), "gantry.io/job");
  SetPhase("nlp", done, "Succeeded");
  ASSERT_TRUE(Soon([&] { return Json(c.Get("/v1/jobs/" + done_job)).value("state", "") == "succeeded"; }));
  ASSERT_TRUE(Soon([&] { return !NodeOf("nlp", waiting).empty(); })) << ServerLog();

  // A pending pod deleted leaves the queue.
  Make("nlp", "never", Whole("8", "NVIDIA-H100-80GB-HBM3"));
  ASSERT_TRUE(Soon([&] { return Json(c.Get("/v1/queue"))["queue"].size() == 1; }));
  std::string out;
  ASSERT_EQ(kube_.Kubectl("-n nlp delete pod never --wait=false", &out), 0) << out;
  ASSERT_TRUE(Soon([&] { return Json(c.Get("/v1/queue"))["queue"].empty(); }));

  // Bound pods are billed to their namespaces' teams.
  nlohmann::json usage = Json(c.Get("/v1/usage?by=team"));
  std::map<std::string, double> gpu_hours;
  for (const auto& line : usage.value("lines", nlohmann::json::array())) {
    gpu_hours[line.value("team", "")] = line.value("gpu_hours", 0.0);
  }
  EXPECT_GT(gpu_hours["vision"], 0) << usage.dump();
  EXPECT_GT(gpu_hours["nlp"], 0) << usage.dump();
}

TEST_F(KubePods, AControllerKilledAndRestartedNeitherBindsTwiceNorLosesAPod) {
  MakeT4Nodes(4);
  {
    ServerProcess server(dir_, "");
    StartWhenNodes(server, 5);
    for (int i = 0; i < 20; ++i) Make("vision", fmt::format("p-{}", i), Whole("1", "Tesla-T4"));
    // Killed in the middle of the burst: some pods placed, some bound, some not yet seen.
    ASSERT_TRUE(Soon([&] { return !NodeOf("vision", "p-0").empty(); }));
    server.Kill(SIGKILL);
  }
  ServerProcess server(dir_, "");
  StartGantry(server);
  auto c = server.Client(kRootToken);
  // 16 T4s: 16 pods bound, 4 waiting; one job per pod, each job's node the pod's.
  ASSERT_TRUE(Soon(
      [&] {
        int bound = 0;
        for (int i = 0; i < 20; ++i) bound += !NodeOf("vision", fmt::format("p-{}", i)).empty();
        return bound == 16 && Json(c.Get("/v1/queue"))["queue"].size() == 4;
      },
      20))
      << ServerLog();
  std::set<std::string> jobs;
  for (int i = 0; i < 20; ++i) {
    nlohmann::json pod = Pod("vision", fmt::format("p-{}", i));
    std::string job = Annotation(pod, "gantry.io/job");
    if (job.empty()) continue;
    EXPECT_TRUE(jobs.insert(job).second) << "two pods bound for job " << job;
    nlohmann::json view = Json(c.Get("/v1/jobs/" + job));
    EXPECT_EQ(view.value("name", ""), "vision/" + pod["metadata"]["name"].get<std::string>()) << view.dump();
    EXPECT_NE(view.dump().find(pod["spec"]["nodeName"].get<std::string>()), std::string::npos) << view.dump();
  }
  EXPECT_EQ(jobs.size(), 16u);
  nlohmann::json active = Json(c.Get("/v1/jobs?state=active&limit=100"));
  EXPECT_EQ(active.value("jobs", nlohmann::json::array()).size(), 20u) << "one job per pod, none lost" << active.dump();
}

TEST_F(KubePods, ATeamOverItsGuaranteeGivesBackWhatTheOtherReclaims) {
  // Each team is guaranteed 8 of the 16 T4s and may borrow beyond.
  std::ofstream(dir_ + "/config/team_quotas.yaml")
      << "teams:\n  vision: {guaranteed: {T4: 8}, borrow_limit: 16}\n  nlp: {guaranteed: {T4: 8}, borrow_limit: 16}\n";
  MakeT4Nodes(4);
  ServerProcess server(dir_, "");
  StartWhenNodes(server, 5);
  // nlp takes all 16 while vision has nothing waiting: 8 of them borrowed.
  for (int i = 0; i < 16; ++i) Make("nlp", fmt::format("n-{}", i), Whole("1", "Tesla-T4"));
  auto bound = [&](const std::string& ns, const std::string& prefix, int n) {
    int count = 0;
    for (int i = 0; i < n; ++i) count += !NodeOf(ns, fmt::format("{}-{}", prefix, i)).empty();
    return count;
  };
  ASSERT_TRUE(Soon([&] { return bound("nlp", "n", 16) == 16; }, 20)) << ServerLog();
  // vision comes for its guarantee: four of nlp's pods are told and deleted, vision's bound.
  for (int i = 0; i < 4; ++i) Make("vision", fmt::format("v-{}", i), Whole("1", "Tesla-T4"));
  int reclaimed = 0;
  ASSERT_TRUE(Soon(
      [&] {
        reclaimed += FinishDeletions("nlp");  // as the kubelet would, once each victim's grace is over
        return reclaimed == 4 && bound("vision", "v", 4) == 4;
      },
      30))
      << reclaimed << " reclaimed; " << ServerLog();
  EXPECT_EQ(bound("nlp", "n", 16), 12) << "no more than vision's guarantee came back";
}

TEST_F(KubePods, OneGantryHoldsAnAgentsNodeAndNodesForPodsUnderOneQuota) {
  // vision may hold 2 GPUs at once, bare jobs and pods together.
  std::ofstream(dir_ + "/config/team_quotas.yaml") << "teams:\n  vision: {max_gpus: 2}\n";
  ASSERT_EQ(kube_.Api("POST", "/api/v1/nodes", GpuNode("gpu-0", "Tesla-T4", 4)).first, 201);
  ServerProcess server(dir_, "");
  StartGantry(server);
  // node-a (the fixture's Node object) runs a Gantry agent: a node for bare jobs and pods.
  AgentProcess agent(dir_, "node-a", "2xH100-80GB");
  agent.Start(server.address());
  auto c = server.Client(kRootToken);
  auto node = [&](const std::string& id) {
    const nlohmann::json nodes = Json(c.Get("/v1/nodes"));
    for (const auto& n : nodes.value("nodes", nlohmann::json::array())) {
      if (n["id"] == id) return n;
    }
    return nlohmann::json::object();  // not (yet) there
  };
  ASSERT_TRUE(Soon([&] { return node("node-a").value("gpus", nlohmann::json::array()).size() == 2; }))
      << Json(c.Get("/v1/nodes")).dump();
  ASSERT_TRUE(Soon([&] { return !node("gpu-0").is_null(); }));
  EXPECT_EQ(node("node-a").value("taints", nlohmann::json::array()), nlohmann::json::array());
  EXPECT_EQ(node("gpu-0")["taints"], nlohmann::json({"gantry.io/pods-only"}));

  // A bare job runs on the agent's node; one that asks for T4s waits: only pods go to gpu-0.
  auto alice = server.Client(kAliceToken);
  nlohmann::json bare = Json(alice.Post("/v1/jobs", R"({"gpus": 1, "command": "sleep 60"})", "application/json"));
  nlohmann::json on_t4 =
      Json(alice.Post("/v1/jobs", R"({"gpus": 1, "gpu_types": ["T4"], "command": "true"})", "application/json"));
  ASSERT_TRUE(Soon([&] { return Json(alice.Get("/v1/jobs/" + bare.value("id", ""))).value("state", "") == "running"; }))
      << bare.dump();
  EXPECT_EQ(Json(alice.Get("/v1/jobs/" + on_t4.value("id", ""))).value("state", ""), "pending");
  // A pod of vision's goes to the agent's node beside the bare job.
  Make("vision", "beside", Whole("1", "NVIDIA-H100-80GB-HBM3"));
  ASSERT_TRUE(Soon([&] { return NodeOf("vision", "beside") == "node-a"; })) << ServerLog();
  // The team's limit counts both: a second pod waits, saying so, though gpu-0 has room.
  Make("vision", "over", Whole("1", "Tesla-T4"));
  ASSERT_TRUE(Soon([&] { return !WaitMessage("vision", "over").empty(); })) << ServerLog();
  EXPECT_EQ(NodeOf("vision", "over"), "");
  EXPECT_NE(WaitMessage("vision", "over").find("holds 2 of 2 GPUs"), std::string::npos)
      << WaitMessage("vision", "over");
  ASSERT_EQ(alice.Delete("/v1/jobs/" + bare.value("id", ""))->status, 200);
  ASSERT_TRUE(Soon([&] { return NodeOf("vision", "over") == "gpu-0"; })) << ServerLog();
}

TEST_F(KubePods, APreemptionHonoursADisruptionBudgetForAsLongAsItMayWaitThenDeletes) {
  ASSERT_EQ(kube_.Api("POST", "/api/v1/nodes", GpuNode("gpu-0", "Tesla-T4", 4)).first, 201);
  // Two of nlp's pods hold the node's 4 T4s; a budget lets none of the guarded one go (no
  // disruption controller runs here: the budget allows no disruption at all).
  for (const char* name : {"guarded", "free"}) {
    nlohmann::json pod = GantryPod(name, Whole("2", "Tesla-T4"));
    pod["metadata"]["labels"]["app"] = name;
    ASSERT_EQ(kube_.Api("POST", "/api/v1/namespaces/nlp/pods", pod).first, 201);
  }
  nlohmann::json budget = {{"apiVersion", "policy/v1beta1"},
                           {"kind", "PodDisruptionBudget"},
                           {"metadata", {{"name", "keep-one"}}},
                           {"spec", {{"minAvailable", 1}, {"selector", {{"matchLabels", {{"app", "guarded"}}}}}}}};
  auto [made, answer] = kube_.Api("POST", "/apis/policy/v1beta1/namespaces/nlp/poddisruptionbudgets", budget);
  ASSERT_EQ(made, 201) << answer.dump();
  ServerProcess server(dir_, "");
  StartOnKube(server, kube_, dir_,
              {"--kube-pods", "--kube-priority-class", "urgent=high", "--kube-eviction-wait", "6"});
  ASSERT_TRUE(Soon([&] { return NodeOf("nlp", "guarded") == "gpu-0" && NodeOf("nlp", "free") == "gpu-0"; }))
      << ServerLog();
  // The kubelet runs them (a pod still Pending is evicted whatever its budget says).
  SetPhase("nlp", "guarded", "Running");
  SetPhase("nlp", "free", "Running");
  auto deleting = [&](const std::string& name) {
    nlohmann::json pod = Pod("nlp", name);
    return pod.is_object() && pod.contains("metadata") && pod["metadata"].contains("deletionTimestamp");
  };
  auto has_event = [&](const std::string& name, const std::string& reason) {
    auto reasons = EventReasons("nlp", name);
    return std::find(reasons.begin(), reasons.end(), reason) != reasons.end();
  };
  // vision's urgent pod needs the whole node: both are preempted. The free one is evicted at
  // once; the guarded one's eviction is refused, and the pod is told so.
  const auto asked = std::chrono::steady_clock::now();
  Make("vision", "urgent", OfClass("4", "Tesla-T4", "urgent"));
  ASSERT_TRUE(Soon([&] { return deleting("free"); })) << ServerLog();
  ASSERT_TRUE(Soon([&] { return has_event("guarded", "EvictionRefused"); })) << ServerLog();
  EXPECT_FALSE(deleting("guarded")) << "the budget is honoured while Gantry may wait";
  EXPECT_EQ(NodeOf("vision", "urgent"), "");
  // Past --kube-eviction-wait (6 s) it is deleted all the same, saying so, and the urgent
  // pod gets the node once the kubelet has stopped both.
  ASSERT_TRUE(Soon([&] { return deleting("guarded"); })) << ServerLog();
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - asked).count();
  EXPECT_GE(waited, 6.0) << "deleted before the wait was over";
  EXPECT_TRUE(has_event("guarded", "EvictionOverridden"));
  EXPECT_FALSE(has_event("free", "EvictionRefused"));
  int finished = 0;
  ASSERT_TRUE(Soon([&] {
    finished += FinishDeletions("nlp");
    return finished == 2 && NodeOf("vision", "urgent") == "gpu-0";
  })) << ServerLog();
}

// kube-controller-manager's Job controller runs here too: a batch/v1 Job makes its pods.
class KubePodsWithJobs : public KubePods {
 public:
  static void SetUpTestSuite() { setenv("GANTRY_KUBE_CONTROLLERS", "job", 1); }
  static void TearDownTestSuite() { unsetenv("GANTRY_KUBE_CONTROLLERS"); }
};

TEST_F(KubePodsWithJobs, ABatchJobsPodsAreOneGangAndFreeTheirGpusWhenTheySucceed) {
  MakeT4Nodes(4);
  ServerProcess server(dir_, "");
  StartWhenNodes(server, 5);
  auto c = server.Client(kRootToken);
  nlohmann::json pod_template = GantryPod("", Member("4", "Tesla-T4", "train", 4));
  pod_template["metadata"].erase("name");
  pod_template["spec"]["restartPolicy"] = "Never";
  nlohmann::json job = {{"apiVersion", "batch/v1"},
                        {"kind", "Job"},
                        {"metadata", {{"name", "train"}}},
                        {"spec",
                         {{"parallelism", 4},
                          {"completions", 4},
                          {"template", {{"metadata", pod_template["metadata"]}, {"spec", pod_template["spec"]}}}}}};
  auto [made, body] = kube_.Api("POST", "/apis/batch/v1/namespaces/vision/jobs", job);
  ASSERT_EQ(made, 201) << body.dump();
  // The Job controller makes four pods; Gantry binds them as one gang, one per node.
  std::vector<std::string> pods;
  std::set<std::string> nodes, gantry_jobs;
  ASSERT_TRUE(Soon(
      [&] {
        pods.clear();
        nodes.clear();
        gantry_jobs.clear();
        auto [status, list] = kube_.Api("GET", "/api/v1/namespaces/vision/pods?labelSelector=job-name%3Dtrain");
        for (const auto& p : list.value("items", nlohmann::json::array())) {
          pods.push_back(p["metadata"]["name"]);
          nodes.insert(p["spec"].value("nodeName", ""));
          gantry_jobs.insert(Annotation(p, "gantry.io/job"));
        }
        return pods.size() == 4 && nodes.size() == 4 && !nodes.count("");
      },
      30))
      << ServerLog();
  ASSERT_EQ(gantry_jobs.size(), 1u) << "the Job's pods are one Gantry job";
  const std::string id = *gantry_jobs.begin();
  nlohmann::json running = Json(c.Get("/v1/jobs/" + id));
  EXPECT_EQ(running.value("placement", nlohmann::json::array()).size(), 4u) << running.dump();
  // A kubelet would say each succeeded: the gang's job succeeds, its GPUs are free, and the
  // Job controller counts four completions.
  for (const std::string& p : pods) SetPhase("vision", p, "Succeeded");
  ASSERT_TRUE(Soon([&] { return Json(c.Get("/v1/jobs/" + id)).value("state", "") == "succeeded"; }))
      << Json(c.Get("/v1/jobs/" + id)).dump();
  nlohmann::json cluster = Json(c.Get("/v1/cluster"));
  EXPECT_EQ(cluster.value("allocated_by_team", nlohmann::json::object()).value("vision", 0.0), 0.0) << cluster.dump();
  ASSERT_TRUE(Soon([&] {
    auto [status, now] = kube_.Api("GET", "/apis/batch/v1/namespaces/vision/jobs/train");
    return now["status"].value("succeeded", 0) == 4;
  })) << kube_.Api("GET", "/apis/batch/v1/namespaces/vision/jobs/train").second.dump();
}

}  // namespace
}  // namespace gantry::testing
