// The simulator's HTML page: one self-contained file with inline SVG charts (no scripts,
// no external assets), so it can be mailed or attached to a ticket as it is.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/html_util.h"
#include "sim/report.h"

namespace gantry {

namespace {

const auto& kPalette = kChartPalette;
constexpr int kW = 640, kH = 260, kLeft = 60, kRight = 150, kTop = 28, kBottom = 36;

struct Line {
  std::string name;
  std::vector<double> x, y;
};

// A line chart (or stacked areas) with axes, ticks and a legend. With log_x, x values
// below 1 are drawn at 1.
std::string Chart(const std::string& title, const std::string& xlabel, const std::string& ylabel,
                  const std::vector<Line>& lines, bool log_x = false, bool stacked = false) {
  double xmin = 1e300, xmax = -1e300, ymax = 0;
  std::vector<double> stack;
  for (const Line& l : lines) {
    if (stacked && stack.size() < l.y.size()) stack.resize(l.y.size(), 0);
    for (size_t i = 0; i < l.x.size(); ++i) {
      double x = log_x ? std::log10(std::max(1.0, l.x[i])) : l.x[i];
      xmin = std::min(xmin, x);
      xmax = std::max(xmax, x);
      double y = l.y[i];
      if (stacked) y = stack[i] += l.y[i];
      ymax = std::max(ymax, y);
    }
  }
  if (xmin > xmax) xmin = 0, xmax = 1;
  if (xmax == xmin) xmax = xmin + 1;
  double ystep = NiceStep(ymax > 0 ? ymax : 1);
  ymax = std::ceil((ymax > 0 ? ymax : 1) / ystep - 1e-6) * ystep;
  const double pw = kW - kLeft - kRight, ph = kH - kTop - kBottom;
  auto px = [&](double x) { return kLeft + (x - xmin) / (xmax - xmin) * pw; };
  auto py = [&](double y) { return kTop + ph - y / ymax * ph; };
  std::string svg = fmt::format(
      "<svg xmlns='http://www.w3.org/2000/svg' width='{}' height='{}' font-family='sans-serif' font-size='11'>"
      "<text x='{}' y='16' font-size='13' font-weight='bold'>{}</text>",
      kW, kH, kLeft, HtmlEscape(title));
  for (double y = 0; y <= ymax + 1e-9; y += ystep) {
    svg +=
        fmt::format("<line x1='{}' x2='{}' y1='{:.1f}' y2='{:.1f}' stroke='#ddd'/>", kLeft, kLeft + pw, py(y), py(y));
    svg += fmt::format("<text x='{}' y='{:.1f}' text-anchor='end'>{:g}</text>", kLeft - 4, py(y) + 4, y);
  }
  if (log_x) {
    for (int e = static_cast<int>(std::floor(xmin)); e <= static_cast<int>(std::ceil(xmax)); ++e) {
      if (e < xmin || e > xmax) continue;
      svg += fmt::format(
          "<line x1='{0:.1f}' x2='{0:.1f}' y1='{1}' y2='{2}' stroke='#eee'/>"
          "<text x='{0:.1f}' y='{3}' text-anchor='middle'>{4:g}</text>",
          px(e), kTop, kTop + ph, kTop + ph + 14, std::pow(10, e));
    }
  } else {
    double xstep = NiceStep(xmax - xmin);
    for (double x = std::ceil(xmin / xstep) * xstep; x <= xmax + 1e-9; x += xstep) {
      svg += fmt::format("<text x='{:.1f}' y='{}' text-anchor='middle'>{:g}</text>", px(x), kTop + ph + 14, x);
    }
  }
  svg += fmt::format("<text x='{}' y='{}' text-anchor='middle'>{}</text>", kLeft + pw / 2, kH - 4, HtmlEscape(xlabel));
  svg += fmt::format("<text transform='translate(12,{}) rotate(-90)' text-anchor='middle'>{}</text>", kTop + ph / 2,
                     HtmlEscape(ylabel));
  std::vector<double> base(stack.size(), 0);
  for (size_t li = 0; li < lines.size(); ++li) {
    const Line& l = lines[li];
    const char* color = kPalette[li % std::size(kPalette)];
    std::string pts;
    for (size_t i = 0; i < l.x.size(); ++i) {
      double x = log_x ? std::log10(std::max(1.0, l.x[i])) : l.x[i];
      double y = stacked ? base[i] + l.y[i] : l.y[i];
      pts += fmt::format("{:.1f},{:.1f} ", px(x), py(y));
    }
    if (stacked) {
      for (size_t i = l.x.size(); i-- > 0;) pts += fmt::format("{:.1f},{:.1f} ", px(l.x[i]), py(base[i]));
      for (size_t i = 0; i < l.y.size(); ++i) base[i] += l.y[i];
      svg += fmt::format("<polygon points='{}' fill='{}' fill-opacity='0.75' stroke='none'/>", pts, color);
    } else {
      svg += fmt::format("<polyline points='{}' fill='none' stroke='{}' stroke-width='1.5'/>", pts, color);
    }
    if (li < 16) {
      double ly = kTop + 12.0 * static_cast<double>(li);
      svg += fmt::format("<rect x='{}' y='{:.1f}' width='10' height='10' fill='{}'/><text x='{}' y='{:.1f}'>{}</text>",
                         kLeft + pw + 10, ly, color, kLeft + pw + 24, ly + 9, HtmlEscape(l.name));
    }
  }
  return svg + "</svg>";
}

Line Cdf(const std::string& name, const std::vector<double>& sorted) {
  Line l{name, {}, {}};
  const size_t points = std::min<size_t>(sorted.size(), 300);
  for (size_t i = 0; i < points; ++i) {
    size_t idx = points == 1 ? 0 : i * (sorted.size() - 1) / (points - 1);
    l.x.push_back(sorted[idx]);
    l.y.push_back(static_cast<double>(idx + 1) / static_cast<double>(sorted.size()));
  }
  return l;
}

std::vector<double> Hours(const std::vector<double>& seconds) {
  std::vector<double> h;
  for (double s : seconds) h.push_back(s / 3600);
  return h;
}

}  // namespace

std::string RenderSimHtml(const std::vector<PolicyRun>& runs, const std::string& title,
                          const std::vector<std::string>& notes) {
  std::string said;
  for (const std::string& note : notes) said += "<p class='note'>" + HtmlEscape(note) + "</p>";
  std::string html = fmt::format(
      "<!DOCTYPE html><html><head><meta charset='utf-8'><title>{0}</title><style>"
      "body{{font-family:sans-serif;margin:24px;color:#222}} table{{border-collapse:collapse;margin:12px 0}}"
      "td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}} th{{background:#f3f3f3}}"
      "td:first-child,th:first-child{{text-align:left}} .charts svg{{margin:8px 16px 8px 0}}</style></head><body>"
      "<h1>{0}</h1>{1}<table><tr><th>policy</th><th>completed</th><th>rejected</th><th>GPU util</th>"
      "<th>useful GPU util</th><th>util when queued</th><th>util of what waiting jobs could use</th><th>JCT mean "
      "(h)</th><th>JCT p95 (h)</th><th>queue delay mean "
      "(s)</th>"
      "<th>delay p50 (s)</th><th>delay p95 (s)</th><th>preemptions</th><th>max team starvation (s)</th>"
      "<th>Jain</th></tr>",
      HtmlEscape(title), said);
  for (const PolicyRun& run : runs) {
    const SimResult& r = run.result;
    html += fmt::format(
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.3f}</td><td>{:.3f}</td><td>{:.3f}</td><td>{:.3f}</td><td>{:.2f}</"
        "td>"
        "<td>{:.2f}</td><td>{:.0f}</td><td>{:.0f}</td><td>{:.0f}</td><td>{}</td><td>{:.0f}</td><td>{:.3f}</td></tr>",
        HtmlEscape(r.policy), r.jobs_completed, r.jobs_rejected, r.gpu_utilization, r.useful_gpu_utilization,
        std::max(0.0, r.gpu_utilization_when_queued), std::max(0.0, r.gpu_utilization_when_queued_usable),
        r.jct_mean_s / 3600, r.jct_p95_s / 3600, r.queue_delay_mean_s, r.queue_delay_p50_s, r.queue_delay_p95_s,
        r.preemptions, r.max_team_starvation_s, r.jain_fairness);
  }
  html += "</table><div class='charts'>";
  std::vector<Line> util, queue, jct, delay;
  for (const PolicyRun& run : runs) {
    const SimSeries& s = run.result.series;
    util.push_back({run.result.policy, Hours(s.t_s), s.utilization});
    queue.push_back({run.result.policy, Hours(s.t_s), s.queued});
    jct.push_back(Cdf(run.result.policy, run.result.jct_sorted_s));
    delay.push_back(Cdf(run.result.policy, run.result.queue_delay_sorted_s));
  }
  html += Chart("GPU utilization over time", "hours since the first submit", "allocated / total", util);
  html += Chart("Queue length over time", "hours since the first submit", "waiting jobs", queue);
  html += Chart("Job completion time (CDF)", "seconds (log)", "fraction of jobs", jct, /*log_x=*/true);
  html += Chart("Queueing delay (CDF)", "seconds (log)", "fraction of jobs", delay, /*log_x=*/true);
  for (const PolicyRun& run : runs) {
    std::vector<Line> teams;
    for (const auto& [team, gpus] : run.result.series.team_gpus)
      teams.push_back({team, Hours(run.result.series.t_s), gpus});
    html += Chart("GPUs per team over time: " + run.result.policy, "hours since the first submit", "GPUs", teams, false,
                  /*stacked=*/true);
  }
  return html + "</div></body></html>\n";
}

}  // namespace gantry
