// The controller's state machine with no thread, store or clock (ControllerState alone):
// the harness's users and config, a recording node link and a time the test moves.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/config_dir.h"
#include "core/spec_yaml.h"
#include "state/controller_state.h"
#include "state/state_harness.h"
#include "test_util.h"

namespace gantry::testing {

struct StateUnderTest {
  // `configure` changes the options (the config, quotas included) before the state is made.
  explicit StateUnderTest(const StoredState& stored = {},
                          const std::function<void(ControllerOptions&)>& configure = nullptr) {
    options.config = *LoadConfigDir("");
    options.users = HarnessUsers();
    options.kill_wait_ms = 5000;
    if (configure) configure(options);
    state = std::make_unique<ControllerState>(options, std::make_shared<const QuotaConfig>(options.config.quotas),
                                              [this](const std::string& line) { log.push_back(line); });
    state->SetTime(now, 0);
    EXPECT_TRUE(state->Recover(stored, {}).ok());
    state->StartMonth({});
  }
  void At(TimeMs t) { state->SetTime(t, t * 1000); }
  TimeMs now = 1'800'000'000'000;
  ControllerOptions options;
  std::vector<std::string> log;
  RecordingLink link;
  std::unique_ptr<ControllerState> state;
};

}  // namespace gantry::testing
