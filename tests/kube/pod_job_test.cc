// Pods read as Gantry jobs (core/kube_pod.h): GPUs from limits (containers summed, an init
// container's when larger), MIG slices, shares from annotations, the node selector and
// single-value affinity, tolerations, times, gangs and the team from the namespace; and
// what Gantry cannot honour refused with the pod's field named.
#include <gtest/gtest.h>

#include "core/kube_pod.h"

namespace gantry::testing {
namespace {

nlohmann::json Pod(nlohmann::json resources, nlohmann::json annotations = nlohmann::json::object()) {
  return {
      {"metadata", {{"namespace", "vision-prod"}, {"name", "train-0"}, {"uid", "u-1"}, {"annotations", annotations}}},
      {"spec",
       {{"schedulerName", "gantry"},
        {"containers", {{{"name", "main"}, {"image", "pytorch"}, {"resources", resources}}}}}},
      {"status", {{"phase", "Pending"}}}};
}

nlohmann::json Gpus(const std::string& n) { return {{"limits", {{"nvidia.com/gpu", n}}}}; }

std::string FieldOfRefusal(const nlohmann::json& pod) {
  auto job = JobOfPod(pod, KubePodPolicy{});
  EXPECT_FALSE(job.ok()) << pod.dump();
  return job.ok() ? "" : job.status().field();
}

TEST(PodJob, AWholeGpuPodIsAJobOfItsNamespacesTeam) {
  nlohmann::json pod = Pod(Gpus("2"), {{"gantry.io/estimated-duration", "90m"}, {"gantry.io/gang-min-members", "4"}});
  pod["spec"]["containers"][0]["resources"]["requests"] = {{"cpu", "500m"}, {"memory", "1Gi"}};
  pod["spec"]["containers"].push_back(
      {{"name", "sidecar"}, {"resources", {{"limits", {{"nvidia.com/gpu", 1}, {"cpu", "1"}, {"memory", "512Mi"}}}}}});
  pod["spec"]["serviceAccountName"] = "trainer";
  pod["spec"]["priorityClassName"] = "research-high";
  pod["spec"]["nodeSelector"] = {{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"}};
  pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] = {
      {{"matchExpressions", {{{"key", "zone"}, {"operator", "In"}, {"values", {"a"}}}}}}};
  pod["spec"]["tolerations"] = {{{"key", "dedicated"}, {"operator", "Equal"}, {"value", "ml"}},
                                {{"key", "spot"}, {"operator", "Exists"}, {"effect", "NoSchedule"}},
                                {{"key", "slow"}, {"operator", "Exists"}, {"effect", "PreferNoSchedule"}}};
  pod["spec"]["activeDeadlineSeconds"] = 7200;
  pod["metadata"]["labels"] = {{"gantry.io/gang", "resnet"}, {"gantry.io/team", "nlp"}};
  KubePodPolicy policy;
  policy.namespace_teams = {{"vision-prod", "vision"}};
  policy.priority_classes = {{"research-high", "high"}};
  ASSERT_TRUE(WantsGantry(pod, policy));
  auto job = JobOfPod(pod, policy);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->ns, "vision-prod");
  EXPECT_EQ(job->uid, "u-1");
  EXPECT_EQ(job->spec.team, "vision") << "the namespace's team, not the pod's own label";
  EXPECT_EQ(job->spec.user, "trainer@vision-prod");
  EXPECT_EQ(job->spec.project, "vision-prod");
  EXPECT_EQ(job->spec.priority_class, "high");
  EXPECT_EQ(job->spec.request.gpus, 3);
  EXPECT_EQ(job->spec.request.sharing, SharingMode::kExclusive);
  EXPECT_EQ(job->spec.request.num_nodes, 1);
  EXPECT_EQ(job->spec.request.cpus, 2);  // 0.5 + 1, rounded up
  EXPECT_EQ(job->spec.request.memory_mib, 1536);
  EXPECT_EQ(job->spec.node_selector,
            (std::map<std::string, std::string>{{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"}, {"zone", "a"}}));
  EXPECT_EQ(job->spec.tolerations, (std::vector<Taint>{{"dedicated", "ml"}, {"spot", ""}}));
  EXPECT_EQ(job->spec.estimated_duration_ms, 90 * 60 * 1000);
  EXPECT_EQ(job->spec.time_limit_ms, 7200 * 1000);
  EXPECT_EQ(job->gang, "resnet");
  EXPECT_EQ(job->gang_min_members, 4);
  EXPECT_TRUE(job->spec.preemptible);
  pod["spec"]["schedulerName"] = "default-scheduler";
  EXPECT_FALSE(WantsGantry(pod, policy));
}

TEST(PodJob, AnInitContainerCountsWhenItAsksForMore) {
  nlohmann::json pod = Pod(Gpus("1"));
  pod["spec"]["initContainers"] = {{{"name", "warm"}, {"resources", Gpus("4")}}};
  auto job = JobOfPod(pod, KubePodPolicy{});
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->spec.request.gpus, 4);
}

TEST(PodJob, MigSlicesAndSharesAreReadAsGantryAsksForThem) {
  auto mig = JobOfPod(Pod({{"limits", {{"nvidia.com/mig-3g.40gb", "2"}}}}), KubePodPolicy{});
  ASSERT_TRUE(mig.ok()) << mig.status().ToString();
  EXPECT_EQ(mig->spec.request.sharing, SharingMode::kMig);
  EXPECT_EQ(mig->spec.request.mig_profile, "3g.40gb");
  EXPECT_EQ(mig->spec.request.gpus, 2);

  auto share = JobOfPod(
      Pod({{"requests", {{"cpu", "2"}}}},
          {{"gantry.io/gpu-fraction", "0.5"}, {"gantry.io/gpu-sharing", "mps"}, {"gantry.io/gpu-memory", "20Gi"}}),
      KubePodPolicy{});
  ASSERT_TRUE(share.ok()) << share.status().ToString();
  EXPECT_EQ(share->spec.request.sharing, SharingMode::kMps);
  EXPECT_EQ(share->spec.request.gpus, 1);
  EXPECT_EQ(share->spec.request.gpu_milli, 500);
  EXPECT_EQ(share->spec.request.gpu_memory_mib, 20480);
}

TEST(PodJob, WhatGantryCannotHonourIsRefusedNamingThePodsField) {
  const std::string fraction = "metadata.annotations[gantry.io/gpu-fraction]";
  EXPECT_EQ(FieldOfRefusal(Pod(Gpus("0"))), "spec.containers.resources");
  EXPECT_EQ(FieldOfRefusal(Pod(nlohmann::json::object())), "spec.containers.resources") << "no GPU at all";
  EXPECT_EQ(FieldOfRefusal(Pod(Gpus("1"), {{"gantry.io/gpu-fraction", "0.5"}})), fraction);
  EXPECT_EQ(FieldOfRefusal(Pod({}, {{"gantry.io/gpu-fraction", "1.5"}})), fraction);
  EXPECT_EQ(FieldOfRefusal(Pod({}, {{"gantry.io/gpu-fraction", "half"}})), fraction);
  EXPECT_EQ(FieldOfRefusal(Pod({}, {{"gantry.io/gpu-fraction", "0.5"}, {"gantry.io/gpu-sharing", "fast"}})),
            "metadata.annotations[gantry.io/gpu-sharing]");
  EXPECT_EQ(FieldOfRefusal(Pod({{"limits", {{"nvidia.com/mig-1g.10gb", "1"}, {"nvidia.com/mig-3g.40gb", "1"}}}})),
            "spec.containers.resources");
  EXPECT_EQ(FieldOfRefusal(Pod({{"limits", {{"nvidia.com/gpu", "1.5.0"}}}})),
            "spec.containers[0].resources.limits[nvidia.com/gpu]");
  EXPECT_EQ(FieldOfRefusal(Pod({{"limits", {{"nvidia.com/gpu", "500m"}}}})), "spec.containers.resources");
  EXPECT_EQ(FieldOfRefusal(Pod(Gpus("1"), {{"gantry.io/estimated-duration", "soon"}})),
            "metadata.annotations[gantry.io/estimated-duration]");
  EXPECT_EQ(FieldOfRefusal(Pod(Gpus("1"), {{"gantry.io/gang-min-members", "4"}})),
            "metadata.annotations[gantry.io/gang-min-members]")
      << "a member count needs a gang";
  EXPECT_EQ(FieldOfRefusal(Pod(Gpus("1"), {{"gantry.io/preemptible", "maybe"}})),
            "metadata.annotations[gantry.io/preemptible]");
  nlohmann::json not_in = Pod(Gpus("1"));
  not_in["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] = {
      {{"matchExpressions", {{{"key", "zone"}, {"operator", "NotIn"}, {"values", {"b"}}}}}}};
  EXPECT_EQ(FieldOfRefusal(not_in), "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution");
  nlohmann::json everything = Pod(Gpus("1"));
  everything["spec"]["tolerations"] = {{{"operator", "Exists"}}};
  EXPECT_EQ(FieldOfRefusal(everything), "spec.tolerations");
  nlohmann::json deadline = Pod(Gpus("1"));
  deadline["spec"]["activeDeadlineSeconds"] = -5;
  EXPECT_EQ(FieldOfRefusal(deadline), "spec.activeDeadlineSeconds");
  nlohmann::json nameless = Pod(Gpus("1"));
  nameless["metadata"].erase("uid");
  EXPECT_EQ(FieldOfRefusal(nameless), "metadata");
}

TEST(PodJob, QuantitiesAreReadAsKubernetesWritesThem) {
  const std::vector<std::pair<std::string, int64_t>> read = {
      {"500m", 500},           {"2", 2000}, {"0.5", 500}, {"1Gi", 1073741824000},  {"1.5G", 1500000000000},
      {"129e6", 129000000000}, {"1e-3", 1}, {"0.1m", 1},  {"123Mi", 128974848000}, {"+3k", 3000000}};
  for (const auto& [text, milli] : read) {
    auto q = QuantityMilli(text);
    ASSERT_TRUE(q.ok()) << text << ": " << q.status().ToString();
    EXPECT_EQ(*q, milli) << text;
  }
  for (const std::string bad : {"", "abc", "1.2.3", "5X", "-1", "1e99", "9Ei", ".", "1 Gi"}) {
    EXPECT_FALSE(QuantityMilli(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace gantry::testing
