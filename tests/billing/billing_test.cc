// Accounting arithmetic, worked by hand: calendars and time zones, dated prices and pool
// overrides, fractional, MIG, preempted and month-crossing intervals, the monthly report.
#include <gtest/gtest.h>

#include "billing/report.h"
#include "core/quota_config.h"
#include "test_util.h"

namespace gantry::testing {
namespace {

Allocation Interval(const std::string& job, const std::string& team, const std::string& type, double share,
                    const std::string& from, const std::string& to, int run = 1) {
  Allocation a;
  a.job_id = job;
  a.run = run;
  a.team = team;
  a.project = "p-" + team;
  a.user = "u-" + team;
  a.gpu_type = type;
  a.share = share;
  a.start_ms = Utc(from);
  a.end_ms = to.empty() ? -1 : Utc(to);
  return a;
}

PriceBook Builtin() {
  auto book = PriceBook::Build(Catalog(), PricingConfig{}, Calendar());
  EXPECT_TRUE(book.ok());
  return *book;
}

TEST(Calendar, MonthBoundsInUtcAndInABerlinWinter) {
  auto utc = Calendar().MonthBounds("2026-11");
  ASSERT_TRUE(utc.ok());
  EXPECT_EQ(utc->first, Utc("2026-11-01T00:00:00Z"));
  EXPECT_EQ(utc->second, Utc("2026-12-01T00:00:00Z"));
  auto berlin = Calendar::ForZone("Europe/Berlin");
  ASSERT_TRUE(berlin.ok());
  auto b = berlin->MonthBounds("2026-11");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->first, Utc("2026-10-31T23:00:00Z"));  // CET is UTC+1 in November
  EXPECT_EQ(b->second, Utc("2026-11-30T23:00:00Z"));
  auto october = berlin->MonthBounds("2026-10");  // CEST (UTC+2) until 25 October
  EXPECT_EQ(october->first, Utc("2026-09-30T22:00:00Z"));
  EXPECT_EQ(berlin->MonthOf(Utc("2026-11-30T23:30:00Z")), "2026-12");
  EXPECT_EQ(berlin->DayOf(Utc("2026-11-30T22:59:59Z")), "2026-11-30");
  EXPECT_EQ(berlin->NextDay(Utc("2026-11-15T12:00:00Z")), Utc("2026-11-15T23:00:00Z"));
}

TEST(Calendar, BadInputNamesTheField) {
  auto zone = Calendar::ForZone("Mars/Olympus", "pricing.timezone");
  ASSERT_FALSE(zone.ok());
  EXPECT_EQ(zone.status().field(), "pricing.timezone");
  EXPECT_EQ(Calendar().MonthBounds("2026-13").status().field(), "month");
  EXPECT_EQ(Calendar().MonthBounds("26-11").status().field(), "month");
  EXPECT_FALSE(Calendar().ParseDate("2026-02-30", "from").ok());
  EXPECT_EQ(*Calendar().ParseDate("2026-02-28", "from"), Utc("2026-02-28T00:00:00Z"));
}

TEST(PriceBook, WholeFractionalAndMigSharesAtTheListPrice) {
  PriceBook book = Builtin();
  // 2 A100-80GB for 90 minutes at 3.43/h: 3 GPU-h, 10.29.
  Accrual whole = Accrue(Interval("1", "t", "A100-80GB", 2, "2026-11-10T00:00:00Z", "2026-11-10T01:30:00Z"),
                         kBeginningOfTime, kNever, 0, book);
  EXPECT_DOUBLE_EQ(whole.gpu_ms, 3.0 * kHourMs);
  EXPECT_NEAR(whole.cost, 10.29, 1e-9);
  // A quarter of an A100-80GB for 4 hours: 1 GPU-h, 3.43.
  Accrual quarter = Accrue(Interval("2", "t", "A100-80GB", 0.25, "2026-11-10T00:00:00Z", "2026-11-10T04:00:00Z"),
                           kBeginningOfTime, kNever, 0, book);
  EXPECT_DOUBLE_EQ(quarter.gpu_ms, 1.0 * kHourMs);
  EXPECT_NEAR(quarter.cost, 3.43, 1e-9);
  // A MIG 3g.40gb of an H100 (3 of 7 compute slices) for 7 hours: 3 GPU-h at 6.88 = 20.64.
  Accrual mig = Accrue(Interval("3", "t", "H100-80GB", 3.0 / 7, "2026-11-10T00:00:00Z", "2026-11-10T07:00:00Z"),
                       kBeginningOfTime, kNever, 0, book);
  EXPECT_NEAR(mig.gpu_ms, 3.0 * kHourMs, 1e-6);
  EXPECT_NEAR(mig.cost, 20.64, 1e-9);
}

TEST(PriceBook, APriceChangeMidMonthSplitsTheInterval) {
  std::string yaml = R"(
gpu_types:
  A100-80GB:
    memory_gb: 80
    relative_speed: 2.4
    price_on_demand: 3.43
    price_spot: 1.40
    price_changes:
      - {effective: 2026-11-16, on_demand: 3.00, spot: 1.20}
)";
  auto catalog = GpuCatalog::FromYaml(yaml);
  ASSERT_TRUE(catalog.ok()) << catalog.status().ToString();
  auto book = PriceBook::Build(*catalog, PricingConfig{}, Calendar());
  ASSERT_TRUE(book.ok());
  // One GPU from noon on the 15th to noon on the 16th: 12 h x 3.43 + 12 h x 3.00 = 77.16.
  Allocation a = Interval("1", "t", "A100-80GB", 1, "2026-11-15T12:00:00Z", "2026-11-16T12:00:00Z");
  EXPECT_NEAR(Accrue(a, kBeginningOfTime, kNever, 0, *book).cost, 41.16 + 36.00, 1e-9);
  // In Berlin, "2026-11-16" starts at 23:00 UTC on the 15th: 11 h x 3.43 + 13 h x 3.00 = 76.73.
  auto berlin = PriceBook::Build(*catalog, PricingConfig{}, *Calendar::ForZone("Europe/Berlin"));
  EXPECT_NEAR(Accrue(a, kBeginningOfTime, kNever, 0, *berlin).cost, 37.73 + 39.00, 1e-9);
}

