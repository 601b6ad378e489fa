// Job spec and cluster file parsing: fields, defaults, and errors that name the field.
#include "core/spec_yaml.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/scheduler_config.h"

namespace gantry {
namespace {

const GpuCatalog& C() { return GpuCatalog::Builtin(); }

TEST(JobSpecYaml, ParsesEveryField) {
  auto spec = ParseJobSpecText(R"(
id: j1
user: ana
team: vision
project: detector
priority: high
gpus: 16
nodes: 2
gpu_types: [H100-80GB, A100-80GB]
prefer_listed_order: true
gpu_memory_gb: 40
cpus: 32
memory_gb: 256
node_selector: {zone: east}
preferred_labels: [{key: rack, value: r1, weight: 5}]
tolerations: [dedicated=training, spot]
preemptible: false
checkpointable: true
estimated_duration: 2h30m
time_limit: 1d
)");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->request.gpus, 16);
  EXPECT_EQ(spec->request.num_nodes, 2);
  EXPECT_EQ(spec->request.gpu_memory_mib, 40 * 1024);
  EXPECT_EQ(spec->request.memory_mib, 256 * 1024);
  EXPECT_EQ(spec->node_selector.at("zone"), "east");
  ASSERT_EQ(spec->preferred_labels.size(), 1u);
  EXPECT_EQ(spec->preferred_labels[0].weight, 5);
  ASSERT_EQ(spec->tolerations.size(), 2u);
  EXPECT_EQ(spec->tolerations[0].value, "training");
  EXPECT_EQ(spec->tolerations[1].value, "");
  EXPECT_FALSE(spec->preemptible);
  EXPECT_EQ(spec->estimated_duration_ms, 2 * kHourMs + 30 * kMinuteMs);
  EXPECT_EQ(spec->time_limit_ms, 24 * kHourMs);
}

TEST(JobSpecYaml, InfersTheSharingMode) {
  // A plain fraction leaves the mode to the site (auto); a thread share means MPS.
  auto plain = ParseJobSpecText("{user: a, team: t, gpu_fraction: 0.25}");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->request.sharing, SharingMode::kAuto);
  EXPECT_EQ(plain->request.gpu_milli, 250);
  auto threads = ParseJobSpecText("{user: a, team: t, gpu_fraction: 0.25, mps_thread_percent: 30}");
  ASSERT_TRUE(threads.ok());
  EXPECT_EQ(threads->request.sharing, SharingMode::kMps);
  auto ts = ParseJobSpecText("{user: a, team: t, gpu_fraction: 0.25, sharing: time-slice}");
  ASSERT_TRUE(ts.ok());
  EXPECT_EQ(ts->request.sharing, SharingMode::kTimeSlice);
  auto mig = ParseJobSpecText("{user: a, team: t, mig_profile: 3g.40gb}");
  ASSERT_TRUE(mig.ok());
  EXPECT_EQ(mig->request.sharing, SharingMode::kMig);
  auto mps = ParseJobSpecText("{user: a, team: t, sharing: mps, gpu_milli: 300}");
  ASSERT_TRUE(mps.ok());
  EXPECT_EQ(mps->request.sharing, SharingMode::kMps);
  EXPECT_EQ(mps->request.gpu_milli, 300);
}

TEST(JobSpecYaml, AcceptsJson) {
  auto spec = ParseJobSpecText(R"({"user": "a", "team": "t", "gpus": 4, "gpu_types": ["T4"]})");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->request.gpus, 4);
}

TEST(JobSpecYaml, NamesTheBadField) {
  auto unknown = ParseJobSpecText("{user: a, team: t, gpuz: 4}");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().field(), "gpuz");
  EXPECT_EQ(unknown.status().message(), "unknown field");
  auto wrong_type = ParseJobSpecText("{user: a, team: t, gpus: many}");
  ASSERT_FALSE(wrong_type.ok());
  EXPECT_EQ(wrong_type.status().field(), "gpus");
  auto fraction = ParseJobSpecText("{user: a, team: t, gpu_fraction: 1.5}");
  ASSERT_FALSE(fraction.ok());
  EXPECT_EQ(fraction.status().field(), "gpu_fraction");
  auto duration = ParseJobSpecText("{user: a, team: t, time_limit: 3 weeks}");
  ASSERT_FALSE(duration.ok());
  EXPECT_EQ(duration.status().field(), "time_limit");
  auto sharing = ParseJobSpecText("{user: a, team: t, sharing: vgpu}");
  ASSERT_FALSE(sharing.ok());
  EXPECT_EQ(sharing.status().field(), "sharing");
  auto malformed = ParseJobSpecText("{user: a, team: [");
  ASSERT_FALSE(malformed.ok());
  EXPECT_NE(malformed.status().message().find("malformed"), std::string::npos);
  auto not_map = ParseJobSpecText("- 1\n- 2\n");
  ASSERT_FALSE(not_map.ok());
}

