// A stand-in libdcgm for tests: the embedded-mode calls the agent makes, over two GPUs with
// the UUIDs of the NVML stub. GPU 0 reports profiling ratios (its tensor field is blank, as
// on a GPU without that counter); GPU 1 has lifetime ECC errors and, when a test sets one,
// an XID with its time.
#include <cstdint>
#include <cstring>
#include <mutex>

namespace {

struct FieldValue {
  unsigned version;
  unsigned short field_id, field_type;
  int status;
  int64_t ts;
  union {
    int64_t i64;
    double dbl;
    char str[256];
    char blob[4096];
  } value;
};

constexpr int kOk = 0, kBadParam = -1, kNotWatched = -15;
constexpr double kDoubleBlank = 140737488355328.0;

std::mutex mu;
bool watching = false;
int last_xid[2] = {0, 0};
int64_t xid_ts[2] = {0, 0};

void Fill(unsigned gpu, unsigned short field, FieldValue* v) {
  v->field_id = field;
  v->status = kOk;
  v->ts = 1700000000000000;
  v->field_type = 'd';
  switch (field) {
    case 54:
      v->field_type = 's';
      std::snprintf(v->value.str, sizeof(v->value.str), "GPU-stub-000%u", gpu);
      return;
    case 230:
      v->field_type = 'i';
      v->value.i64 = last_xid[gpu];
      v->ts = xid_ts[gpu];
      return;
    case 313:
      v->field_type = 'i';
      v->value.i64 = gpu == 1 ? 3 : 0;
      return;
    case 1002: v->value.dbl = gpu == 0 ? 0.62 : 0.0; return;
    case 1003: v->value.dbl = gpu == 0 ? 0.31 : 0.0; return;
    case 1004: v->value.dbl = gpu == 0 ? kDoubleBlank : 0.0; return;
    case 1005: v->value.dbl = gpu == 0 ? 0.2 : 0.0; return;
    default: v->status = kNotWatched;
  }
}

}  // namespace

extern "C" {

int dcgmInit() { return kOk; }
int dcgmShutdown() { return kOk; }
int dcgmStartEmbedded(int mode, uintptr_t* handle) {
  if (mode != 2) return kBadParam;  // the agent asks for manual mode
  *handle = 42;
  return kOk;
}
int dcgmStopEmbedded(uintptr_t) { return kOk; }
const char* errorString(int) { return "stub DCGM error"; }
int dcgmGetAllSupportedDevices(uintptr_t, unsigned* ids, int* count) {
  ids[0] = 0;
  ids[1] = 1;
  *count = 2;
  return kOk;
}
int dcgmFieldGroupCreate(uintptr_t, int n, unsigned short* ids, const char*, uintptr_t* group) {
  if (n <= 0 || !ids) return kBadParam;
  *group = ids[0];
  return kOk;
}
int dcgmFieldGroupDestroy(uintptr_t, uintptr_t) { return kOk; }
int dcgmWatchFields(uintptr_t, uintptr_t group, uintptr_t, long long freq_us, double, int) {
  if (group != 0x7fffffff || freq_us <= 0) return kBadParam;
  std::lock_guard<std::mutex> lock(mu);
  watching = true;
  return kOk;
}
int dcgmUpdateAllFields(uintptr_t, int) { return kOk; }
int dcgmGetLatestValuesForFields(uintptr_t, int gpu, unsigned short* fields, unsigned count, FieldValue* values) {
  std::lock_guard<std::mutex> lock(mu);
  if (!watching || gpu < 0 || gpu > 1) return kBadParam;
  for (unsigned i = 0; i < count; ++i) {
    if (values[i].version != (sizeof(FieldValue) | (1u << 24))) return kBadParam;
    Fill(static_cast<unsigned>(gpu), fields[i], &values[i]);
  }
  return kOk;
}

// Test control.
void stub_dcgm_set_xid(unsigned gpu, int xid, int64_t ts_us) {
  std::lock_guard<std::mutex> lock(mu);
  last_xid[gpu] = xid;
  xid_ts[gpu] = ts_us;
}

}  // extern "C"
