// JobOfPod: a pod's spec, labels and annotations read into a Gantry job spec; JobOfGang:
// a gang's pods as one.
#include "core/kube_pod.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>

#include "core/duration.h"
#include "core/json_fields.h"
#include "core/sharing_config.h"
#include "core/time.h"

namespace gantry {

namespace {

constexpr const char* kGpuResource = "nvidia.com/gpu";
constexpr const char* kMigResourcePrefix = "nvidia.com/mig-";
constexpr int64_t kMiB = 1024 * 1024;

// The multiplier of a quantity's suffix, or 0 when it is not one.
long double SuffixMultiplier(const std::string& suffix) {
  static const std::map<std::string, long double> multipliers = {{"", 1},
                                                                 {"n", 1e-9L},
                                                                 {"u", 1e-6L},
                                                                 {"m", 1e-3L},
                                                                 {"k", 1e3L},
                                                                 {"M", 1e6L},
                                                                 {"G", 1e9L},
                                                                 {"T", 1e12L},
                                                                 {"P", 1e15L},
                                                                 {"E", 1e18L},
                                                                 {"Ki", 1024.0L},
                                                                 {"Mi", 1048576.0L},
                                                                 {"Gi", 1073741824.0L},
                                                                 {"Ti", 1099511627776.0L},
                                                                 {"Pi", 1125899906842624.0L},
                                                                 {"Ei", 1152921504606846976.0L}};
  auto it = multipliers.find(suffix);
  return it == multipliers.end() ? 0 : it->second;
}

// A field's text for messages: the pod's own words, cut short.
std::string Shown(const std::string& s) {
  return s.size() <= 64 ? s : fmt::format("{}...", std::string_view(s).substr(0, 64));
}

// Gantry's rule for user and project names (core/job.cc checks every job spec by it): the
// pod's field is named here instead of the job's.
constexpr const char* kNameRule = "is not a Gantry name (letters, digits and . _ - @, from a letter or digit)";
bool GantryName(const std::string& s) {
  if (s.empty() || s.size() > 128 || !std::isalnum(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' || c == '@';
  });
}

const nlohmann::json& Annotations(const nlohmann::json& pod) {
  return ObjectAt(ObjectAt(pod, "metadata"), "annotations");
}
const nlohmann::json& Labels(const nlohmann::json& pod) { return ObjectAt(ObjectAt(pod, "metadata"), "labels"); }

// What the pod's containers ask for: the sum over its containers, or an init container's
// when that is more (Kubernetes' effective request).
struct Asked {
  std::map<std::string, int64_t> milli;  // resource name to thousandths of its unit
};

// Adds what the containers in `list` (containers, or initContainers: the largest of those
// counts, not their sum) ask for to `total`: per container its requests, and its limits for
// what it requests nothing of (as Kubernetes defaults a request to its limit).
Status AddResources(const nlohmann::json& containers, const char* list, bool init, Asked* total) {
  Asked sum;
  for (size_t i = 0; i < containers.size(); ++i) {
    const nlohmann::json& resources = ObjectAt(containers[i], "resources");
    const nlohmann::json& requests = ObjectAt(resources, "requests");
    for (const char* which : {"requests", "limits"}) {
      for (const auto& [name, value] : ObjectAt(resources, which).items()) {
        if (std::string(which) == "limits" && requests.contains(name)) continue;
        std::string field = fmt::format("spec.{}[{}].resources.{}[{}]", list, i, which, Shown(name));
        if (!value.is_string() && !value.is_number()) return Status::Invalid(field, "is not a quantity");
        auto q = QuantityMilli(value.is_string() ? value.get<std::string>() : value.dump());
        if (!q) return Status::Invalid(field, q.status().message());
        int64_t& slot = sum.milli[name];
        if (init) {
          slot = std::max(slot, *q);
        } else if (*q > INT64_MAX / 4 - slot) {
          return Status::Invalid(field, "the containers' sum is out of range");
        } else {
          slot += *q;
        }
      }
    }
  }
  for (const auto& [name, milli] : sum.milli) {
    int64_t& slot = total->milli[name];
    slot = init ? std::max(slot, milli) : slot + milli;
  }
  return Status::Ok();
}

// What the pod asks for: its containers' sum, or an init container's where that is more.
Expected<Asked> ResourcesOf(const nlohmann::json& spec) {
  Asked asked;
  const nlohmann::json& containers = ArrayAt(spec, "containers");
  if (containers.empty()) return Status::Invalid("spec.containers", "is empty");
  if (Status s = AddResources(containers, "containers", false, &asked); !s.ok()) return s;
  if (Status s = AddResources(ArrayAt(spec, "initContainers"), "initContainers", true, &asked); !s.ok()) return s;
  return asked;
}

// Whole units of a resource, rounded up.
int64_t Whole(int64_t milli) { return (milli + 999) / 1000; }

Status ReadGpus(const nlohmann::json& pod, const Asked& asked, GpuRequest* r) {
  const nlohmann::json& annotations = Annotations(pod);
  std::string mig_profile;
  int64_t mig = 0, gpus = 0;
  for (const auto& [name, milli] : asked.milli) {
    if (name == kGpuResource) gpus = milli;
    if (name.rfind(kMigResourcePrefix, 0) != 0 || milli == 0) continue;
    if (!mig_profile.empty()) {
      return Status::Invalid("spec.containers.resources", "asks for two MIG profiles; a job has one");
    }
    mig_profile = name.substr(std::string(kMigResourcePrefix).size());
    mig = milli;
  }
  const std::string fraction = StringAt(annotations, "gantry.io/gpu-fraction");
  const std::string sharing = StringAt(annotations, "gantry.io/gpu-sharing");
  const std::string memory = StringAt(annotations, "gantry.io/gpu-memory");
  r->num_nodes = 1;  // a pod runs on one node
  if (gpus % 1000 != 0 || mig % 1000 != 0) {
    return Status::Invalid("spec.containers.resources", "GPUs are counted whole (a share: gantry.io/gpu-fraction)");
  }
  if (!memory.empty()) {
    auto bytes = QuantityMilli(memory);
    if (!bytes || *bytes <= 0) {
      return Status::Invalid("metadata.annotations[gantry.io/gpu-memory]",
                             fmt::format("'{}' is not a memory size (e.g. 20Gi)", Shown(memory)));
    }
    r->gpu_memory_mib = (Whole(*bytes) + kMiB - 1) / kMiB;
  }
  if (!fraction.empty()) {
    const std::string field = "metadata.annotations[gantry.io/gpu-fraction]";
    if (gpus > 0 || mig > 0) return Status::Invalid(field, "a share is instead of nvidia.com/gpu or MIG, not beside");
    double share = 0;
    auto [end, ec] = std::from_chars(fraction.data(), fraction.data() + fraction.size(), share);
    if (ec != std::errc() || end != fraction.data() + fraction.size() || !(share > 0) || !(share < 1)) {
      return Status::Invalid(field, fmt::format("'{}' is not a share between 0 and 1 (e.g. 0.5)", Shown(fraction)));
    }
    r->gpus = 1;
    r->gpu_milli = static_cast<int32_t>(std::lround(share * kMilliPerGpu));
    if (r->gpu_milli < 1 || r->gpu_milli >= kMilliPerGpu) return Status::Invalid(field, "is too small or too large");
    r->sharing = SharingMode::kAuto;
    if (!sharing.empty() && !ParseFractionSharing(sharing, &r->sharing)) {
      return Status::Invalid("metadata.annotations[gantry.io/gpu-sharing]",
                             fmt::format("'{}' is not auto, mps or time-slice", Shown(sharing)));
    }
    return Status::Ok();
  }
  if (!sharing.empty()) {
    return Status::Invalid("metadata.annotations[gantry.io/gpu-sharing]", "goes with gantry.io/gpu-fraction");
  }
  if (mig > 0) {
    if (gpus > 0) return Status::Invalid("spec.containers.resources", "asks for whole GPUs and MIG slices at once");
    r->sharing = SharingMode::kMig;
    r->mig_profile = mig_profile;
    gpus = mig;
  }
  if (gpus == 0) {
    return Status::Invalid("spec.containers.resources",
                           "asks for no GPU (nvidia.com/gpu or nvidia.com/mig-<profile> limits, or a "
                           "gantry.io/gpu-fraction annotation)");
  }
  if (gpus / 1000 > kMaxNodesPerJob * 64) return Status::Invalid("spec.containers.resources", "too many GPUs");
  r->gpus = static_cast<int>(gpus / 1000);
  return Status::Ok();
}

// nodeSelector, and required node affinity that is one term of single-value `In`s (what a
// selector can say); anything else is refused rather than placed against its wish.
Status ReadNodeChoice(const nlohmann::json& spec, JobSpec* job) {
  for (const auto& [key, value] : ObjectAt(spec, "nodeSelector").items()) {
    if (!value.is_string()) return Status::Invalid("spec.nodeSelector[" + Shown(key) + "]", "is not a string");
    job->node_selector[key] = value.get<std::string>();
  }
  const nlohmann::json& required =
      ObjectAt(ObjectAt(ObjectAt(spec, "affinity"), "nodeAffinity"), "requiredDuringSchedulingIgnoredDuringExecution");
  const nlohmann::json& terms = ArrayAt(required, "nodeSelectorTerms");
  const std::string field = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution";
  if (terms.size() > 1) return Status::Invalid(field, "Gantry reads one node selector term, not alternatives");
  for (const auto& term : terms) {
    if (!ArrayAt(term, "matchFields").empty()) return Status::Invalid(field, "matchFields is not read by Gantry");
    for (const auto& e : ArrayAt(term, "matchExpressions")) {
      const nlohmann::json& values = ArrayAt(e, "values");
      if (StringAt(e, "operator") != "In" || values.size() != 1 || !values[0].is_string()) {
        return Status::Invalid(
            field, fmt::format("'{}': Gantry reads `In` with one value (a node selector)", Shown(StringAt(e, "key"))));
      }
      job->node_selector[StringAt(e, "key")] = values[0].get<std::string>();
    }
  }
  for (const auto& t : ArrayAt(spec, "tolerations")) {
    const std::string key = StringAt(t, "key");
    if (key.empty()) return Status::Invalid("spec.tolerations", "a toleration of every taint (no key) is not read");
    const std::string effect = StringAt(t, "effect");
    if (!effect.empty() && effect != "NoSchedule" && effect != "NoExecute") continue;  // a preference only
    job->tolerations.push_back({key, StringAt(t, "operator") == "Exists" ? "" : StringAt(t, "value")});
  }
  return Status::Ok();
}

Status ReadTimes(const nlohmann::json& pod, JobSpec* job) {
  const std::string estimate = StringAt(Annotations(pod), "gantry.io/estimated-duration");
  if (!estimate.empty()) {
    auto ms = ParseJobTime(estimate);
    if (!ms || *ms <= 0) {
      return Status::Invalid("metadata.annotations[gantry.io/estimated-duration]",
                             fmt::format("'{}' is not a duration (e.g. 90m, 2h)", Shown(estimate)));
    }
    job->estimated_duration_ms = *ms;
  }
  const nlohmann::json& spec = ObjectAt(pod, "spec");
  if (spec.contains("activeDeadlineSeconds")) {
    const int64_t seconds = IntAt(spec, "activeDeadlineSeconds");
    if (seconds <= 0 || seconds > kMaxDurationMs / kSecondMs) {
      return Status::Invalid("spec.activeDeadlineSeconds", "is not a positive number of seconds");
    }
    job->time_limit_ms = seconds * kSecondMs;
  }
  return Status::Ok();
}

Status ReadGang(const nlohmann::json& pod, KubePodJob* out) {
  const nlohmann::json& labels = Labels(pod);
  out->gang = StringAt(labels, "gantry.io/gang");
  for (const char* pod_group : {"scheduling.x-k8s.io/pod-group", "pod-group.scheduling.sigs.k8s.io"}) {
    if (out->gang.empty()) out->gang = StringAt(labels, pod_group);
  }
  const std::string min = StringAt(Annotations(pod), "gantry.io/gang-min-members");
  if (min.empty()) return Status::Ok();
  const std::string field = "metadata.annotations[gantry.io/gang-min-members]";
  if (out->gang.empty()) return Status::Invalid(field, "goes with the label gantry.io/gang");
  int n = 0;
  auto [end, ec] = std::from_chars(min.data(), min.data() + min.size(), n);
  if (ec != std::errc() || end != min.data() + min.size() || n < 1 || n > kMaxNodesPerJob) {
    return Status::Invalid(field, fmt::format("'{}' is not a member count from 1 to {}", Shown(min), kMaxNodesPerJob));
  }
  out->gang_min_members = n;
  return Status::Ok();
}

// GPU Feature Discovery writes the product with dashes for spaces ("NVIDIA-A100-SXM4-80GB").
std::string ProductKey(std::string s) {
  for (char& c : s) c = c == ' ' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Whether two gang members ask for the same (a gang is one job: each member is one node's part).
bool SameAsk(const JobSpec& a, const JobSpec& b) {
  const GpuRequest &x = a.request, &y = b.request;
  return x.sharing == y.sharing && x.gpus == y.gpus && x.gpu_milli == y.gpu_milli && x.mig_profile == y.mig_profile &&
         x.gpu_types == y.gpu_types && x.cpus == y.cpus && x.memory_mib == y.memory_mib &&
         x.gpu_memory_mib == y.gpu_memory_mib && a.node_selector == b.node_selector && a.tolerations == b.tolerations &&
         a.priority_class == b.priority_class;
}

}  // namespace

std::string PodRef(const KubePodJob& pod) { return pod.ns + "/" + pod.name + "/" + pod.uid; }

PodRefParts SplitPodRef(const std::string& ref) {
  size_t a = ref.find('/'), b = ref.rfind('/');
  if (a == std::string::npos || a == b) return {};
  return {ref.substr(0, a), ref.substr(a + 1, b - a - 1), ref.substr(b + 1)};
}

const GpuType* TypeOfProduct(const GpuCatalog& catalog, const std::string& product) {
  if (product.empty()) return nullptr;
  if (const GpuType* t = catalog.Find(product)) return t;
  const std::string key = ProductKey(product);
  for (const GpuType& t : catalog.types()) {
    if (ProductKey(t.name) == key) return &t;
    for (const std::string& alias : t.aliases) {
      if (ProductKey(alias) == key) return &t;
    }
  }
  return nullptr;
}

Expected<JobSpec> JobOfGang(const std::vector<KubePodJob>& members) {
  if (members.empty()) return Status::Invalid("gang", "has no members");
  JobSpec spec = members.front().spec;
  for (const KubePodJob& m : members) {
    if (!SameAsk(m.spec, spec)) {
      return Status::Invalid("gang", fmt::format("the members of gang {} ask for different resources; Gantry places "
                                                 "a gang as one job of equal parts",
                                                 members.front().gang));
    }
    spec.kube_pods.push_back(PodRef(m));
  }
  if (members.size() > 1) {
    if (!spec.request.whole_gpus()) {
      return Status::Invalid("gang", "a gang's members take whole GPUs, not shares or MIG slices");
    }
    spec.name = members.front().ns + "/" + members.front().gang;
    spec.request.num_nodes = static_cast<int>(members.size());
    spec.request.gpus *= static_cast<int>(members.size());
  }
  return spec;
}

Expected<int64_t> QuantityMilli(const std::string& text) {
  // sign, digits with at most one point, then a suffix or an exponent (e3, E-2)
  size_t at = 0;
  bool negative = false;
  if (at < text.size() && (text[at] == '+' || text[at] == '-')) negative = text[at++] == '-';
  const size_t digits_from = at;
  int points = 0, digits = 0;
  while (at < text.size() && (std::isdigit(static_cast<unsigned char>(text[at])) || text[at] == '.')) {
    points += text[at] == '.';
    digits += text[at] != '.';
    ++at;
  }
  if (digits == 0 || points > 1 || at - digits_from > 40) {
    return Status::Invalid("quantity", fmt::format("'{}' is not a quantity", Shown(text)));
  }
  long double number = std::strtold(text.substr(digits_from, at - digits_from).c_str(), nullptr);
  const std::string rest = text.substr(at);
  long double multiplier = SuffixMultiplier(rest);
  if (multiplier == 0 && rest.size() >= 2 && (rest[0] == 'e' || rest[0] == 'E')) {
    int exponent = 0;
    auto [end, ec] = std::from_chars(rest.data() + 1, rest.data() + rest.size(), exponent);
    if (ec == std::errc() && end == rest.data() + rest.size() && exponent >= -18 && exponent <= 18) {
      multiplier = std::pow(10.0L, exponent);
    }
  }
  if (multiplier == 0) return Status::Invalid("quantity", fmt::format("'{}' has an unknown unit", Shown(text)));
  const long double milli = std::ceil(number * multiplier * 1000.0L - 1e-6L);
  if (negative && milli > 0) return Status::Invalid("quantity", fmt::format("'{}' is negative", Shown(text)));
  if (milli > static_cast<long double>(INT64_MAX / 2)) {
    return Status::Invalid("quantity", fmt::format("'{}' is out of range", Shown(text)));
  }
  return static_cast<int64_t>(milli);
}

bool WantsGantry(const nlohmann::json& pod, const KubePodPolicy& policy) {
  return StringAt(ObjectAt(pod, "spec"), "schedulerName") == policy.scheduler_name;
}

Expected<KubePodJob> JobOfPod(const nlohmann::json& pod, const KubePodPolicy& policy) {
  const nlohmann::json& meta = ObjectAt(pod, "metadata");
  const nlohmann::json& spec = ObjectAt(pod, "spec");
  KubePodJob out;
  out.ns = StringAt(meta, "namespace");
  out.name = StringAt(meta, "name");
  out.uid = StringAt(meta, "uid");
  if (out.ns.empty() || out.name.empty() || out.uid.empty()) {
    return Status::Invalid("metadata", "a pod has a namespace, a name and a uid");
  }
  out.node = StringAt(spec, "nodeName");
  const nlohmann::json& status = ObjectAt(pod, "status");
  out.phase = StringAt(status, "phase");
  out.ended_reason = StringAt(status, "reason");
  const nlohmann::json& containers = ArrayAt(status, "containerStatuses");
  out.containers_ended = !containers.empty();
  for (const nlohmann::json& container : containers) {
    const nlohmann::json& ended = ObjectAt(ObjectAt(container, "state"), "terminated");
    out.containers_ended = out.containers_ended && !ended.empty();
    const int64_t code = IntAt(ended, "exitCode");
    if (code == 0 || out.exit_code != 0) continue;
    out.exit_code = static_cast<int>(std::clamp<int64_t>(code, INT32_MIN, INT32_MAX));
    if (out.ended_reason.empty()) out.ended_reason = StringAt(ended, "reason");
  }
  if (out.phase == "Failed" && out.exit_code == 0) out.exit_code = 1;
  out.ended_reason = Shown(out.ended_reason);
  out.deleting = meta.contains("deletionTimestamp") && !meta["deletionTimestamp"].is_null();
  if (out.deleting && !ParseUtc(StringAt(meta, "deletionTimestamp"), &out.deletion_ms)) out.deletion_ms = -1;

  if (out.node.empty()) {
    // What Gantry writes when it binds (kube/pod_binder.h) is never the pod's own to say: a
    // pod that came with its devices or its share named could run on what it chose.
    for (const char* written :
         {"gantry.io/job", "gantry.io/gpus", "gantry.io/visible-devices", "gantry.io/sharing", "gantry.io/gang-rank",
          "gantry.io/gang-size", "gantry.io/gpu-share", "gantry.io/mps-thread-percent", "gantry.io/gpu-memory-limit",
          "gantry.io/mig-profile"}) {
      if (Annotations(pod).contains(written)) {
        return Status::Invalid(fmt::format("metadata.annotations[{}]", written),
                               "is written by Gantry when it binds the pod; a pod does not bring it");
      }
    }
  }
  JobSpec& job = out.spec;
  auto team = policy.namespace_teams.find(out.ns);
  job.team = team == policy.namespace_teams.end() ? out.ns : team->second;
  const std::string account = StringAt(spec, "serviceAccountName");
  job.user = StringAt(Annotations(pod), "gantry.io/user");
  if (!job.user.empty() && !GantryName(job.user)) {
    return Status::Invalid("metadata.annotations[gantry.io/user]", fmt::format("'{}' {}", Shown(job.user), kNameRule));
  }
  // A service account as a Gantry user name: ACCOUNT@NAMESPACE (Kubernetes' own form,
  // system:serviceaccount:NS:NAME, has colons, which no Gantry name has).
  if (job.user.empty()) job.user = fmt::format("{}@{}", account.empty() ? "default" : account, out.ns);
  job.project = StringAt(Labels(pod), "gantry.io/project");
  if (!job.project.empty() && !GantryName(job.project)) {
    return Status::Invalid("metadata.labels[gantry.io/project]", fmt::format("'{}' {}", Shown(job.project), kNameRule));
  }
  if (job.project.empty()) job.project = out.ns;
  job.name = out.ns + "/" + out.name;
  auto priority = policy.priority_classes.find(StringAt(spec, "priorityClassName"));
  if (priority != policy.priority_classes.end()) job.priority_class = priority->second;
  const std::string preemptible = StringAt(Annotations(pod), "gantry.io/preemptible");
  if (!preemptible.empty() && preemptible != "true" && preemptible != "false") {
    return Status::Invalid("metadata.annotations[gantry.io/preemptible]", "is \"true\" or \"false\"");
  }
  job.preemptible = preemptible != "false";
  job.checkpointable = StringAt(Annotations(pod), "gantry.io/checkpointable") == "true";

  auto asked = ResourcesOf(spec);
  if (!asked) return asked.status();
  if (Status s = ReadGpus(pod, *asked, &job.request); !s.ok()) return s;
  if (auto cpu = asked->milli.find("cpu"); cpu != asked->milli.end()) {
    job.request.cpus = static_cast<int>(std::min<int64_t>(Whole(cpu->second), 1 << 20));
  }
  if (auto memory = asked->milli.find("memory"); memory != asked->milli.end()) {
    job.request.memory_mib = (Whole(memory->second) + kMiB - 1) / kMiB;
  }
  if (Status s = ReadNodeChoice(spec, &job); !s.ok()) return s;
  if (Status s = ReadTimes(pod, &job); !s.ok()) return s;
  if (Status s = ReadGang(pod, &out); !s.ok()) return s;
  return out;
}

}  // namespace gantry
