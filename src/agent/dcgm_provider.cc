// DCGM on top of another provider: libdcgm loaded with dlopen, an embedded host engine in
// manual mode (fields update when the agent samples, no timer of DCGM's own), and the
// fields NVML lacks added to each reading: profiling ratios (SM active and occupancy,
// tensor pipe, DRAM), lifetime uncorrectable ECC, and the last XID. Inventory, processes,
// events and MIG calls stay the base provider's.
#include <fmt/format.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>

#include "agent/gpu_provider.h"
#include "agent/nvml_api.h"  // dlfcn

namespace gantry {

namespace {

namespace dcgm {

using Return = int;
using Handle = uintptr_t;
using GroupId = uintptr_t;
using FieldGroupId = uintptr_t;

constexpr Return kOk = 0;
constexpr int kOperationModeManual = 2;
constexpr GroupId kAllGpus = 0x7fffffff;
constexpr int kMaxDevices = 32;
constexpr unsigned short kTypeDouble = 'd';
constexpr unsigned short kTypeInt64 = 'i';
constexpr unsigned short kTypeString = 's';
constexpr double kDoubleBlank = 140737488355328.0;
constexpr int64_t kInt64Blank = 0x7ffffffffffffff0LL;

// Field ids (stable across releases; ../shared/reference/gpu-facts.md 2.1).
constexpr unsigned short kUuid = 54;
constexpr unsigned short kXidErrors = 230;
constexpr unsigned short kEccDbeAggregate = 313;
constexpr unsigned short kSmActive = 1002;
constexpr unsigned short kSmOccupancy = 1003;
constexpr unsigned short kTensorActive = 1004;
constexpr unsigned short kDramActive = 1005;

struct FieldValueV1 {
  unsigned version;
  unsigned short field_id;
  unsigned short field_type;
  int status;
  int64_t ts;  // µs since 1970
  union {
    int64_t i64;
    double dbl;
    char str[256];
    char blob[4096];
  } value;
};
static_assert(sizeof(FieldValueV1) == 4120);
constexpr unsigned kFieldValueVersion1 = sizeof(FieldValueV1) | (1u << 24);

struct Api {
  void* lib = nullptr;
  Return (*init)() = nullptr;
  Return (*shutdown)() = nullptr;
  Return (*start_embedded)(int, Handle*) = nullptr;
  Return (*stop_embedded)(Handle) = nullptr;
  const char* (*error_string)(Return) = nullptr;
  Return (*supported_devices)(Handle, unsigned*, int*) = nullptr;
  Return (*field_group_create)(Handle, int, unsigned short*, const char*, FieldGroupId*) = nullptr;
  Return (*field_group_destroy)(Handle, FieldGroupId) = nullptr;
  Return (*watch_fields)(Handle, GroupId, FieldGroupId, long long, double, int) = nullptr;
  Return (*update_all_fields)(Handle, int) = nullptr;
  Return (*latest_values)(Handle, int, unsigned short*, unsigned, FieldValueV1*) = nullptr;

  template <typename F>
  void Load(F*& fn, const char* symbol) {
    fn = reinterpret_cast<F*>(dlsym(lib, symbol));
  }
};

bool Number(const FieldValueV1& v, double* out) {
  if (v.status != kOk) return false;
  if (v.field_type == kTypeDouble && v.value.dbl < kDoubleBlank) {
    *out = v.value.dbl;
    return true;
  }
  if (v.field_type == kTypeInt64 && v.value.i64 < kInt64Blank) {
    *out = static_cast<double>(v.value.i64);
    return true;
  }
  return false;
}

}  // namespace dcgm

class DcgmProvider : public GpuProvider {
 public:
  explicit DcgmProvider(std::unique_ptr<GpuProvider> base) : base_(std::move(base)) {}
  ~DcgmProvider() override {
    if (handle_) {
      if (fields_) api_.field_group_destroy(handle_, fields_);
      if (profiling_) api_.field_group_destroy(handle_, profiling_);
      api_.stop_embedded(handle_);
    }
    if (initialized_) api_.shutdown();
    if (api_.lib) dlclose(api_.lib);
  }

