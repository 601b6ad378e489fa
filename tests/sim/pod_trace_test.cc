// Kubernetes pods as a simulator trace: a List or one Pod per line, read by the
// controller's own pod reader; gangs as one job; what cannot replay skipped with its reason;
// and a gang replayed through the simulator waits for whole nodes, as a gang job does.
#include "sim/pod_trace.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/config_dir.h"
#include "core/time.h"
#include "sim/simulator.h"
#include "test_util.h"

namespace gantry {
namespace {

constexpr TimeMs kStart = 1767225600000;  // 2026-01-01T00:00:00Z

struct TracedAsk {
  std::string gpus = "1";
  std::string product;   // nodeSelector nvidia.com/gpu.product
  std::string fraction;  // gantry.io/gpu-fraction
  std::string gang;      // gantry.io/gang
  int gang_min = 0;      // gantry.io/gang-min-members
  std::string phase = "Succeeded";
};

// A pod as `kubectl get pod -o json` prints it once it ended: created at `created_s`,
// started at `started_s` and its container finished at `finished_s` (seconds from kStart).
nlohmann::json TracedPod(const std::string& ns, const std::string& name, double created_s, double started_s,
                         double finished_s, const TracedAsk& ask = {}) {
  auto at = [](double s) { return FormatUtc(kStart + static_cast<TimeMs>(s * 1000)); };
  nlohmann::json labels = nlohmann::json::object(), annotations = nlohmann::json::object();
  if (!ask.gang.empty()) labels["gantry.io/gang"] = ask.gang;
  if (ask.gang_min > 0) annotations["gantry.io/gang-min-members"] = std::to_string(ask.gang_min);
  if (!ask.fraction.empty()) annotations["gantry.io/gpu-fraction"] = ask.fraction;
  nlohmann::json limits = nlohmann::json::object();
  if (!ask.gpus.empty() && ask.fraction.empty()) limits["nvidia.com/gpu"] = ask.gpus;
  nlohmann::json spec = {{"nodeName", "old-node-1"},
                         {"containers", {{{"name", "main"}, {"resources", {{"limits", limits}}}}}}};
  if (!ask.product.empty()) spec["nodeSelector"] = {{"nvidia.com/gpu.product", ask.product}};
  nlohmann::json status = {{"phase", ask.phase}, {"startTime", at(started_s)}};
  if (ask.phase == "Succeeded" || ask.phase == "Failed") {
    status["containerStatuses"] = {
        {{"name", "main"},
         {"state", {{"terminated", {{"exitCode", ask.phase == "Failed" ? 1 : 0}, {"finishedAt", at(finished_s)}}}}}}};
  }
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"namespace", ns},
            {"name", name},
            {"uid", ns + "-" + name},
            {"creationTimestamp", at(created_s)},
            {"labels", labels},
            {"annotations", annotations}}},
          {"spec", spec},
          {"status", status}};
}

nlohmann::json List(std::vector<nlohmann::json> pods) {
  return {{"apiVersion", "v1"}, {"kind", "List"}, {"items", std::move(pods)}};
}

