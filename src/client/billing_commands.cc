// Accounting subcommands: usage, report, budgets, alerts.
#include "client/billing_commands.h"

#include <fmt/format.h>

#include <fstream>
#include <ostream>

#include "billing/report.h"
#include "client/terminal_safe.h"

namespace gantry {

namespace {

std::string Str(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return "";
  return j[key].is_string() ? j[key].get<std::string>() : j[key].dump();
}

// One line per usage line: its labels, then GPU-hours, cost, utilization and idle cost.
void PrintUsageLines(std::ostream& out, const nlohmann::json& lines, std::initializer_list<const char*> keys,
                     const std::string& currency, const nlohmann::json* total = nullptr) {
  std::string head;
  for (const char* k : keys) head += fmt::format("{:<16} ", k);
  out << head << fmt::format("{:>12} {:>12} {:>7} {:>12}\n", "GPU-HOURS", "COST " + currency, "UTIL%", "IDLE COST");
  auto line = [&](const nlohmann::json& l, bool is_total) {
    std::string row;
    bool first = true;
    for (const char* k : keys) {
      row += fmt::format("{:<16} ", is_total && first ? std::string("TOTAL") : Str(l, k).substr(0, 16));
      first = false;
    }
    std::string util = Str(l, "avg_utilization_pct");
    out << row
        << fmt::format("{:>12} {:>12} {:>7} {:>12}\n", FormatAmount(l.value("gpu_hours", 0.0)),
                       FormatAmount(l.value("cost", 0.0)), util.empty() ? "-" : util,
                       FormatAmount(l.value("idle_cost", 0.0)));
  };
  for (const auto& l : lines) line(l, false);
  if (total) line(*total, true);
}

std::vector<const char*> KeysFor(const std::string& by) {
  if (by == "project") return {"team", "project"};
  if (by == "user") return {"team", "user"};
  if (by == "gpu_type") return {"gpu_type"};
  if (by == "job") return {"job_id", "team", "user"};
  return {"team"};
}

void PrintKeyed(std::ostream& out, const nlohmann::json& lines, const std::vector<const char*>& keys,
                const std::string& currency, const nlohmann::json* total = nullptr) {
  switch (keys.size()) {
    case 1: PrintUsageLines(out, lines, {keys[0]}, currency, total); break;
    case 2: PrintUsageLines(out, lines, {keys[0], keys[1]}, currency, total); break;
    default: PrintUsageLines(out, lines, {keys[0], keys[1], keys[2]}, currency, total); break;
  }
}

void PrintReport(std::ostream& out, const nlohmann::json& r) {
  std::string cur = r.value("currency", "USD");
  const nlohmann::json& t = r["totals"];
  out << fmt::format("GPU bill {} ({} to {}, {}){}\n", Str(r, "month"), Str(r, "from"), Str(r, "to"),
                     Str(r, "timezone"), r.value("complete", true) ? "" : " - month in progress");
  out << fmt::format("total: {} {} for {} GPU-hours, {} jobs; average utilization {}%, idle cost {}\n\n",
                     FormatAmount(t.value("cost", 0.0)), cur, FormatAmount(t.value("gpu_hours", 0.0)), Str(t, "jobs"),
                     Str(t, "avg_utilization_pct").empty() ? "-" : Str(t, "avg_utilization_pct"),
                     FormatAmount(t.value("idle_cost", 0.0)));
  PrintKeyed(out, r["teams"], {"team"}, cur);
  out << "\n";
  PrintKeyed(out, r["projects"], {"team", "project"}, cur);
  out << "\n";
  PrintKeyed(out, r["gpu_types"], {"gpu_type"}, cur);
  if (!r.value("capacity", nlohmann::json::array()).empty()) {
    out << "\n";
    PrintKeyed(out, r["capacity"], {"capacity"}, cur);
    if (std::string saving = SpotSaving(r); !saving.empty()) out << saving << "\n";
  }
  out << "\ntop jobs by cost:\n";
  PrintKeyed(out, r["top_jobs"], {"job_id", "team", "user"}, cur);
  if (!r["idle_jobs"].empty()) {
    out << "\njobs flagged idle:\n";
    PrintKeyed(out, r["idle_jobs"], {"job_id", "team", "user"}, cur);
  }
  if (r.contains("reconciliation")) {
    const auto& rec = r["reconciliation"];
    out << fmt::format("\nreconciliation: ledger {:.3f} GPU-s, job event history {:.3f} GPU-s: {}\n",
                       rec.value("ledger_gpu_seconds", 0.0), rec.value("event_history_gpu_seconds", 0.0),
                       rec.value("match", false) ? "match" : "MISMATCH");
  }
}

void PrintBudgets(std::ostream& out, const nlohmann::json& b) {
  out << fmt::format("{:<24} {:>14} {:>14} {:>8} {:<6} {}\n", "SCOPE", "LIMIT", "USED", "USED%", "ON100%", "STATE");
  std::string cur = b.value("currency", "USD");
  for (const auto& x : b["budgets"]) {
    const auto& limit = x["limit"];
    const auto& used = x["used"];
    std::string lim, use;
    if (limit.contains("cost")) {
      lim = fmt::format("{:g} {}", limit["cost"].get<double>(), cur);
      use = fmt::format("{} {}", FormatAmount(used.value("cost", 0.0)), cur);
    }
    if (limit.contains("gpu_hours")) {
      lim += (lim.empty() ? "" : " / ") + fmt::format("{:g} GPU-h", limit["gpu_hours"].get<double>());
      use += (use.empty() ? "" : " / ") + fmt::format("{} GPU-h", FormatAmount(used.value("gpu_hours", 0.0)));
    }
    int level = x.value("level", 0);
    std::string state = x.value("held", false) ? "HELD" : level >= 100 ? "exceeded" : level >= 80 ? "warning" : "ok";
    out << fmt::format("{:<24} {:>14} {:>14} {:>8.1f} {:<6} {}\n", Str(x, "scope"), lim, use, x.value("used_pct", 0.0),
                       Str(x, "on_exceed"), state);
  }
}

void PrintAlerts(std::ostream& out, const nlohmann::json& b) {
  for (const auto& a : b["alerts"]) {
    out << fmt::format("{}  {:<18} {}\n", Str(a, "time"), Str(a, "kind"), Str(a, "message"));
  }
  if (b["alerts"].empty()) out << "no alerts\n";
}

}  // namespace

void AddBillingCommands(CLI::App& app, std::ostream& out, const ClientPlumbing& p) {
  const auto& wants = p.wants;
  // Captured one by one: an action that held `p` whole would hold `chosen`, which holds it.
  auto request = p.request;
  auto chosen = p.chosen;
  struct UsageFlags {
    std::string team, from, to, by = "team";
  };
  auto uf = std::make_shared<UsageFlags>();
  if (wants("usage")) {
    CLI::App* usage = app.add_subcommand("usage", "GPU-hours and cost over a window (default: this month so far)");
    p.common(usage);
    usage->add_option("--team", uf->team, "Only this team (users: always their own)");
    usage->add_option("--from", uf->from, "Start: YYYY-MM-DD (billing time zone) or YYYY-MM-DDTHH:MM:SSZ");
    usage->add_option("--to", uf->to, "End (exclusive); default now");
    usage->add_option("--by", uf->by, "team, project, user, gpu_type or job")
        ->check(CLI::IsMember({"team", "project", "user", "gpu_type", "job"}));
    usage->callback([=, &out] {
      *chosen = [=, &out] {
        std::string q = "/v1/usage?by=" + uf->by;
        if (!uf->team.empty()) q += "&team=" + uf->team;
        if (!uf->from.empty()) q += "&from=" + uf->from;
        if (!uf->to.empty()) q += "&to=" + uf->to;
        return request([q](ApiClient& a) { return a.Get(q); },
                       [&out, uf](const nlohmann::json& b) {
                         out << fmt::format("usage {} to {}{}\n", Str(b, "from"), Str(b, "to"),
                                            Str(b, "team").empty() ? "" : ", team " + Str(b, "team"));
                         PrintKeyed(out, b["lines"], KeysFor(uf->by), b.value("currency", "USD"), &b["total"]);
                       });
      };
    });
  }

  struct ReportFlags {
    std::string month, format = "text", file;
  };
  auto rf = std::make_shared<ReportFlags>();
  if (wants("report")) {
    CLI::App* report = app.add_subcommand("report", "The monthly GPU bill: per team, project and GPU type");
    p.common(report);
    report->add_option("--month", rf->month, "YYYY-MM (default: this month)");
    report->add_option("--format", rf->format, "text, json, csv or html")
        ->check(CLI::IsMember({"text", "json", "csv", "html"}));
    report->add_option("--out", rf->file, "Write to this file instead of standard output");
    report->callback([=, &out] {
      *chosen = [=, &out] {
        std::string q = "/v1/reports/monthly";
        if (!rf->month.empty()) q += "?month=" + rf->month;
        return request([q](ApiClient& a) { return a.Get(q); },
                       [&out, rf](const nlohmann::json& b) {
                         std::ofstream file;
                         if (!rf->file.empty()) file.open(rf->file, std::ios::trunc);
                         std::ostream& o = rf->file.empty() ? out : file;
                         if (rf->format == "json") {
                           o << JsonForTerminal(b) << "\n";
                         } else if (rf->format == "csv") {
                           o << ReportCsv(b);
                         } else if (rf->format == "html") {
                           o << ReportHtml(b);
                         } else {
                           PrintReport(o, b);
                         }
                         if (!rf->file.empty()) out << "wrote " << rf->file << "\n";
                       });
      };
    });
  }

  if (wants("budgets")) {
    CLI::App* budgets = app.add_subcommand("budgets", "This month's budgets: limit, use, alerts and holds");
    p.common(budgets);
    budgets->callback([=, &out] {
      *chosen = [=, &out] {
        return request([](ApiClient& a) { return a.Get("/v1/budgets"); },
                       [&out](const nlohmann::json& b) { PrintBudgets(out, b); });
      };
    });
  }

  if (wants("alerts")) {
    CLI::App* alerts = app.add_subcommand("alerts", "Budget, job cost-limit and idle-job alerts, newest first");
    p.common(alerts);
    alerts->callback([=, &out] {
      *chosen = [=, &out] {
        return request([](ApiClient& a) { return a.Get("/v1/alerts"); },
                       [&out](const nlohmann::json& b) { PrintAlerts(out, b); });
      };
    });
  }
}

}  // namespace gantry
