// Kubernetes' view of a node laid over its agent's (ControllerState::ApplyKubeNode), on the
// state machine alone: labels and taints replace the previous ones and survive the agent
// registering again; a cordon or a deletion drains, an uncordon undoes only Kubernetes' own
// drain; Gantry's own labels are never taken from a Node object.
#include <gtest/gtest.h>

#include "state/state_under_test.h"
#include "state/state_views.h"

namespace gantry::testing {
namespace {

// The node as the API shows it: labels, taints ("key=value"), state.
nlohmann::json NodeIn(ControllerState& state, const std::string& id) {
  Answer nodes = StateViews(state).Nodes(kAdmin);
  if (!nodes) return nullptr;
  for (const nlohmann::json& n : (*nodes)["nodes"]) {
    if (n["id"] == id) return n;
  }
  return nullptr;
}

TEST(KubeNodeState, FactsReplaceTheirPredecessorsAndOutliveARegistration) {
  StateUnderTest t;
  Node agent_view = MakeNode("gpu-1", "A100-80GB", 2);
  agent_view.labels["rack"] = "r7";
  agent_view.taints = {{"agent", "own"}};
  ASSERT_TRUE(t.state->AttachNodes({agent_view}, &t.link, {}).ok());
  KubeNodeFacts facts;
  facts.labels = {{"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB"},
                  {"zone", "a"},
                  {"gantry.io/fake", "true"},
                  {"pool", "spot-a100"}};
  facts.taints = {{"dedicated", "inference"}};
  t.state->ApplyKubeNode("gpu-1", facts);
  nlohmann::json n = NodeIn(*t.state, "gpu-1");
  EXPECT_EQ(n["labels"]["nvidia.com/gpu.product"], "NVIDIA-A100-SXM4-80GB");
  EXPECT_EQ(n["labels"]["rack"], "r7");                  // the agent's stay
  EXPECT_FALSE(n["labels"].contains("gantry.io/fake"));  // Gantry's own, never Kubernetes'
  EXPECT_FALSE(n["labels"].contains("pool"));            // no pool token may speak for it by a label
  EXPECT_EQ(n["taints"], nlohmann::json({"agent=own", "dedicated=inference"}));
  // New facts: zone gone, the taint changed.
  facts.labels.erase("zone");
  facts.taints = {{"dedicated", "training"}};
  t.state->ApplyKubeNode("gpu-1", facts);
  n = NodeIn(*t.state, "gpu-1");
  EXPECT_FALSE(n["labels"].contains("zone"));
  EXPECT_EQ(n["taints"], nlohmann::json({"agent=own", "dedicated=training"}));
  // The agent registers again (its report has no Kubernetes labels): they are laid over again.
  ASSERT_TRUE(t.state->AttachNodes({agent_view}, &t.link, {}).ok());
  n = NodeIn(*t.state, "gpu-1");
  EXPECT_EQ(n["labels"]["nvidia.com/gpu.product"], "NVIDIA-A100-SXM4-80GB");
  EXPECT_EQ(n["taints"], nlohmann::json({"agent=own", "dedicated=training"}));
  // A list without it (it was deleted while no watch ran, or before a take-over): deleted.
  t.state->ApplyKubeNodes({});
  n = NodeIn(*t.state, "gpu-1");
  EXPECT_EQ(n["state"], "drained");
  EXPECT_EQ(n["labels"]["gantry.io/kube-drained"], "deleted");
}

TEST(KubeNodeState, ACordonDrainsAnUncordonUndoesOnlyItsOwnDrain) {
  StateUnderTest t;
  ASSERT_TRUE(t.state->AttachNodes({MakeNode("gpu-1", "A100-80GB", 2)}, &t.link, {}).ok());
  KubeNodeFacts cordoned;
  cordoned.cordoned = true;
  t.state->ApplyKubeNode("gpu-1", cordoned);
  EXPECT_EQ(NodeIn(*t.state, "gpu-1")["state"], "drained");
  // Registering again keeps the drain, and whose it is.
  ASSERT_TRUE(t.state->AttachNodes({MakeNode("gpu-1", "A100-80GB", 2)}, &t.link, {}).ok());
  EXPECT_EQ(NodeIn(*t.state, "gpu-1")["state"], "drained");
  t.state->ApplyKubeNode("gpu-1", {});
  EXPECT_EQ(NodeIn(*t.state, "gpu-1")["state"], "up");
  // An admin's drain: a cordon and uncordon leave it drained.
  ASSERT_TRUE(t.state->SetDrain(kAdmin, "gpu-1", -1, true).ok());
  t.state->ApplyKubeNode("gpu-1", cordoned);
  t.state->ApplyKubeNode("gpu-1", {});
  EXPECT_EQ(NodeIn(*t.state, "gpu-1")["state"], "drained");
  // Cordoned first, then drained by an admin: the drain is the admin's, an uncordon keeps it.
  ASSERT_TRUE(t.state->SetDrain(kAdmin, "gpu-1", -1, false).ok());
  t.state->ApplyKubeNode("gpu-1", cordoned);
  ASSERT_TRUE(t.state->SetDrain(kAdmin, "gpu-1", -1, true).ok());
  t.state->ApplyKubeNode("gpu-1", {});
  EXPECT_EQ(NodeIn(*t.state, "gpu-1")["state"], "drained");
  // Facts for a node not registered yet wait for it; a deleted Node drains it when it comes.
  KubeNodeFacts deleted;
  deleted.deleted = true;
  t.state->ApplyKubeNode("gpu-2", deleted);
  ASSERT_TRUE(t.state->AttachNodes({MakeNode("gpu-2", "A100-80GB", 2)}, &t.link, {}).ok());
  EXPECT_EQ(NodeIn(*t.state, "gpu-2")["state"], "drained");
  EXPECT_EQ(NodeIn(*t.state, "gpu-2")["labels"]["gantry.io/kube-drained"], "deleted");
}

}  // namespace
}  // namespace gantry::testing