TEST(PodTrace, PodsAreTheirJobsAGangIsOneAndWhatCannotReplayIsSkippedWithItsReason) {
  TracedAsk t4;
  t4.product = "Tesla-T4";
  TracedAsk member;
  member.gpus = "4";
  member.gang = "ddp";
  member.gang_min = 2;
  TracedAsk half;
  half.fraction = "0.5";
  TracedAsk running;
  running.phase = "Running";
  TracedAsk no_gpu;
  no_gpu.gpus = "";
  TracedAsk lonely = member;
  lonely.gang = "short";
  lonely.gang_min = 3;
  const nlohmann::json list =
      List({TracedPod("vision", "alone", 10, 12, 72, t4), TracedPod("nlp", "ddp-0", 20, 25, 125, member),
            TracedPod("nlp", "ddp-1", 22, 25, 145, member), TracedPod("vision", "half", 30, 30, 90, half),
            TracedPod("vision", "still-running", 5, 6, 0, running), TracedPod("vision", "cpu-only", 5, 6, 9, no_gpu),
            TracedPod("nlp", "short-0", 5, 6, 9, lonely)});
  auto trace = ParsePodTrace(list.dump(), GpuCatalog::Builtin(), false);
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  ASSERT_EQ(trace->jobs.size(), 3u);
  const TraceJob& alone = trace->jobs[0];  // by submit time
  EXPECT_EQ(alone.spec.team, "vision");
  EXPECT_EQ(alone.spec.name, "vision/alone");
  EXPECT_EQ(alone.spec.user, "default@vision");
  EXPECT_EQ(alone.spec.request.gpus, 1);
  EXPECT_EQ(alone.spec.request.gpu_types, std::vector<std::string>{"T4"}) << "the GPU model its node selector chose";
  EXPECT_TRUE(alone.spec.node_selector.empty());
  EXPECT_EQ(alone.submit_ms, kStart + 10'000);
  EXPECT_EQ(alone.duration_ms, 60'000) << "from its start to its container's end, not from its creation";
  const TraceJob& gang = trace->jobs[1];
  EXPECT_EQ(gang.spec.team, "nlp");
  EXPECT_EQ(gang.spec.request.num_nodes, 2);
  EXPECT_EQ(gang.spec.request.gpus, 8);
  EXPECT_EQ(gang.submit_ms, kStart + 22'000) << "whole once its last member exists";
  EXPECT_EQ(gang.duration_ms, 120'000) << "over when its last member is";
  EXPECT_TRUE(gang.spec.kube_pods.empty());
  const TraceJob& shared = trace->jobs[2];
  EXPECT_EQ(shared.spec.request.gpus, 1);
  EXPECT_EQ(shared.spec.request.gpu_milli, 500);
  ASSERT_EQ(trace->skipped.size(), 3u);
  std::string reasons;
  for (const TraceIssue& s : trace->skipped) reasons += s.reason + "\n";
  EXPECT_NE(reasons.find("vision/still-running had not ended when the trace was taken (status.phase 'Running')"),
            std::string::npos)
      << reasons;
  EXPECT_NE(reasons.find("asks for no GPU"), std::string::npos) << reasons;
  EXPECT_NE(reasons.find("gang nlp/short: 1 of its 3 members are in the trace"), std::string::npos) << reasons;
}

TEST(PodTrace, OnePodALineAndStrictStopsAtTheFirstItCannotRead) {
  TracedAsk h100;
  h100.product = "NVIDIA-H100-80GB-HBM3";
  TracedAsk unknown;
  unknown.product = "Voodoo-5";
  const std::string lines = TracedPod("a", "p", 0, 1, 11, h100).dump() + "\n\n" + "{not json\n" +
                            TracedPod("a", "q", 0, 1, 11, unknown).dump() + "\n";
  auto trace = ParsePodTrace(lines, GpuCatalog::Builtin(), false);
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  ASSERT_EQ(trace->jobs.size(), 1u);
  EXPECT_EQ(trace->jobs[0].spec.request.gpu_types, std::vector<std::string>{"H100-80GB"});
  ASSERT_EQ(trace->skipped.size(), 2u);
  EXPECT_EQ(trace->skipped[0].line, 3);
  EXPECT_EQ(trace->skipped[0].reason, "not a JSON object (a Pod)");
  EXPECT_EQ(trace->skipped[1].line, 4);
  EXPECT_NE(trace->skipped[1].reason.find("GPU model 'Voodoo-5' is none of"), std::string::npos);
  auto strict = ParsePodTrace(lines, GpuCatalog::Builtin(), true);
  ASSERT_FALSE(strict.ok());
  EXPECT_NE(strict.status().message().find("pod 3: not a JSON object"), std::string::npos) << strict.status().message();
}

TEST(PodTrace, AGangNameThatEveryRunReusesIsOneGangJobPerRun) {
  // A Job's (or a CronJob's) pod template carries the same gang name each time it runs:
  // three daily runs of two members are three gang jobs, not one of six members.
  TracedAsk member;
  member.gpus = "8";
  member.gang = "ddp";
  member.gang_min = 2;
  std::vector<nlohmann::json> pods;
  for (int day = 0; day < 3; ++day) {
    const double at = day * 86400.0;
    for (int i = 0; i < 2; ++i) {
      pods.push_back(
          TracedPod("nlp", "ddp-" + std::to_string(day) + "-" + std::to_string(i), at + i, at + 5, at + 3600, member));
    }
  }
  pods.push_back(pods.front());  // a pod listed twice is one pod
  auto trace = ParsePodTrace(List(pods).dump(), GpuCatalog::Builtin(), false);
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  ASSERT_EQ(trace->jobs.size(), 3u);
  for (const TraceJob& job : trace->jobs) {
    EXPECT_EQ(job.spec.request.num_nodes, 2);
    EXPECT_EQ(job.spec.request.gpus, 16);
  }
  EXPECT_EQ(trace->jobs[1].submit_ms, kStart + 86401'000);
  ASSERT_EQ(trace->skipped.size(), 1u);
  EXPECT_NE(trace->skipped[0].reason.find("is in the trace already"), std::string::npos);
}

TEST(PodTrace, AGangOfPodsReplaysAsAGangJobWaitingForWholeNodes) {
  // As Simulator.GangWaitsForWholeNodes, from pods: two 8-GPU nodes; X holds one GPU until
  // 100 s; the gang's two 8-GPU pods need both nodes whole: it starts at 100 (a wait of
  // 99 s) and ends at 150.
  TracedAsk member;
  member.gpus = "8";
  member.gang = "g";
  member.gang_min = 2;
  const nlohmann::json list = List({TracedPod("a", "x", 0, 0, 100), TracedPod("a", "g-0", 1, 200, 250, member),
                                    TracedPod("a", "g-1", 1, 200, 240, member)});
  auto trace = ParsePodTrace(list.dump(), GpuCatalog::Builtin(), true);
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  SimOptions options;
  options.policy = "backfill";
  ConfigSet config{GpuCatalog::Builtin(), SchedulerConfig::Builtin(), QuotaConfig{}, ""};
  auto r = Simulate({testing::MakeNode("a", "A100-80GB", 8), testing::MakeNode("b", "A100-80GB", 8)}, *trace, config,
                    options);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->jobs_completed, 2);
  EXPECT_DOUBLE_EQ(r->queue_delay_max_s, 99);
  EXPECT_DOUBLE_EQ(r->makespan_s, 150);
}

}  // namespace
}  // namespace gantry
