// Sums over the ledger: usage by team, project, user, GPU type or job over any window,
// and the monthly bill (per team, project and GPU type, daily GPU-hours, top jobs by cost,
// utilization and the cost of the idle part). Intervals are cut at the window's edges, so
// an interval crossing a month boundary counts in each month for its part.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "billing/calendar.h"
#include "billing/ledger.h"
#include "billing/pricing.h"

namespace gantry {

enum class UsageGrouping : uint8_t { kTeam, kProject, kUser, kGpuType, kJob };
Expected<UsageGrouping> ParseUsageGrouping(const std::string& text);

struct UsageLine {
  nlohmann::json labels;               // {"team": ...}, {"team", "project"}, {"date"}, ...; built on output
  const Allocation* sample = nullptr;  // a row of the group: its labels come from it
  UsageGrouping by = UsageGrouping::kTeam;
  double gpu_ms = 0;
  double cost = 0;
  double measured_gpu_ms = 0;  // the part with telemetry
  double util_gpu_ms = 0;      // sum of gpu_ms x utilization (0..1) over the measured part
  double idle_cost = 0;        // cost x (1 - utilization) over the measured part
  bool idle_flagged = false;

  void Add(const Allocation& a, const Accrual& acc);
  double avg_util_pct() const { return measured_gpu_ms > 0 ? 100 * util_gpu_ms / measured_gpu_ms : -1; }
  nlohmann::json ToJson() const;
};

// One line per group, most expensive first. Lines point into `allocations` (for their
// labels): keep it alive while using them.
std::vector<UsageLine> AggregateUsage(const std::vector<Allocation>& allocations, TimeMs from, TimeMs to, TimeMs now,
                                      const PriceBook& prices, UsageGrouping by);

struct ReportOptions {
  std::string month;  // YYYY-MM
  std::string currency = "USD";
  int top_jobs = 10;
  // Which pools bill at spot rates (the pricing config) and the on-demand list prices a
  // spot GPU-hour is compared with: the bill's "capacity" lines, spot against on-demand
  // and what spot saved. Null: no such lines.
  const PricingConfig* pricing = nullptr;
  const PriceBook* on_demand_prices = nullptr;
};

// The monthly report as JSON (the csv and html forms are rendered from it).
Expected<nlohmann::json> MonthlyReport(const std::vector<Allocation>& allocations, const Calendar& calendar,
                                       const PriceBook& prices, TimeMs now, const ReportOptions& options);

// Rounds to `digits` decimals (JSON carries costs to 1e-6 and GPU-seconds to the millisecond).
double RoundTo(double x, int digits);
// Amounts and hours as text: two decimals, four below 1 (a demo's 0.0021 is not 0.00).
std::string FormatAmount(double x);

// "spot: 120.00 GPU-hours for 110.40 USD, 367.20 USD at on-demand prices: saved 256.80 USD
// (70%)" from a MonthlyReport's capacity lines; "" when it has no spot hours.
std::string SpotSaving(const nlohmann::json& report);

// The csv and one-page html forms of a MonthlyReport.
std::string ReportCsv(const nlohmann::json& report);
std::string ReportHtml(const nlohmann::json& report);

}  // namespace gantry
