// The node protocol's messages as value types: the orders a controller sends a node
// (start a run, stop a run, re-partition a MIG GPU before a start) and what a node reports
// back (a run started or exited, MIG devices changed, GPU readings, GPU health). Both the
// in-process agent and the HTTP wire (order_wire.h, report_wire.h) carry exactly these.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/job.h"
#include "core/time.h"
#include "protocol/gpu_readings.h"

namespace gantry {

struct AssignedGpu {
  int index = 0;
  std::string uuid;      // GPU-... (MIG: the parent GPU)
  std::string mig_uuid;  // MIG-... when the share is a MIG instance the agent created
  int32_t milli = 1000;
  int mps_thread_percent = 0;
  int64_t memory_mib = 0;
  std::string mig_profile;
  int mig_start = -1;  // the instance's first memory slice
};

// A MIG re-partition the agent makes on one GPU before it starts the job.
struct MigOrder {
  int gpu = 0;  // index on the node
  std::string gpu_uuid;
  std::vector<MigInstanceSpec> destroy;
  std::vector<MigInstanceSpec> create;
};

// Start one node's part of a job run.
struct StartOrder {
  std::string job_id;
  int run = 1;  // 1 for the first start; GANTRY_RESTART_COUNT = run - 1
  JobSpecPtr spec;
  std::string node_id;
  int node_rank = 0;  // 0..num_nodes-1 within a gang
  int num_nodes = 1;
  std::string leader_node;           // node of rank 0 (GANTRY_MASTER_NODE)
  std::string master_addr;           // rank 0's node address (MASTER_ADDR)
  int master_port = 0;               // a port lent by rank 0's node (MASTER_PORT); 0: none
  std::string node_address;          // this node's address (GANTRY_NODE_ADDRESS)
  std::map<std::string, int> ports;  // the job's named ports on this node (GANTRY_PORT_<NAME>)
  SharingMode sharing = SharingMode::kExclusive;
  std::vector<AssignedGpu> gpus;
  std::vector<MigOrder> mig;  // made before the start, in order
  int cpus = 0;
  int64_t memory_mib = 0;
  // Whose account the job runs under on a root agent (the job's team policy): members
  // without a Unix account on the node run as `unix_account` (empty: they fail), and the
  // job may run as uid 0 only with `allow_root`.
  std::string unix_account;
  bool allow_root = false;
};

// Stop a run: SIGTERM to its process group, SIGKILL after grace_ms.
struct StopOrder {
  std::string job_id;
  int run = 1;
  std::string node_id;
  DurationMs grace_ms = 0;
  std::string reason;
  std::string kube_pod;  // a pod job's member there ("namespace/name/uid"; not sent to agents)
};

// An interactive session on a running job's node, asked for by a user and checked by the
// server: run a command in the job's allocation (exec, and gantry shell's shell), follow its
// output (attach), or reach one of its named ports (port). The agent connects back to the
// server for the session's stream (it may be behind NAT), or gets it handed over in process.
enum class StreamKind : uint8_t { kExec, kAttach, kPort };
struct StreamOrder {
  std::string session;  // random; the agent presents it when it connects back
  std::string job_id;
  int run = 1;
  std::string node_id;
  int node_rank = 0;  // which rank's output (attach)
  StreamKind kind = StreamKind::kExec;
  std::vector<std::string> command;  // exec: argv; empty: the account's login shell
  bool tty = false;                  // exec: a terminal (the user's size below)
  int cols = 80, rows = 24;
  bool end_job = false;  // exec into a job that holds GPUs (gantry shell): its hold ends with the session
  int port = 0;          // port: the node's port of the job's named port
  std::string who;       // the user who asked (the agent's log)
};
const char* ToString(StreamKind kind);
bool ParseStreamKind(const std::string& text, StreamKind* out);

// One run on one node as the node knows it: started (exited false) or ended. Also what an
// agent reports about the runs it knows when it (re)connects.
struct RunReport {
  std::string job_id;
  int run = 1;
  std::string node_id;
  bool exited = false;
  int exit_code = -1;
  std::string reason;
  TimeMs ended_ms = -1;  // when it ended, as the agent knows it; -1: unknown
};

// A MIG re-partition made for `job_id` (error empty) or failed: the GPU's MIG devices now.
struct MigReport {
  std::string node_id;
  int gpu = -1;
  std::vector<MigDeviceInfo> devices;
  std::string job_id;
  std::string error;
};

// A GPU turned unhealthy (with why) or healthy again.
struct GpuHealthChange {
  std::string node_id;
  int gpu = -1;
  bool healthy = true;
  std::string reason;
};

// The node's cloud takes it back (a spot reclaim) `reclaim_in_ms` from the report, as the
// agent's notice source said (`source`: the file or command that said it).
struct NodeNotice {
  std::string node_id;
  DurationMs reclaim_in_ms = 0;
  std::string source;
};

// The latest reading of some of a node's GPUs, by GPU index.
struct NodeReadings {
  std::string node_id;
  std::vector<std::pair<int, GpuSample>> samples;
};

}  // namespace gantry
