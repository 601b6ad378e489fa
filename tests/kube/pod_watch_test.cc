// The watch of pods that ask for Gantry, against a real API server: only pods with
// schedulerName gantry arrive (the field selector), each read as a job or with the reason it
// cannot be one, and a deleted pod is said to be gone.
#include "kube/pod_watch.h"

#include <gtest/gtest.h>

#include <map>
#include <mutex>

#include "kube/kube_fixture.h"

namespace gantry::testing {
namespace {

nlohmann::json GpuPod(const std::string& name, const std::string& scheduler, nlohmann::json annotations,
                      const std::string& gpus) {
  nlohmann::json resources = nlohmann::json::object();
  if (!gpus.empty()) resources["limits"] = {{"nvidia.com/gpu", gpus}};
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"annotations", annotations}}},
          {"spec",
           {{"schedulerName", scheduler},
            {"automountServiceAccountToken", false},  // no controller manager makes its token here
            {"containers", {{{"name", "main"}, {"image", "pytorch"}, {"resources", resources}}}}}}};
}

TEST(PodWatch, OnlyPodsForGantryArriveReadAsJobsOrWithTheReason) {
  ScratchKube kube;
  ASSERT_FALSE(kube.url().empty());
  std::string out;
  ASSERT_EQ(kube.Kubectl("create namespace vision", &out), 0) << out;
  // No controller manager here: the namespace's default account is made by hand.
  ASSERT_EQ(kube.Kubectl("-n vision create serviceaccount default", &out), 0) << out;
  auto [made, body] = kube.Api("POST", "/api/v1/namespaces/vision/pods", GpuPod("early", "gantry", {}, "2"));
  ASSERT_EQ(made, 201) << body.dump();

  std::mutex mu;
  std::map<std::string, WatchedPod> seen;
  int lists = 0;
  KubeConfig config;
  config.url = kube.url();
  config.ca_file = kube.ca();
  config.token_file = kube.dir() + "/admin-token";
  KubePodPolicy policy;
  policy.namespace_teams = {{"vision", "cv"}};
  PodWatch watch(
      config, policy,
      [&](const WatchedPod& pod) {
        std::lock_guard<std::mutex> lock(mu);
        seen.insert_or_assign(pod.key, pod);
      },
      [&](const std::vector<WatchedPod>& pods) {
        std::lock_guard<std::mutex> lock(mu);
        ++lists;
        for (const auto& pod : pods) seen.insert_or_assign(pod.key, pod);
      });
  watch.Start();
  auto has = [&](const std::string& key) {
    std::lock_guard<std::mutex> lock(mu);
    return seen.count(key) > 0;
  };
  ASSERT_TRUE(Eventually([&] { return has("vision/early"); })) << watch.loop().last_error();
  EXPECT_GE(lists, 1);

  ASSERT_EQ(kube.Api("POST", "/api/v1/namespaces/vision/pods", GpuPod("other", "default-scheduler", {}, "1")).first,
            201);
  ASSERT_EQ(kube.Api("POST", "/api/v1/namespaces/vision/pods",
                     GpuPod("half", "gantry", {{"gantry.io/gpu-fraction", "0.5"}}, ""))
                .first,
            201);
  ASSERT_EQ(kube.Api("POST", "/api/v1/namespaces/vision/pods",
                     GpuPod("greedy", "gantry", {{"gantry.io/gpu-fraction", "2"}}, ""))
                .first,
            201);
  ASSERT_TRUE(Eventually([&] { return has("vision/half") && has("vision/greedy"); }));
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(seen.count("vision/other"), 0u) << "another scheduler's pod never arrives";
    const WatchedPod& early = seen.at("vision/early");
    ASSERT_TRUE(early.job.ok()) << early.job.status().ToString();
    EXPECT_EQ(early.job->spec.team, "cv");
    EXPECT_EQ(early.job->spec.request.gpus, 2);
    EXPECT_FALSE(early.job->uid.empty());
    const WatchedPod& half = seen.at("vision/half");
    ASSERT_TRUE(half.job.ok()) << half.job.status().ToString();
    EXPECT_EQ(half.job->spec.request.gpu_milli, 500);
    const WatchedPod& greedy = seen.at("vision/greedy");
    ASSERT_FALSE(greedy.job.ok());
    EXPECT_EQ(greedy.job.status().field(), "metadata.annotations[gantry.io/gpu-fraction]");
  }
  // Deleted at once (no kubelet runs it): the watch says it is gone.
  ASSERT_EQ(kube.Kubectl("-n vision delete pod early --grace-period=0 --force --wait=false", &out), 0) << out;
  EXPECT_TRUE(Eventually([&] {
    std::lock_guard<std::mutex> lock(mu);
    return seen.at("vision/early").deleted;
  }));
  watch.Stop();
}

}  // namespace
}  // namespace gantry::testing