TEST(PriceBook, AnEditedPastPriceAppliesOnlyFromNow) {
  PriceBook billed;
  billed.Set("A100-80GB", "", {{kBeginningOfTime, 3.43}});
  PriceBook edited;
  edited.Set("A100-80GB", "", {{kBeginningOfTime, 4.00}});
  edited.Set("T4", "", {{kBeginningOfTime, 0.53}});
  TimeMs now = Utc("2026-11-20T00:00:00Z");
  std::vector<std::string> retroactive;
  PriceBook merged = PriceBook::Merge(billed, edited, now, &retroactive);
  EXPECT_EQ(retroactive, std::vector<std::string>{"A100-80GB"});
  EXPECT_DOUBLE_EQ(merged.PerHour("A100-80GB", "", now - 1), 3.43);
  EXPECT_DOUBLE_EQ(merged.PerHour("A100-80GB", "", now), 4.00);
  EXPECT_DOUBLE_EQ(merged.PerHour("T4", "", 0), 0.53);  // a new type: nothing billed before
  // A day across the change: 24 h x 3.43 before it, 24 h x 4.00 after.
  EXPECT_NEAR(merged.Cost("A100-80GB", "", 1, now - 24 * kHourMs, now + 24 * kHourMs), 82.32 + 96.0, 1e-9);
  // Merging the same configuration again (the next restart) changes nothing.
  EXPECT_EQ(PriceBook::Merge(merged, edited, now + kHourMs, nullptr), merged);
  auto round_trip = PriceBook::FromJson(merged.ToJson());
  ASSERT_TRUE(round_trip.ok());
  EXPECT_EQ(*round_trip, merged);
}

TEST(PriceBook, NodePoolsBillAtSpotOrAFixedPrice) {
  std::string yaml = std::string(R"(
pricing:
  currency: EUR
  timezone: Europe/Berlin
  pools:
    preemptible: {rate: spot}
    reserved: {prices: {H100-80GB: 2.50}}
)");
  auto pricing = PricingConfig::FromYaml(yaml, Catalog());
  ASSERT_TRUE(pricing.ok()) << pricing.status().ToString();
  EXPECT_EQ(pricing->currency, "EUR");
  auto book = PriceBook::Build(Catalog(), *pricing, *Calendar::ForZone(pricing->timezone));
  ASSERT_TRUE(book.ok());
  EXPECT_DOUBLE_EQ(book->PerHour("H100-80GB", "", 0), 6.88);
  EXPECT_DOUBLE_EQ(book->PerHour("H100-80GB", "preemptible", 0), 3.40);
  EXPECT_DOUBLE_EQ(book->PerHour("H100-80GB", "reserved", 0), 2.50);
  EXPECT_DOUBLE_EQ(book->PerHour("A100-80GB", "reserved", 0), 3.43);  // no override for that type
  EXPECT_DOUBLE_EQ(book->PerHour("H100-80GB", "unknown-pool", 0), 6.88);

  auto bad = PricingConfig::FromYaml("pricing: {pools: {p: {prices: {Z9000: 1}}}}", Catalog());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().field(), "pricing.pools.p.prices.Z9000");
  auto typo = PricingConfig::FromYaml("pricing: {currancy: EUR}", Catalog());
  EXPECT_EQ(typo.status().field(), "pricing.currancy");
}

