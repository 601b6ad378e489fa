// The fake GPU provider: GPUs that exist only in memory, for machines without GPUs and for
// tests. Utilization, memory, temperature and power follow the load the agent reports for
// each GPU (its jobs' shares), with a little deterministic wobble; faults are injected on
// demand: an XID (79 also marks the GPU lost), a temperature, uncorrectable ECC errors.
#pragma once

#include <deque>
#include <map>
#include <mutex>

#include "agent/gpu_provider.h"

namespace gantry {

class FakeGpuProvider : public GpuProvider, public GpuLoadSink {
 public:
  explicit FakeGpuProvider(GpuInventory inventory);

  std::string name() const override { return "fake"; }
  Expected<GpuInventory> Inventory() override;
  Expected<std::vector<GpuSample>> Sample() override;
  std::vector<GpuEvent> Events(int timeout_ms) override;
  bool DeliversXidEvents() const override { return true; }  // InjectXid
  // MIG instances exist in the inventory only; destroying refuses while a process runs.
  Expected<std::vector<MigDeviceInfo>> ApplyMig(const std::string& gpu_uuid,
                                                const std::vector<MigInstanceSpec>& destroy,
                                                const std::vector<MigInstanceSpec>& create) override;
  int mig_changes();  // how many re-partitions were made (tests)

  void SetLoad(const std::string& uuid, double share, int64_t memory_mib,
               std::vector<std::pair<int, int64_t>> processes) override;
  // Faults. Each returns false for an unknown UUID.
  bool InjectXid(const std::string& uuid, int xid);
  bool SetTemperature(const std::string& uuid, double celsius);
  bool AddUncorrectableEcc(const std::string& uuid, int64_t errors);
  bool Heal(const std::string& uuid);  // clears every fault of the GPU

 private:
  struct State {
    double share = 0;
    int64_t memory_mib = 0;
    std::vector<std::pair<int, int64_t>> processes;
    double temperature_override = -1;
    int64_t ecc_uncorrected = 0;
    bool lost = false;
    int last_xid = 0;
    int64_t xid_events = 0;
  };
  GpuInventory inventory_;
  std::mutex mu_;
  std::map<std::string, State> state_;
  std::deque<GpuEvent> events_;
  uint64_t samples_ = 0;
  int mig_instances_made_ = 0;
  int mig_changes_ = 0;
};

}  // namespace gantry
