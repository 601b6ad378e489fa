// The NVML provider over a stand-in libnvidia-ml (tests/agent/stub_nvml.cc): inventory with
// MIG slots and NVLink peers, readings with per-process memory and SM use, XID events, MIG
// re-partitioning with its refusals, and a standalone server that runs MIG jobs on it.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "agent/fake_provider.h"
#include "agent/gpu_provider.h"
#include "core/gpu_catalog.h"
#include "protocol/inventory.h"
#include "server/server_fixture.h"

namespace gantry {
namespace {

// The stub's test controls, from the same loaded copy the provider uses.
struct StubControls {
  StubControls() {
    lib = dlopen(STUB_NVML, RTLD_NOW | RTLD_LOCAL);
    EXPECT_NE(lib, nullptr) << dlerror();
    set_process = reinterpret_cast<void (*)(unsigned, unsigned, unsigned long long, unsigned, unsigned)>(
        dlsym(lib, "stub_nvml_set_process"));
    clear_processes = reinterpret_cast<void (*)()>(dlsym(lib, "stub_nvml_clear_processes"));
    set_mps_client = reinterpret_cast<void (*)(unsigned, unsigned, unsigned long long, unsigned)>(
        dlsym(lib, "stub_nvml_set_mps_client"));
    push_xid = reinterpret_cast<void (*)(unsigned, unsigned long long)>(dlsym(lib, "stub_nvml_push_xid"));
    reinterpret_cast<void (*)()>(dlsym(lib, "stub_nvml_reset"))();  // tests in one process share the library
  }
  ~StubControls() { dlclose(lib); }
  void* lib = nullptr;
  void (*set_process)(unsigned, unsigned, unsigned long long, unsigned, unsigned) = nullptr;
  void (*clear_processes)() = nullptr;
  void (*set_mps_client)(unsigned, unsigned, unsigned long long, unsigned) = nullptr;
  void (*push_xid)(unsigned, unsigned long long) = nullptr;
};

constexpr unsigned kNotMig = 0xFFFFFFFFu;

std::unique_ptr<GpuProvider> OpenStub() {
  std::string why;
  auto p = OpenNvmlProvider(&why, STUB_NVML);
  EXPECT_NE(p, nullptr) << why;
  return p;
}

TEST(NvmlProvider, ReadsInventoryWithMigSlotsAndNvLinkPeers) {
  StubControls stub;
  auto nvml = OpenStub();
  ASSERT_NE(nvml, nullptr);
  auto inv = nvml->Inventory();
  ASSERT_TRUE(inv.ok());
  EXPECT_EQ(inv->provider, "nvml");
  EXPECT_EQ(inv->driver_version, "550.54.15");
  ASSERT_EQ(inv->gpus.size(), 2u);
  EXPECT_EQ(inv->gpus[0].name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(inv->gpus[0].pci_bus_id, "00000000:07:00.0");
  EXPECT_EQ(inv->gpus[0].memory_total_mib, 81559);
  EXPECT_TRUE(inv->gpus[0].mig_enabled);
  ASSERT_EQ(inv->gpus[0].mig_devices.size(), 1u);
  EXPECT_EQ(inv->gpus[0].mig_devices[0].uuid, "MIG-stub-existing");
  EXPECT_EQ(inv->gpus[0].mig_devices[0].profile, "3g.40gb");
  EXPECT_EQ(inv->gpus[0].mig_devices[0].start, 4);
  EXPECT_EQ(inv->gpus[0].nvlink_peers, std::vector<int>{1});
  EXPECT_EQ(inv->gpus[1].nvlink_peers, std::vector<int>{0});
  // The scheduler's node: the instance keeps its real slot (4, not the first free one).
  auto node = NodeFromInventory("h", *inv, GpuCatalog::Builtin(), {8, 65536});
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  ASSERT_EQ(node->gpus[0].mig_instances.size(), 1u);
  EXPECT_EQ(node->gpus[0].mig_instances[0].placement.start, 4);
  EXPECT_EQ(node->gpus[0].mig_instances[0].uuid, "MIG-stub-existing");
  EXPECT_EQ(node->gpus[0].nvlink_group, node->gpus[1].nvlink_group);
}

TEST(NvmlProvider, NvLinkPeersBecomeGroups) {
  GpuInventory inv;
  for (int i = 0; i < 4; ++i) {
    GpuInfo g;
    g.index = i;
    g.nvlink_peers = {i ^ 1};  // 0-1 and 2-3
    inv.gpus.push_back(g);
  }
  Node node;
  node.gpus.resize(4);
  AssignNvLinkGroups(inv, node);
  EXPECT_EQ(node.gpus[0].nvlink_group, node.gpus[1].nvlink_group);
  EXPECT_EQ(node.gpus[2].nvlink_group, node.gpus[3].nvlink_group);
  EXPECT_NE(node.gpus[0].nvlink_group, node.gpus[2].nvlink_group);
}

TEST(NvmlProvider, SamplesCarryEachProcessMemoryAndSmUse) {
  StubControls stub;
  auto nvml = OpenStub();
  ASSERT_NE(nvml, nullptr);
  stub.set_process(1, 4242, 2ull << 30, kNotMig, 63);
  auto samples = nvml->Sample();
  ASSERT_TRUE(samples.ok());
  ASSERT_EQ(samples->size(), 2u);
  const GpuSample& whole = (*samples)[1];
  EXPECT_EQ(whole.uuid, "GPU-stub-0001");
  EXPECT_EQ(whole.util_pct, 87);
  EXPECT_EQ(whole.mem_used_mib, 2048);
  EXPECT_EQ(whole.temperature_c, 41);
  EXPECT_DOUBLE_EQ(whole.power_w, 123.456);
  ASSERT_EQ(whole.processes.size(), 1u);
  EXPECT_EQ(whole.processes[0].pid, 4242);
  EXPECT_EQ(whole.processes[0].used_memory_mib, 2048);
  EXPECT_EQ(whole.processes[0].sm_util, 63);
  EXPECT_EQ((*samples)[0].util_pct, -1);  // MIG: NVML has no whole-GPU utilization
}

TEST(NvmlProvider, MpsClientsAreListedBesideTheirServer) {
  // NVML shows an MPS server among a GPU's compute processes and its clients in a list of
  // their own: each client (a job's process) appears with its memory and SM use.
  StubControls stub;
  auto nvml = OpenStub();
  ASSERT_NE(nvml, nullptr);
  stub.set_mps_client(1, 5001, 1ull << 30, 20);
  stub.set_mps_client(1, 5002, 3ull << 30, 35);
  auto samples = nvml->Sample();
  ASSERT_TRUE(samples.ok());
  std::map<int, GpuProcess> by_pid;
  for (const GpuProcess& p : (*samples)[1].processes) by_pid[p.pid] = p;
  ASSERT_EQ(by_pid.size(), 3u);  // the server (9999) and both clients
  EXPECT_EQ(by_pid[5001].used_memory_mib, 1024);
  EXPECT_EQ(by_pid[5001].sm_util, 20);
  EXPECT_EQ(by_pid[5002].used_memory_mib, 3072);
  EXPECT_EQ(by_pid[5002].sm_util, 35);
  EXPECT_EQ(by_pid[9999].used_memory_mib, 4096);
}

TEST(NvmlProvider, XidEventsNameTheirGpu) {
  StubControls stub;
  auto nvml = OpenStub();
  ASSERT_NE(nvml, nullptr);
  stub.push_xid(1, 79);
  std::vector<GpuEvent> events = nvml->Events(10);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].uuid, "GPU-stub-0001");
  EXPECT_EQ(events[0].xid, 79);
  EXPECT_EQ((*nvml->Sample())[1].last_xid, 79);
}

// The agent's loop is paced by this wait: an NVML that returns early (the stand-in returns
// at once) must not turn it into a busy loop.
TEST(NvmlProvider, EventsWaitTheirTimeoutWhenThereAreNone) {
  StubControls stub;
  auto nvml = OpenStub();
  ASSERT_NE(nvml, nullptr);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(nvml->Events(150).empty());
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(150));
}