TEST(MonthlyReport, SplitsAtTheMonthBoundaryAndAddsUp) {
  PriceBook book = Builtin();
  std::vector<Allocation> ledger = {
      // 2 GPUs across the October/November boundary: 8 GPU-h in each month.
      Interval("1", "vision", "A100-80GB", 1, "2026-10-31T20:00:00Z", "2026-11-01T04:00:00Z"),
      Interval("1", "vision", "A100-80GB", 1, "2026-10-31T20:00:00Z", "2026-11-01T04:00:00Z"),
      // A preempted job: two runs of 1 and 2 hours on a T4.
      Interval("2", "nlp", "T4", 1, "2026-11-03T10:00:00Z", "2026-11-03T11:00:00Z", 1),
      Interval("2", "nlp", "T4", 1, "2026-11-04T10:00:00Z", "2026-11-04T12:00:00Z", 2),
      // Still running at "now": counted up to now.
      Interval("3", "nlp", "H100-80GB", 0.5, "2026-11-05T00:00:00Z", ""),
  };
  ledger[4].samples = 10;
  ledger[4].util_sum = 10 * 20.0;  // 20% busy
  ledger[4].idle = true;
  TimeMs now = Utc("2026-11-05T10:00:00Z");
  auto nov = MonthlyReport(ledger, Calendar(), book, now, {"2026-11", "USD", 10});
  ASSERT_TRUE(nov.ok());
  const nlohmann::json& r = *nov;
  // vision: 8 GPU-h x 3.43 = 27.44. nlp: 3 GPU-h x 0.53 = 1.59, plus 0.5 x 10 h x 6.88 = 34.40.
  EXPECT_DOUBLE_EQ(r["totals"]["gpu_hours"], 8 + 3 + 5.0);
  EXPECT_DOUBLE_EQ(r["totals"]["cost"], 27.44 + 1.59 + 34.40);
  EXPECT_EQ(r["totals"]["jobs"], 3);
  EXPECT_EQ(r["complete"], false);
  ASSERT_EQ(r["teams"].size(), 2u);
  EXPECT_EQ(r["teams"][0]["team"], "nlp");  // most expensive first
  EXPECT_DOUBLE_EQ(r["teams"][0]["cost"], 35.99);
  EXPECT_DOUBLE_EQ(r["teams"][1]["gpu_hours"], 8.0);
  // Utilization is known only for job 3: 20%, so 80% of its 34.40 was idle.
  EXPECT_DOUBLE_EQ(r["totals"]["avg_utilization_pct"], 20.0);
  EXPECT_DOUBLE_EQ(r["totals"]["idle_cost"], 27.52);
  ASSERT_EQ(r["idle_jobs"].size(), 1u);
  EXPECT_EQ(r["idle_jobs"][0]["job_id"], "3");
  EXPECT_EQ(r["top_jobs"][0]["job_id"], "3");
  // Daily GPU-hours add up to the month's.
  ASSERT_EQ(r["daily"].size(), 30u);
  double daily = 0;
  for (const auto& d : r["daily"]) daily += d["gpu_hours"].get<double>();
  EXPECT_NEAR(daily, 16.0, 1e-9);
  EXPECT_DOUBLE_EQ(r["daily"][0]["gpu_hours"], 8.0);

  auto oct = MonthlyReport(ledger, Calendar(), book, now, {"2026-10", "USD", 10});
  EXPECT_DOUBLE_EQ((*oct)["totals"]["gpu_hours"], 8.0);
  EXPECT_EQ((*oct)["complete"], true);

  std::string csv = ReportCsv(r);
  EXPECT_NE(csv.find("team,vision,,,,,,8.000000,27.44,,0.00"), std::string::npos) << csv;
  EXPECT_NE(csv.find("total,,,,,,,16.000000,63.43"), std::string::npos) << csv;
  std::string html = ReportHtml(r);
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("Cost by team"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);  // one self-contained page
  EXPECT_EQ(html.find("#d62728"), std::string::npos) << "no alarm red for a team or a GPU type";
}

