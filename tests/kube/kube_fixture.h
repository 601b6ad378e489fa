// Gantry on a real API server (ScratchKube): the trial overlay applied as a user would, and
// a Gantry controller run outside the cluster with the controller service account's own
// token, so the manifests' RBAC is what it works with.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <string>
#include <thread>

#include "kube/scratch_kube.h"
#include "server/controller_harness.h"
#include "server/server_process.h"

namespace gantry::testing {

// Whether `ok` holds within `seconds`, asked every 0.1 s (watches and agents are asynchronous).
inline bool Eventually(const std::function<bool()>& ok, int seconds = 10) {
  for (int i = 0; i < seconds * 10; ++i) {
    if (ok()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return ok();
}

// Applies deploy/kubernetes/overlays/`overlay` server-side (a server dry run first), the
// API server validating every object. The API server here is 1.20, which has no policy/v1:
// there, and only there, the PodDisruptionBudget goes in as policy/v1beta1 without 1.27's
// unhealthyPodEvictionPolicy (docs/KUBERNETES.md says the same for older clusters).
inline void ApplyOverlay(const ScratchKube& kube, const std::string& overlay) {
  std::string out;
  ASSERT_EQ(kube.Kubectl(fmt::format("kustomize {}/deploy/kubernetes/overlays/{}", GANTRY_SOURCE_DIR, overlay), &out),
            0)
      << out;
  std::string rendered = out;
  std::string versions;
  ASSERT_EQ(kube.Kubectl("api-versions", &versions), 0) << versions;
  if (versions.find("policy/v1\n") == std::string::npos) {
    const std::string v1 = "apiVersion: policy/v1\nkind: PodDisruptionBudget";
    for (size_t at; (at = rendered.find(v1)) != std::string::npos;) {
      rendered.replace(at, v1.size(), "apiVersion: policy/v1beta1\nkind: PodDisruptionBudget");
    }
    const std::string newer = "  unhealthyPodEvictionPolicy: AlwaysAllow\n";  // Kubernetes 1.27's
    for (size_t at; (at = rendered.find(newer)) != std::string::npos;) rendered.erase(at, newer.size());
  }
  std::string file = kube.dir() + "/" + overlay + ".yaml";
  std::ofstream(file) << rendered;
  // A dry run does not make the namespace its other objects go in: it is made first (as
  // docs/KUBERNETES.md's production steps do).
  kube.Kubectl("create namespace gantry-system", &out);
  ASSERT_EQ(kube.Kubectl("apply --server-side --dry-run=server -f " + file, &out), 0) << out;
  ASSERT_EQ(kube.Kubectl("apply --server-side -f " + file, &out), 0) << out;
}

// A Node object as a kubelet and GPU Feature Discovery would make it: `gpus` GPUs of model
// `product` offered to pods (the device plugin's nvidia.com/gpu), CPUs and memory.
inline nlohmann::json GpuNode(const std::string& name, const std::string& product = "NVIDIA-H100-80GB-HBM3",
                              int gpus = 1) {
  const std::string count = std::to_string(gpus);
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata",
           {{"name", name},
            {"labels",
             {{"kubernetes.io/hostname", name},
              {"nvidia.com/gpu.present", "true"},
              {"nvidia.com/gpu.product", product},
              {"nvidia.com/gpu.count", count}}}}},
          {"status",
           {{"capacity", {{"nvidia.com/gpu", count}, {"cpu", "64"}, {"memory", "512Gi"}}},
            {"allocatable", {{"nvidia.com/gpu", count}, {"cpu", "62"}, {"memory", "500Gi"}}}}}};
}

// The agent DaemonSet's pod on `node`, as its controller and the scheduler would place it
// (neither runs here: the test stands in for them), in namespace `ns`.
inline nlohmann::json AgentPod(const ScratchKube& kube, const std::string& ns, const std::string& name,
                               const std::string& node) {
  nlohmann::json pod = {{"apiVersion", "v1"},
                        {"kind", "Pod"},
                        {"metadata", {{"name", name}, {"labels", {{"app.kubernetes.io/name", "gantry-agent"}}}}},
                        {"spec",
                         {{"serviceAccountName", "gantry-agent"},
                          {"automountServiceAccountToken", false},
                          {"nodeName", node},
                          {"containers", {{{"name", "agent"}, {"image", "gantry:latest"}, {"args", {"agent"}}}}}}}};
  auto [status, made] = kube.Api("POST", "/api/v1/namespaces/" + ns + "/pods", pod);
  EXPECT_EQ(status, 201) << made.dump();
  return made;
}

// A test on its own API server, the trial overlay applied and the GPU Node node-a made.
class OnKube : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(kube_.url().empty());
    ApplyOverlay(kube_, "trial");
    ASSERT_EQ(kube_.Api("POST", "/api/v1/nodes", GpuNode("node-a")).first, 201);
  }
  ScratchKube kube_;
};

// A Gantry controller (no standalone GPUs: it waits for agents) that talks to the API
// server with the gantry-controller service account's token.
inline void StartOnKube(ServerProcess& server, const ScratchKube& kube, const std::string& dir,
                        const std::vector<std::string>& more = {}) {
  std::string token = kube.TokenFor("gantry-system", "gantry-controller", "https://kubernetes.default.svc");
  ASSERT_FALSE(token.empty());
  std::ofstream(dir + "/controller-token") << token;
  server.AddArgs({"--kube-api", kube.url(), "--kube-ca", kube.ca(), "--kube-token-file", dir + "/controller-token",
                  "--kube-node-selector", "nvidia.com/gpu.present=true", "--node-timeout", "30"});
  server.AddArgs(more);
  server.Start();
}

}  // namespace gantry::testing