TEST(NvmlProvider, CreatesAndDestroysMigInstancesAtTheirSlots) {
  StubControls stub;
  auto nvml = OpenStub();
  ASSERT_NE(nvml, nullptr);
  auto made = nvml->ApplyMig("GPU-stub-0000", {}, {{"1g.10gb", 0}, {"2g.20gb", 2}});
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  ASSERT_EQ(made->size(), 3u);
  std::map<int, std::string> by_start;
  for (const MigDeviceInfo& m : *made) by_start[m.start] = m.profile;
  EXPECT_EQ(by_start, (std::map<int, std::string>{{0, "1g.10gb"}, {2, "2g.20gb"}, {4, "3g.40gb"}}));
  // The same order again (an agent retrying it) changes nothing.
  EXPECT_EQ(nvml->ApplyMig("GPU-stub-0000", {}, {{"1g.10gb", 0}})->size(), 3u);
  // A profile that cannot start there, and one the GPU does not have, are refused by name.
  auto bad = nvml->ApplyMig("GPU-stub-0000", {}, {{"3g.40gb", 2}});
  EXPECT_NE(bad.status().message().find("3g.40gb cannot start at slice 2"), std::string::npos)
      << bad.status().message();
  bad = nvml->ApplyMig("GPU-stub-0000", {}, {{"9g.99gb", 0}});
  EXPECT_NE(bad.status().message().find("no MIG profile 9g.99gb"), std::string::npos) << bad.status().message();
  // Re-partition to one 7g.80gb: everything in the way goes first.
  auto whole = nvml->ApplyMig("GPU-stub-0000", {{"1g.10gb", 0}, {"2g.20gb", 2}, {"3g.40gb", 4}}, {{"7g.80gb", 0}});
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  ASSERT_EQ(whole->size(), 1u);
  EXPECT_EQ((*whole)[0].profile, "7g.80gb");
  EXPECT_EQ((*whole)[0].start, 0);
  EXPECT_EQ(nvml->ApplyMig("GPU-stub-0001", {}, {{"1g.10gb", 0}}).ok(), false);  // not in MIG mode
}