// The bill's faults a platform team found: its headline said "0.0 GPU-hours" next to 0.0040
// in the tables, its budget table showed raw JSON, and its jobs had no names.
TEST(MonthlyReport, SpotHoursAreBilledApartWithWhatTheySavedAgainstOnDemandPrices) {
  auto pricing = PricingConfig::FromYaml("pricing: {pools: {a100-spot: {rate: spot}}}", Catalog());
  ASSERT_TRUE(pricing.ok()) << pricing.status().ToString();
  auto book = PriceBook::Build(Catalog(), *pricing, Calendar());
  PriceBook list = Builtin();
  std::vector<Allocation> ledger = {
      Interval("1", "vision", "A100-80GB", 1, "2026-11-02T00:00:00Z", "2026-11-02T10:00:00Z"),  // 10 GPU-h, spot
      Interval("2", "nlp", "A100-80GB", 1, "2026-11-02T00:00:00Z", "2026-11-02T04:00:00Z"),     // 4 GPU-h, on demand
  };
  ledger[0].pool = "a100-spot";
  ReportOptions options{.month = "2026-11", .pricing = &*pricing, .on_demand_prices = &list};
  auto r = MonthlyReport(ledger, Calendar(), *book, Utc("2026-12-05T00:00:00Z"), options);
  ASSERT_TRUE(r.ok());
  const nlohmann::json& capacity = (*r)["capacity"];
  ASSERT_EQ(capacity.size(), 2u) << capacity.dump();
  EXPECT_EQ(capacity[0]["capacity"], "on_demand");
  EXPECT_DOUBLE_EQ(capacity[0]["gpu_hours"], 4.0);
  EXPECT_DOUBLE_EQ(capacity[0]["cost"], 4 * 3.43);
  EXPECT_EQ(capacity[1]["capacity"], "spot");
  EXPECT_DOUBLE_EQ(capacity[1]["gpu_hours"], 10.0);
  EXPECT_DOUBLE_EQ(capacity[1]["cost"], 10 * 1.40);
  EXPECT_DOUBLE_EQ(capacity[1]["cost_at_on_demand_prices"], 10 * 3.43);
  EXPECT_DOUBLE_EQ(capacity[1]["saving"], 10 * (3.43 - 1.40));
  EXPECT_EQ(SpotSaving(*r),
            "spot: 10.00 GPU-hours for 14.00 USD, 34.30 USD at on-demand prices: saved 20.30 USD (59%)");
  EXPECT_NE(ReportCsv(*r).find("capacity,,,,,,,10.000000,14.00,,0.0000,spot,34.30,\n"), std::string::npos)
      << ReportCsv(*r);
  EXPECT_NE(ReportHtml(*r).find("saved 20.30 USD"), std::string::npos);
  // Without the pricing config the bill has no such lines (and no spot line of nothing).
  auto plain = MonthlyReport(ledger, Calendar(), *book, Utc("2026-12-05T00:00:00Z"), {"2026-11", "USD", 10});
  EXPECT_TRUE((*plain)["capacity"].empty());
  EXPECT_EQ(SpotSaving(*plain), "");
}

TEST(MonthlyReport, HtmlHeadlineBudgetsAndJobNamesReadAsText) {
  nlohmann::json r = {
      {"month", "2026-11"},
      {"currency", "USD"},
      {"totals",
       {{"gpu_hours", 0.004}, {"cost", 0.0137}, {"avg_utilization_pct", nullptr}, {"idle_cost", 0.0}, {"jobs", 1}}},
      {"teams", nlohmann::json::array()},
      {"projects", nlohmann::json::array()},
      {"gpu_types", nlohmann::json::array()},
      {"daily", nlohmann::json::array()},
      {"top_jobs",
       {{{"job_id", "7"}, {"name", "resnet50"}, {"team", "vision"}, {"gpu_hours", 0.004}, {"cost", 0.0137}}}},
      {"idle_jobs", nlohmann::json::array()},
      {"budgets",
       {{{"scope", "vision"},
         {"limit", {{"gpu_hours", 10.0}}},
         {"used", {{"cost", 0.0137}, {"gpu_hours", 0.004}}},
         {"used_pct", 0.04}}}}};
  std::string html = ReportHtml(r);
  // Every amount on the page has two decimals; one below a cent reads <0.01, the same in
  // the headline, the tables and the budgets (not 0.0 beside 0.0040, nor 0.0137 beside 27.44).
  EXPECT_NE(html.find("0.01 USD for &lt;0.01 GPU-hours; no utilization readings"), std::string::npos) << html;
  EXPECT_NE(html.find("<td>10.00 GPU-hours</td>"), std::string::npos) << html;
  EXPECT_NE(html.find("0.01 USD and &lt;0.01 GPU-hours"), std::string::npos) << html;
  EXPECT_NE(html.find("<td class='n'>&lt;0.01</td><td class='n'>0.01</td>"), std::string::npos) << html;
  EXPECT_EQ(html.find("{&quot;"), std::string::npos) << html;
  EXPECT_EQ(html.find("{\"gpu_hours"), std::string::npos) << html;
  EXPECT_NE(html.find("<td>resnet50</td>"), std::string::npos) << html;
  EXPECT_NE(ReportCsv(r).find(",resnet50\n"), std::string::npos);
}

