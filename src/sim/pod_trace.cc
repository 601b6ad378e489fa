// ParsePodTrace: Pod objects read as jobs (gangs grouped into one), timed by their status.
#include "sim/pod_trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/json_fields.h"
#include "core/kube_pod.h"

namespace gantry {

namespace {

// One pod of the trace, read: where it was (its line, or its place in a List), the job,
// and when it came and how long it ran.
struct TracedPod {
  int line = 0;
  KubePodJob pod;
  TimeMs created_ms = 0, finished_ms = 0;
  DurationMs ran_ms = 0;
};

bool TimeAt(const nlohmann::json& object, const char* key, TimeMs* out) {
  const std::string text = StringAt(object, key);
  return !text.empty() && ParseUtc(text, out);
}

// The GPU model a node selector asks for, as the job's GPU type; "" or the reason it is none.
std::string GpuTypeOfSelector(const GpuCatalog& catalog, JobSpec* spec) {
  for (const char* label : {"gantry.io/gpu-type", "nvidia.com/gpu.product"}) {
    auto it = spec->node_selector.find(label);
    if (it == spec->node_selector.end()) continue;
    const GpuType* type = TypeOfProduct(catalog, it->second);
    if (!type) {
      return fmt::format("spec.nodeSelector[{}]: GPU model '{}' is none of {}", label, it->second.substr(0, 64),
                         catalog.Names());
    }
    if (spec->request.gpu_types.empty()) spec->request.gpu_types = {type->name};
  }
  spec->node_selector.clear();  // the traced cluster's labels, not the simulated one's
  spec->tolerations.clear();
  return "";
}

// Reads one pod into `out`; "" or the reason it is skipped.
std::string ReadPod(const nlohmann::json& object, const GpuCatalog& catalog, TracedPod* out) {
  auto job = JobOfPod(object, KubePodPolicy{});
  const nlohmann::json& meta = ObjectAt(object, "metadata");
  const std::string key =
      fmt::format("{}/{}", StringAt(meta, "namespace").substr(0, 64), StringAt(meta, "name").substr(0, 64));
  if (!job) return fmt::format("pod {}: {}: {}", key, job.status().field(), job.status().message());
  const nlohmann::json& status = ObjectAt(object, "status");
  if (!job->Ended()) {
    return fmt::format("pod {} had not ended when the trace was taken (status.phase '{}')", key, job->phase);
  }
  if (!TimeAt(ObjectAt(object, "metadata"), "creationTimestamp", &out->created_ms)) {
    return fmt::format("pod {}: metadata.creationTimestamp is not a time", key);
  }
  TimeMs started = 0, finished = -1;
  if (!TimeAt(status, "startTime", &started)) return fmt::format("pod {}: status.startTime is not a time", key);
  for (const nlohmann::json& container : ArrayAt(status, "containerStatuses")) {
    TimeMs at = 0;
    if (TimeAt(ObjectAt(ObjectAt(container, "state"), "terminated"), "finishedAt", &at)) {
      finished = std::max(finished, at);
    }
  }
  if (finished < 0) return fmt::format("pod {}: no container has state.terminated.finishedAt", key);
  if (finished < started || started < out->created_ms) {
    return fmt::format("pod {}: created, started and finished out of order", key);
  }
  out->ran_ms = finished - started;
  out->finished_ms = finished;
  if (std::string why = GpuTypeOfSelector(catalog, &job->spec); !why.empty())
    return fmt::format("pod {}: {}", key, why);
  out->pod = std::move(*job);
  return "";
}

// A gang's name is reused by every run of the Job (or CronJob) that makes it: its pods are
// the gang's runs one after another, as the controller forms them. In creation order, a run
// takes the members that exist before any of it has finished, up to its minimum member count
// when one is given.
std::vector<std::vector<const TracedPod*>> GangRuns(std::vector<const TracedPod*> members) {
  std::stable_sort(members.begin(), members.end(),
                   [](const TracedPod* a, const TracedPod* b) { return a->created_ms < b->created_ms; });
  std::vector<std::vector<const TracedPod*>> runs;
  TimeMs run_ends_ms = 0;
  for (const TracedPod* m : members) {
    const int want = m->pod.gang_min_members;
    const bool full = !runs.empty() && want > 0 && static_cast<int>(runs.back().size()) >= want;
    if (runs.empty() || full || m->created_ms >= run_ends_ms) {
      runs.emplace_back();
      run_ends_ms = std::numeric_limits<TimeMs>::max();
    }
    runs.back().push_back(m);
    run_ends_ms = std::min(run_ends_ms, m->finished_ms);
  }
  return runs;
}

TraceJob JobOf(const std::vector<const TracedPod*>& members, JobSpec spec) {
  TraceJob job;
  for (const TracedPod* m : members) {
    job.submit_ms = std::max(job.submit_ms, m->created_ms);  // a gang is whole once its last pod exists
    job.duration_ms = std::max(job.duration_ms, m->ran_ms);  // and ends with its last
  }
  spec.kube_pods.clear();  // no pods to bind in a simulation
  job.spec = std::move(spec);
  job.checkpoint_interval_ms = 0;
  return job;
}

}  // namespace

Expected<Trace> ParsePodTrace(const std::string& text, const GpuCatalog& catalog, bool strict) {
  // A List (kubectl get -o json), a lone Pod, or one Pod per line.
  std::vector<std::pair<int, nlohmann::json>> objects;
  nlohmann::json whole = nlohmann::json::parse(text, nullptr, false);
  if (!whole.is_discarded()) {
    if (whole.is_object() && whole.contains("items")) {
      int item = 0;
      // Moved, not copied: a copy of a deeply nested field recurses as deep as it goes.
      for (nlohmann::json& pod : whole["items"]) objects.emplace_back(++item, std::move(pod));
    } else {
      objects.emplace_back(1, std::move(whole));
    }
  } else {
    std::istringstream in(text);
    std::string line;
    for (int line_no = 1; std::getline(in, line); ++line_no) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      objects.emplace_back(line_no, nlohmann::json::parse(line, nullptr, false));
    }
  }
  Trace trace;
  std::vector<TracedPod> pods;
  std::set<std::string> uids;
  for (auto& [line, object] : objects) {
    TracedPod pod;
    pod.line = line;
    std::string why = object.is_object() ? ReadPod(object, catalog, &pod) : "not a JSON object (a Pod)";
    if (why.empty() && !uids.insert(pod.pod.uid).second) {
      why = fmt::format("pod {}: its uid {} is in the trace already", pod.pod.key(), pod.pod.uid.substr(0, 64));
    }
    if (!why.empty()) {
      if (strict) return Status::Invalid("trace", fmt::format("pod {}: {}", line, why));
      trace.skipped.push_back({line, why});
      continue;
    }
    pods.push_back(std::move(pod));
  }
  // Pods alone are jobs alone; a gang's pods (one namespace, one gang name) are one job.
  std::map<std::string, std::vector<const TracedPod*>> gangs;
  for (const TracedPod& p : pods) {
    if (p.pod.gang.empty()) {
      trace.jobs.push_back(JobOf({&p}, p.pod.spec));
    } else {
      gangs[p.pod.ns + "/" + p.pod.gang].push_back(&p);
    }
  }
  for (auto& [gang, all] : gangs) {
    for (const std::vector<const TracedPod*>& members : GangRuns(all)) {
      std::vector<KubePodJob> jobs;
      for (const TracedPod* m : members) jobs.push_back(m->pod);
      auto spec = JobOfGang(jobs);
      std::string why = spec ? "" : fmt::format("gang {}: {}", gang, spec.status().message());
      if (spec && static_cast<int>(members.size()) < members.front()->pod.gang_min_members) {
        why = fmt::format("gang {}: {} of its {} members are in the trace", gang, members.size(),
                          members.front()->pod.gang_min_members);
      }
      if (!why.empty()) {
        if (strict) return Status::Invalid("trace", fmt::format("pod {}: {}", members.front()->line, why));
        trace.skipped.push_back({members.front()->line, why});
        continue;
      }
      trace.jobs.push_back(JobOf(members, std::move(*spec)));
    }
  }
  for (size_t i = 0; i < trace.jobs.size(); ++i) trace.jobs[i].spec.id = fmt::format("t{}", i);
  std::stable_sort(trace.jobs.begin(), trace.jobs.end(),
                   [](const TraceJob& a, const TraceJob& b) { return a.submit_ms < b.submit_ms; });
  return trace;
}

Expected<Trace> LoadPodTrace(const std::string& path, const GpuCatalog& catalog, bool strict) {
  std::ifstream in(path);
  if (!in) return Status::NotFound("cannot read trace " + path);
  std::stringstream buf;
  buf << in.rdbuf();
  return ParsePodTrace(buf.str(), catalog, strict);
}

}  // namespace gantry
