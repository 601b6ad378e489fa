// The pod link against a real API server, as a tenant who races it would: between Gantry's
// placement of a pod and its bind, the tenant deletes the pod and makes another under the
// same name (its own scheduler named, its own GPU limits). The API server the tests run
// (1.20) does not check a Binding's uid, so the bind lands on the new pod; Gantry must not
// leave it there, bound to GPUs no scheduler counted for it.
#include <gtest/gtest.h>

#include <memory>

#include "agent/report_sink.h"
#include "kube/kube_fixture.h"
#include "kube/pod_binder.h"

namespace gantry::testing {
namespace {

nlohmann::json PodNamed(const std::string& name, const std::string& scheduler, const std::string& gpus) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}}},
          {"spec",
           {{"schedulerName", scheduler},
            {"automountServiceAccountToken", false},
            {"containers",
             {{{"name", "main"}, {"image", "pytorch"}, {"resources", {{"limits", {{"nvidia.com/gpu", gpus}}}}}}}}}}};
}

TEST(KubePodBinderSecurity, APodMadeAgainUnderAPlacedPodsNameDoesNotKeepItsBind) {
  ScratchKube kube;
  ASSERT_FALSE(kube.url().empty());
  std::string out;
  ASSERT_EQ(kube.Kubectl("create namespace nlp", &out), 0) << out;
  ASSERT_EQ(kube.Kubectl("-n nlp create serviceaccount default", &out), 0) << out;
  ASSERT_EQ(kube.Api("POST", "/api/v1/nodes", GpuNode("gpu-0", "Tesla-T4", 2)).first, 201);
  auto [made, placed] = kube.Api("POST", "/api/v1/namespaces/nlp/pods", PodNamed("x", "gantry", "1"));
  ASSERT_EQ(made, 201) << placed.dump();
  const std::string placed_uid = placed["metadata"]["uid"];
  // Gantry placed it (job 7, GPU 0 of gpu-0); before the bind, the tenant swaps it.
  ASSERT_EQ(kube.Kubectl("-n nlp delete pod x --grace-period=0 --force", &out), 0) << out;
  auto [remade, swapped] = kube.Api("POST", "/api/v1/namespaces/nlp/pods", PodNamed("x", "nobody", "2"));
  ASSERT_EQ(remade, 201) << swapped.dump();
  ASSERT_NE(swapped["metadata"]["uid"], placed_uid);

  KubeConfig config;
  config.url = kube.url();
  config.ca_file = kube.ca();
  config.token_file = kube.dir() + "/admin-token";
  ReportSink reports;
  auto binder = std::make_unique<PodBinder>(config, reports, 60'000, 1);
  JobSpec spec;
  spec.kube_pods = {"nlp/x/" + placed_uid};
  StartOrder start;
  start.job_id = "7";
  start.node_id = start.leader_node = "gpu-0";
  start.spec = std::make_shared<const JobSpec>(spec);
  start.gpus.push_back({0, "GPU-t4-0", "", 1000, 0, 0, "", -1});
  binder->Start(start);
  // The placed pod's run ends (its pod is gone) ...
  EXPECT_EQ(reports.WaitExit("7", 30), 1);
  EXPECT_NE(reports.Reason("7").find("replaced by another of that name"), std::string::npos) << reports.Reason("7");
  // ... and the pod made in its place is not left bound to Gantry's node.
  EXPECT_TRUE(Eventually([&] {
    auto [status, now] = kube.Api("GET", "/api/v1/namespaces/nlp/pods/x");
    return status == 404 || now["spec"].value("nodeName", "").empty() || now["metadata"].contains("deletionTimestamp");
  }));
  binder.reset();
}

}  // namespace
}  // namespace gantry::testing
