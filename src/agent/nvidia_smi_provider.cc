// The nvidia-smi provider, for machines where NVML cannot be loaded but the tool works:
// CSV queries for inventory, readings and compute processes. It sees no XID events.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <sstream>
#include <thread>

#include "agent/gpu_provider.h"

namespace gantry {

namespace {

constexpr const char* kInventoryQuery =
    "nvidia-smi --query-gpu=index,uuid,name,pci.bus_id,memory.total,mig.mode.current,driver_version "
    "--format=csv,noheader,nounits";
constexpr const char* kSampleQuery =
    "nvidia-smi --query-gpu=uuid,utilization.gpu,utilization.memory,memory.used,memory.total,temperature.gpu,"
    "power.draw,power.limit,clocks.sm,ecc.errors.corrected.volatile.total,ecc.errors.uncorrected.volatile.total "
    "--format=csv,noheader,nounits";
constexpr const char* kProcessQuery =
    "nvidia-smi --query-compute-apps=gpu_uuid,pid,used_memory --format=csv,noheader,nounits";

Expected<std::string> Run(const char* cmd) {
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen((std::string(cmd) + " 2>/dev/null").c_str(), "r"), pclose);
  if (!pipe) return Status::Internal("cannot run nvidia-smi");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe.get())) > 0) out.append(buf, n);
  int rc = pclose(pipe.release());
  if (rc != 0) return Status::Internal(fmt::format("nvidia-smi failed ({})", rc));
  return out;
}

std::vector<std::vector<std::string>> Rows(const std::string& csv) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(csv);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \r") == std::string::npos) continue;
    std::vector<std::string> cells;
    std::string cell;
    std::istringstream ls(line);
    while (std::getline(ls, cell, ',')) {
      size_t b = cell.find_first_not_of(" \r");
      size_t e = cell.find_last_not_of(" \r");
      cells.push_back(b == std::string::npos ? "" : cell.substr(b, e - b + 1));
    }
    rows.push_back(std::move(cells));
  }
  return rows;
}

// "[N/A]", "[Not Supported]" and empty read as -1.
double Number(const std::string& s) {
  if (s.empty() || s[0] == '[') return -1;
  try {
    return std::stod(s);
  } catch (const std::exception&) {
    return -1;
  }
}

class NvidiaSmiProvider : public GpuProvider {
 public:
  std::string name() const override { return "nvidia-smi"; }
  Expected<GpuInventory> Inventory() override {
    auto out = Run(kInventoryQuery);
    if (!out) return out.status();
    return ParseNvidiaSmiInventory(*out);
  }
  Expected<std::vector<GpuSample>> Sample() override {
    auto out = Run(kSampleQuery);
    if (!out) return out.status();
    auto samples = ParseNvidiaSmiSamples(*out);
    if (!samples) return samples;
    if (auto procs = Run(kProcessQuery); procs) {
      for (const auto& row : Rows(*procs)) {
        if (row.size() < 3) continue;
        for (GpuSample& s : *samples) {
          if (s.uuid == row[0]) {
            s.processes.push_back({static_cast<int>(Number(row[1])), static_cast<int64_t>(Number(row[2])), -1, -1, ""});
          }
        }
      }
    }
    return samples;
  }
  // nvidia-smi has no events: waiting out the time keeps the caller's loop paced.
  std::vector<GpuEvent> Events(int timeout_ms) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(std::max(0, timeout_ms)));
    return {};
  }
};

}  // namespace

Expected<GpuInventory> ParseNvidiaSmiInventory(const std::string& csv) {
  GpuInventory inv;
  inv.provider = "nvidia-smi";
  for (const auto& row : Rows(csv)) {
    if (row.size() < 7) return Status::Invalid("nvidia-smi", "expected 7 columns, got " + std::to_string(row.size()));
    GpuInfo g;
    g.index = static_cast<int>(Number(row[0]));
    g.uuid = row[1];
    g.name = row[2];
    g.pci_bus_id = row[3];
    g.memory_total_mib = static_cast<int64_t>(Number(row[4]));
    g.mig_enabled = row[5] == "Enabled";
    inv.driver_version = row[6];
    inv.gpus.push_back(std::move(g));
  }
  if (inv.gpus.empty()) return Status::NotFound("nvidia-smi lists no GPU");
  return inv;
}

Expected<std::vector<GpuSample>> ParseNvidiaSmiSamples(const std::string& csv) {
  std::vector<GpuSample> out;
  for (const auto& row : Rows(csv)) {
    if (row.size() < 11) return Status::Invalid("nvidia-smi", "expected 11 columns, got " + std::to_string(row.size()));
    GpuSample s;
    s.uuid = row[0];
    s.util_pct = Number(row[1]);
    s.mem_util_pct = Number(row[2]);
    s.mem_used_mib = static_cast<int64_t>(Number(row[3]));
    s.mem_total_mib = static_cast<int64_t>(Number(row[4]));
    s.temperature_c = Number(row[5]);
    s.power_w = Number(row[6]);
    s.power_limit_w = Number(row[7]);
    s.sm_clock_mhz = static_cast<int>(Number(row[8]));
    s.ecc_corrected = static_cast<int64_t>(Number(row[9]));
    s.ecc_uncorrected = static_cast<int64_t>(Number(row[10]));
    out.push_back(std::move(s));
  }
  return out;
}

std::unique_ptr<GpuProvider> OpenNvidiaSmiProvider(std::string* why) {
  auto p = std::make_unique<NvidiaSmiProvider>();
  auto inv = p->Inventory();
  if (!inv) {
    *why = inv.status().message();
    return nullptr;
  }
  return p;
}

}  // namespace gantry
