// The table of Slurm flags and their Gantry forms (docs/SLURM.md has the long version).
#include "client/slurm_hints.h"

#include <fmt/format.h>

#include <map>

#include "core/duration.h"

namespace gantry {

namespace {

// Slurm's flag -> how Gantry says it. Flags Gantry takes as they are (-J, -N, -G, -H, -a,
// -d, --array, --mail-type, --mail-user, --dependency) are not here.
const std::map<std::string, std::string>& SlurmFlags() {
  static const std::map<std::string, std::string> kFlags = {
      {"--partition", "Slurm's partitions are node labels here: --node-selector pool=NAME"},
      {"-q", "the QOS is the priority class here: -p/--priority CLASS (critical, high, medium, low)"},
      {"--qos", "the QOS is the priority class here: -p/--priority CLASS (critical, high, medium, low)"},
      {"--time", "the time limit is --time-limit (2:00:00, 90m, 0 for the longest allowed)"},
      {"--time-min", "the run-time estimate is --estimate (backfill plans with it)"},
      {"--gres", "GPUs are -g COUNT and -t TYPE: --gres=gpu:a100:4 is -g 4 -t A100-80GB"},
      {"--gpus-per-node", "-g/--gpus is the job's total: -g (NODES x PER-NODE) with -N NODES"},
      {"--gpus-per-task", "-g/--gpus is the job's total GPUs"},
      {"-n", "Gantry starts one process per node; start more from the command (torchrun --nproc-per-node)"},
      {"--ntasks", "Gantry starts one process per node; start more from the command (torchrun --nproc-per-node)"},
      {"--ntasks-per-node", "Gantry starts one process per node; start more from the command (torchrun ...)"},
      {"-c", "CPUs are --cpus (per node)"},
      {"--cpus-per-task", "CPUs are --cpus (per node)"},
      {"--mem", "host memory is --memory-gb (per node)"},
      {"--mem-per-gpu", "host memory is --memory-gb (per node)"},
      {"-w", "pick nodes by label: --node-selector KEY=VALUE"},
      {"--nodelist", "pick nodes by label: --node-selector KEY=VALUE"},
      {"-x", "keep off nodes by label: drain them, or --node-selector KEY=VALUE"},
      {"--exclude", "keep off nodes by label: drain them, or --node-selector KEY=VALUE"},
      {"-D", "the working directory is --workdir"},
      {"--chdir", "the working directory is --workdir"},
      {"--export", "variables are -e NAME=VALUE (repeat); the submitting shell's are not copied"},
      {"--output", "Gantry keeps the job's output: gantry logs ID (--stderr for stderr)"},
      {"--error", "Gantry keeps the job's output: gantry logs ID (--stderr for stderr)"},
      {"-A", "the account to bill is --project (and --team for a team of yours)"},
      {"--account", "the account to bill is --project (and --team for a team of yours)"},
      {"--job-name", "the name is -J/--name"},
      {"--wrap", "the command goes after --: gantry submit -- python train.py"},
      {"--requeue", "requeue after faults: --max-fault-retries N; restart after a failure: --retries N"},
      {"--signal", "jobs that save state take --checkpointable (SIGTERM, then $GANTRY_CHECKPOINT_DIR)"},
      {"--test-only", "--dry-run says where the job would start, or why it would wait"},
      {"--exclusive", "whole GPUs are never shared; -g COUNT takes them"},
      {"--pty", "a shell on GPUs: gantry shell -g 1; in a running job: gantry exec ID -t -- bash"},
      {"--jobid", "the job is the first word: gantry exec ID -- CMD"},
      {"--overlap", "gantry exec ID -- CMD runs beside the job's own command"},
      {"-it", "gantry exec ID -t -- CMD (input always reaches the command; -t adds a terminal)"},
      {"-i", "input always reaches the command (--no-stdin for none)"},
  };
  return kFlags;
}

}  // namespace

std::vector<std::string> SlurmFlagHints(const std::vector<std::string>& args) {
  std::vector<std::string> hints;
  for (const std::string& arg : args) {
    if (arg == "--") break;
    std::string flag = arg.substr(0, arg.find('='));
    if (flag.size() > 2 && flag[1] != '-') flag = flag.substr(0, 2);  // -c8 is -c
    auto it = SlurmFlags().find(flag);
    if (it != SlurmFlags().end()) hints.push_back(fmt::format("Slurm's {}: {}", flag, it->second));
  }
  return hints;
}

std::string SlurmCommandHint(const std::string& word) {
  static const std::map<std::string, std::string> kCommands = {
      {"srun",
       "gantry run -g 1 -- CMD (a job, its output as it runs); srun --pty bash is gantry shell -g 1; "
       "srun --jobid ID is gantry exec ID -- CMD"},
      {"salloc", "gantry shell -g 1 (GPUs and a shell on them), or gantry submit -g 1 --hold-gpus 2h"},
      {"sattach", "gantry attach ID"},
      {"sbatch", "gantry submit -- CMD (gantry submit --help)"},
      {"squeue", "gantry queue (why each job waits), gantry jobs (filters like squeue's)"},
      {"scancel", "gantry cancel ID"},
      {"scontrol", "gantry job ID (show), gantry hold / release / update ID"},
      {"sinfo", "gantry nodes, gantry status"},
      {"sacct", "gantry jobs --since 7d, gantry usage"},
      {"kubectl", "gantry exec ID -t -- bash is kubectl exec -it; gantry attach ID is kubectl attach"},
  };
  auto it = kCommands.find(word);
  return it == kCommands.end() ? "" : fmt::format("Slurm's {}: {}", word, it->second);
}

std::string SlurmRefusalHint(const std::string& field, const std::string& value) {
  if (field == "priority") {
    return fmt::format(
        "-p is the priority class here (Slurm's --qos); if '{}' is a Slurm partition, partitions are node labels: "
        "--node-selector pool={}",
        value, value);
  }
  return "";
}

std::string TimeGivenAsGpuType(const std::string& value) {
  if (value.empty() || !ParseJobTime(value).ok()) return "";
  return fmt::format(
      "'{}' is a time, not a GPU type: -t is --gpu-type here; for Slurm's -t (a time limit) give --time-limit {}",
      value, value);
}

}  // namespace gantry
