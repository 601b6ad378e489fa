// The simulator on small hand-made traces whose answers are worked out here, and a
// determinism check.
#include "sim/simulator.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "core/quota_config.h"
#include "core/spec_yaml.h"
#include "sim/report.h"
#include "test_util.h"

namespace gantry {
namespace {

using testing::MakeNode;

ConfigSet Config() { return {GpuCatalog::Builtin(), SchedulerConfig::Builtin(), QuotaConfig{}, ""}; }

SimResult RunSim(const std::vector<Node>& nodes, const std::string& csv, const std::string& policy,
                 const std::function<void(ConfigSet&)>& configure = {}) {
  auto trace = ParseTrace(csv, TraceFormat::kCsv, true);
  EXPECT_TRUE(trace.ok()) << trace.status().ToString();
  SimOptions options;
  options.policy = policy;
  ConfigSet config = Config();
  if (configure) configure(config);
  auto r = Simulate(nodes, *trace, config, options);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return *r;
}

// One 8-GPU node. A (6 GPUs, 0-100 s) leaves a 2-GPU hole; B (8 GPUs) is blocked until 100;
// C (1 GPU, 50 s, submitted at 20) fits the hole and ends at 70, before B's reservation.
const char* kHoleTrace =
    "id,submit_time,duration_s,num_gpus\n"
    "A,0,100,6\n"
    "B,10,100,8\n"
    "C,20,50,1\n";

TEST(Simulator, FifoBlocksBehindTheHeadOfTheQueue) {
  // FIFO: A 0-100, B 100-200, C waits behind B: 200-250.
  // Queue delays 0, 90, 180 (mean 90); JCTs 100, 190, 230 (mean 173.3).
  SimResult r = RunSim({MakeNode("n", "A100-80GB", 8)}, kHoleTrace, "fifo");
  EXPECT_EQ(r.jobs_completed, 3);
  EXPECT_DOUBLE_EQ(r.queue_delay_mean_s, 90);
  EXPECT_DOUBLE_EQ(r.queue_delay_max_s, 180);
  EXPECT_NEAR(r.jct_mean_s, (100 + 190 + 230) / 3.0, 1e-9);
  EXPECT_DOUBLE_EQ(r.makespan_s, 250);
  // Allocated GPU-seconds: 6x100 + 8x100 + 1x50 = 1450 over 8 GPUs x 250 s.
  EXPECT_NEAR(r.gpu_utilization, 1450.0 / 2000.0, 1e-9);
}

TEST(Simulator, BackfillFillsTheHole) {
  // Backfill: C runs 20-70 in the hole; B still starts at 100. Delays 0, 90, 0 (mean 30).
  SimResult r = RunSim({MakeNode("n", "A100-80GB", 8)}, kHoleTrace, "backfill");
  EXPECT_DOUBLE_EQ(r.queue_delay_mean_s, 30);
  EXPECT_NEAR(r.jct_mean_s, (100 + 190 + 50) / 3.0, 1e-9);
  EXPECT_DOUBLE_EQ(r.makespan_s, 200);
}

TEST(Simulator, UtilizationWhenQueuedIsNullWhenNothingEverWaited) {
  SimResult idle = RunSim({MakeNode("n", "A100-80GB", 8)}, "id,submit_time,duration_s,num_gpus\nA,0,100,2\n", "gantry");
  EXPECT_LT(idle.gpu_utilization_when_queued, 0);
  EXPECT_TRUE(SimResultToJson({idle, 0})["gpu_utilization_when_queued"].is_null());
  SimResult busy = RunSim({MakeNode("n", "A100-80GB", 8)}, kHoleTrace, "fifo");
  EXPECT_GT(busy.gpu_utilization_when_queued, 0);
}

// The utilization of what waiting jobs could use leaves out idle GPUs they could not:
// backfill's B (8 GPUs) waits 10-100 on a node where A holds 6 and C 1 (20-70). Those idle
// GPUs are no use to B, so nothing it could use sat idle. FIFO keeps C waiting 20-100 while
// one of the 2 idle GPUs would do for it: allocated 6x90 + 8x100 over that plus 80 GPU-s.
TEST(Simulator, UtilizationOfWhatWaitingJobsCouldUseLeavesOutGpusTheyCouldNot) {
  SimResult backfill = RunSim({MakeNode("n", "A100-80GB", 8)}, kHoleTrace, "backfill");
  EXPECT_NEAR(backfill.gpu_utilization_when_queued, (6 * 10 + 7 * 50 + 6 * 30) / (8.0 * 90), 1e-9);
  EXPECT_DOUBLE_EQ(backfill.gpu_utilization_when_queued_usable, 1);
  SimResult fifo = RunSim({MakeNode("n", "A100-80GB", 8)}, kHoleTrace, "fifo");
  EXPECT_NEAR(fifo.gpu_utilization_when_queued_usable, 1340.0 / 1420.0, 1e-9);
  // H100 work waits while a T4 node sits idle: the T4s count in the old measure only.
  SimResult typed =
      RunSim({MakeNode("t4", "T4", 4), MakeNode("h", "H100-80GB", 8)},
             "id,submit_time,duration_s,num_gpus,gpu_types\nX,0,100,8,H100-80GB\nY,10,100,8,H100-80GB\n", "gantry");
  EXPECT_NEAR(typed.gpu_utilization_when_queued, 8.0 / 12.0, 1e-9);
  EXPECT_DOUBLE_EQ(typed.gpu_utilization_when_queued_usable, 1);
  EXPECT_DOUBLE_EQ(SimResultToJson({typed, 0})["gpu_utilization_when_queued_usable"].get<double>(), 1);
  SimResult idle = RunSim({MakeNode("n", "A100-80GB", 8)}, "id,submit_time,duration_s,num_gpus\nA,0,100,2\n", "gantry");
  EXPECT_TRUE(SimResultToJson({idle, 0})["gpu_utilization_when_queued_usable"].is_null());
}

// No teams listed: team a fills the 8 GPUs with 10-hour jobs, team b arrives a minute later.
// With default_share equal each has an equal part (4 GPUs) once both have work, so after
// reclaim_after (30 min) b takes back what a holds above its 4, one eviction per GPU. With
// none (the default) only the starvation guard acts (45 min), for one job.
TEST(Simulator, WithoutQuotasTeamsGetEqualSharesBackByReclaim) {
  std::string csv = "id,submit_time,duration_s,num_gpus,team\n";
  for (int i = 0; i < 8; ++i) csv += fmt::format("a{},0,36000,1,a\n", i);
  for (int i = 0; i < 6; ++i) csv += fmt::format("b{},60,36000,1,b\n", i);
  auto trace = ParseTrace(csv, TraceFormat::kCsv, true);
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  auto b_starts_within = [&](DefaultShare share, TimeMs by_ms) {
    SimOptions options;
    options.quotas.default_share = share;
    int starts = 0;
    options.on_decision = [&](const SimDecision& d) {
      if (d.start && d.job_id[0] == 'b' && d.t_ms <= by_ms) ++starts;
    };
    auto r = Simulate({MakeNode("n", "A100-80GB", 8)}, *trace, Config(), options);
    EXPECT_TRUE(r.ok());
    return starts;
  };
  EXPECT_EQ(b_starts_within(DefaultShare::kEqual, 40 * kMinuteMs), 4);
  EXPECT_EQ(b_starts_within(DefaultShare::kEqual, 9 * kHourMs), 4);  // never past its part
  EXPECT_EQ(b_starts_within(DefaultShare::kNone, 40 * kMinuteMs), 0);
  EXPECT_EQ(b_starts_within(DefaultShare::kNone, 9 * kHourMs), 1);  // the guard's rescue
}

// Team r waits for the whole 3-GPU H200 node while team n's 2-GPU job holds part of it for
// 10 hours. When that job may not be evicted, r starves for the 10 hours, but none of it
// counts as rescuable. When it may, the guard takes it at the bound (45 min + 2 min grace),
// and all of r's wait counted as rescuable.
TEST(Simulator, StarvationARescueCouldEndIsMeasuredApart) {
  const std::vector<Node> nodes = {MakeNode("h", "H200-141GB", 3), MakeNode("a", "A100-80GB", 8)};
  auto trace = [](const char* preemptible) {
    return fmt::format(
        "id,submit_time,duration_s,num_gpus,gpu_types,team,preemptible\n"
        "n1,0,36000,2,H200-141GB,n,{}\nr1,60,600,3,H200-141GB,r,true\n",
        preemptible);
  };
  SimResult protected_run = RunSim(nodes, trace("false"), "gantry");
  EXPECT_NEAR(protected_run.per_team["r"].max_starvation_s, 36000 - 60, 1);
  EXPECT_DOUBLE_EQ(protected_run.per_team["r"].max_starvation_rescuable_s, 0);
  EXPECT_DOUBLE_EQ(protected_run.max_team_starvation_rescuable_s, 0);
  SimResult evictable = RunSim(nodes, trace("true"), "gantry");
  EXPECT_NEAR(evictable.per_team["r"].max_starvation_s, 2820, 30);
  EXPECT_DOUBLE_EQ(evictable.per_team["r"].max_starvation_rescuable_s, evictable.per_team["r"].max_starvation_s);
  EXPECT_EQ(evictable.preemptions, 1);
  EXPECT_TRUE(SimResultToJson({evictable, 0}).contains("max_team_starvation_rescuable_s"));
}

// Jobs without estimates: each "train" run takes 100 s; after three have finished, the
// next ones are planned with 100 s (and the prediction error is recorded), not their limit.
TEST(Simulator, JobsWithoutEstimatesArePlannedWithRunTimesOfJobsAlike) {
  std::string csv = "id,submit_time,duration_s,num_gpus,user\n";
  for (int i = 0; i < 6; ++i) csv += fmt::format("t{},{},100,8,ana\n", i, i * 200);
  auto trace = ParseTrace(csv, TraceFormat::kCsv, true);
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  SimOptions options;
  options.policy = "gantry";
  options.no_estimates = true;
  auto r = Simulate({MakeNode("n", "A100-80GB", 8)}, *trace, Config(), options);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->jobs_completed, 6);
  EXPECT_EQ(r->predicted_jobs, 3);  // the 4th, 5th and 6th
  EXPECT_DOUBLE_EQ(r->prediction_error_mean, 0);
}

TEST(Simulator, GangWaitsForWholeNodes) {
  // Two 8-GPU nodes; X holds one GPU until 100; G (16 GPUs) needs both nodes whole: it
  // starts at 100 (delay 99) and ends at 150.
  SimResult r = RunSim({MakeNode("a", "A100-80GB", 8), MakeNode("b", "A100-80GB", 8)},
                       "id,submit_time,duration_s,num_gpus\nX,0,100,1\nG,1,50,16\n", "backfill");
  EXPECT_DOUBLE_EQ(r.queue_delay_max_s, 99);
  EXPECT_DOUBLE_EQ(r.makespan_s, 150);
}

constexpr const char* kFiveQuarters =
    "submit_time,duration_s,num_gpus,gpu_fraction,sharing\n0,100,1,0.25,{0}\n0,100,1,0.25,{0}\n0,100,1,0.25,{0}\n"
    "0,100,1,0.25,{0}\n0,100,1,0.25,{0}\n";

void NoSlowDown(ConfigSet& c) {
  c.scheduler.sharing.time_slice_packing = true;
  c.scheduler.sharing.time_slice_speed = {{2, 0.5}};  // n jobs at 1/n each: the GPU's total stays 1
}

TEST(Simulator, FractionsPackOntoOneGpu) {
  // One GPU; five 0.25 jobs of 100 s at t=0, time-sliced with packing allowed and no
  // slow-down beyond sharing (4 jobs at 1/4 speed each): the four take 400 s together, the
  // fifth then runs alone for 100 s. Allocated: 4 x 0.25 x 400 + 0.25 x 100 = 425 GPU-s
  // over 500 s; useful: the work, 5 x 0.25 x 100 = 125 GPU-s.
  SimResult r =
      RunSim({MakeNode("t", "T4", 1)}, fmt::format(fmt::runtime(kFiveQuarters), "time-slice"), "gantry", NoSlowDown);
  EXPECT_EQ(r.jobs_completed, 5);
  EXPECT_DOUBLE_EQ(r.queue_delay_max_s, 400);
  EXPECT_DOUBLE_EQ(r.makespan_s, 500);
  EXPECT_NEAR(r.gpu_utilization, 425.0 / 500.0, 1e-9);
  EXPECT_NEAR(r.useful_gpu_utilization, 125.0 / 500.0, 1e-9);
  // Queued 0-400 with the GPU fully allocated: utilization when queued is 1.
  EXPECT_NEAR(r.gpu_utilization_when_queued, 1.0, 1e-9);
}

TEST(Simulator, TimeSlicedJobsRunAloneUnlessTheSiteAllowsPacking) {
  // The shipped setting: each time-sliced job holds the GPU alone, one after another.
  SimResult r = RunSim({MakeNode("t", "T4", 1)}, fmt::format(fmt::runtime(kFiveQuarters), "time-slice"), "gantry");
  EXPECT_DOUBLE_EQ(r.makespan_s, 500);
  EXPECT_NEAR(r.gpu_utilization, 1.0, 1e-9);          // each holds the whole GPU
  EXPECT_NEAR(r.useful_gpu_utilization, 0.25, 1e-9);  // but asked for, and used, a quarter
}

TEST(Simulator, PlainFractionsGetMpsAndItsMeasuredSpeed) {
  // auto on a node that can run MPS: four share the GPU at 0.578 of their speed alone (the
  // H100 figure for 4 clients), ending at ceil(100 / 0.578) = 173.011 s; the fifth then runs
  // alone to 273.011 s. Useful work is the jobs' own: 125 GPU-s.
  SimResult r = RunSim({MakeNode("t", "T4", 1)}, fmt::format(fmt::runtime(kFiveQuarters), ""), "gantry");
  const double four_end = 173.011;
  EXPECT_NEAR(r.makespan_s, four_end + 100, 1e-3);
  EXPECT_NEAR(r.gpu_utilization, (4 * 0.25 * four_end + 0.25 * 100) / (four_end + 100), 1e-5);
  EXPECT_NEAR(r.useful_gpu_utilization, 125.0 / (four_end + 100), 1e-5);
}

TEST(Simulator, ASharerThatEndsSpeedsUpTheOthers) {
  // Two MPS halves of 100 s and 50 s: both at 0.725 until the short one's 50 s of work are
  // done at 50 / 0.725 = 68.966 s; the long one has 50 s of work left, alone at full speed.
  SimResult r =
      RunSim({MakeNode("t", "T4", 1)},
             "submit_time,duration_s,num_gpus,gpu_fraction,sharing\n0,100,1,0.5,mps\n0,50,1,0.5,mps\n", "gantry");
  EXPECT_EQ(r.jobs_completed, 2);
  EXPECT_NEAR(r.makespan_s, 68.966 + 50, 1e-3);
}

TEST(Simulator, WithoutMpsAPlainFractionIsTimeSliced) {
  Node no_mps = MakeNode("t", "T4", 1);
  no_mps.mps = false;
  SimResult r = RunSim({no_mps}, fmt::format(fmt::runtime(kFiveQuarters), "auto"), "gantry");
  EXPECT_DOUBLE_EQ(r.makespan_s, 500);  // alone, one after another (no packing)
}

TEST(Simulator, CountsJobsThatCanNeverFitAsRejected) {
  SimResult r =
      RunSim({MakeNode("n", "A100-80GB", 8)},
             "id,submit_time,duration_s,num_gpus,gpu_types\nok,0,10,8,\nbig,0,10,16,\nt4,0,10,1,T4\n", "gantry");
  EXPECT_EQ(r.jobs_total, 3);
  EXPECT_EQ(r.jobs_completed, 1);
  EXPECT_EQ(r.jobs_rejected, 2);
  ASSERT_EQ(r.rejected_samples.size(), 2u);
  EXPECT_NE(r.rejected_samples[0].find("big: gpus:"), std::string::npos) << r.rejected_samples[0];
}

TEST(Simulator, MeasuresTeamStarvationAndShares) {
  // "hog" holds the only GPU 0-1000; "late" submits at 100 and waits until 1000: it starves
  // 900 s. GPU-hours: hog 1000 s, late 100 s (1000-1100).
  SimResult r = RunSim({MakeNode("n", "A100-80GB", 1)},
                       "submit_time,duration_s,num_gpus,team\n0,1000,1,hog\n100,100,1,late\n", "fifo");
  EXPECT_DOUBLE_EQ(r.per_team.at("late").max_starvation_s, 900);
  EXPECT_DOUBLE_EQ(r.per_team.at("hog").max_starvation_s, 0);
  EXPECT_DOUBLE_EQ(r.max_team_starvation_s, 900);
  EXPECT_NEAR(r.per_team.at("hog").gpu_hours, 1000.0 / 3600, 1e-12);
  EXPECT_NEAR(r.per_team.at("late").share_of_gpu_hours, 100.0 / 1100, 1e-12);
  EXPECT_DOUBLE_EQ(r.per_team.at("late").queue_delay_mean_s, 900);
  // Jain over run/JCT per team: hog 1, late 100/1000 = 0.1: (1.1)^2 / (2 x 1.01) = 0.599.
  EXPECT_NEAR(r.jain_fairness, 1.21 / 2.02, 1e-9);
}

// Before: the simulator ran a cycle only at arrivals and ends, so the guard acted at the
// next event after the bound (here the hog's end: "late" starved 99,900 s). The bound
// passing wakes it, as the live server's tick does: at 100 + 45 min the hog (no
// guarantee) is evicted, and after its 120 s grace "late" starts: 2,820 s of starvation.
TEST(Simulator, TheStarvationBoundPassingIsAnEventOfItsOwn) {
  SimResult r = RunSim({MakeNode("n", "A100-80GB", 1)},
                       "submit_time,duration_s,num_gpus,team\n0,100000,1,hog\n100,100,1,late\n", "gantry");
  EXPECT_DOUBLE_EQ(r.per_team.at("late").max_starvation_s, 45 * 60 + 120);
  EXPECT_EQ(r.preemptions, 1);
}

// Two GPUs. Team hog holds both: h1 (not preemptible) and h2, which ends at 2,790 s and
// hands its GPU to h3 (a higher class, arriving then). "late" has waited since 100 s; at
// the bound (2,800 s) the only job a rescue may take is h3, and h3 has run 10 s of its
// 10 min min_runtime. Before, nothing happened until the next arrival or end (h3's, 100,000
// s on): "late" starved 99,900 s. Now h3 reaching min_runtime (3,390 s) is a wake of its own,
// as the server's tick would notice it: h3 is evicted then, "late" starts after the 120 s
// grace: 3,410 s, the bound plus what min_runtime and the grace add (at most 57 min).
TEST(Simulator, AVictimReachingMinRuntimeIsAnEventWhileATeamStarvesPastTheBound) {
  SimResult r = RunSim({MakeNode("n", "A100-80GB", 2)},
                       "id,submit_time,duration_s,num_gpus,team,priority,preemptible\n"
                       "h1,0,100000,1,hog,medium,false\nh2,0,2790,1,hog,medium,true\n"
                       "h3,2790,100000,1,hog,high,true\nl1,100,100,1,late,medium,true\n",
                       "gantry");
  EXPECT_DOUBLE_EQ(r.per_team.at("late").max_starvation_s, 3390 + 120 - 100);
  EXPECT_DOUBLE_EQ(r.per_team.at("late").max_starvation_rescuable_s, 3390 + 120 - 100);
  EXPECT_EQ(r.preemptions, 1);
}

// The queue's guarantee term follows a team crossing its guarantee at once. Two GPUs;
// team "a" (guarantee 1) runs a0 until 400 s, team "b" (no guarantee) runs b1 until 450 s
// and queues b2, b3 and, at 350 s, b4 (the periodic reorder then keys a at its
// guarantee). At 400 s b2 takes a0's GPU; a1 comes at 410 s, a below its guarantee from
// then on. At 450 s a1 takes b1's GPU (queue delay 40 s). Keyed with the tiers of the
// last periodic reorder, the older b3 took it and a1 waited until 1,400 s.
TEST(Simulator, ATeamThatFallsBelowItsGuaranteeIsFirstForTheNextFreeGpu) {
  auto trace = ParseTrace(
      "id,submit_time,duration_s,num_gpus,team\na0,0,400,1,a\nb1,0,450,1,b\nb2,0,1000,1,b\nb3,5,1000,1,b\n"
      "b4,350,1000,1,b\na1,410,1000,1,a\n",
      TraceFormat::kCsv, true);
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  SimOptions options;
  options.policy = "gantry";
  auto quotas = QuotaConfig::FromYaml("teams:\n  a: {guaranteed: {any: 1}}\n", GpuCatalog::Builtin());
  ASSERT_TRUE(quotas.ok()) << quotas.status().ToString();
  options.quotas = *quotas;
  auto r = Simulate({MakeNode("n", "A100-80GB", 2)}, *trace, Config(), options);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_DOUBLE_EQ(r->per_team.at("a").queue_delay_mean_s, 20);  // a0 0 s, a1 40 s
  EXPECT_EQ(r->preemptions, 0);
}

TEST(Simulator, SameInputSameResult) {
  std::string csv = "submit_time,duration_s,num_gpus,team\n";
  for (int i = 0; i < 300; ++i) {
    csv += std::to_string(i * 7 % 500) + "," + std::to_string(50 + i * 13 % 400) + "," + std::to_string(1 << (i % 4)) +
           ",team" + std::to_string(i % 3) + "\n";
  }
  std::vector<Node> nodes = {MakeNode("a", "A100-80GB", 8), MakeNode("b", "A100-80GB", 8)};
  SimResult a = RunSim(nodes, csv, "gantry");
  SimResult b = RunSim(nodes, csv, "gantry");
  EXPECT_EQ(SimResultToJson({a, 0}).dump(), SimResultToJson({b, 0}).dump());
  EXPECT_EQ(a.jobs_completed, 300);
}

}  // namespace
}  // namespace gantry