TEST(JobSpecYaml, PortNamesAreIdentifiersGivenOnce) {
  auto ok = ParseJobSpecText("{ports: [jupyter, tensorboard_2]}");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->ports, (std::vector<std::string>{"jupyter", "tensorboard_2"}));
  for (const char* bad : {"{ports: [Jupyter]}", "{ports: ['$(id)']}", "{ports: [web, 'a b']}", "{ports: [master]}",
                          "{ports: [web, web]}", "{ports: ['']}"}) {
    auto refused = ParseJobSpecText(bad);
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_EQ(refused.status().field().rfind("ports[", 0), 0u) << bad << ": " << refused.status().ToString();
  }
  auto many = ParseJobSpecText("{ports: [a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p, q]}");
  ASSERT_FALSE(many.ok());
  EXPECT_EQ(many.status().field(), "ports");
  EXPECT_EQ(ParseJobSpecText("{ports: web}").status().field(), "ports");
}

TEST(Durations, ParseCommonForms) {
  EXPECT_EQ(*ParseDuration("90"), 90 * kSecondMs);
  EXPECT_EQ(*ParseDuration("15m"), 15 * kMinuteMs);
  EXPECT_EQ(*ParseDuration("1h30m"), 90 * kMinuteMs);
  EXPECT_EQ(*ParseDuration("2d"), 48 * kHourMs);
  EXPECT_EQ(*ParseDuration("1.5h"), 90 * kMinuteMs);
  EXPECT_EQ(*ParseDuration("250ms"), 250);
  EXPECT_EQ(*ParseDuration("1m30s250ms"), 90'250);
}

// Slurm's forms, with a bare number of minutes where a job's time is written.
TEST(Durations, ParseSlurmsClockFormsAndBareMinutes) {
  EXPECT_EQ(*ParseJobTime("30"), 30 * kMinuteMs);
  EXPECT_EQ(*ParseJobTime("5:30"), 5 * kMinuteMs + 30 * kSecondMs);
  EXPECT_EQ(*ParseJobTime("2:00:00"), 2 * kHourMs);
  EXPECT_EQ(*ParseJobTime("1-00:00:00"), 24 * kHourMs);
  EXPECT_EQ(*ParseJobTime("1-12"), 36 * kHourMs);
  EXPECT_EQ(*ParseJobTime("2-03:04"), 51 * kHourMs + 4 * kMinuteMs);
  EXPECT_EQ(*ParseJobTime("2h"), 2 * kHourMs);
}

TEST(Durations, RefuseWhatIsNotADuration) {
  for (const char* bad : {"",
                          "abc",
                          "5y",
                          "3 weeks",
                          ".",
                          "1..5h",
                          "1.2.3",
                          "5h3",
                          "-5m",
                          "1-",
                          "1:2:3:4",
                          "1:60",
                          "1-1:1:1:1",
                          "::",
                          "33--6060",
                          "1-+5",
                          "1e5",
                          "99999999999999999999d",
                          "1000000000000000000",
                          "h",
                          "0x10"}) {
    auto d = ParseJobTime(bad);
    EXPECT_FALSE(d.ok()) << "'" << bad << "' gave " << (d ? *d : 0);
    if (!d.ok()) {
      EXPECT_NE(d.status().message().find("duration"), std::string::npos) << bad;
    }
  }
}

// In a job: time_limit as people write it, or time_limit_s in seconds as the API answers.
TEST(Durations, AJobsTimeIsWrittenEitherWayButNotBoth) {
  EXPECT_EQ(ParseJobSpecText("{user: a, team: t, time_limit: 30}")->time_limit_ms, 30 * kMinuteMs);
  EXPECT_EQ(ParseJobSpecText("{user: a, team: t, time_limit: '1-00:00:00'}")->time_limit_ms, 24 * kHourMs);
  EXPECT_EQ(ParseJobSpecText("{user: a, team: t, time_limit_s: 90}")->time_limit_ms, 90 * kSecondMs);
  EXPECT_EQ(ParseJobSpecText("{user: a, team: t, estimated_duration_s: 0.5}")->estimated_duration_ms, 500);
  auto both = ParseJobSpecText("{user: a, team: t, time_limit: 2h, time_limit_s: 7200}");
  ASSERT_FALSE(both.ok());
  EXPECT_EQ(both.status().field(), "time_limit_s");
  auto negative = ParseJobSpecText("{user: a, team: t, time_limit_s: -1}");
  ASSERT_FALSE(negative.ok());
  EXPECT_EQ(negative.status().field(), "time_limit_s");
  // Slurm's no-limit (--time-limit 0, unlimited): the longest allowed, once checked; a
  // negative time says so rather than puzzling over days.
  for (const char* none : {"0", "unlimited", "UNLIMITED", "infinite"}) {
    auto spec = ParseJobSpecText(fmt::format("{{user: a, team: t, time_limit: {}}}", none));
    ASSERT_TRUE(spec.ok()) << none;
    EXPECT_EQ(spec->time_limit_ms, kTimeLimitAsAllowed) << none;
  }
  auto minus = ParseJobSpecText("{user: a, team: t, time_limit: '-5'}");
  ASSERT_FALSE(minus.ok());
  EXPECT_EQ(minus.status().field(), "time_limit");
  EXPECT_NE(minus.status().message().find("a duration cannot be negative"), std::string::npos)
      << minus.status().message();
  auto words = ParseJobSpecText("{user: a, team: t, estimated_duration_s: soon}");
  ASSERT_FALSE(words.ok());
  EXPECT_EQ(words.status().field(), "estimated_duration_s");
}

TEST(ClusterYaml, BuildsNodesFromGroups) {
  auto nodes = ParseCluster(YAML::Load(R"(
node_groups:
  - {name: a100, count: 2, gpu_type: A100-80GB, gpus_per_node: 8, nvlink_groups: 2, labels: {zone: east}}
  - {name: inf, count: 1, gpu_type: L40S, gpus_per_node: 4, taints: [dedicated=inference]}
  - {name: mig, count: 1, gpu_type: A100-40GB, gpus_per_node: 2, mig: {gpus: [1], layout: [3g.20gb, 3g.20gb]}}
)"),
                            C());
  ASSERT_TRUE(nodes.ok()) << nodes.status().ToString();
  ASSERT_EQ(nodes->size(), 4u);
  EXPECT_EQ((*nodes)[1].id, "a100-1");
  EXPECT_EQ((*nodes)[0].gpus[3].nvlink_group, 0);
  EXPECT_EQ((*nodes)[0].gpus[4].nvlink_group, 1);
  EXPECT_EQ((*nodes)[0].labels.at("zone"), "east");
  EXPECT_EQ((*nodes)[2].taints[0].key, "dedicated");
  const Node& mig = (*nodes)[3];
  EXPECT_FALSE(mig.gpus[0].mig_enabled);
  ASSERT_TRUE(mig.gpus[1].mig_enabled);
  ASSERT_EQ(mig.gpus[1].mig_instances.size(), 2u);
  EXPECT_EQ(mig.gpus[1].mig_instances[1].placement.start, 4);
  for (const Node& n : *nodes) EXPECT_TRUE(ValidateNode(n, C()).ok()) << n.id;
}

TEST(ClusterYaml, NamesTheBadField) {
  auto bad_type = ParseCluster(YAML::Load("node_groups: [{name: x, count: 1, gpu_type: H300, gpus_per_node: 8}]"), C());
  ASSERT_FALSE(bad_type.ok());
  EXPECT_EQ(bad_type.status().field(), "node_groups[0].gpu_type");
  auto bad_count = ParseCluster(YAML::Load("node_groups: [{name: x, count: -1, gpu_type: T4, gpus_per_node: 8}]"), C());
  EXPECT_EQ(bad_count.status().field(), "node_groups[0].count");
  auto no_mig = ParseCluster(
      YAML::Load("node_groups: [{name: x, count: 1, gpu_type: T4, gpus_per_node: 1, mig: {gpus: [0], layout: []}}]"),
      C());
  EXPECT_EQ(no_mig.status().field(), "node_groups[0].mig");
  auto overfull = ParseCluster(YAML::Load("node_groups: [{name: x, count: 1, gpu_type: A100-80GB, gpus_per_node: 1, "
                                          "mig: {gpus: [0], layout: [4g.40gb, 4g.40gb]}}]"),
                               C());
  EXPECT_EQ(overfull.status().field(), "node_groups[0].mig.layout");
  auto typo =
      ParseCluster(YAML::Load("node_groups: [{name: x, count: 1, gpu_type: T4, gpus_per_node: 1, cpu: 4}]"), C());
  EXPECT_EQ(typo.status().field(), "node_groups[0].cpu");
}

}  // namespace
}  // namespace gantry
