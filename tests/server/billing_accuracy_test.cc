// The accuracy check over a simulated month: a month of jobs (whole GPUs and fractions,
// three priority classes with preemptions, retries, two server crashes with exits while it
// was down, an A100 price change on the 16th) driven through the real controller and
// store with a hand-moved clock. The monthly report must equal, to the millisecond and
// the cent, an independent recomputation from the job event history alone.
#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include "billing/report.h"
#include "controller_harness.h"

namespace gantry::testing {
namespace {

const TimeMs kPriceChange = Utc("2026-11-16T00:00:00Z");

// The built-in catalog, with A100-80GB at 3.00 from 16 November on.
void WithPriceChange(ControllerOptions& o) {
  std::ifstream in(std::string(GANTRY_SOURCE_DIR "/config/gpu_types.yaml"));
  std::string yaml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string spot = "    price_spot: 1.40\n";
  size_t at = yaml.find(spot, yaml.find("  A100-80GB:\n"));
  ASSERT_NE(at, std::string::npos);
  yaml.insert(at + spot.size(), "    price_changes:\n      - {effective: 2026-11-16, on_demand: 3.00, spot: 1.20}\n");
  auto catalog = GpuCatalog::FromYaml(yaml);
  ASSERT_TRUE(catalog.ok()) << catalog.status().ToString();
  ASSERT_EQ(catalog->Find("A100-80GB")->price_changes.size(), 1u);
  o.config.catalog = *catalog;
}

// The price of one GPU-hour, written out by hand (not through PriceBook).
double HandPrice(const std::string& type, TimeMs t) {
  if (type == "A100-80GB") return t < kPriceChange ? 3.43 : 3.00;
  if (type == "T4") return 0.53;
  if (type == "H100-80GB") return 6.88;
  ADD_FAILURE() << "unexpected type " << type;
  return 0;
}

struct AgentRun {
  std::string job_id;
  int run = 0;
  std::string node;
  TimeMs ends = 0;
};

TEST(BillingAccuracy, ASimulatedMonthEqualsTheEventHistoryToTheMillisecondAndCent) {
  const TimeMs start = Utc("2026-10-31T18:00:00Z"), stop = Utc("2026-12-01T06:00:00Z");
  const std::vector<Node> nodes = {MakeNode("a1", "A100-80GB", 4), MakeNode("a2", "A100-80GB", 4),
                                   MakeNode("t1", "T4", 4), MakeNode("h1", "H100-80GB", 8)};
  std::mt19937 rng(20261126);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  auto h = std::make_unique<Harness>("", 3600 * 1000, WithPriceChange, start);
  const std::string db = h->db;
  h->Attach(nodes);
  std::map<std::string, AgentRun> running;  // job id -> its current run, as the "agent" sees it
  size_t starts_seen = 0, stops_seen = 0;
  int submitted = 0, crashes = 0, preempted = 0;
  const Actor teams[] = {kAlice, kBob, {"carol", "speech", Role::kUser}};
  const char* classes[] = {"low", "medium", "critical"};

  auto collect = [&] {
    h->controller->Sync();
    std::lock_guard<std::mutex> lock(h->link.mu);
    for (; starts_seen < h->link.starts.size(); ++starts_seen) {
      const StartOrder& o = h->link.starts[starts_seen];
      running[o.job_id] = {o.job_id, o.run, o.node_id, h->now + uniform(10, 2000) * kMinuteMs};
    }
    for (; stops_seen < h->link.stops.size(); ++stops_seen) {
      const StopOrder& o = h->link.stops[stops_seen];
      auto it = running.find(o.job_id);
      if (it == running.end() || it->second.run != o.run) continue;
      it->second.ends = std::min(it->second.ends, h->now + uniform(0, 3) * kMinuteMs);  // checkpoint, then exit
      preempted++;
    }
  };
  while (h->now < stop) {
    h->now += uniform(1, 90) * kMinuteMs;
    for (int k = uniform(0, 2); k > 0; --k) {
      const Actor& who = teams[uniform(0, 2)];
      int shape = uniform(0, 9);
      std::string request = shape < 2   ? "gpu_fraction: 0.25, sharing: time-slice"
                            : shape < 3 ? "gpu_fraction: 0.5, sharing: time-slice"
                                        : "gpus: " + std::to_string(uniform(1, 4));
      std::string type = shape < 5 ? "A100-80GB" : shape < 8 ? "T4" : "H100-80GB";
      ApiAnswer r = h->Submit(fmt::format("{{{}, gpu_types: [{}], priority: {}, time_limit: 7d, "
                                          "retries_on_failure: 1, command: 'x'}}",
                                          request, type, classes[uniform(0, 2)]),
                              who);
      ASSERT_EQ(r.status, 201) << r.body.dump();
      submitted++;
    }
    collect();
    std::vector<AgentRun> ending;
    for (const auto& [id, run] : running) {
      if (run.ends <= h->now) ending.push_back(run);
    }
    for (const AgentRun& r : ending) {
      running.erase(r.job_id);
      h->controller->RunExited(ExitReport(r.job_id, r.run, r.node, uniform(0, 9) == 0 ? 1 : 0, "", r.ends));
    }
    collect();
    if (uniform(0, 150) == 0 && crashes < 2) {
      // The server dies; two hours later it is back. Runs that ended meanwhile are reported
      // with their real end, the rest are adopted.
      h->controller.reset();
      crashes++;
      TimeMs back = h->now + 2 * kHourMs;
      std::vector<RunReport> reports;
      for (auto it = running.begin(); it != running.end();) {
        bool ended = it->second.ends <= back;
        RunReport rep{it->first, it->second.run, it->second.node, ended, 0, "", ended ? it->second.ends : -1};
        reports.push_back(rep);
        it = ended ? running.erase(it) : std::next(it);
      }
      h = std::make_unique<Harness>(db, 3600 * 1000, WithPriceChange, back);
      starts_seen = stops_seen = 0;
      ASSERT_TRUE(h->controller->AttachNodes(nodes, &h->link, reports).ok());
      collect();
    }
  }
  EXPECT_EQ(crashes, 2);
  EXPECT_GT(preempted, 0);
  EXPECT_GT(submitted, 500);

  // The independent recomputation: "started" (time, placement with type and share) to
  // "released" (time) of each run, cut at the month, priced by hand.
  const TimeMs from = Utc("2026-11-01T00:00:00Z"), to = Utc("2026-12-01T00:00:00Z");
  double gpu_ms = 0, cost = 0;
  std::map<std::string, double> team_ms;
  auto add = [&](const nlohmann::json& placement, TimeMs begin, TimeMs end, const std::string& team) {
    TimeMs lo = std::max(begin, from), hi = std::min(end, to);
    for (const auto& node : placement) {
      for (const auto& g : node["gpus"]) {
        double share = g["share"];
        for (TimeMs t = lo; t < hi;) {  // split at the price change
          TimeMs next = t < kPriceChange && hi > kPriceChange ? kPriceChange : hi;
          gpu_ms += share * static_cast<double>(next - t);
          team_ms[team] += share * static_cast<double>(next - t);
          cost += share * static_cast<double>(next - t) / kHourMs * HandPrice(node["gpu_type"], t);
          t = next;
        }
      }
    }
  };
  for (int id = 1; id <= submitted; ++id) {
    nlohmann::json events = Api(h->controller->Events(kAdmin, std::to_string(id))).body["events"];
    std::string team = Api(h->controller->GetJob(kAdmin, std::to_string(id))).body["team"];
    std::map<int, std::pair<TimeMs, nlohmann::json>> open;  // run -> start, placement
    for (const auto& e : events) {
      int run = e["detail"].value("run", 0);
      if (e["kind"] == "started") open[run] = {e["at_ms"], e["detail"]["placement"]};
      if (e["kind"] != "released") continue;
      auto it = open.find(run);
      ASSERT_NE(it, open.end());
      add(it->second.second, it->second.first, e["at_ms"], team);
      open.erase(it);
    }
    for (const auto& [run, started] : open) add(started.second, started.first, to, team);  // still running
  }
  ApiAnswer report = Api(h->controller->MonthlyReport(kAdmin, "2026-11"));
  ASSERT_EQ(report.status, 200);
  const nlohmann::json& r = report.body;
  EXPECT_GT(gpu_ms, 1000.0 * kHourMs);
  EXPECT_DOUBLE_EQ(r["totals"]["gpu_seconds"], RoundTo(gpu_ms / 1000, 3));
  EXPECT_NEAR(r["totals"]["cost"].get<double>(), cost, 1e-5);
  // The same to the cent. Both sides first to the micro-dollar: a total on a half cent
  // (54038.875, summed in another order as 54038.8749999) must not round two ways.
  EXPECT_EQ(FormatAmount(RoundTo(r["totals"]["cost"].get<double>(), 6)), FormatAmount(RoundTo(cost, 6)));
  EXPECT_EQ(r["reconciliation"]["match"], true);
  for (const auto& t : r["teams"]) {
    EXPECT_DOUBLE_EQ(t["gpu_seconds"], RoundTo(team_ms[t["team"]] / 1000, 3)) << t.dump();
  }
  std::printf(
      "simulated month: %d jobs, %d preemptions, %d crashes; %.3f GPU-hours, %.2f USD; report %s GPU-s, %s USD\n",
      submitted, preempted, crashes, gpu_ms / kHourMs, cost, r["totals"]["gpu_seconds"].dump().c_str(),
      r["totals"]["cost"].dump().c_str());
}

}  // namespace
}  // namespace gantry::testing
