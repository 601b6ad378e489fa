// Job spec and cluster file parsing.
#include "core/spec_yaml.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "core/job_arrays.h"
#include "core/notify.h"
#include "core/read_file.h"
#include "core/scheduler_config.h"
#include "core/yaml_util.h"

namespace gantry {

Taint ParseTaint(const std::string& text) {
  size_t eq = text.find('=');
  if (eq == std::string::npos) return {text, ""};
  return {text.substr(0, eq), text.substr(eq + 1)};
}

namespace {

// A job's time: `key` as people write it (units, Slurm's clock forms, a bare number of
// minutes) or `key`_s, a number of seconds as the API writes it back; not both.
DurationMs ReadDurationField(YamlReader& r, const std::string& key) {
  std::string text = r.Optional<std::string>(key, "");
  double seconds = r.Optional<double>(key + "_s", -1.0);
  if (!text.empty() && seconds >= 0) {
    r.Fail(key + "_s", "give " + key + " or " + key + "_s, not both");
    return 0;
  }
  if (seconds >= 0 || r.Child(key + "_s")) {
    if (!std::isfinite(seconds) || seconds < 0 || seconds * kSecondMs > static_cast<double>(kMaxDurationMs)) {
      r.Fail(key + "_s", fmt::format("must be a number of seconds within 0..{}", kMaxDurationMs / kSecondMs));
      return 0;
    }
    return static_cast<DurationMs>(std::llround(seconds * kSecondMs));
  }
  if (text.empty()) return 0;
  auto d = ParseJobTime(text);
  if (!d) {
    r.Fail(key, d.status().message());
    return 0;
  }
  return *d;
}

// Slurm's ways of asking for no time limit: 0, unlimited, infinite.
bool AsLongAsAllowed(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text == "0" || text == "unlimited" || text == "infinite";
}

// notify ("end,fail" or a list), webhook, notify_format and mail_user, checked. A target
// without events hears of the end.
Status ParseNotify(const YAML::Node& notify, JobSpec* j) {
  if (notify && notify.IsScalar()) {
    auto events = ParseNotifyEvents("notify", notify.Scalar());
    if (!events) return events.status();
    j->notify = std::move(*events);
  } else if (notify && notify.IsSequence()) {
    for (const YAML::Node& e : notify) {
      if (!e.IsScalar()) return Status::Invalid("notify", "a list of events: start, end, fail, preempt, all");
      j->notify.push_back(e.Scalar());
    }
    if (Status s = CheckNotifyEvents("notify", j->notify); !s.ok()) return s;
  } else if (notify && !notify.IsNull()) {
    return Status::Invalid("notify", "a list of events: start, end, fail, preempt, all");
  }
  if (!j->webhook.empty()) {
    if (Status s = CheckWebhookUrl("webhook", j->webhook); !s.ok()) return s;
  }
  if (Status s = CheckNotifyFormat("notify_format", j->notify_format); !s.ok()) return s;
  if (!j->mail_user.empty()) {
    if (Status s = CheckMailAddress("mail_user", j->mail_user); !s.ok()) return s;
  }
  if ((!j->webhook.empty() || !j->mail_user.empty()) && j->notify.empty()) j->notify = {"end"};
  return Status::Ok();
}

// Pinned GPU indices: each 0..63 and listed once; whole GPUs default to one per index.
Status CheckGpuIndices(const YAML::Node& node, GpuRequest& q) {
  if (q.gpu_indices.empty()) return Status::Ok();
  std::sort(q.gpu_indices.begin(), q.gpu_indices.end());
  for (size_t i = 0; i < q.gpu_indices.size(); ++i) {
    int g = q.gpu_indices[i];
    if (g < 0 || g > 63) return Status::Invalid("gpu_indices", fmt::format("GPU index {} is not within 0..63", g));
    if (i > 0 && q.gpu_indices[i - 1] == g) return Status::Invalid("gpu_indices", fmt::format("GPU {} twice", g));
  }
  if (q.sharing != SharingMode::kExclusive) return Status::Ok();
  if (!node["gpus"]) q.gpus = static_cast<int>(q.gpu_indices.size());
  if (q.gpus > static_cast<int>(q.gpu_indices.size())) {
    return Status::Invalid("gpus",
                           fmt::format("{} GPUs from the {} listed in gpu_indices", q.gpus, q.gpu_indices.size()));
  }
  return Status::Ok();
}

int64_t GbToMib(double gb) { return static_cast<int64_t>(std::llround(gb * 1024)); }

// A size in GB within 0..max, as MiB; an error names the field as written.
int64_t ReadGbField(YamlReader& r, const std::string& key, double max) {
  double gb = r.Optional<double>(key, 0.0);
  if (!std::isfinite(gb) || gb < 0 || gb > max) {
    r.Fail(key, fmt::format("must be within 0..{:g} GB, got {:g}", max, gb));
    return 0;
  }
  return GbToMib(gb);
}

// Port names become variable names (GANTRY_PORT_JUPYTER): lower-case identifiers, each
// once, at most 16; "master" is MASTER_PORT's.
Status CheckPortNames(const std::vector<std::string>& names) {
  if (names.size() > 16) return Status::Invalid("ports", "at most 16 named ports");
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string& n = names[i];
    std::string field = fmt::format("ports[{}]", i);
    if (n.empty() || n.size() > 32 || n[0] < 'a' || n[0] > 'z' ||
        n.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos) {
      return Status::Invalid(field, fmt::format("'{}' is not a port name: a lower-case identifier "
                                                "(letters, digits, _; at most 32), e.g. jupyter",
                                                n));
    }
    if (n == "master") return Status::Invalid(field, "'master' is taken: every job gets MASTER_PORT");
    if (std::find(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(i), n) !=
        names.begin() + static_cast<std::ptrdiff_t>(i)) {
      return Status::Invalid(field, fmt::format("'{}' is named twice", n));
    }
  }
  return Status::Ok();
}

// A plain YAML scalar that a JSON or YAML reader takes as a number (5, -1, 2.5, 1e3).
bool LooksLikeNumber(const std::string& s) {
  if (s.empty()) return false;
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

}  // namespace

Expected<JobSpec> ParseJobSpec(const YAML::Node& node, const std::string& path,
                               const std::vector<std::string>& extra_fields) {
  if (!node || !node.IsMap()) return Status::Invalid(path, "a job must be a map of fields");
  JobSpec j;
  // Field errors name the field itself ("gpus"), as users write it.
  YamlReader r(node, "");
  auto field = [&](const char* key) { return std::string(key); };
  for (const std::string& f : extra_fields) r.Child(f);
  j.id = r.Optional<std::string>("id", "");
  j.user = r.Optional<std::string>("user", "");
  j.team = r.Optional<std::string>("team", "");
  j.project = r.Optional<std::string>("project", "");
  j.priority_class = r.Optional<std::string>("priority", "");
  GpuRequest& q = j.request;
  q.gpus = r.Optional<int>("gpus", 1);
  double fraction = r.Optional<double>("gpu_fraction", 0.0);
  int milli = r.Optional<int>("gpu_milli", 0);
  q.mig_profile = r.Optional<std::string>("mig_profile", "");
  std::string sharing = r.Optional<std::string>("sharing", "");
  q.mps_thread_percent = r.Optional<int>("mps_thread_percent", 0);
  q.gpu_memory_mib = ReadGbField(r, "gpu_memory_gb", 1e4);
  q.gpu_types = r.Optional<std::vector<std::string>>("gpu_types", {});
  q.prefer_listed_order = r.Optional<bool>("prefer_listed_order", false);
  q.cpus = r.Optional<int>("cpus", 0);
  q.memory_mib = ReadGbField(r, "memory_gb", 1e6);
  q.num_nodes = r.Optional<int>("nodes", 0);
  q.gpu_indices = r.Optional<std::vector<int>>("gpu_indices", {});
  j.node_selector = r.Optional<std::map<std::string, std::string>>("node_selector", {});
  YAML::Node prefs = r.Child("preferred_labels");
  std::vector<std::string> tolerations = r.Optional<std::vector<std::string>>("tolerations", {});
  j.preemptible = r.Optional<bool>("preemptible", true);
  j.checkpointable = r.Optional<bool>("checkpointable", false);
  j.estimated_duration_ms = ReadDurationField(r, field("estimated_duration"));
  const std::string limit = r.Optional<std::string>(field("time_limit"), "");
  j.time_limit_ms = AsLongAsAllowed(limit) ? kTimeLimitAsAllowed : ReadDurationField(r, field("time_limit"));
  j.name = r.Optional<std::string>("name", "");
  j.command = r.Optional<std::string>("command", "");
  j.hold_gpus_ms = ReadDurationField(r, field("hold_gpus"));
  j.submit_held = r.Optional<bool>("hold", false);
  j.working_dir = r.Optional<std::string>("working_dir", "");
  j.env = r.Optional<std::map<std::string, std::string>>("env", {});
  j.max_retries = r.Optional<int>("max_retries", 3);
  j.retries_on_failure = r.Optional<int>("retries_on_failure", 0);
  j.cost_limit = r.Optional<double>("cost_limit", 0.0);
  j.ports = r.Optional<std::vector<std::string>>("ports", {});
  j.kube_pods = r.Optional<std::vector<std::string>>("kube_pods", {});
  j.container.image = r.Optional<std::string>("container_image", "");
  j.container.mounts = r.Optional<std::vector<std::string>>("container_mounts", {});
  j.container.workdir = r.Optional<std::string>("container_workdir", "");
  j.container.env = r.Optional<std::map<std::string, std::string>>("container_env", {});
  std::string pull = r.Optional<std::string>("container_pull", "missing");
  if (const YAML::Node a = node["array"]; a && a.IsScalar() && a.Tag() != "!" && LooksLikeNumber(a.Scalar())) {
    return Status::Invalid("array", fmt::format("is a number: give the task list as text, e.g. \"0-99\" (or \"{}\" "
                                                "for one task)",
                                                a.Scalar()));
  }
  j.array = r.Optional<std::string>("array", "");
  j.dependency = r.Optional<std::string>("dependency", "");
  YAML::Node notify = r.Child("notify");
  j.webhook = r.Optional<std::string>("webhook", "");
  j.notify_format = r.Optional<std::string>("notify_format", "");
  j.mail_user = r.Optional<std::string>("mail_user", "");
  Status s = r.Finish();
  if (!s.ok()) {
    std::string f = s.field();
    if (!f.empty() && f[0] == '.') f = f.substr(1);
    return Status::Invalid(f, s.message());
  }
  if (!j.array.empty()) {
    if (auto a = ParseArraySpec(j.array); !a) return a.status();
  }
  if (!j.dependency.empty()) {
    if (auto d = ParseDependency(j.dependency); !d) return d.status();
  }
  if (Status n = ParseNotify(notify, &j); !n.ok()) return n;
  if (Status p = CheckPortNames(j.ports); !p.ok()) return p;
  if (!ParsePullPolicy(pull, &j.container.pull)) {
    return Status::Invalid("container_pull", "must be missing, always or never, not '" + pull + "'");
  }
  if (Status c = ValidateContainerSpec(j.container); !c.ok()) return c;
  bool has_fraction = node["gpu_fraction"] && !node["gpu_fraction"].IsNull();
  if (!std::isfinite(fraction) || fraction < 0 || fraction > 1 || (has_fraction && fraction == 0)) {
    return Status::Invalid("gpu_fraction", fmt::format("must be in (0, 1], got {:g}", fraction));
  }
  if (fraction > 0 && milli > 0) return Status::Invalid("gpu_milli", "give gpu_fraction or gpu_milli, not both");
  q.gpu_milli = milli > 0 ? milli : static_cast<int32_t>(std::lround(fraction * kMilliPerGpu));
  if (fraction > 0 && q.gpu_milli == 0) return Status::Invalid("gpu_fraction", "must be at least 0.001");
  if (node["gpu_milli"] && milli <= 0) return Status::Invalid("gpu_milli", "must be within 1..1000");
  if (!sharing.empty()) {
    if (!ParseSharingMode(sharing, &q.sharing)) {
      return Status::Invalid("sharing", "must be auto, exclusive, time-slice, mps or mig, not '" + sharing + "'");
    }
  } else if (!q.mig_profile.empty()) {
    q.sharing = SharingMode::kMig;
  } else if (q.gpu_milli > 0) {
    // A thread share implies MPS; else the site's default for the node decides (sharing in
    // scheduler_config.yaml).
    q.sharing = q.mps_thread_percent > 0 ? SharingMode::kMps : SharingMode::kAuto;
  }
  if (Status s = CheckGpuIndices(node, q); !s.ok()) return s;
  if (node["command"] && j.command.find_first_not_of(" \t\r\n") == std::string::npos) {
    return Status::Invalid("command", "is blank (leave it out and give hold_gpus for a job that only holds GPUs)");
  }
  if (j.hold_gpus_ms > 0) {  // the hold ends then (the node ends it); the scheduler plans with it
    if (!j.command.empty()) return Status::Invalid("hold_gpus", "a job holds its GPUs or runs a command, not both");
    if (j.time_limit_ms > 0 && j.time_limit_ms < j.hold_gpus_ms) {
      return Status::Invalid("hold_gpus", "is longer than the job's time_limit");
    }
    if (j.estimated_duration_ms == 0) j.estimated_duration_ms = j.hold_gpus_ms;
  }
  if (prefs) {
    if (!prefs.IsSequence()) return Status::Invalid("preferred_labels", "must be a list");
    for (size_t i = 0; i < prefs.size(); ++i) {
      YamlReader pr(prefs[i], fmt::format("preferred_labels[{}]", i));
      LabelPreference p;
      p.key = pr.Required<std::string>("key");
      p.value = pr.Required<std::string>("value");
      p.weight = pr.Optional<int>("weight", 1);
      if (Status ps = pr.Finish(); !ps.ok()) return ps;
      j.preferred_labels.push_back(p);
    }
  }
  for (const std::string& t : tolerations) j.tolerations.push_back(ParseTaint(t));
  return j;
}

Expected<JobSpec> ParseJobSpecText(const std::string& text) {
  auto loaded = LoadYaml(text, "body", "malformed YAML/JSON");
  if (!loaded) return loaded.status();
  YAML::Node node = *loaded;
  return ParseJobSpec(node);
}

namespace {

Status ParseNodeGroup(const YAML::Node& g, size_t index, const GpuCatalog& catalog, std::vector<Node>* out) {
  std::string where = fmt::format("node_groups[{}]", index);
  YamlReader r(g, where);
  std::string name = r.Required<std::string>("name");
  int count = r.Required<int>("count");
  std::string type_name = r.Required<std::string>("gpu_type");
  int gpus = r.Required<int>("gpus_per_node");
  int nvlink_groups = r.Optional<int>("nvlink_groups", 1);
  int cpus = r.Optional<int>("cpus", 64);
  double memory_gb = r.Optional<double>("memory_gb", 512);
  auto labels = r.Optional<std::map<std::string, std::string>>("labels", {});
  auto taints = r.Optional<std::vector<std::string>>("taints", {});
  bool mps = r.Optional<bool>("mps", true);
  YAML::Node mig = r.Child("mig");
  if (Status s = r.Finish(); !s.ok()) return s;
  const GpuType* type = catalog.Find(type_name);
  if (!type) {
    return Status::Invalid(where + ".gpu_type",
                           fmt::format("unknown GPU type '{}' (known: {})", type_name, catalog.Names()));
  }
  if (count < 1 || count > 100000) return Status::Invalid(where + ".count", "must be within 1..100000");
  if (gpus < 0 || gpus > 64) return Status::Invalid(where + ".gpus_per_node", "must be within 0..64");
  if (nvlink_groups < 1 || (gpus > 0 && gpus % nvlink_groups != 0)) {
    return Status::Invalid(where + ".nvlink_groups", "must be >= 1 and divide gpus_per_node");
  }
  std::vector<int> mig_gpus;
  std::vector<MigPlacement> layout;
  if (mig) {
    YamlReader m(mig, where + ".mig");
    mig_gpus = m.Required<std::vector<int>>("gpus");
    auto profiles = m.Optional<std::vector<std::string>>("layout", {});
    if (Status s = m.Finish(); !s.ok()) return s;
    if (!type->supports_mig()) return Status::Invalid(where + ".mig", type->name + " has no MIG");
    for (const std::string& p : profiles) {
      int pi = type->FindMigProfile(p);
      if (pi < 0)
        return Status::Invalid(where + ".mig.layout", fmt::format("{} has no MIG profile '{}'", type->name, p));
      auto start = FindMigStart(*type, layout, pi);
      if (!start) return Status::Invalid(where + ".mig.layout", fmt::format("'{}' does not fit beside the others", p));
      layout.push_back({pi, *start});
    }
  }
  for (int n = 0; n < count; ++n) {
    Node node;
    node.id = fmt::format("{}-{}", name, n);
    node.cpus = cpus;
    node.memory_mib = GbToMib(memory_gb);
    node.labels = labels;
    node.mps = mps;
    for (const std::string& t : taints) node.taints.push_back(ParseTaint(t));
    for (int i = 0; i < gpus; ++i) {
      Gpu gpu;
      gpu.index = i;
      gpu.type = type->id;
      gpu.uuid =
          fmt::format("GPU-{:08x}-{:04x}-{:04x}", std::hash<std::string>{}(node.id) & 0xffffffffu, n & 0xffff, i);
      gpu.nvlink_group = i / (gpus / nvlink_groups);
      if (std::find(mig_gpus.begin(), mig_gpus.end(), i) != mig_gpus.end()) {
        gpu.mig_enabled = true;
        for (const MigPlacement& p : layout) gpu.mig_instances.push_back({p, ""});
      }
      node.gpus.push_back(std::move(gpu));
    }
    out->push_back(std::move(node));
  }
  return Status::Ok();
}

}  // namespace

Expected<std::vector<Node>> ParseCluster(const YAML::Node& root, const GpuCatalog& catalog) {
  YamlReader top(root, "cluster");
  YAML::Node groups = top.Child("node_groups");
  top.Optional<std::string>("name", "");
  top.Optional<std::string>("description", "");
  YAML::Node pools = top.Child("pools");  // the simulator's node pools (LoadClusterPools)
  top.Child("autoscaler");
  if (Status s = top.Finish(); !s.ok()) return s;
  const bool elastic = pools && pools.IsSequence() && pools.size() > 0;
  const bool has_groups = groups && groups.IsSequence() && groups.size() > 0;
  if ((groups && !groups.IsSequence()) || (!has_groups && !elastic)) {
    return Status::Invalid("node_groups", "must be a non-empty list (or give pools)");
  }
  std::vector<Node> nodes;
  for (size_t i = 0; groups && i < groups.size(); ++i) {
    if (Status s = ParseNodeGroup(groups[i], i, catalog, &nodes); !s.ok()) return s;
  }
  std::set<std::string> ids;
  for (const Node& n : nodes) {
    if (!ids.insert(n.id).second) return Status::Invalid("node_groups", "duplicate node id " + n.id);
  }
  return nodes;
}

// Seconds from the trace's start, one a line ("offset_s" header and # comments allowed).
static Expected<std::vector<DurationMs>> ReadReclaimTrace(const std::string& file, const std::string& field) {
  auto text = ReadFileNoThrow(file, 16 << 20);
  if (!text) return Status::Invalid(field, "cannot read " + file);
  std::vector<DurationMs> times;
  std::istringstream lines(*text);
  std::string line;
  for (int n = 1; std::getline(lines, line); ++n) {
    line = line.substr(0, line.find('#'));
    line.erase(0, std::min(line.size(), line.find_first_not_of(" \t\r")));
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r' || line.back() == '\t')) line.pop_back();
    if (line.empty() || (n == 1 && line == "offset_s")) continue;
    double seconds = -1;
    auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), seconds);
    if (ec != std::errc() || end != line.data() + line.size() || !(seconds >= 0 && seconds <= 1e9)) {
      return Status::Invalid(
          field, fmt::format("{} line {}: '{}' is not seconds from the trace's start", file, n, line.substr(0, 40)));
    }
    times.push_back(static_cast<DurationMs>(seconds * 1000));
  }
  std::sort(times.begin(), times.end());
  return times;
}