namespace gantry {
namespace {

// Elastic pools: an A100 pool on demand and one on spot, up to 4 nodes of 8 each, nodes
// up 3 minutes after they are asked for, idle ones returned after 10 minutes.
SimResult RunElastic(const std::vector<Node>& nodes, const std::string& csv, double reclaims_per_hour = 0) {
  auto trace = ParseTrace(csv, TraceFormat::kCsv, true);
  EXPECT_TRUE(trace.ok()) << trace.status().ToString();
  SimOptions options;
  auto pools = ParseAutoscalerYaml(fmt::format(R"(
autoscaler: {{scale_down_after: 10m}}
pools:
  - {{name: a100, gpu_type: A100-80GB, gpus_per_node: 8, max_nodes: 4, startup: 3m}}
  - {{name: a100-spot, gpu_type: A100-80GB, gpus_per_node: 8, capacity: spot, max_nodes: 4, startup: 3m,
     spot_reclaims_per_node_hour: {}}}
)",
                                               reclaims_per_hour),
                                   GpuCatalog::Builtin());
  EXPECT_TRUE(pools.ok()) << pools.status().ToString();
  options.autoscaler = *pools;
  ConfigSet config = Config();
  auto r = Simulate(nodes, *trace, config, options);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return *r;
}

std::string Burst(int jobs, const std::string& extra_columns = "", const std::string& extra_values = "") {
  std::string csv = "id,submit_time,duration_s,num_gpus" + extra_columns + "\n";
  for (int i = 0; i < jobs; ++i) csv += fmt::format("j{},0,3600,1{}\n", i, extra_values);
  return csv;
}

TEST(ElasticPools, ABurstGrowsTheCheapestPoolAndItShrinksBackBilledForItsHours) {
  // 20 one-GPU preemptible jobs of an hour, no node to begin with; an 8-GPU job later.
  SimResult r = RunElastic({}, Burst(20) + "big,7200,1800,8\n");
  EXPECT_EQ(r.jobs_completed, 21);
  ASSERT_EQ(r.pools.size(), 2u);
  const PoolMetrics& on_demand = r.pools[0];
  const PoolMetrics& spot = r.pools[1];
  EXPECT_EQ(on_demand.nodes_requested, 0) << "preemptible work goes to spot";
  EXPECT_EQ(spot.peak_nodes, 3) << "20 GPUs: three nodes of 8";
  EXPECT_EQ(spot.nodes_requested, 4) << "three for the burst, one for the 8-GPU job later";
  EXPECT_EQ(spot.nodes_returned, 4) << "all idle nodes went back";
  // Each job waited for the autoscaler's first look (1 min) and a node's start-up (3 min).
  EXPECT_DOUBLE_EQ(r.queue_delay_p50_s, 240);
  // Billed from each request to the node's return: 3 x (1 h + 4 min + 10 min idle) and the
  // big job's node (3 min + 30 min + 10 min), within a tick either way.
  EXPECT_NEAR(spot.node_hours, 3 * (60 + 4 + 10) / 60.0 + (3 + 30 + 10) / 60.0, 0.1);
  EXPECT_NEAR(spot.cost, spot.gpu_hours * 1.40, 1e-6);
  EXPECT_NEAR(r.spot_saving, spot.gpu_hours * (3.43 - 1.40), 1e-6);
  EXPECT_NEAR(r.cost, spot.cost, 1e-6) << "no fixed nodes";
  EXPECT_GT(r.always_on_cost, 3 * r.cost) << "three nodes on demand all along cost far more";
}

TEST(ElasticPools, NonPreemptibleWorkGoesOnDemandAndFixedNodesAreUsedFirst) {
  SimResult r = RunElastic({testing::MakeNode("fixed", "A100-80GB", 8)}, Burst(12, ",preemptible", ",false"));
  EXPECT_EQ(r.jobs_completed, 12);
  EXPECT_EQ(r.pools[0].nodes_requested, 1) << "8 on the fixed node, 4 more on one on-demand node";
  EXPECT_EQ(r.pools[1].nodes_requested, 0);
  EXPECT_GT(r.cost, r.pools[0].cost) << "the fixed node is billed too, at on-demand prices";
}

TEST(ElasticPools, ReclaimedSpotNodesEvictTheirJobsWhichResumeFromTheirCheckpoints) {
  const std::string csv = Burst(16, ",checkpoint_interval_s", ",600");
  SimResult r = RunElastic({}, csv, 2.0);  // two reclaims per node-hour
  EXPECT_EQ(r.jobs_completed, 16) << "every job finishes despite the reclaims";
  EXPECT_GT(r.pools[1].reclaims, 0);
  EXPECT_GE(r.preemptions, r.pools[1].reclaims) << "each reclaim evicted the jobs on its node";
  EXPECT_GT(r.pools[1].nodes_requested, 2) << "lost nodes are replaced";
  SimResult again = RunElastic({}, csv, 2.0);
  EXPECT_EQ(again.pools[1].reclaims, r.pools[1].reclaims) << "the same seed, the same reclaims";
  EXPECT_DOUBLE_EQ(again.jct_mean_s, r.jct_mean_s);
}

}  // namespace
}  // namespace gantry

