// The GPU-second ledger: one allocation interval per GPU share of each job run, with who
// pays for it, what it was, when it was held, and how busy the GPU was meanwhile (from
// the agents' telemetry). Reports and budgets are sums over these intervals.
#pragma once

#include <cstdint>
#include <string>

#include "billing/pricing.h"
#include "core/time.h"

namespace gantry {

struct Allocation {
  std::string job_id;
  int run = 1;
  int slot = 0;  // which GPU share of the run (0..n-1 over its nodes and GPUs)
  std::string user;
  std::string team;
  std::string project;
  std::string priority_class;
  std::string node;
  std::string pool;  // the node's pool label; empty: none
  int gpu_index = 0;
  std::string gpu_uuid;
  std::string gpu_type;
  std::string mig_profile;
  double share = 1;  // of one GPU: 1, a fraction, or a MIG profile's compute share
  TimeMs start_ms = 0;
  TimeMs end_ms = -1;  // -1: still held
  // Telemetry over the interval: sums of readings (utilization %, memory MiB) and their count.
  double util_sum = 0;
  double mem_sum_mib = 0;
  int64_t samples = 0;
  bool idle = false;  // the job was flagged idle while holding this GPU

  bool open() const { return end_ms < 0; }
  // End of the interval, or `now` for one still open.
  TimeMs EndOr(TimeMs now) const { return end_ms < 0 ? now : end_ms; }
  double avg_util() const { return samples > 0 ? util_sum / static_cast<double>(samples) : -1; }
  double avg_mem_mib() const { return samples > 0 ? mem_sum_mib / static_cast<double>(samples) : -1; }
};

// What part of an allocation falls inside [from, to) (open ones counted up to `now`).
struct Accrual {
  double gpu_ms = 0;
  double cost = 0;
};
Accrual Accrue(const Allocation& a, TimeMs from, TimeMs to, TimeMs now, const PriceBook& prices);

}  // namespace gantry