TEST(Usage, GroupsByEveryDimensionAndCutsTheWindow) {
  PriceBook book = Builtin();
  std::vector<Allocation> ledger = {
      Interval("1", "vision", "A100-80GB", 1, "2026-11-10T00:00:00Z", "2026-11-10T10:00:00Z"),
      Interval("2", "vision", "T4", 1, "2026-11-10T00:00:00Z", "2026-11-10T10:00:00Z"),
      Interval("3", "nlp", "T4", 1, "2026-11-10T00:00:00Z", "2026-11-10T10:00:00Z"),
  };
  TimeMs from = Utc("2026-11-10T05:00:00Z"), to = Utc("2026-11-10T07:00:00Z");
  auto by_type = AggregateUsage(ledger, from, to, to, book, UsageGrouping::kGpuType);
  ASSERT_EQ(by_type.size(), 2u);
  EXPECT_EQ(by_type[0].ToJson()["gpu_type"], "A100-80GB");
  EXPECT_DOUBLE_EQ(by_type[0].gpu_ms, 2.0 * kHourMs);
  EXPECT_DOUBLE_EQ(by_type[1].gpu_ms, 4.0 * kHourMs);  // two T4 jobs, 2 h each in the window
  EXPECT_EQ(AggregateUsage(ledger, from, to, to, book, UsageGrouping::kJob).size(), 3u);
  EXPECT_EQ(AggregateUsage(ledger, from, to, to, book, UsageGrouping::kProject).size(), 2u);
  EXPECT_FALSE(ParseUsageGrouping("colour").ok());
  EXPECT_EQ(ParseUsageGrouping("colour").status().field(), "by");
}

TEST(BudgetConfig, ParsesAndRefusesBadFieldsByName) {
  auto ok = QuotaConfig::FromYaml(R"(
accounting: {webhook: "http://127.0.0.1:9/hook", idle_threshold_percent: 3, idle_after: 45m}
teams:
  vision:
    budget: {monthly_cost: 5000, on_exceed: hold}
    project_budgets: {detector: {monthly_gpu_hours: 100}}
    idle_action: stop
)",
                                  Catalog());
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  const TeamQuota& v = ok->teams.at("vision");
  EXPECT_DOUBLE_EQ(v.budget.monthly_cost, 5000);
  EXPECT_TRUE(v.budget.hold);
  EXPECT_DOUBLE_EQ(v.project_budgets.at("detector").monthly_gpu_hours, 100);
  EXPECT_EQ(v.idle_action, IdleAction::kStop);
  EXPECT_EQ(ok->accounting.idle_after_ms, 45 * kMinuteMs);
  EXPECT_TRUE(ok->accounting.CostLimitExempt("critical"));

  auto field = [](const std::string& yaml) { return QuotaConfig::FromYaml(yaml, Catalog()).status().field(); };
  EXPECT_EQ(field("teams: {a: {budget: {monthly_cost: -5}}}"), "teams.a.budget.monthly_cost");
  EXPECT_EQ(field("teams: {a: {budget: {monthly_cost: 5, on_exceed: panic}}}"), "teams.a.budget.on_exceed");
  EXPECT_EQ(field("teams: {a: {budget: {}}}"), "teams.a.budget");
  EXPECT_EQ(field("teams: {a: {idle_action: delete}}"), "teams.a.idle_action");
  EXPECT_EQ(field("accounting: {webhook: ftp://x}"), "accounting.webhook");
  EXPECT_EQ(field("accounting: {idle_after: soon}"), "accounting.idle_after");
  EXPECT_EQ(field("accounting: {idle_treshold_percent: 5}"), "accounting.idle_treshold_percent");
}

}  // namespace
}  // namespace gantry::testing
