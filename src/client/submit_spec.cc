// The job flags of submit and run, and the spec they build.
#include "client/submit_spec.h"

#include <fmt/format.h>
#include <sys/random.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <ostream>
#include <sstream>
#include <thread>

#include "client/jobs_file.h"
#include "client/slurm_hints.h"
#include "core/yaml_util.h"

namespace gantry {

void AddSubmitOptions(CLI::App* c, SubmitFlags& f) {
  c->add_option("-f,--file", f.file, "Job spec file (YAML or JSON)")->check(CLI::ExistingFile);
  c->add_option("--profile", f.profile, "Named job profile (profiles.yaml)");
  c->add_option("-J,--name", f.name, "Job name");
  c->add_option("--user", f.user, "Submit for this user (team admins)");
  c->add_option("--team", f.team, "Team (admins)");
  c->add_option("--project", f.project, "Project to bill");
  c->add_option("-p,--priority", f.priority, "Priority class");
  c->add_option("-g,-G,--gpus", f.gpus, "Whole GPUs, in all (over --nodes)");
  c->add_option("--gpu-fraction", f.fraction,
                "A fraction of one GPU (MPS or time-slice, as the site sets; see --sharing)");
  c->add_option("--mig", f.mig, "MIG profile, e.g. 3g.40gb");
  c->add_option("--sharing", f.sharing,
                "For a fraction: auto (the site's default), mps or time-slice; or mig, exclusive");
  c->add_option("-t,--gpu-type", f.gpu_types, "Allowed GPU type (repeat for several)");
  c->add_option("--gpu-memory-gb", f.gpu_memory_gb, "Minimum GPU memory (or the MPS limit)");
  c->add_option("--cpus", f.cpus, "CPUs per node");
  c->add_option("--memory-gb", f.memory_gb, "Host memory per node");
  c->add_option("-N,--nodes", f.nodes, "Spread over this many nodes (a gang: all start together)");
  c->add_option("--time-limit", f.time_limit,
                "e.g. 2h, 90m, 2:00:00, 1-00:00:00; a bare number is minutes; 0 or unlimited: the longest this "
                "cluster allows (as in Slurm)");
  c->add_option("--estimate", f.estimate, "Estimated run time, e.g. 30m (backfill starts jobs that end in time)");
  c->add_option("--cost-limit", f.cost_limit, "Stop the job once it has cost this much (alert at 80%)");
  c->add_option("--workdir", f.workdir, "Working directory (absolute)");
  c->add_option("-e,--env", f.env, "NAME=VALUE (repeat)");
  c->add_option("--container-image", f.container_image, "Run in this OCI image, e.g. nvcr.io/nvidia/pytorch:24.05-py3");
  c->add_option("--container-mount", f.container_mounts, "HOST:CONTAINER[:ro] into the container (repeat)");
  c->add_option("--container-workdir", f.container_workdir, "Working directory inside the container");
  c->add_option("--container-env", f.container_env, "NAME=VALUE inside the container only (repeat)");
  c->add_option("--container-pull", f.container_pull, "Pull the image: missing (default), always, never");
  c->add_flag("--checkpointable", f.checkpointable, "The job saves and resumes from GANTRY_CHECKPOINT_DIR");
  c->add_flag("--not-preemptible", f.not_preemptible, "Never evict this job");
  c->add_flag("-H,--hold", f.hold, "Submit it held: it waits until `gantry release ID` (sbatch -H)");
  c->add_option("-a,--array", f.array,
                "A job array: 0-99, 1,5,9, 0-99:2; %8 runs at most 8 at once. Each task gets "
                "GANTRY_ARRAY_TASK_ID (and SLURM_ARRAY_TASK_ID)");
  c->add_option("-d,--dependency", f.dependency,
                "Start after other jobs: afterok:ID[:ID], afternotok:, afterany:, after:, aftercorr:ARRAY, "
                "singleton; several joined by ','");
  c->add_option("--hold-gpus", f.hold_gpus,
                "No command: hold the GPUs this long for interactive use (e.g. 2h), then release them");
  c->add_option("--mps-thread-percent", f.mps_thread_percent,
                "MPS: the share of the GPU's SMs (default: the fraction)");
  c->add_flag("--prefer-listed-order", f.prefer_listed_order, "Try the --gpu-type types in the order given");
  c->add_option("--gpu-index", f.gpu_indices, "Single-node servers: only this GPU (repeat; pins the job to them)");
  c->add_option("--node-selector", f.node_selector, "Run only on nodes with this label: KEY=VALUE (repeat)");
  c->add_option("--prefer-label", f.prefer_labels, "Prefer nodes with this label: KEY=VALUE[:WEIGHT] (repeat)");
  c->add_option("--toleration", f.tolerations, "Tolerate a node taint: KEY or KEY=VALUE (repeat)");
  c->add_option("--port", f.ports,
                "A named TCP port the job listens on, e.g. jupyter: given as $GANTRY_PORT_JUPYTER, shown as a URL "
                "(repeat)");
  c->add_option("--retries", f.retries, "Run again up to N times when the command exits non-zero");
  c->add_option("--max-fault-retries", f.fault_retries, "Requeue up to N times after a node or GPU fault (default 3)");
  c->add_option("--notify", f.notify, "Events to hear of: start, end, fail, preempt, all (e.g. end,fail)");
  c->add_option("--mail-type", f.mail_type, "As sbatch: BEGIN, END, FAIL, REQUEUE, ALL (joined by ',')");
  c->add_option("--webhook", f.webhook, "POST the job's events here (a host the team may use)");
  c->add_option("--notify-format", f.notify_format, "Webhook payload: json (default) or slack");
  c->add_option("--mail-user", f.mail_user, "Mail the job's events here (through the server's sendmail)");
  c->add_option("command", f.command, "The command (after --)");
}

std::string RandomKey() {
  unsigned char b[12];
  // The kernel's generator (OpenSSL's would load libcrypto and set up its DRBG: most of a
  // quick command's start). 12 bytes come whole; only a signal can interrupt the call.
  ssize_t got = -1;
  do {
    got = getrandom(b, sizeof(b), 0);
  } while (got < 0 && errno == EINTR);
  if (got != static_cast<ssize_t>(sizeof(b))) std::abort();
  std::string k;
  for (unsigned char c : b) k += fmt::format("{:02x}", c);
  return k;
}

namespace {

// KEY=VALUE -> {key, value}; errors name the flag.
Expected<std::pair<std::string, std::string>> SplitKeyValue(const std::string& flag, const std::string& kv) {
  size_t eq = kv.find('=');
  if (eq == std::string::npos || eq == 0) return Status::Invalid(flag, "expected KEY=VALUE, got '" + kv + "'");
  return std::pair{kv.substr(0, eq), kv.substr(eq + 1)};
}

// --mail-type's Slurm names as Gantry's events.
Expected<std::string> MailTypeEvents(const std::string& text) {
  static const std::map<std::string, std::string> kNames = {
      {"begin", "start"}, {"end", "end"}, {"fail", "fail"}, {"requeue", "preempt"}, {"all", "all"}};
  std::string events;
  std::stringstream in(text);
  for (std::string name; std::getline(in, name, ',');) {
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    auto it = kNames.find(name);
    if (it == kNames.end()) {
      return Status::Invalid("--mail-type", "unknown type '" + name + "' (BEGIN, END, FAIL, REQUEUE, ALL)");
    }
    events += (events.empty() ? "" : ",") + it->second;
  }
  return events;
}

Status SetNotify(const SubmitFlags& f, YAML::Node& spec) {
  if (!f.notify.empty() && !f.mail_type.empty()) {
    return Status::Invalid("--mail-type", "give --notify or --mail-type, not both");
  }
  if (!f.notify.empty()) spec["notify"] = f.notify;
  if (!f.mail_type.empty()) {
    auto events = MailTypeEvents(f.mail_type);
    if (!events) return events.status();
    spec["notify"] = *events;
  }
  if (!f.webhook.empty()) spec["webhook"] = f.webhook;
  if (!f.notify_format.empty()) spec["notify_format"] = f.notify_format;
  if (!f.mail_user.empty()) spec["mail_user"] = f.mail_user;
  return Status::Ok();
}

// Node selection, preferences, tolerations, retries, MPS share.
Status SetPlacementFlags(const SubmitFlags& f, YAML::Node& spec) {
  for (const std::string& kv : f.node_selector) {
    auto pair = SplitKeyValue("--node-selector", kv);
    if (!pair) return pair.status();
    spec["node_selector"][pair->first] = pair->second;
  }
  for (const std::string& text : f.prefer_labels) {
    size_t colon = text.rfind(':');
    std::string kv = colon == std::string::npos ? text : text.substr(0, colon);
    auto pair = SplitKeyValue("--prefer-label", kv);
    if (!pair) return pair.status();
    YAML::Node pref;
    pref["key"] = pair->first;
    pref["value"] = pair->second;
    if (colon != std::string::npos) {
      int weight = 0;
      std::string w = text.substr(colon + 1);
      auto [end, ec] = std::from_chars(w.data(), w.data() + w.size(), weight);
      if (ec != std::errc() || end != w.data() + w.size()) {
        return Status::Invalid("--prefer-label", "the weight after ':' must be a whole number, got '" + w + "'");
      }
      pref["weight"] = weight;
    }
    spec["preferred_labels"].push_back(pref);
  }
  for (const std::string& t : f.tolerations) spec["tolerations"].push_back(t);
  for (const std::string& p : f.ports) spec["ports"].push_back(p);
  if (f.prefer_listed_order) spec["prefer_listed_order"] = true;
  if (!f.gpu_indices.empty()) spec["gpu_indices"] = f.gpu_indices;
  if (f.retries >= 0) spec["retries_on_failure"] = f.retries;
  if (f.fault_retries >= 0) spec["max_retries"] = f.fault_retries;
  if (f.mps_thread_percent >= 0) spec["mps_thread_percent"] = f.mps_thread_percent;
  if (!f.hold_gpus.empty()) spec["hold_gpus"] = f.hold_gpus;
  return Status::Ok();
}

}  // namespace

Expected<YAML::Node> BuildSpec(const SubmitFlags& f, const ClientConfig& cfg) {
  YAML::Node spec(YAML::NodeType::Map);
  if (!f.profile.empty()) {
    auto text = ReadTextFile(cfg.profiles);
    if (!text) return Status::Invalid("profile", "no profiles file at " + cfg.profiles + " (set GANTRY_PROFILES)");
    auto loaded = LoadYaml(*text, cfg.profiles);
    if (!loaded) return loaded.status();
    YAML::Node all = *loaded;
    YAML::Node p = all["profiles"] ? all["profiles"][f.profile] : YAML::Node();
    if (!p || !p.IsMap())
      return Status::Invalid("profile", fmt::format("no profile '{}' in {}", f.profile, cfg.profiles));
    for (const auto& kv : p) spec[kv.first.as<std::string>()] = kv.second;
  }
  if (!f.file.empty()) {
    auto text = ReadTextFile(f.file);
    if (!text) return text.status();
    auto loaded = LoadYaml(*text, f.file);
    if (!loaded) return loaded.status();
    YAML::Node file = *loaded;
    if (!file.IsMap()) return Status::Invalid(f.file, "a job file holds one map of fields");
    for (const auto& kv : file) spec[kv.first.as<std::string>()] = kv.second;
  }
  auto set = [&](const char* key, const auto& value) { spec[key] = value; };
  if (!f.name.empty()) set("name", f.name);
  if (!f.user.empty()) set("user", f.user);
  if (!f.team.empty()) set("team", f.team);
  if (!f.project.empty()) set("project", f.project);
  if (!f.priority.empty()) set("priority", f.priority);
  if (f.gpus >= 0 || f.fraction >= 0 || !f.mig.empty()) {
    spec.remove("gpus");
    spec.remove("gpu_fraction");
    spec.remove("gpu_milli");
    spec.remove("mig_profile");
  }
  if (f.gpus >= 0) set("gpus", f.gpus);
  if (f.fraction >= 0) set("gpu_fraction", f.fraction);
  if (!f.mig.empty()) set("mig_profile", f.mig);
  if (!f.sharing.empty()) set("sharing", f.sharing);
  for (const std::string& type : f.gpu_types) {
    if (std::string why = TimeGivenAsGpuType(type); !why.empty()) return Status::Invalid("-t", why);
  }
  if (!f.gpu_types.empty()) set("gpu_types", f.gpu_types);
  if (f.cpus >= 0) set("cpus", f.cpus);
  if (f.nodes >= 0) set("nodes", f.nodes);
  if (f.memory_gb >= 0) set("memory_gb", f.memory_gb);
  if (f.gpu_memory_gb >= 0) set("gpu_memory_gb", f.gpu_memory_gb);
  // A flag replaces the file's time in either spelling (time_limit or time_limit_s).
  if (!f.time_limit.empty()) spec.remove("time_limit_s"), set("time_limit", f.time_limit);
  if (!f.estimate.empty()) spec.remove("estimated_duration_s"), set("estimated_duration", f.estimate);
  if (!f.workdir.empty()) set("working_dir", f.workdir);
  if (!f.array.empty()) set("array", f.array);
  if (!f.dependency.empty()) set("dependency", f.dependency);
  if (f.cost_limit >= 0) set("cost_limit", f.cost_limit);
  if (f.checkpointable) set("checkpointable", true);
  if (f.not_preemptible) set("preemptible", false);
  if (f.hold) set("hold", true);
  if (Status s = SetNotify(f, spec); !s.ok()) return s;
  if (Status s = SetPlacementFlags(f, spec); !s.ok()) return s;
  for (const auto& [field, list] : {std::pair{"env", &f.env}, std::pair{"container_env", &f.container_env}}) {
    for (const std::string& kv : *list) {
      size_t eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) return Status::Invalid(field, "expected NAME=VALUE, got '" + kv + "'");
      spec[field][kv.substr(0, eq)] = kv.substr(eq + 1);
    }
  }
  if (!f.container_image.empty()) set("container_image", f.container_image);
  if (!f.container_workdir.empty()) set("container_workdir", f.container_workdir);
  if (!f.container_pull.empty()) set("container_pull", f.container_pull);
  for (const std::string& m : f.container_mounts) spec["container_mounts"].push_back(m);
  if (!f.command.empty()) {
    std::string cmd;
    for (const std::string& a : f.command)
      cmd += (cmd.empty() ? "" : " ") + (f.command.size() == 1 ? a : ShellQuote(a));
    set("command", cmd);
  }
  return spec;
}