Expected<AutoscalerConfig> LoadClusterPools(const std::string& path, const GpuCatalog& catalog) {
  try {
    YAML::Node root = YAML::LoadFile(path);
    YAML::Node only(YAML::NodeType::Map);
    for (const char* key : {"pools", "autoscaler"}) {
      if (root.IsMap() && root[key]) only[key] = root[key];
    }
    auto config = ParseAutoscalerConfig(only, catalog);
    if (!config) return config;
    for (size_t i = 0; i < config->pools.size(); ++i) {
      NodePool& pool = config->pools[i];
      if (pool.spot_reclaim_trace.empty()) continue;
      std::string file = pool.spot_reclaim_trace;
      if (file[0] != '/') file = (std::filesystem::path(path).parent_path() / file).string();
      auto times = ReadReclaimTrace(file, fmt::format("pools[{}].spot_reclaim_trace", i));
      if (!times) return times.status();
      pool.reclaim_times = std::move(*times);
    }
    return config;
  } catch (const YAML::Exception& e) {
    return Status::Invalid(path, e.what());
  }
}

Expected<std::vector<Node>> LoadClusterFile(const std::string& path, const GpuCatalog& catalog) {
  try {
    return ParseCluster(YAML::LoadFile(path), catalog);
  } catch (const YAML::BadFile&) {
    return Status::NotFound("cannot read " + path);
  } catch (const YAML::Exception& e) {
    return Status::Invalid(path, fmt::format("malformed YAML at line {}: {}", e.mark.line + 1, e.msg));
  }
}

}  // namespace gantry
