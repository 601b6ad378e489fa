// One trace through both paths: the simulator, and the live server's state machine
// (ControllerState) driven by a clock that jumps from event to event, with nodes that run
// each job for its trace duration and exit when told to stop. The promise that a policy
// measured in the simulator is the policy the server runs: every start (instant, job,
// GPUs) and every eviction (instant, job) is the same.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "core/spec_yaml.h"
#include "sim/simulator.h"
#include "state/state_under_test.h"

namespace gantry::testing {
namespace {

struct Row {
  DurationMs submit_ms = 0;  // after the first
  const Actor* who = nullptr;
  int gpus = 1;
  DurationMs duration_ms = 0;
  std::string priority;
};

// A busy afternoon of two teams on 24 GPUs: bursts of arrivals, 1- to 8-GPU jobs of 5 min
// to 2 h in three classes, enough to queue, borrow, reclaim and preempt.
std::vector<Row> MakeRows(uint64_t seed, int count) {
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap_s(1.0 / 120);
  std::uniform_int_distribution<int> minutes(5, 120), pick(0, 99);
  const int sizes[] = {1, 1, 1, 2, 2, 4, 8};
  const char* classes[] = {"high", "medium", "medium", "low"};
  std::vector<Row> rows;
  DurationMs t = 0;
  for (int i = 0; i < count; ++i) {
    t += static_cast<DurationMs>(gap_s(rng)) * kSecondMs;
    Row r;
    r.submit_ms = t;
    r.who = pick(rng) < 55 ? &kAlice : &kBob;
    r.gpus = sizes[pick(rng) % 7];
    r.duration_ms = minutes(rng) * kMinuteMs + pick(rng) * kSecondMs;
    r.priority = classes[pick(rng) % 4];
    rows.push_back(r);
  }
  return rows;
}

JobSpec SpecOf(const Row& r, size_t i) {
  std::string yaml = fmt::format(
      "name: job-{0}\ngpus: {1}\ncommand: python train.py --job {0}\npriority: {2}\n"
      "estimated_duration: {3}s\ntime_limit: {4}s\n",
      i, r.gpus, r.priority, r.duration_ms / kSecondMs, (2 * r.duration_ms + kHourMs) / kSecondMs);
  auto spec = ParseJobSpecText(yaml);
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  return *spec;
}

// A start: "t=... start 12 on n1:0,n1:1"; an eviction: "t=... evict 7".
using Decisions = std::vector<std::string>;

std::string Start(TimeMs t, const std::string& job, const std::vector<std::pair<std::string, int>>& gpus) {
  std::string where;
  for (const auto& [node, gpu] : gpus) where += fmt::format("{}{}:{}", where.empty() ? "" : ",", node, gpu);
  return fmt::format("t={} start {} on {}", t, job, where);
}
std::string Evict(TimeMs t, const std::string& job) { return fmt::format("t={} evict {}", t, job); }

const char* kQuotas = "teams:\n  vision: {guaranteed: {any: 12}}\n  nlp: {guaranteed: {any: 12}}\n";

std::vector<Node> Cluster() {
  return {MakeNode("n1", "A100-80GB", 8), MakeNode("n2", "A100-80GB", 8), MakeNode("n3", "A100-80GB", 8)};
}

Decisions Simulated(const std::vector<Row>& rows, TimeMs t0, const ConfigSet& config) {
  Trace trace;
  for (size_t i = 0; i < rows.size(); ++i) {
    TraceJob job{SpecOf(rows[i], i), t0 + rows[i].submit_ms, rows[i].duration_ms, 0};
    job.spec.id = std::to_string(i + 1);  // the server's ids: numbered in submission order
    job.spec.user = rows[i].who->user;
    job.spec.team = rows[i].who->team;
    trace.jobs.push_back(std::move(job));
  }
  Decisions out;
  SimOptions options;
  options.quotas = config.quotas;
  options.restart_overhead_ms = 0;  // the server's node restarts a job at once
  options.default_checkpoint_interval_ms = 0;
  options.on_decision = [&](const SimDecision& d) {
    out.push_back(d.start ? Start(d.t_ms - t0, d.job_id, d.gpus) : Evict(d.t_ms - t0, d.job_id));
  };
  auto result = Simulate(Cluster(), trace, config, options);
  EXPECT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->jobs_completed, static_cast<int>(rows.size()));
  return out;
}

// The server's state machine on the same trace: the test is its nodes and its clock.
Decisions Served(const std::vector<Row>& rows, TimeMs t0, const ConfigSet& config) {
  StateUnderTest t({}, [&](ControllerOptions& o) { o.config = config; });
  EXPECT_TRUE(t.state->AttachNodes(Cluster(), &t.link, {}).ok());
  t.state->TakeOutput();
  // The runs' ends (done, or stopped when told) by time, then job number, as the
  // simulator's events: the order in which jobs leave is the order of the running list.
  struct Exit {
    TimeMs at = 0;
    int job = 0;
    std::string node;
    int run = 1;
    auto operator<=>(const Exit&) const = default;
  };
  std::set<Exit> exits;
  std::map<std::string, DurationMs> duration;
  Decisions out;
  size_t next = 0;
  while (true) {
    TimeMs at = next < rows.size() ? t0 + rows[next].submit_ms : kNever;
    if (!exits.empty()) at = std::min(at, exits.begin()->at);
    at = std::min(at, t.state->NextClockThreshold());
    if (at == kNever) break;
    t.At(at);
    for (auto it = exits.begin(); it != exits.end() && it->at == at; it = exits.erase(it)) {
      RunReport exited;
      exited.job_id = std::to_string(it->job);
      exited.run = it->run;
      exited.node_id = it->node;
      exited.exited = true;
      exited.exit_code = 0;  // a preempted run is requeued whatever its exit status
      exited.ended_ms = at;
      t.state->RunExited(exited);
    }
    for (; next < rows.size() && t0 + rows[next].submit_ms == at; ++next) {
      auto submitted = t.state->Submit(*rows[next].who, SpecOf(rows[next], next), "", "");
      EXPECT_TRUE(submitted.ok()) << submitted.status().ToString();
      duration[submitted->job.value("id", "")] = rows[next].duration_ms;
    }
    t.state->Cycle();
    ControllerState::Output output = t.state->TakeOutput();
    Decisions evictions;
    std::vector<std::string> started;  // in order; a job on several nodes has an order per node
    std::map<std::string, std::vector<std::pair<std::string, int>>> gpus;
    for (const Effects::Order& order : output.effects.orders) {
      if (const auto* start = std::get_if<StartOrder>(&order.order)) {
        if (!gpus.count(start->job_id)) started.push_back(start->job_id);
        for (const AssignedGpu& g : start->gpus) gpus[start->job_id].emplace_back(start->node_id, g.index);
        RunReport started;
        started.job_id = start->job_id;
        started.run = start->run;
        started.node_id = start->node_id;
        t.state->RunStarted(started);
        exits.insert({at + duration.at(start->job_id), std::stoi(start->job_id), start->node_id, start->run});
      } else {
        const auto& stop = std::get<StopOrder>(order.order);
        std::string evicted = Evict(at - t0, stop.job_id);  // once, whatever its nodes
        if (std::find(evictions.begin(), evictions.end(), evicted) == evictions.end()) evictions.push_back(evicted);
        std::erase_if(exits, [&](const Exit& e) {
          return e.job == std::stoi(stop.job_id) && e.run == stop.run && e.node == stop.node_id;
        });
        exits.insert({at + stop.grace_ms, std::stoi(stop.job_id), stop.node_id, stop.run});
      }
    }
    for (const std::string& job : started) out.push_back(Start(at - t0, job, gpus[job]));
    out.insert(out.end(), evictions.begin(), evictions.end());  // the simulator's order: starts, then evictions
  }
  return out;
}

TEST(SimServerParity, OneTraceGivesTheSameStartsAndEvictionsOnBothPaths) {
  ConfigSet config{GpuCatalog::Builtin(), SchedulerConfig::Builtin(), QuotaConfig{}, ""};
  auto quotas = QuotaConfig::FromYaml(kQuotas, config.catalog);
  ASSERT_TRUE(quotas.ok()) << quotas.status().ToString();
  config.quotas = *quotas;
  const TimeMs t0 = 1'800'000'000'000;
  for (uint64_t seed : {1, 2, 3}) {
    std::vector<Row> rows = MakeRows(seed, 160);
    Decisions simulated = Simulated(rows, t0, config);
    Decisions served = Served(rows, t0, config);
    size_t evictions = std::count_if(simulated.begin(), simulated.end(),
                                     [](const std::string& d) { return d.find(" evict ") != std::string::npos; });
    // The trace must exercise what the two copies share: a queue, and reclaim's evictions.
    EXPECT_GT(evictions, 0u) << "seed " << seed;
    for (size_t i = 0; i < std::max(simulated.size(), served.size()); ++i) {
      std::string sim = i < simulated.size() ? simulated[i] : "(none)";
      std::string server = i < served.size() ? served[i] : "(none)";
      if (sim != server) {
        for (size_t k = i >= 5 ? i - 5 : 0; k < std::min(i + 5, std::min(simulated.size(), served.size())); ++k) {
          std::cout << k << ": " << simulated[k] << "    |    " << served[k] << "\n";
        }
      }
      ASSERT_EQ(sim, server) << "seed " << seed << ", decision " << i << " of " << simulated.size();
    }
    std::cout << "seed " << seed << ": " << simulated.size() << " decisions, " << evictions
              << " evictions, the same on both paths\n";
  }
}

}  // namespace
}  // namespace gantry::testing