Expected<HttpAnswer> PostJob(ApiClient& api, const std::string& path, const std::string& body, const std::string& key) {
  Expected<HttpAnswer> a = Status::Internal("not sent");
  for (int attempt = 0; attempt < 3; ++attempt) {
    a = api.Post(path, body, "application/yaml", {{"Idempotency-Key", key}});
    if (a) return a;
    std::this_thread::sleep_for(std::chrono::milliseconds(200 << attempt));
  }
  return a;
}

std::optional<nlohmann::json> SubmitToFollow(ApiClient& api, const SubmitFlags& f, const ClientConfig& cfg,
                                             std::ostream& err, int* rc) {
  auto spec = BuildSpec(f, cfg);
  if (!spec) {
    err << "gantry: " << spec.status().ToString() << "\n";
    *rc = 2;
    return std::nullopt;
  }
  std::error_code ec;
  if (!(*spec)["working_dir"]) (*spec)["working_dir"] = std::filesystem::current_path(ec).string();
  YAML::Emitter e;
  e << *spec;
  auto a = PostJob(api, "/v1/jobs", e.c_str(), RandomKey());
  if (!a || a->status >= 300) {
    err << "gantry: " << (a ? DescribeError(*a) : a.status().message()) << "\n";
    const nlohmann::json e =
        a && a->body.is_object() ? a->body.value("error", nlohmann::json::object()) : nlohmann::json();
    // -p gpu: a Slurm partition, not a class that exists (400; a class the team may not use is 403).
    if (a && a->status == 400 && e.is_object() && !f.priority.empty()) {
      if (std::string hint = SlurmRefusalHint(e.value("field", ""), f.priority); !hint.empty()) {
        err << "hint: " << hint << "\n";
      }
    }
    *rc = 1;
    return std::nullopt;
  }
  return a->body;
}

}  // namespace gantry
