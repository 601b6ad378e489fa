// Parsing of job specs and cluster descriptions from YAML (and from JSON, which YAML 1.2
// contains). Unknown fields are refused by name, so a typo never silently changes a job.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "core/job.h"
#include "core/node.h"
#include "core/node_pools.h"

namespace gantry {

// One job from a YAML map. Fields: id, user, team, project, priority, gpus, gpu_fraction
// (or gpu_milli), mig_profile, sharing, mps_thread_percent, gpu_memory_gb, gpu_types,
// prefer_listed_order, cpus, memory_gb, nodes, node_selector, preferred_labels,
// tolerations, preemptible, checkpointable, estimated_duration, time_limit, name, command,
// hold_gpus, working_dir, env, max_retries, retries_on_failure, cost_limit, array,
// dependency, notify, webhook, notify_format, mail_user.
// `extra_fields` are accepted and left for the caller (e.g. command, at).
Expected<JobSpec> ParseJobSpec(const YAML::Node& node, const std::string& path = "job",
                               const std::vector<std::string>& extra_fields = {});
Expected<JobSpec> ParseJobSpecText(const std::string& text);

// A cluster file: node_groups, each {name, count, gpu_type, gpus_per_node, nvlink_groups,
// cpus, memory_gb, labels, taints, mig: {gpus: [...], layout: [profiles]}}.
// Node ids are "<name>-<n>"; GPU UUIDs are made up deterministically.
Expected<std::vector<Node>> ParseCluster(const YAML::Node& root, const GpuCatalog& catalog);
Expected<std::vector<Node>> LoadClusterFile(const std::string& path, const GpuCatalog& catalog);
// The `pools` and `autoscaler` sections of a cluster file (the simulator's elastic nodes);
// none when it has neither.
Expected<AutoscalerConfig> LoadClusterPools(const std::string& path, const GpuCatalog& catalog);

// "key=value" -> Taint; "key" alone -> Taint with empty value.
Taint ParseTaint(const std::string& text);

}  // namespace gantry
