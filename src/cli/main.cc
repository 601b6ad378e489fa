// gantry: the one binary, with a subcommand per role (demo now; server, agent, sim, and
// the client commands as they land).
#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/demo.h"

int main(int argc, char** argv) {
  CLI::App app{"Gantry: a GPU cluster manager for ML teams"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "gantry 0.1.0");

  gantry::DemoOptions demo;
  CLI::App* demo_cmd = app.add_subcommand("demo", "Run the scheduler over an example cluster and job scenario");
  demo_cmd->add_option("--cluster", demo.cluster_path, "Cluster YAML (node_groups)")
      ->required()
      ->check(CLI::ExistingFile);
  demo_cmd->add_option("--scenario", demo.scenario_path, "Scenario YAML (start, waves of jobs)")
      ->required()
      ->check(CLI::ExistingFile);
  demo_cmd->add_option("--config", demo.config_dir, "Config directory (default: built-in defaults)");
  std::string output = "text";
  demo_cmd->add_option("-o,--output", output, "text or json")->check(CLI::IsMember({"text", "json"}));

  CLI11_PARSE(app, argc, argv);
  if (*demo_cmd) {
    demo.json = output == "json";
    return gantry::RunDemo(demo, std::cout, std::cerr);
  }
  return 0;
}
