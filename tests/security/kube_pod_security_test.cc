// Attacks on Gantry's scheduling of Kubernetes pods by a tenant who may make pods in their
// own namespace and call Gantry's API: claiming a pod through a job spec (so Gantry would
// bind or delete another team's pod), bringing the annotations Gantry writes at a bind (so
// the pod would run on devices or a share it chose), choosing a team by a label, joining
// another namespace's gang, and a gang or fraction sized to overflow.
#include <gtest/gtest.h>

#include <map>

#include "core/kube_pod.h"
#include "state/state_under_test.h"

namespace gantry::testing {
namespace {

nlohmann::json Pod(const std::string& ns, nlohmann::json labels, nlohmann::json annotations) {
  return {{"metadata",
           {{"namespace", ns}, {"name", "p"}, {"uid", "u-1"}, {"labels", labels}, {"annotations", annotations}}},
          {"spec",
           {{"schedulerName", "gantry"},
            {"containers",
             {{{"name", "main"}, {"image", "pytorch"}, {"resources", {{"limits", {{"nvidia.com/gpu", "1"}}}}}}}}}},
          {"status", {{"phase", "Pending"}}}};
}

// The state machine with a pod link and `nodes` nodes for pods, of 8 A100s each.
struct PodsOnA100s : StateUnderTest {
  explicit PodsOnA100s(int nodes) {
    state->SetPodLink(&pods);
    KubeNodeFacts facts;
    facts.labels = {{"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB"}};
    facts.gpus = 8;
    for (int n = 0; n < nodes; ++n) state->ApplyKubeNode("k" + std::to_string(n), facts);
  }
  RecordingLink pods;
};

TEST(KubePodSecurity, AJobSpecCannotClaimAPod) {
  StateUnderTest t;
  ASSERT_TRUE(t.state->AttachNodes({MakeNode("n1", "A100-80GB", 2)}, &t.link, {}).ok());
  JobSpec spec;
  spec.command = "true";
  spec.request.gpus = 1;
  spec.kube_pods = {"nlp/their-pod/uid-of-their-pod"};
  auto refused = t.state->Submit(kAlice, spec, "", "");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().field(), "kube_pods");
  // Nor through a jobs file, nor as an admin: only the pod watch makes pod jobs.
  auto batch = t.state->SubmitBatch(kAdmin, {spec}, "", "", true);
  ASSERT_FALSE(batch.ok());
  EXPECT_EQ(batch.status().field(), "jobs[0].kube_pods");
  // And not by the spec's text either (the CLI's and the API's way in).
  auto parsed = ParseJobSpecText("gpus: 1\ncommand: \"true\"\nkube_pods: [\"nlp/x/u\"]\n");
  ASSERT_TRUE(parsed.ok());
  auto text_refused = t.state->Submit(kAlice, *parsed, "", "");
  ASSERT_FALSE(text_refused.ok());
  EXPECT_EQ(text_refused.status().field(), "kube_pods");
}

TEST(KubePodSecurity, APodCannotBringWhatGantryWritesWhenItBinds) {
  for (const char* written : {"gantry.io/visible-devices", "gantry.io/gpus", "gantry.io/job", "gantry.io/gpu-share",
                              "gantry.io/gpu-memory-limit", "gantry.io/gang-rank"}) {
    auto job = JobOfPod(Pod("vision", nlohmann::json::object(), {{written, "0,1,2,3"}}), KubePodPolicy{});
    ASSERT_FALSE(job.ok()) << written;
    EXPECT_EQ(job.status().field(), std::string("metadata.annotations[") + written + "]");
  }
  // Once bound (by Gantry) the pod carries them: that pod is read as it is.
  nlohmann::json bound = Pod("vision", nlohmann::json::object(), {{"gantry.io/visible-devices", "0"}});
  bound["spec"]["nodeName"] = "gpu-1";
  EXPECT_TRUE(JobOfPod(bound, KubePodPolicy{}).ok());
}

TEST(KubePodSecurity, TheNamespaceNotALabelChoosesTheTeamAndGangsStayInTheirNamespace) {
  KubePodPolicy policy;
  policy.namespace_teams = {{"vision-prod", "vision"}};
  auto job =
      JobOfPod(Pod("vision-prod", {{"gantry.io/team", "nlp"}, {"team", "nlp"}}, {{"gantry.io/team", "nlp"}}), policy);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->spec.team, "vision");

