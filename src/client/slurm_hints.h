// What a Slurm user types that Gantry spells otherwise: the flags sbatch, srun and salloc
// take that Gantry's submit and run do not (or take with another meaning), each with the
// Gantry way, shown as a hint when the command line is refused.
#pragma once

#include <string>
#include <vector>

namespace gantry {

// Hints for the Slurm flags among `args` (up to a "--"), in the order they appear; one per
// flag, none for what is not Slurm's.
std::vector<std::string> SlurmFlagHints(const std::vector<std::string>& args);

// When a submit's refusal is about `field`, what a Slurm habit may have meant by `value`
// (e.g. -p gpu: a partition, not a priority class); empty when nothing fits.
std::string SlurmRefusalHint(const std::string& field, const std::string& value);

// What to type instead of a Slurm (or kubectl) command given as gantry's: `gantry srun`
// answers gantry shell, run and exec; empty for a word that is not one.
std::string SlurmCommandHint(const std::string& word);

// A GPU type that is really a time (Slurm's -t): the refusal naming --time-limit, else empty.
std::string TimeGivenAsGpuType(const std::string& value);

}  // namespace gantry
