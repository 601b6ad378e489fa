// Accrual of one allocation interval over a window.
#include "billing/ledger.h"

#include <algorithm>

namespace gantry {

Accrual Accrue(const Allocation& a, TimeMs from, TimeMs to, TimeMs now, const PriceBook& prices) {
  TimeMs lo = std::max(a.start_ms, from);
  TimeMs hi = std::min(a.EndOr(now), to);
  if (hi <= lo) return {};
  return {a.share * static_cast<double>(hi - lo), prices.Cost(a.gpu_type, a.pool, a.share, lo, hi)};
}

}  // namespace gantry
