// Small helpers for the self-contained HTML pages (simulator and billing reports): text
// escaping, a colour palette and round axis steps for inline SVG charts.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>

namespace gantry {

// No red among the first colours: on a bill red reads as an alarm.
inline constexpr const char* kChartPalette[] = {"#1f77b4", "#17becf", "#2ca02c", "#ff7f0e", "#9467bd",
                                                "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#6b6ecf",
                                                "#393b79", "#637939", "#843c39", "#7b4173"};

inline std::string HtmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else if (c == '"')
      out += "&quot;";
    else
      out += c;
  }
  return out;
}

// A round step (1, 2 or 5 x 10^k) that cuts `range` into about five ticks.
inline double NiceStep(double range) {
  double raw = range / 5;
  double mag = std::pow(10, std::floor(std::log10(std::max(raw, 1e-12))));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (raw <= m * mag * (1 + 1e-6)) return m * mag;  // 1.0000001 / 5 still steps by 0.2
  }
  return 10 * mag;
}

}  // namespace gantry