  // Two namespaces' pods with one gang name are two gangs: nlp's pod never completes, nor
  // is placed with, vision's gang.
  PodsOnA100s t(2);
  auto member = [](const std::string& ns, const std::string& name) {
    KubePodJob pod;
    pod.ns = ns;
    pod.name = name;
    pod.uid = "uid-" + ns + name;
    pod.gang = "ddp";
    pod.gang_min_members = 2;
    pod.spec.team = ns;
    pod.spec.user = "u";
    pod.spec.request.gpus = 1;
    return WatchedPod{ns + "/" + name, ns, name, pod.uid, pod, false};
  };
  t.state->ApplyKubePod(member("vision", "a"));
  t.state->ApplyKubePod(member("nlp", "b"));
  t.state->Cycle();
  EXPECT_TRUE(t.state->TakeOutput().effects.orders.empty());
  for (const KubePodWait& w : t.state->KubePodWaits()) EXPECT_NE(w.message.find("1 of 2"), std::string::npos);
}

// A pod names its user (gantry.io/user): a member of its namespace's team, or a name of its
// own namespace; never another team's user, whose per-user limits it would fill.
TEST(KubePodSecurity, APodCannotNameAnotherTeamsUser) {
  PodsOnA100s t(1);
  auto pod = [](const std::string& name, const std::string& user) {
    KubePodJob p;
    p.ns = "nlp";
    p.name = name;
    p.uid = "uid-" + name;
    p.spec.team = "nlp";
    p.spec.user = user;
    p.spec.request.gpus = 1;
    return WatchedPod{"nlp/" + name, "nlp", name, p.uid, p, false};
  };
  t.state->ApplyKubePod(pod("as-alice", "alice"));        // vision's user
  t.state->ApplyKubePod(pod("as-other-ns", "x@vision"));  // another namespace's name
  t.state->ApplyKubePod(pod("as-bob", "bob"));            // nlp's own user
  t.state->ApplyKubePod(pod("as-own-ns", "trainer@nlp"));
  WatchedPod unknown_class = pod("unknown-class", "bob");  // a PriorityClass mapped to no Gantry class
  unknown_class.job->spec.priority_class = "bogus";
  t.state->ApplyKubePod(unknown_class);
  std::map<std::string, KubePodWait> waits;
  for (const KubePodWait& w : t.state->KubePodWaits()) waits[w.name] = w;
  ASSERT_EQ(waits.count("as-alice"), 1u);
  EXPECT_EQ(waits["as-alice"].code, "refused");
  EXPECT_NE(waits["as-alice"].message.find("metadata.annotations[gantry.io/user]"), std::string::npos);
  EXPECT_EQ(waits["as-other-ns"].code, "refused");
  EXPECT_EQ(waits.count("as-bob"), 0u);
  EXPECT_EQ(waits.count("as-own-ns"), 0u);
  // A refusal names the pod's own field, not the Gantry job field behind it.
  EXPECT_NE(waits["unknown-class"].message.find("spec.priorityClassName: unknown priority class 'bogus'"),
            std::string::npos)
      << waits["unknown-class"].message;
  t.state->Cycle();
  EXPECT_EQ(t.state->TakeOutput().effects.orders.size(), 2u) << "bob's and trainer@nlp's pods are placed";
}

TEST(KubePodSecurity, AGangOrAShareSizedToOverflowIsRefusedNamingTheField) {
  auto huge = JobOfPod(Pod("vision", {{"gantry.io/gang", "g"}}, {{"gantry.io/gang-min-members", "99999999999"}}),
                       KubePodPolicy{});
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().field(), "metadata.annotations[gantry.io/gang-min-members]");
  nlohmann::json tiny = Pod("vision", nlohmann::json::object(), {{"gantry.io/gpu-fraction", "0.0000001"}});
  tiny["spec"]["containers"][0]["resources"] = nlohmann::json::object();
  auto share = JobOfPod(tiny, KubePodPolicy{});
  ASSERT_FALSE(share.ok());
  EXPECT_EQ(share.status().field(), "metadata.annotations[gantry.io/gpu-fraction]");
}

}  // namespace
}  // namespace gantry::testing
