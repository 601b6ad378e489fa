// Sharing-mode names and validation of job specifications.
#include "core/job.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "core/encoding.h"
#include "core/scheduler_config.h"

namespace gantry {

namespace {
constexpr int kMaxGpusPerJob = 65536;
}  // namespace

const char* ToString(SharingMode m) {
  switch (m) {
    case SharingMode::kExclusive: return "exclusive";
    case SharingMode::kTimeSlice: return "time-slice";
    case SharingMode::kMps: return "mps";
    case SharingMode::kMig: return "mig";
    case SharingMode::kAuto: return "auto";
  }
  return "?";
}

bool ParseSharingMode(const std::string& s, SharingMode* out) {
  for (SharingMode m :
       {SharingMode::kExclusive, SharingMode::kTimeSlice, SharingMode::kMps, SharingMode::kMig, SharingMode::kAuto}) {
    if (s == ToString(m)) {
      *out = m;
      return true;
    }
  }
  if (s == "timeslice" || s == "time_slice") {
    *out = SharingMode::kTimeSlice;
    return true;
  }
  return false;
}

int EffectiveMpsThreadPercent(const GpuRequest& r) {
  if (r.mps_thread_percent > 0) return r.mps_thread_percent;
  return std::max(1, (r.gpu_milli + 5) / 10);
}

uint64_t AllowedTypeMask(const GpuRequest& r, const GpuCatalog& catalog) {
  if (r.gpu_types.empty()) return catalog.size() >= 64 ? ~uint64_t{0} : (uint64_t{1} << catalog.size()) - 1;
  uint64_t mask = 0;
  for (const std::string& name : r.gpu_types) {
    if (const GpuType* t = catalog.Find(name)) mask |= uint64_t{1} << t->id;
  }
  return mask;
}

namespace {

Status ValidateShape(const GpuRequest& r) {
  switch (r.sharing) {
    case SharingMode::kExclusive:
      if (r.gpus <= 0) return Status::Invalid("gpus", fmt::format("must be at least 1, got {}", r.gpus));
      if (r.gpus > kMaxGpusPerJob)
        return Status::Invalid("gpus", fmt::format("{} is more than {}", r.gpus, kMaxGpusPerJob));
      if (r.gpu_milli != 0) return Status::Invalid("gpu_fraction", "a fraction needs sharing auto, mps or time-slice");
      if (!r.mig_profile.empty()) return Status::Invalid("mig_profile", "a MIG profile needs sharing mig");
      if (r.num_nodes < 0 || r.num_nodes > kMaxNodesPerJob) {
        return Status::Invalid("nodes", fmt::format("must be within 0..{}, got {}", kMaxNodesPerJob, r.num_nodes));
      }
      if (r.num_nodes > 0 && r.gpus % r.num_nodes != 0) {
        return Status::Invalid("nodes", fmt::format("{} GPUs do not split evenly over {} nodes", r.gpus, r.num_nodes));
      }
      return Status::Ok();
    case SharingMode::kTimeSlice:
    case SharingMode::kMps:
    case SharingMode::kAuto:
      if (r.gpu_milli <= 0 || r.gpu_milli > kMilliPerGpu) {
        return Status::Invalid("gpu_fraction", fmt::format("must be in (0, 1], got {:g}", r.gpu_milli / 1000.0));
      }
      if (r.gpus != 1) return Status::Invalid("gpus", "a fractional request uses exactly one GPU");
      if (r.num_nodes > 1) return Status::Invalid("nodes", "a fractional request runs on one node");
      if (!r.mig_profile.empty()) return Status::Invalid("mig_profile", "a MIG profile needs sharing mig");
      if (r.mps_thread_percent < 0 || r.mps_thread_percent > 100) {
        return Status::Invalid("mps_thread_percent", "must be within 1..100");
      }
      if (r.sharing != SharingMode::kMps && r.mps_thread_percent != 0) {
        return Status::Invalid("mps_thread_percent", "only for sharing mps (give sharing: mps with it)");
      }
      return Status::Ok();
    case SharingMode::kMig:
      if (r.mig_profile.empty()) return Status::Invalid("mig_profile", "sharing mig needs a MIG profile");
      if (r.gpus != 1) return Status::Invalid("gpus", "a MIG request uses exactly one MIG instance");
      if (r.gpu_milli != 0) return Status::Invalid("gpu_fraction", "a MIG request takes no fraction");
      if (r.num_nodes > 1) return Status::Invalid("nodes", "a MIG request runs on one node");
      return Status::Ok();
  }
  return Status::Invalid("sharing", "unknown sharing mode");
}

}  // namespace

bool TypeCanServe(const GpuType& t, const GpuRequest& r) {
  switch (r.sharing) {
    case SharingMode::kExclusive: return t.memory_mib >= r.gpu_memory_mib;
    case SharingMode::kTimeSlice:
    case SharingMode::kAuto: return t.memory_mib * r.gpu_milli / kMilliPerGpu >= r.gpu_memory_mib;
    case SharingMode::kMps: return t.memory_mib >= r.gpu_memory_mib;
    case SharingMode::kMig: {
      int p = t.FindMigProfile(r.mig_profile);
      return p >= 0 && t.mig_profiles[p].memory_mib >= r.gpu_memory_mib;
    }
  }
  return false;
}

namespace {

bool IsEnvName(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

// Variables the dynamic loader or libc act on before the program runs, and those Gantry
// sets itself (GPU assignment, MPS daemon, job identity): a job may not set them.
std::string ReservedEnvReason(const std::string& name) {
  static const char* const kLoader[] = {"GCONV_PATH",       "GETCONF_DIR",  "HOSTALIASES", "LOCALDOMAIN",
                                        "LOCPATH",          "MALLOC_TRACE", "NIS_PATH",    "NLSPATH",
                                        "RESOLV_HOST_CONF", "RES_OPTIONS"};
  if (name.rfind("LD_", 0) == 0) return "is a dynamic loader variable; jobs may not set LD_* variables";
  for (const char* v : kLoader) {
    if (name == v) return "is a variable libc acts on before the job runs; jobs may not set it";
  }
  if (name.rfind("GANTRY_", 0) == 0 || name.rfind("CUDA_MPS_", 0) == 0 || name == "CUDA_VISIBLE_DEVICES" ||
      name == "NVIDIA_VISIBLE_DEVICES") {
    return "is set by Gantry for each run";
  }
  return "";
}

// Control characters (C0, DEL) would reach terminals and logs as they are.
bool HasControlChar(const std::string& s) {
  return std::any_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
}

// User, team and project names: letters, digits and . _ - @, starting with a letter or
// digit; no spaces, quotes or shell syntax.
bool IsPlainName(const std::string& s) {
  if (s.empty() || !std::isalnum(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' || c == '@';
  });
}

// Text is stored and shown as it was given: bytes that are not UTF-8 are refused, not
// replaced (U+FFFD) on the way to the store.
Status CheckUtf8(const JobSpec& spec) {
  std::vector<std::pair<std::string, const std::string*>> texts = {{"name", &spec.name},
                                                                   {"command", &spec.command},
                                                                   {"working_dir", &spec.working_dir},
                                                                   {"container_image", &spec.container.image},
                                                                   {"container_workdir", &spec.container.workdir},
                                                                   {"array", &spec.array},
                                                                   {"dependency", &spec.dependency},
                                                                   {"webhook", &spec.webhook},
                                                                   {"notify_format", &spec.notify_format},
                                                                   {"mail_user", &spec.mail_user}};
  for (const auto& [k, v] : spec.node_selector) {
    texts.emplace_back("node_selector", &k);
    texts.emplace_back("node_selector." + k, &v);
  }
  for (const Taint& t : spec.tolerations) {
    texts.emplace_back("tolerations", &t.key);
    texts.emplace_back("tolerations", &t.value);
  }
  for (const LabelPreference& l : spec.preferred_labels) {
    texts.emplace_back("preferred_labels", &l.key);
    texts.emplace_back("preferred_labels", &l.value);
  }
  for (const auto& [field, vars] : {std::pair{"env", &spec.env}, std::pair{"container_env", &spec.container.env}}) {
    for (const auto& [k, v] : *vars) texts.emplace_back(std::string(field) + "." + k, &v);
  }
  for (size_t i = 0; i < spec.container.mounts.size(); ++i) {
    texts.emplace_back(fmt::format("container_mounts[{}]", i), &spec.container.mounts[i]);
  }
  for (const auto& [field, text] : texts) {
    if (long at = InvalidUtf8At(*text); at >= 0) {
      return Status::Invalid(field, fmt::format("is not valid UTF-8 (byte {})", at));
    }
  }
  return Status::Ok();
}

// The fields the agent uses to run the job: sizes bounded, names well formed.
Status ValidateRunFields(const JobSpec& spec) {
  constexpr size_t kMaxCommand = 64 * 1024;
  if (spec.name.size() > 256) return Status::Invalid("name", "longer than 256 characters");
  if (HasControlChar(spec.name)) return Status::Invalid("name", "contains a control character");
  if (spec.command.size() > kMaxCommand) return Status::Invalid("command", "longer than 64 KiB");
  if (spec.command.find('\0') != std::string::npos) return Status::Invalid("command", "contains a NUL byte");
  if (!spec.working_dir.empty() && spec.working_dir[0] != '/') {
    return Status::Invalid("working_dir", "must be an absolute path");
  }
  if (spec.working_dir.size() > 4096) return Status::Invalid("working_dir", "longer than 4096 characters");
  if (HasControlChar(spec.working_dir)) return Status::Invalid("working_dir", "contains a control character");
  // The container's variables follow the same rules (one per line of the runtime's env file).
  for (const auto& [field, vars] : {std::pair{"env", &spec.env}, std::pair{"container_env", &spec.container.env}}) {
    if (vars->size() > 256) return Status::Invalid(field, "more than 256 variables");
    for (const auto& [k, v] : *vars) {
      std::string at = std::string(field) + "." + k;
      if (!IsEnvName(k) || k.size() > 256) {
        return Status::Invalid(field, fmt::format("'{}' is not a variable name", k));
      }
      if (std::string why = ReservedEnvReason(k); !why.empty()) return Status::Invalid(at, why);
      if (v.size() > 32 * 1024) return Status::Invalid(at, "longer than 32 KiB");
      if (v.find('\0') != std::string::npos) return Status::Invalid(at, "contains a NUL byte");
      if (spec.container.enabled() && v.find('\n') != std::string::npos) {
        return Status::Invalid(at, "a container job's variables are one line each");
      }
    }
  }
  if (Status s = CheckUtf8(spec); !s.ok()) return s;
  if (spec.max_retries < 0 || spec.max_retries > 100) return Status::Invalid("max_retries", "must be within 0..100");
  if (spec.retries_on_failure < 0 || spec.retries_on_failure > 100) {
    return Status::Invalid("retries_on_failure", "must be within 0..100");
  }
  if (!(spec.cost_limit >= 0 && spec.cost_limit <= 1e9)) {
    return Status::Invalid("cost_limit", "must be within 0..1e9 (0: no limit)");
  }
  const std::pair<const char*, const std::string*> names[] = {
      {"id", &spec.id}, {"user", &spec.user}, {"team", &spec.team}, {"project", &spec.project}};
  for (const auto& [field, value] : names) {
    if (value->size() > 128) return Status::Invalid(field, "longer than 128 characters");
    if (!value->empty() && !IsPlainName(*value)) {
      return Status::Invalid(field, "must be letters, digits and . _ - @, starting with a letter or digit");
    }
  }
  return Status::Ok();
}

}  // namespace

Status ValidateJobSpec(JobSpec& spec, const GpuCatalog& catalog, const SchedulerConfig& config) {
  if (spec.user.empty()) return Status::Invalid("user", "is required");
  if (spec.team.empty()) return Status::Invalid("team", "is required");
  if (spec.priority_class.empty()) spec.priority_class = config.default_priority_class;
  if (config.FindClass(spec.priority_class) < 0) {
    return Status::Invalid(
        "priority", fmt::format("unknown priority class '{}' (known: {})", spec.priority_class, config.ClassNames()));
  }
  GpuRequest& r = spec.request;
  if (Status s = ValidateShape(r); !s.ok()) return s;
  // Each type once (by name or alias): a list is then no longer than the catalog.
  std::vector<bool> listed(catalog.size(), false);
  for (const std::string& name : r.gpu_types) {
    const GpuType* type = catalog.Find(name);
    if (!type) {
      return Status::Invalid("gpu_types", fmt::format("unknown GPU type '{}' (known: {})", name, catalog.Names()));
    }
    if (listed[type->id]) return Status::Invalid("gpu_types", fmt::format("'{}' is listed twice", name));
    listed[type->id] = true;
  }
  if (r.gpu_memory_mib < 0) return Status::Invalid("gpu_memory_gb", "must be >= 0");
  if (r.cpus < 0) return Status::Invalid("cpus", fmt::format("must be >= 0, got {}", r.cpus));
  if (r.memory_mib < 0) return Status::Invalid("memory_gb", "must be >= 0");
  if (spec.estimated_duration_ms < 0) return Status::Invalid("estimated_duration", "must be >= 0");
  if (spec.time_limit_ms == kTimeLimitAsAllowed) spec.time_limit_ms = config.max_time_limit_ms;
  if (spec.time_limit_ms < 0) return Status::Invalid("time_limit", "must be >= 0");
  if (spec.time_limit_ms == 0) spec.time_limit_ms = config.default_time_limit_ms;
  if (spec.time_limit_ms > config.max_time_limit_ms) {
    return Status::Invalid("time_limit", fmt::format("{} exceeds the maximum {}", FormatDuration(spec.time_limit_ms),
                                                     FormatDuration(config.max_time_limit_ms)));
  }
  if (Status s = ValidateRunFields(spec); !s.ok()) return s;
  for (const LabelPreference& p : spec.preferred_labels) {
    if (p.key.empty()) return Status::Invalid("preferred_labels", "label key is empty");
    if (p.weight < 0 || p.weight > 100) return Status::Invalid("preferred_labels", "weight must be within 0..100");
  }
  uint64_t mask = AllowedTypeMask(r, catalog);
  bool any_type = false;
  bool any_mig = false;
  for (const GpuType& t : catalog.types()) {
    if (!(mask >> t.id & 1)) continue;
    if (r.sharing == SharingMode::kMig && t.FindMigProfile(r.mig_profile) >= 0) any_mig = true;
    if (TypeCanServe(t, r)) any_type = true;
  }
  if (r.sharing == SharingMode::kMig && !any_mig) {
    return Status::Invalid("mig_profile", fmt::format("no allowed GPU type has MIG profile '{}'", r.mig_profile));
  }
  if (!any_type) {
    return Status::Invalid(
        "gpu_memory_gb",
        fmt::format("no allowed GPU type offers {} MiB of GPU memory to this request", r.gpu_memory_mib));
  }
  return Status::Ok();
}

}  // namespace gantry
