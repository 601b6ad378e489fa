// What a compromised agent reports of a failed MIG change is kept only where the GPU model's
// rules allow it: an instance starting past the GPU's memory slices, or instances on a GPU
// not in MIG mode, are left out. Before, they were persisted, and at the next start the
// stored node failed its check: the server did not come back.
#include <gtest/gtest.h>

#include "server/controller_harness.h"

namespace gantry::testing {
namespace {

TEST(MigReportAttack, AFailedChangesReportOutsideTheModelsRulesIsNotKeptAndTheServerComesBack) {
  std::string db;
  {
    Harness h;
    db = h.db;
    h.Attach({MakeMigNode("h1", "H100-80GB", 1, {0}, {}), MakeNode("n2", "H100-80GB", 1)});
    h.controller->MigChanged({"h1", 0, {{"MIG-bad", "3g.40gb", 1, 0, 40}}, "", "made up"});
    h.controller->MigChanged({"n2", 0, {{"MIG-bad", "1g.10gb", 1, 0, 0}}, "", "made up"});
    h.controller->Sync();
    h.controller.reset();  // as if killed: what was committed remains
  }
  Harness h(db);  // recovers from the store (the harness expects Recover() to succeed)
  h.Attach({MakeMigNode("h1", "H100-80GB", 1, {0}, {}), MakeNode("n2", "H100-80GB", 1)});
  // The GPUs take work as before: a whole GPU on n2.
  std::string id = h.Submit("{gpus: 1, gpu_types: [H100-80GB], command: 'sleep 10'}", kAlice).body["id"];
  h.controller->Sync();
  EXPECT_EQ(h.State(id, kAlice), "running");
}

}  // namespace
}  // namespace gantry::testing