namespace gantry {
namespace {

// A recorded reclaim trace (spot_reclaim_trace, beside the cluster file) instead of a rate:
// each line reclaims the spot pool's longest-up node then.
TEST(ElasticPools, AReclaimTraceReclaimsTheLongestUpSpotNodeAtEachRecordedTime) {
  const std::string dir = ::testing::TempDir() + "gantry-reclaim-trace";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/reclaims.csv") << "offset_s\n1800\n# a comment\n2400\n999999999\n";
  std::ofstream(dir + "/cluster.yaml")
      << "autoscaler: {scale_down_after: 10m}\n"
         "pools:\n"
         "  - {name: a100-spot, gpu_type: A100-80GB, gpus_per_node: 8, capacity: spot, max_nodes: 4, startup: 3m,\n"
         "     spot_reclaim_trace: reclaims.csv}\n";
  auto pools = LoadClusterPools(dir + "/cluster.yaml", GpuCatalog::Builtin());
  ASSERT_TRUE(pools.ok()) << pools.status().ToString();
  ASSERT_EQ(pools->pools[0].reclaim_times, (std::vector<DurationMs>{1800000, 2400000, 999999999000}));
  auto trace =
      ParseTrace(Burst(16, ",checkpoint_interval_s", ",600") + "late,3000,60,1,600\n", TraceFormat::kCsv, true);
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  SimOptions options;
  options.autoscaler = *pools;
  auto r = Simulate({}, *trace, Config(), options);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->jobs_completed, 17);
  EXPECT_EQ(r->pools[0].reclaims, 2) << "the two recorded before the last submission; the third is past it";
  EXPECT_GE(r->pools[0].nodes_requested, 4) << "two for the burst, and the reclaimed ones replaced";

  std::ofstream(dir + "/reclaims.csv") << "1800\nsoon\n";
  auto bad = LoadClusterPools(dir + "/cluster.yaml", GpuCatalog::Builtin());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().field(), "pools[0].spot_reclaim_trace");
  EXPECT_NE(bad.status().message().find("line 2"), std::string::npos) << bad.status().ToString();
}

}  // namespace
}  // namespace gantry