  bool Open(const std::string& library, std::string* why) {
    api_.lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!api_.lib) {
      *why = "cannot load " + library + ": " + dlerror();
      return false;
    }
    api_.Load(api_.init, "dcgmInit");
    api_.Load(api_.shutdown, "dcgmShutdown");
    api_.Load(api_.start_embedded, "dcgmStartEmbedded");
    api_.Load(api_.stop_embedded, "dcgmStopEmbedded");
    api_.Load(api_.error_string, "errorString");
    api_.Load(api_.supported_devices, "dcgmGetAllSupportedDevices");
    api_.Load(api_.field_group_create, "dcgmFieldGroupCreate");
    api_.Load(api_.field_group_destroy, "dcgmFieldGroupDestroy");
    api_.Load(api_.watch_fields, "dcgmWatchFields");
    api_.Load(api_.update_all_fields, "dcgmUpdateAllFields");
    api_.Load(api_.latest_values, "dcgmGetLatestValuesForFields");
    if (!api_.init || !api_.shutdown || !api_.start_embedded || !api_.stop_embedded || !api_.supported_devices ||
        !api_.field_group_create || !api_.field_group_destroy || !api_.watch_fields || !api_.update_all_fields ||
        !api_.latest_values) {
      *why = library + " lacks the calls the agent needs";
      return false;
    }
    if (dcgm::Return rc = api_.init(); rc != dcgm::kOk) return Fail("dcgmInit", rc, why);
    initialized_ = true;
    if (dcgm::Return rc = api_.start_embedded(dcgm::kOperationModeManual, &handle_); rc != dcgm::kOk) {
      handle_ = 0;
      return Fail("dcgmStartEmbedded", rc, why);
    }
    unsigned short base[] = {dcgm::kUuid, dcgm::kXidErrors, dcgm::kEccDbeAggregate};
    if (!Watch(base, "gantry-base", &fields_, why)) return false;
    // Profiling fields need a datacenter GPU with profiling support; without them DCGM
    // still adds ECC history and XIDs.
    unsigned short prof[] = {dcgm::kSmActive, dcgm::kSmOccupancy, dcgm::kTensorActive, dcgm::kDramActive};
    std::string ignored;
    if (!Watch(prof, "gantry-profiling", &profiling_, &ignored)) profiling_ = 0;
    api_.update_all_fields(handle_, 1);
    unsigned ids[dcgm::kMaxDevices] = {};
    int count = 0;
    if (dcgm::Return rc = api_.supported_devices(handle_, ids, &count); rc != dcgm::kOk) {
      return Fail("dcgmGetAllSupportedDevices", rc, why);
    }
    for (int i = 0; i < count && i < dcgm::kMaxDevices; ++i) {
      unsigned short field = dcgm::kUuid;
      dcgm::FieldValueV1 v{};
      v.version = dcgm::kFieldValueVersion1;
      if (api_.latest_values(handle_, static_cast<int>(ids[i]), &field, 1, &v) != dcgm::kOk || v.status != dcgm::kOk ||
          v.field_type != dcgm::kTypeString) {
        continue;
      }
      v.value.str[sizeof(v.value.str) - 1] = 0;
      gpu_ids_[v.value.str] = static_cast<int>(ids[i]);
    }
    if (gpu_ids_.empty()) {
      *why = "DCGM sees no GPU";
      return false;
    }
    return true;
  }

  std::unique_ptr<GpuProvider> ReleaseBase() { return std::move(base_); }

  std::string name() const override { return base_->name() + "+dcgm"; }
  bool DeliversXidEvents() const override { return true; }  // the base's, or DCGM's
  Expected<GpuInventory> Inventory() override { return base_->Inventory(); }

  Expected<std::vector<GpuSample>> Sample() override {
    auto samples = base_->Sample();
    if (!samples) return samples;
    api_.update_all_fields(handle_, 1);
    std::lock_guard<std::mutex> lock(mu_);
    for (GpuSample& s : *samples) {
      auto it = gpu_ids_.find(s.uuid);
      if (it != gpu_ids_.end()) AddFields(it->second, s);
    }
    return samples;
  }

  std::vector<GpuEvent> Events(int timeout_ms) override {
    std::vector<GpuEvent> out = base_->Events(timeout_ms);
    std::lock_guard<std::mutex> lock(mu_);
    out.insert(out.end(), xid_events_.begin(), xid_events_.end());
    xid_events_.clear();
    return out;
  }

  Expected<std::vector<MigDeviceInfo>> ApplyMig(const std::string& gpu_uuid,
                                                const std::vector<MigInstanceSpec>& destroy,
                                                const std::vector<MigInstanceSpec>& create) override {
    return base_->ApplyMig(gpu_uuid, destroy, create);
  }

 private:
  bool Fail(const char* call, dcgm::Return rc, std::string* why) {
    *why = fmt::format("{}: {} ({})", call, api_.error_string ? api_.error_string(rc) : "error", rc);
    return false;
  }