TEST(NvmlProvider, RefusesToDestroyAnInstanceWithAProcessInIt) {
  StubControls stub;
  auto nvml = OpenStub();
  ASSERT_NE(nvml, nullptr);
  unsigned existing_gi = static_cast<unsigned>(nvml->Inventory()->gpus[0].mig_devices[0].gpu_instance);
  stub.set_process(0, 777, 1ull << 30, existing_gi, 0);
  auto refused = nvml->ApplyMig("GPU-stub-0000", {{"3g.40gb", 4}}, {{"7g.80gb", 0}});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("process 777 runs in the 3g.40gb instance"), std::string::npos)
      << refused.status().message();
  EXPECT_EQ(nvml->Inventory()->gpus[0].mig_devices.size(), 1u);  // untouched
  stub.clear_processes();
  EXPECT_TRUE(nvml->ApplyMig("GPU-stub-0000", {{"3g.40gb", 4}}, {{"7g.80gb", 0}}).ok());
}

TEST(NvmlProvider, AMissingLibraryIsReported) {
  std::string why;
  EXPECT_EQ(OpenNvmlProvider(&why, "/nonexistent/libnvidia-ml.so.1"), nullptr);
  EXPECT_NE(why.find("cannot load /nonexistent/libnvidia-ml.so.1"), std::string::npos) << why;
}

// The whole path on "real" GPUs: a standalone server finds the stub through NVML, the
// scheduler reuses the existing instance for the first 3g.40gb job, has the agent create
// one for the second, and each job sees its own MIG device.
TEST(NvmlStandalone, MigJobsRunOnInstancesTheAgentMade) {
  setenv("GANTRY_NVML_LIBRARY", STUB_NVML, 1);
  std::string dir = testing::TempPath("nvml-srv");
  std::filesystem::remove_all(dir);
  testing::ServerProcess server(dir, "detect");
  server.Start();
  unsetenv("GANTRY_NVML_LIBRARY");
  auto alice = server.Client(testing::kAliceToken);
  auto submit = [&](const std::string& yaml) {
    auto r = alice.Post("/v1/jobs", yaml, "application/yaml");
    EXPECT_TRUE(r && r->status == 201) << (r ? r->body : "no answer");
    return testing::Json(r).value("id", "");
  };
  const char* body = "{mig_profile: 3g.40gb, command: 'echo $CUDA_VISIBLE_DEVICES; sleep 30'}";
  std::string first = submit(body);
  std::string second = submit(body);
  auto log_of = [&](const std::string& id) {
    std::string out;
    for (int i = 0; i < 500 && out.empty(); ++i) {
      auto r = alice.Get("/v1/jobs/" + id + "/logs");
      out = r && r->status == 200 ? r->body : "";
      if (out.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return out;
  };
  std::set<std::string> devices = {log_of(first), log_of(second)};
  EXPECT_EQ(devices, (std::set<std::string>{"MIG-stub-existing\n", "MIG-stub-2\n"}));
  auto root = server.Client(testing::kRootToken);
  nlohmann::json nodes = testing::Json(root.Get("/v1/nodes"));
  ASSERT_EQ(nodes["nodes"].size(), 1u) << nodes.dump();
  nlohmann::json mig = nodes["nodes"][0]["gpus"][0]["mig_instances"];
  ASSERT_EQ(mig.size(), 2u) << mig.dump();
  for (const auto& m : mig) EXPECT_EQ(m["uuid"].get<std::string>().rfind("MIG-stub-", 0), 0u) << mig.dump();
  std::string table;
  testing::RunCommand(
      fmt::format("GANTRY_SERVER={} GANTRY_TOKEN={} {} nodes", server.address(), testing::kRootToken, GANTRY_BINARY),
      &table);
  EXPECT_NE(table.find("[mig 3g.40gb@4,3g.40gb@0]"), std::string::npos) << table;
  for (const std::string& id : {first, second}) alice.Post("/v1/jobs/" + id + "/cancel", "", "text/plain");
}

}  // namespace
}  // namespace gantry

