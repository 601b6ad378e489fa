// The monthly report as CSV (one table, a section column) and as one self-contained HTML
// page with inline SVG charts: cost by team, cost by GPU type, GPU-hours per day.
#include <fmt/format.h>

#include <algorithm>
#include <string_view>

#include "billing/report.h"
#include "core/encoding.h"
#include "core/html_util.h"

namespace gantry {

namespace {

std::string Text(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return "";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

std::string Money(double x) { return FormatAmount(x); }
// Amounts on the HTML page: always two decimals, so a column lines up (the CSV keeps more);
// "no palette red": red is for alarms (kChartPalette).
// (Text: escape it where it goes into HTML.)
std::string Shown(double x) { return x > 0 && x < 0.005 ? "<0.01" : fmt::format("{:.2f}", x); }

// A budget's limit or use ({"cost": 20000, "gpu_hours": 5000}) as words: "20000.00 USD and
// 5000.00 GPU-hours".
std::string BudgetAmounts(const nlohmann::json& amounts, const std::string& currency) {
  std::string out;
  if (amounts.contains("cost")) out = Shown(amounts["cost"].get<double>()) + " " + currency;
  if (amounts.contains("gpu_hours")) {
    out += (out.empty() ? "" : " and ") + Shown(amounts["gpu_hours"].get<double>()) + " GPU-hours";
  }
  return out.empty() ? "none" : out;
}

}  // namespace

std::string SpotSaving(const nlohmann::json& r) {
  for (const auto& l : r.value("capacity", nlohmann::json::array())) {
    if (Text(l, "capacity") != "spot" || l.value("gpu_hours", 0.0) <= 0) continue;
    const std::string currency = r.value("currency", "USD");
    const double list = l.value("cost_at_on_demand_prices", 0.0), saving = l.value("saving", 0.0);
    return fmt::format("spot: {} GPU-hours for {} {}, {} {} at on-demand prices: saved {} {} ({:.0f}%)",
                       Money(l.value("gpu_hours", 0.0)), Money(l.value("cost", 0.0)), currency, Money(list), currency,
                       Money(saving), currency, list > 0 ? 100 * saving / list : 0.0);
  }
  return "";
}

std::string ReportCsv(const nlohmann::json& r) {
  std::string out =
      "section,team,project,user,gpu_type,job_id,date,gpu_hours,cost,avg_utilization_pct,idle_cost,capacity,"
      "cost_at_on_demand_prices,job_name\n";
  auto rows = [&](const char* section, const nlohmann::json& lines) {
    for (const auto& l : lines) {
      out += section;
      for (const char* k : {"team", "project", "user", "gpu_type", "job_id", "date"}) out += "," + CsvField(Text(l, k));
      out +=
          fmt::format(",{:.6f},{},{},{},{},{},{}\n", l.value("gpu_hours", 0.0), Money(l.value("cost", 0.0)),
                      Text(l, "avg_utilization_pct"), Money(l.value("idle_cost", 0.0)), CsvField(Text(l, "capacity")),
                      l.contains("cost_at_on_demand_prices") ? Money(l["cost_at_on_demand_prices"].get<double>()) : "",
                      CsvField(Text(l, "name")));
    }
  };
  rows("total", nlohmann::json::array({r["totals"]}));
  rows("team", r["teams"]);
  rows("project", r["projects"]);
  rows("gpu_type", r["gpu_types"]);
  rows("capacity", r.value("capacity", nlohmann::json::array()));
  rows("top_job", r["top_jobs"]);
  rows("idle_job", r["idle_jobs"]);
  rows("day", r["daily"]);
  return out;
}

namespace {

// Horizontal bars, one per line, labelled with `label_keys` and the cost.
std::string CostBars(const std::string& title, const nlohmann::json& lines, std::initializer_list<const char*> keys,
                     const std::string& currency) {
  constexpr int kWidth = 640, kRow = 24, kLabel = 170, kValue = 110;
  double max = 0;
  for (const auto& l : lines) max = std::max(max, l.value("cost", 0.0));
  int h = 30 + kRow * static_cast<int>(std::max<size_t>(1, lines.size()));
  std::string svg = fmt::format(
      "<svg xmlns='http://www.w3.org/2000/svg' width='{}' height='{}' font-family='sans-serif' font-size='12'>"
      "<text x='0' y='16' font-weight='bold'>{}</text>",
      kWidth, h, HtmlEscape(title));
  int i = 0;
  for (const auto& l : lines) {
    std::string label;
    for (const char* k : keys) label += (label.empty() ? "" : "/") + Text(l, k);
    double cost = l.value("cost", 0.0);
    int w = max > 0 ? static_cast<int>((kWidth - kLabel - kValue) * cost / max) : 0;
    int y = 26 + kRow * i;
    svg += fmt::format(
        "<text x='0' y='{}'>{}</text><rect x='{}' y='{}' width='{}' height='{}' fill='{}'/>"
        "<text x='{}' y='{}'>{} {}</text>",
        y + 14, HtmlEscape(label), kLabel, y + 2, std::max(w, 1), kRow - 6, kChartPalette[i % std::size(kChartPalette)],
        kLabel + w + 6, y + 14, HtmlEscape(Shown(cost)), HtmlEscape(currency));
    ++i;
  }
  return svg + "</svg>";
}

// Columns of GPU-hours per day.
std::string DailyColumns(const nlohmann::json& daily) {
  constexpr int kWidth = 640, kHeight = 220, kLeft = 50, kBottom = 30, kTop = 26;
  double max = 0;
  for (const auto& d : daily) max = std::max(max, d.value("gpu_hours", 0.0));
  double step = NiceStep(std::max(max, 1e-9));
  double top = std::max(step, std::ceil(max / step) * step);
  int n = static_cast<int>(std::max<size_t>(1, daily.size()));
  double col = static_cast<double>(kWidth - kLeft - 10) / n;
  int plot = kHeight - kTop - kBottom;
  std::string svg = fmt::format(
      "<svg xmlns='http://www.w3.org/2000/svg' width='{}' height='{}' font-family='sans-serif' font-size='11'>"
      "<text x='0' y='16' font-weight='bold' font-size='12'>GPU-hours per day</text>",
      kWidth, kHeight);
  for (double v = 0; v <= top * (1 + 1e-9); v += step) {
    int y = kTop + plot - static_cast<int>(plot * v / top);
    svg += fmt::format(
        "<line x1='{}' y1='{}' x2='{}' y2='{}' stroke='#ddd'/><text x='{}' y='{}' text-anchor='end'>{:g}</text>", kLeft,
        y, kWidth - 10, y, kLeft - 4, y + 4, v);
  }
  int i = 0;
  for (const auto& d : daily) {
    double v = d.value("gpu_hours", 0.0);
    int hgt = static_cast<int>(plot * v / top);
    double x = kLeft + col * i;
    svg += fmt::format(
        "<rect x='{:.1f}' y='{}' width='{:.1f}' height='{}' fill='{}'><title>{}: {:.2f} GPU-h</title></rect>", x + 1,
        kTop + plot - hgt, std::max(1.0, col - 2), hgt, kChartPalette[0], HtmlEscape(Text(d, "date")), v);
    if (i % 5 == 0) {
      svg += fmt::format("<text x='{:.1f}' y='{}' text-anchor='middle'>{}</text>", x + col / 2, kHeight - 10,
                         HtmlEscape(Text(d, "date").substr(5)));
    }
    ++i;
  }
  return svg + "</svg>";
}

std::string Table(const nlohmann::json& lines, std::initializer_list<const char*> keys, const std::string& currency) {
  std::string out = "<table><tr>";
  for (const char* k : keys) out += fmt::format("<th>{}</th>", k);
  out += fmt::format("<th>GPU-hours</th><th>cost ({0})</th><th>avg util %</th><th>idle cost ({0})</th></tr>",
                     HtmlEscape(currency));
  for (const auto& l : lines) {
    out += "<tr>";
    for (const char* k : keys) out += fmt::format("<td>{}</td>", HtmlEscape(Text(l, k)));
    out += fmt::format("<td class='n'>{}</td><td class='n'>{}</td><td class='n'>{}</td><td class='n'>{}</td></tr>",
                       HtmlEscape(Shown(l.value("gpu_hours", 0.0))), HtmlEscape(Shown(l.value("cost", 0.0))),
                       Text(l, "avg_utilization_pct"), HtmlEscape(Shown(l.value("idle_cost", 0.0))));
  }
  return out + "</table>";
}

}  // namespace

std::string ReportHtml(const nlohmann::json& r) {
  std::string currency = r.value("currency", "USD");
  const nlohmann::json& t = r["totals"];
  std::string out = fmt::format(
      "<!doctype html><html><head><meta charset='utf-8'><title>GPU bill {0}</title><style>"
      "body{{font-family:sans-serif;max-width:900px;margin:2em auto;color:#222}}"
      "table{{border-collapse:collapse;margin:1em 0}}td,th{{border:1px solid #ccc;padding:3px 8px}}"
      "td.n{{text-align:right}}.big{{font-size:1.4em}}</style></head><body>"
      "<h1>GPU bill for {0}</h1><p>{1} to {2} ({3}){4}</p>"
      "<p class='big'>{5} {6} for {7} GPU-hours; {8}, idle cost {9} {6}; {10} jobs</p>",
      HtmlEscape(Text(r, "month")), HtmlEscape(Text(r, "from")), HtmlEscape(Text(r, "to")),
      HtmlEscape(Text(r, "timezone")), r.value("complete", true) ? "" : " &mdash; month in progress",
      HtmlEscape(Shown(t.value("cost", 0.0))), HtmlEscape(currency), HtmlEscape(Shown(t.value("gpu_hours", 0.0))),
      Text(t, "avg_utilization_pct").empty() ? "no utilization readings"
                                             : "average utilization " + Text(t, "avg_utilization_pct") + "%",
      HtmlEscape(Shown(t.value("idle_cost", 0.0))), Text(t, "jobs"));
  out += CostBars("Cost by team", r["teams"], {"team"}, currency);
  out += CostBars("Cost by GPU type", r["gpu_types"], {"gpu_type"}, currency);
  out += DailyColumns(r["daily"]);
  out += "<h2>Teams</h2>" + Table(r["teams"], {"team"}, currency);
  out += "<h2>Projects</h2>" + Table(r["projects"], {"team", "project"}, currency);
  out += "<h2>GPU types</h2>" + Table(r["gpu_types"], {"gpu_type"}, currency);
  if (!r.value("capacity", nlohmann::json::array()).empty()) {
    out += "<h2>Spot and on-demand</h2>" + Table(r["capacity"], {"capacity"}, currency) + "<p>" +
           HtmlEscape(SpotSaving(r)) + "</p>";
  }
  out += "<h2>Top jobs by cost</h2>" + Table(r["top_jobs"], {"job_id", "name", "team", "project", "user"}, currency);
  if (!r["idle_jobs"].empty()) {
    out +=
        "<h2>Jobs flagged idle</h2>" + Table(r["idle_jobs"], {"job_id", "name", "team", "project", "user"}, currency);
  }
  if (r.contains("budgets") && !r["budgets"].empty()) {
    out += "<h2>Budgets</h2><table><tr><th>scope</th><th>budget</th><th>used</th><th>%</th></tr>";
    for (const auto& b : r["budgets"]) {
      out += fmt::format(
          "<tr><td>{}</td><td>{}</td><td class='n'>{}</td><td class='n'>{:.1f}</td></tr>", HtmlEscape(Text(b, "scope")),
          HtmlEscape(BudgetAmounts(b.value("limit", nlohmann::json{}), currency)),
          HtmlEscape(BudgetAmounts(b.value("used", nlohmann::json{}), currency)), b.value("used_pct", 0.0));
    }
    out += "</table>";
  }
  return out + "<p><small>Generated by Gantry.</small></p></body></html>\n";
}

}  // namespace gantry