  template <size_t N>
  bool Watch(unsigned short (&ids)[N], const char* group_name, dcgm::FieldGroupId* group, std::string* why) {
    if (dcgm::Return rc = api_.field_group_create(handle_, static_cast<int>(N), ids, group_name, group);
        rc != dcgm::kOk) {
      *group = 0;
      return Fail("dcgmFieldGroupCreate", rc, why);
    }
    // Keep one second of samples, two at most: the agent reads the latest only.
    if (dcgm::Return rc = api_.watch_fields(handle_, dcgm::kAllGpus, *group, 1000000, 1.0, 2); rc != dcgm::kOk) {
      api_.field_group_destroy(handle_, *group);
      *group = 0;
      return Fail("dcgmWatchFields", rc, why);
    }
    return true;
  }

  void AddFields(int gpu_id, GpuSample& s) {
    unsigned short ids[] = {dcgm::kXidErrors,   dcgm::kEccDbeAggregate, dcgm::kSmActive,
                            dcgm::kSmOccupancy, dcgm::kTensorActive,    dcgm::kDramActive};
    constexpr unsigned kCount = sizeof(ids) / sizeof(ids[0]);
    unsigned asked = profiling_ ? kCount : 2;
    std::vector<dcgm::FieldValueV1> values(asked);
    for (auto& v : values) v.version = dcgm::kFieldValueVersion1;
    if (api_.latest_values(handle_, gpu_id, ids, asked, values.data()) != dcgm::kOk) return;
    for (const dcgm::FieldValueV1& v : values) {
      double x = 0;
      if (!dcgm::Number(v, &x)) continue;
      switch (v.field_id) {
        case dcgm::kXidErrors: NoteXid(s, static_cast<int>(x), v.ts); break;
        case dcgm::kEccDbeAggregate: s.ecc_uncorrected_lifetime = static_cast<int64_t>(x); break;
        case dcgm::kSmActive: s.sm_active = x; break;
        case dcgm::kSmOccupancy: s.sm_occupancy = x; break;
        case dcgm::kTensorActive: s.tensor_active = x; break;
        case dcgm::kDramActive: s.dram_active = x; break;
        default: break;
      }
    }
  }

  // DCGM keeps the last XID with its time: a newer one is an event, unless the base
  // provider already delivers XID events itself (NVML with an event set).
  void NoteXid(GpuSample& s, int xid, int64_t ts) {
    if (xid <= 0) return;
    if (s.last_xid == 0) s.last_xid = xid;
    int64_t& seen = xid_seen_us_[s.uuid];
    bool first_reading = seen == 0;
    if (ts <= seen) return;
    seen = ts;
    if (first_reading || base_->DeliversXidEvents()) return;  // first: from before the agent started
    xid_events_.push_back({s.uuid, xid, fmt::format("XID {} (DCGM)", xid)});
  }

  std::unique_ptr<GpuProvider> base_;
  dcgm::Api api_;
  bool initialized_ = false;
  dcgm::Handle handle_ = 0;
  dcgm::FieldGroupId fields_ = 0;
  dcgm::FieldGroupId profiling_ = 0;
  std::map<std::string, int> gpu_ids_;  // UUID -> DCGM GPU id
  std::mutex mu_;
  std::map<std::string, int64_t> xid_seen_us_;
  std::vector<GpuEvent> xid_events_;
};

}  // namespace

std::unique_ptr<GpuProvider> WithDcgm(std::unique_ptr<GpuProvider> base, std::string* why, std::string library) {
  if (!base) return base;
  std::vector<std::string> candidates;
  if (!library.empty()) {
    candidates = {library};
  } else if (const char* env = std::getenv("GANTRY_DCGM_LIBRARY"); env && *env) {
    if (std::string(env) == "none") {
      *why = "DCGM turned off (GANTRY_DCGM_LIBRARY=none)";
      return base;
    }
    candidates = {env};
  } else {
    candidates = {"libdcgm.so.4", "libdcgm.so.3"};
  }
  std::string reasons;
  for (const std::string& lib : candidates) {
    auto dcgm = std::make_unique<DcgmProvider>(std::move(base));
    std::string why_this;
    if (dcgm->Open(lib, &why_this)) return dcgm;
    base = dcgm->ReleaseBase();
    reasons += (reasons.empty() ? "" : "; ") + why_this;
  }
  *why = reasons;
  return base;
}

}  // namespace gantry

namespace gantry {

std::unique_ptr<GpuProvider> DetectGpuProvider(const std::string& which, std::string* why) {
  std::string why_nvml = "not tried", why_smi = "not tried";
  std::unique_ptr<GpuProvider> provider;
  if (which == "auto" || which == "nvml") provider = OpenNvmlProvider(&why_nvml);
  if (!provider && (which == "auto" || which == "nvidia-smi")) provider = OpenNvidiaSmiProvider(&why_smi);
  if (!provider) {
    *why = "NVML: " + why_nvml + "; nvidia-smi: " + why_smi;
    return nullptr;
  }
  std::string why_dcgm;
  return WithDcgm(std::move(provider), &why_dcgm);
}

}  // namespace gantry