namespace gantry {
namespace {

TEST(DcgmProvider, AddsProfilingFieldsAndEccHistoryToNvmlReadings) {
  StubControls stub;
  std::string why;
  auto provider = WithDcgm(OpenStub(), &why, STUB_DCGM);
  ASSERT_NE(provider, nullptr);
  EXPECT_EQ(provider->name(), "nvml+dcgm") << why;
  stub.set_process(1, 4242, 1ull << 30, kNotMig, 50);
  auto samples = provider->Sample();
  ASSERT_TRUE(samples.ok());
  ASSERT_EQ(samples->size(), 2u);
  const GpuSample& g0 = (*samples)[0];
  EXPECT_DOUBLE_EQ(g0.sm_active, 0.62);
  EXPECT_DOUBLE_EQ(g0.sm_occupancy, 0.31);
  EXPECT_DOUBLE_EQ(g0.dram_active, 0.2);
  EXPECT_EQ(g0.tensor_active, -1);  // blank in DCGM: unknown, not zero
  const GpuSample& g1 = (*samples)[1];
  EXPECT_EQ(g1.ecc_uncorrected_lifetime, 3);
  ASSERT_EQ(g1.processes.size(), 1u);  // NVML's part is all there
  EXPECT_EQ(g1.processes[0].sm_util, 50);
  EXPECT_EQ(provider->Inventory()->gpus.size(), 2u);
  EXPECT_TRUE(provider->ApplyMig("GPU-stub-0000", {}, {{"1g.10gb", 0}}).ok());
}

TEST(DcgmProvider, ANewXidSeenByDcgmIsAnEventWhenTheBaseHasNone) {
  auto lib = dlopen(STUB_DCGM, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr);
  auto set_xid = reinterpret_cast<void (*)(unsigned, int, int64_t)>(dlsym(lib, "stub_dcgm_set_xid"));
  set_xid(1, 13, 1000);  // before the agent started: reading only, no event
  GpuInventory inv;
  for (int i = 0; i < 2; ++i) {
    GpuInfo g;
    g.index = i;
    g.uuid = "GPU-stub-000" + std::to_string(i);
    g.name = "H100-80GB";
    inv.gpus.push_back(g);
  }
  // A base provider without XID events of its own (as nvidia-smi).
  struct Eventless : FakeGpuProvider {
    using FakeGpuProvider::FakeGpuProvider;
    bool DeliversXidEvents() const override { return false; }
  };
  std::string why;
  auto provider = WithDcgm(std::make_unique<Eventless>(inv), &why, STUB_DCGM);
  ASSERT_EQ(provider->name(), "fake+dcgm") << why;
  EXPECT_EQ((*provider->Sample())[1].last_xid, 13);  // the last XID as DCGM keeps it (a gauge)
  EXPECT_TRUE(provider->Events(0).empty());          // but not news
  set_xid(1, 79, 2000);
  provider->Sample();
  std::vector<GpuEvent> events = provider->Events(0);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].uuid, "GPU-stub-0001");
  EXPECT_EQ(events[0].xid, 79);
  // Over a base that reports XIDs itself (NVML with events, the fake), DCGM adds none: no
  // XID is reported twice.
  auto over_fake = WithDcgm(std::make_unique<FakeGpuProvider>(inv), &why, STUB_DCGM);
  over_fake->Sample();
  set_xid(1, 48, 3000);
  over_fake->Sample();
  EXPECT_TRUE(over_fake->Events(0).empty());
  dlclose(lib);
}

TEST(DcgmProvider, WithoutTheLibraryTheBaseProviderStays) {
  std::string why;
  GpuInventory inv;
  auto provider = WithDcgm(std::make_unique<FakeGpuProvider>(inv), &why, "/nonexistent/libdcgm.so.4");
  ASSERT_NE(provider, nullptr);
  EXPECT_EQ(provider->name(), "fake");
  EXPECT_NE(why.find("cannot load /nonexistent/libdcgm.so.4"), std::string::npos) << why;
}

}  // namespace
}  // namespace gantry
