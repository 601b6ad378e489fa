// team_quotas.yaml parsing and submission-time quota checks.
#include "core/quota_config.h"

#include <fmt/format.h>
#include <fnmatch.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "core/scheduler_config.h"
#include "core/yaml_util.h"

namespace gantry {

double TeamQuota::guaranteed_total() const {
  double total = guaranteed_any;
  for (const auto& [type, gpus] : guaranteed) total += gpus;
  return total;
}

double TeamQuota::ceiling() const {
  double c = borrow_limit < 0 ? kUnlimited : guaranteed_total() + borrow_limit;
  if (max_gpus >= 0) c = c < 0 ? max_gpus : std::min(c, max_gpus);
  return c;
}

const TeamQuota& QuotaConfig::Team(const std::string& team) const {
  auto it = teams.find(team);
  return it == teams.end() ? default_team : it->second;
}

bool QuotaConfig::SharesEqually() const {
  return default_share == DefaultShare::kEqual && !(default_team.guaranteed_total() > 0);
}

double QuotaConfig::EqualShare(double gpus, size_t unlisted_teams) const {
  if (!SharesEqually() || unlisted_teams == 0) return 0;
  double listed = 0;
  for (const auto& [team, q] : teams) listed += q.guaranteed_total();
  return std::max(0.0, gpus - listed) / static_cast<double>(unlisted_teams);
}

double QuotaConfig::GuaranteeOf(const std::string& team, double equal_share) const {
  auto it = teams.find(team);
  return it != teams.end() ? it->second.guaranteed_total() : default_team.guaranteed_total() + equal_share;
}

double QuotaConfig::TotalWeight() const {
  double w = 0;
  for (const auto& [name, q] : teams) w += q.weight;
  return w;
}

bool AccountingPolicy::CostLimitExempt(const std::string& priority_class) const {
  return std::find(cost_limit_exempt_classes.begin(), cost_limit_exempt_classes.end(), priority_class) !=
         cost_limit_exempt_classes.end();
}

namespace {

Status CheckWebhook(const std::string& field, const std::string& url) {
  if (url.empty() || url.rfind("http://", 0) == 0 || url.rfind("https://", 0) == 0) return Status::Ok();
  return Status::Invalid(field, "must be an http:// or https:// URL");
}

Status ParseBudget(const YAML::Node& node, const std::string& where, Budget* b) {
  YamlReader r(node, where);
  b->monthly_cost = r.Optional<double>("monthly_cost", kUnlimited);
  b->monthly_gpu_hours = r.Optional<double>("monthly_gpu_hours", kUnlimited);
  std::string on_exceed = r.Optional<std::string>("on_exceed", "alert");
  if (Status s = r.Finish(); !s.ok()) return s;
  if (on_exceed != "alert" && on_exceed != "hold")
    return Status::Invalid(where + ".on_exceed", "must be alert or hold");
  b->hold = on_exceed == "hold";
  for (auto [field, v] : {std::pair{"monthly_cost", b->monthly_cost}, {"monthly_gpu_hours", b->monthly_gpu_hours}}) {
    if (v != kUnlimited && !(v > 0 && v < 1e12)) return Status::Invalid(where + "." + field, "must be positive");
  }
  if (!b->set()) return Status::Invalid(where, "needs monthly_cost or monthly_gpu_hours");
  return Status::Ok();
}

Status ParseAccounting(const YAML::Node& node, AccountingPolicy* a) {
  YamlReader r(node, "accounting");
  a->webhook = r.Optional<std::string>("webhook", "");
  a->idle_threshold_pct = r.Optional<double>("idle_threshold_percent", 5.0);
  std::string after = r.Optional<std::string>("idle_after", "30m");
  a->cost_limit_exempt_classes =
      r.Optional<std::vector<std::string>>("cost_limit_exempt_classes", a->cost_limit_exempt_classes);
  if (Status s = r.Finish(); !s.ok()) return s;
  if (Status s = CheckWebhook("accounting.webhook", a->webhook); !s.ok()) return s;
  if (!(a->idle_threshold_pct >= 0 && a->idle_threshold_pct <= 100)) {
    return Status::Invalid("accounting.idle_threshold_percent", "must be within 0..100");
  }
  auto d = ParseDuration(after);
  if (!d || *d <= 0) return Status::Invalid("accounting.idle_after", "must be a positive duration like 30m");
  a->idle_after_ms = *d;
  return Status::Ok();
}

Status ParseTeam(const YAML::Node& node, const std::string& where, const GpuCatalog& catalog, TeamQuota* q) {
  YamlReader r(node, where);
  auto guaranteed = r.Optional<std::map<std::string, double>>("guaranteed", {});
  q->borrow_limit = r.Optional<double>("borrow_limit", kUnlimited);
  q->max_gpus = r.Optional<double>("max_gpus", kUnlimited);
  q->weight = r.Optional<double>("weight", 1.0);
  q->user_max_gpus = r.Optional<double>("user_max_gpus", kUnlimited);
  q->project_max_gpus = r.Optional<std::map<std::string, double>>("project_max_gpus", {});
  YAML::Node budget = r.Child("budget");
  YAML::Node project_budgets = r.Child("project_budgets");
  std::string idle_action = r.Optional<std::string>("idle_action", "flag");
  q->webhook = r.Optional<std::string>("webhook", "");
  q->allowed_executables = r.Optional<std::vector<std::string>>("allowed_executables", {});
  q->allowed_images = r.Optional<std::vector<std::string>>("allowed_images", {});
  if (Status s = r.Finish(); !s.ok()) return s;
  if (budget && !budget.IsNull()) {
    if (Status s = ParseBudget(budget, where + ".budget", &q->budget); !s.ok()) return s;
  }
  if (project_budgets && !project_budgets.IsNull()) {
    if (!project_budgets.IsMap())
      return Status::Invalid(where + ".project_budgets", "must be a map of project to budget");
    for (const auto& kv : project_budgets) {
      std::string project = kv.first.as<std::string>();
      if (Status s = ParseBudget(kv.second, where + ".project_budgets." + project, &q->project_budgets[project]);
          !s.ok()) {
        return s;
      }
    }
  }
  if (idle_action != "flag" && idle_action != "stop") {
    return Status::Invalid(where + ".idle_action", "must be flag or stop");
  }
  q->idle_action = idle_action == "stop" ? IdleAction::kStop : IdleAction::kFlag;
  if (Status s = CheckWebhook(where + ".webhook", q->webhook); !s.ok()) return s;
  for (const auto& [type, gpus] : guaranteed) {
    if (gpus < 0) return Status::Invalid(where + ".guaranteed." + type, "must be >= 0");
    if (type == "any") {
      q->guaranteed_any = gpus;
      continue;
    }
    const GpuType* t = catalog.Find(type);
    if (!t) return Status::Invalid(where + ".guaranteed." + type, "unknown GPU type (or 'any')");
    q->guaranteed[t->id] = gpus;
  }
  if (q->weight <= 0) return Status::Invalid(where + ".weight", "must be positive");
  if (q->borrow_limit < 0 && q->borrow_limit != kUnlimited)
    return Status::Invalid(where + ".borrow_limit", "must be >= 0");
  if (q->max_gpus < 0 && q->max_gpus != kUnlimited) return Status::Invalid(where + ".max_gpus", "must be >= 0");
  if (q->max_gpus >= 0 && q->max_gpus < q->guaranteed_total()) {
    return Status::Invalid(where + ".max_gpus", "is below the guarantee");
  }
  return Status::Ok();
}

}  // namespace

Expected<QuotaConfig> QuotaConfig::FromYaml(const std::string& text, const GpuCatalog& catalog) {
  auto loaded = LoadYaml(text, "team_quotas");
  if (!loaded) return loaded.status();
  YAML::Node root = *loaded;
  QuotaConfig c;
  YamlReader top(root, "team_quotas");
  c.user_max_gpus = top.Optional<double>("user_max_gpus", kUnlimited);
  auto runtimes = top.Optional<std::map<std::string, std::string>>("class_max_runtime", {});
  YAML::Node teams = top.Child("teams");
  YAML::Node defaults = top.Child("default_team");
  YAML::Node accounting = top.Child("accounting");
  c.container_mount_roots = top.Optional<std::vector<std::string>>("container_mount_roots", c.container_mount_roots);
  const std::string share = top.Optional<std::string>("default_share", "none");
  if (Status s = top.Finish(); !s.ok()) return s;
  if (share != "equal" && share != "none") {
    return Status::Invalid("default_share", "must be equal or none, got '" + share + "'");
  }
  c.default_share = share == "none" ? DefaultShare::kNone : DefaultShare::kEqual;
  for (const std::string& root : c.container_mount_roots) {
    if (root.empty() || root[0] != '/') return Status::Invalid("container_mount_roots", "each an absolute directory");
  }
  if (Status s = ParseAccounting(accounting, &c.accounting); !s.ok()) return s;
  for (const auto& [cls, text_value] : runtimes) {
    auto d = ParseDuration(text_value);
    if (!d) return Status::Invalid("class_max_runtime." + cls, d.status().message());
    c.class_max_runtime_ms[cls] = *d;
  }
  if (defaults && !defaults.IsNull()) {
    if (Status s = ParseTeam(defaults, "default_team", catalog, &c.default_team); !s.ok()) return s;
  }
  if (teams && !teams.IsNull()) {
    if (!teams.IsMap()) return Status::Invalid("teams", "must be a map of team name to quota");
    for (const auto& kv : teams) {
      std::string name = kv.first.as<std::string>();
      TeamQuota q;
      if (Status s = ParseTeam(kv.second, "teams." + name, catalog, &q); !s.ok()) return s;
      c.teams[name] = q;
    }
  }
  return c;
}

Expected<QuotaConfig> QuotaConfig::LoadFile(const std::string& path, const GpuCatalog& catalog) {
  auto text = ReadTextFile(path);
  if (!text) return text.status();
  return FromYaml(*text, catalog);
}

double JobGpuShare(const GpuRequest& r, const GpuCatalog& catalog) {
  switch (r.sharing) {
    case SharingMode::kExclusive: return r.gpus;
    case SharingMode::kTimeSlice:
    case SharingMode::kMps:
    case SharingMode::kAuto: return r.gpu_milli / 1000.0;
    case SharingMode::kMig: {
      uint64_t mask = AllowedTypeMask(r, catalog);
      for (const GpuType& t : catalog.types()) {
        int p = t.FindMigProfile(r.mig_profile);
        if ((mask >> t.id & 1) && p >= 0)
          return static_cast<double>(t.mig_profiles[p].compute_slices) / t.mig_compute_slices;
      }
      return 0;
    }
  }
  return 0;
}

Status CheckAllowedExecutable(const std::string& command, const std::vector<std::string>& allowed) {
  if (allowed.empty() || command.empty()) return Status::Ok();
  // One simple command: anything the shell would treat as syntax could run another program.
  size_t bad = command.find_first_of(";|&`$<>(){}\n\\");
  if (bad != std::string::npos) {
    return Status::Invalid("command", fmt::format("your team allows only listed programs, run as one simple command; "
                                                  "'{}' is shell syntax",
                                                  command[bad] == '\n' ? std::string("\\n") : command.substr(bad, 1)));
  }
  std::string program = command.substr(0, command.find_first_of(" \t"));
  if (program.find("/..") != std::string::npos) {
    return Status::Invalid("command",
                           "'..' in the program's path is refused when your team allows only listed programs");
  }
  for (const std::string& pattern : allowed) {
    if (fnmatch(pattern.c_str(), program.c_str(), FNM_PATHNAME) == 0) return Status::Ok();
  }
  std::string list;
  for (const std::string& p : allowed) list += (list.empty() ? "" : ", ") + p;
  return Status::Invalid("command", fmt::format("'{}' is not among your team's allowed programs ({})", program, list));
}

// The image among the team's allowed ones; each mount under an allowed root. A digest
// (NAME@sha256:...) runs whatever image has that digest, whatever the name before it says,
// so a reference with one matches only patterns that give a digest themselves.
Status CheckContainerPolicy(const ContainerSpec& c, const TeamQuota& team, const QuotaConfig& quotas) {
  if (!c.enabled()) return Status::Ok();
  const bool digest = c.image.find('@') != std::string::npos;
  auto allows = [&](const std::string& p) {
    return (p.find('@') != std::string::npos) == digest && fnmatch(p.c_str(), c.image.c_str(), 0) == 0;
  };
  if (!team.allowed_images.empty() && std::none_of(team.allowed_images.begin(), team.allowed_images.end(), allows)) {
    std::string list;
    for (const std::string& p : team.allowed_images) list += (list.empty() ? "" : ", ") + p;
    return Status::Invalid(
        "container_image",
        digest ? fmt::format("'{}' names an image by digest, which runs whatever image has that digest: your team's "
                             "allowed images ({}) allow a digest only where they list one (NAME@sha256:...)",
                             c.image, list)
               : fmt::format("'{}' is not among your team's allowed images ({})", c.image, list));
  }
  for (size_t i = 0; i < c.mounts.size(); ++i) {
    std::string field = fmt::format("container_mounts[{}]", i);
    auto m = ParseMount(c.mounts[i], field);
    if (!m) return m.status();
    if (m->host == "/" || !UnderAnyRoot(m->host, quotas.container_mount_roots)) {
      std::string roots;
      for (const std::string& r : quotas.container_mount_roots) roots += (roots.empty() ? "" : ", ") + r;
      return Status::Invalid(field, fmt::format("{} is outside the directories containers may mount ({}; "
                                                "team_quotas.yaml container_mount_roots)",
                                                m->host, roots));
    }
  }
  return Status::Ok();
}

Status CheckQuotaAdmissible(const JobSpec& spec, const QuotaConfig& quotas, const GpuCatalog& catalog) {
  const TeamQuota& team = quotas.Team(spec.team);
  if (Status s = CheckAllowedExecutable(spec.command, team.allowed_executables); !s.ok()) return s;
  if (Status s = CheckContainerPolicy(spec.container, team, quotas); !s.ok()) return s;
  double share = JobGpuShare(spec.request, catalog);
  double ceiling = team.ceiling();
  auto fmt_gpus = [](double g) { return std::to_string(g).substr(0, std::to_string(g).find('.') + 3); };
  if (ceiling >= 0 && share > ceiling + 1e-9) {
    return Status::Invalid("gpus", "team " + spec.team + " may never hold more than " + fmt_gpus(ceiling) +
                                       " GPUs (guarantee + borrow limit, or max_gpus); this job needs " +
                                       fmt_gpus(share));
  }
  auto project = team.project_max_gpus.find(spec.project);
  if (project != team.project_max_gpus.end() && share > project->second + 1e-9) {
    return Status::Invalid("gpus",
                           "project " + spec.project + " may hold at most " + fmt_gpus(project->second) + " GPUs");
  }
  double user_max = team.user_max_gpus >= 0 ? team.user_max_gpus : quotas.user_max_gpus;
  if (user_max >= 0 && share > user_max + 1e-9) {
    return Status::Invalid("gpus", "user " + spec.user + " may hold at most " + fmt_gpus(user_max) + " GPUs");
  }
  auto runtime = quotas.class_max_runtime_ms.find(spec.priority_class);
  if (runtime != quotas.class_max_runtime_ms.end() && spec.time_limit_ms > runtime->second) {
    return Status::Invalid("time_limit", FormatDuration(spec.time_limit_ms) + " exceeds the " + spec.priority_class +
                                             " class maximum of " + FormatDuration(runtime->second));
  }
  return Status::Ok();
}

}  // namespace gantry
