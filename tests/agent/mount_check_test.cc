// Container mount sources: a link anywhere refuses the mount, and the job's account must
// reach the path itself (search on the way, read, write for read-write).
#include "agent/mount_check.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "server/controller_harness.h"

namespace gantry::testing {
namespace {

namespace fs = std::filesystem;

class MountCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = TempPath("mounts");
    fs::remove_all(root_);
    fs::create_directories(root_ + "/data/sub");
    std::ofstream(root_ + "/data/file") << "x";
    fs::create_symlink("/", root_ + "/to-root");
    fs::create_symlink(root_ + "/data", root_ + "/data-link");
  }
  // An account that owns nothing here (not this test's).
  MountAccount Stranger() const { return {65534, 65534, {}, false}; }
  MountAccount Me() const { return {::geteuid(), ::getegid(), {}, false}; }
  std::string root_;
};

TEST_F(MountCheck, APlainDirectoryIsMountedAsIs) {
  auto ok = CheckMountSource(root_ + "/data", true, Me(), "container_mounts[0]");
  ASSERT_TRUE(ok) << ok.status().ToString();
  EXPECT_EQ(ok->path(), fs::canonical(root_ + "/data").string());
}

// Before: a job made /tmp/x -> / and mounted /tmp/x: the container listed the host's /.
TEST_F(MountCheck, ALinkAnywhereInThePathIsRefused) {
  for (const std::string& path : {root_ + "/to-root", root_ + "/to-root/etc", root_ + "/data-link/sub"}) {
    auto r = CheckMountSource(path, true, Me(), "container_mounts[1]");
    ASSERT_FALSE(r) << path;
    EXPECT_EQ(r.status().field(), "container_mounts[1]");
    EXPECT_NE(r.status().message().find("is a symbolic link"), std::string::npos) << r.status().message();
  }
}

// Before: a directory under a 0700 parent was mounted for an account that cannot enter the
// parent outside a container.
TEST_F(MountCheck, TheJobsAccountMustReachThePath) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: the directories belong to another account than the job's";
  fs::permissions(root_ + "/data", fs::perms::owner_all);  // 0700, root's
  auto hidden = CheckMountSource(root_ + "/data/sub", true, Stranger(), "container_mounts[0]");
  ASSERT_FALSE(hidden);
  EXPECT_NE(hidden.status().message().find("does not let it in"), std::string::npos) << hidden.status().message();
  fs::permissions(root_ + "/data", fs::perms::owner_all | fs::perms::others_exec | fs::perms::others_read);
  fs::permissions(root_ + "/data/sub", fs::perms::owner_all | fs::perms::others_exec | fs::perms::others_read);
  EXPECT_TRUE(CheckMountSource(root_ + "/data/sub", true, Stranger(), "m"));
  auto readonly = CheckMountSource(root_ + "/data/sub", false, Stranger(), "m");  // rw: not writable by it
  ASSERT_FALSE(readonly);
  EXPECT_NE(readonly.status().message().find("writable"), std::string::npos);
  // Its group's bits count for it.
  fs::permissions(root_ + "/data/sub", fs::perms::owner_all | fs::perms::group_all);
  ASSERT_EQ(::chown((root_ + "/data/sub").c_str(), 0, 4242), 0);
  EXPECT_FALSE(CheckMountSource(root_ + "/data/sub", false, Stranger(), "m"));
  EXPECT_TRUE(CheckMountSource(root_ + "/data/sub", false, {65534, 65534, {4242}, false}, "m"));
  // A job allowed to run as root is not held by modes (links are refused still).
  fs::permissions(root_ + "/data", fs::perms::owner_all);
  EXPECT_TRUE(CheckMountSource(root_ + "/data/sub", false, {0, 0, {}, true}, "m"));
  EXPECT_FALSE(CheckMountSource(root_ + "/to-root", true, {0, 0, {}, true}, "m"));
}

TEST_F(MountCheck, AMissingPathOrAFileInThePathIsRefused) {
  EXPECT_FALSE(CheckMountSource(root_ + "/none", true, Me(), "m"));
  auto through_file = CheckMountSource(root_ + "/data/file/x", true, Me(), "m");
  ASSERT_FALSE(through_file);
  EXPECT_NE(through_file.status().message().find("not a directory"), std::string::npos);
}

// Before: the runtime was given the checked path and resolved it again when it mounted, so
// a job that could write a directory of the path swapped it for a link in between (to /etc
// here). Now what was checked is bound by descriptor at the agent's staging path.
TEST_F(MountCheck, WhatIsMountedIsWhatWasCheckedWhateverIsSwappedInAfter) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: binding the checked descriptor takes CAP_SYS_ADMIN";
  const std::string stage = root_ + "/stage";
  auto checked = CheckMountSource(root_ + "/data/sub", true, Me(), "container_mounts[0]");
  ASSERT_TRUE(checked) << checked.status().ToString();
  auto file = CheckMountSource(root_ + "/data/file", true, Me(), "container_mounts[1]");
  ASSERT_TRUE(file) << file.status().ToString();
  std::ofstream(root_ + "/data/sub/mine") << "checked";
  // The swap: data moves away and a link to /etc takes its place.
  fs::rename(root_ + "/data", root_ + "/moved");
  fs::create_symlink("/etc", root_ + "/data");
  auto dir = StageMount(*checked, stage, "0", "container_mounts[0]");
  ASSERT_TRUE(dir) << dir.status().ToString();
  auto one = StageMount(*file, stage, "1", "container_mounts[1]");
  ASSERT_TRUE(one) << one.status().ToString();
  EXPECT_TRUE(fs::exists(*dir + "/mine"));  // the checked directory, not /etc/sub
  std::ifstream in(*one);
  std::string text;
  in >> text;
  EXPECT_EQ(text, "x");
  EXPECT_EQ(fs::status(stage).permissions() & fs::perms::all, fs::perms::owner_all);  // the agent's alone
  // Released at the run's end: unmounted and gone, the source untouched.
  ReleaseStagedMounts(stage);
  EXPECT_FALSE(fs::exists(stage));
  EXPECT_TRUE(fs::exists(root_ + "/moved/sub/mine"));
}

// A staging directory another account could write is refused (it could swap the target).
TEST_F(MountCheck, AStagingDirectoryOthersCanWriteIsRefused) {
  auto checked = CheckMountSource(root_ + "/data/sub", true, Me(), "m");
  ASSERT_TRUE(checked);
  fs::create_directories(root_ + "/open");
  fs::permissions(root_ + "/open", fs::perms::all);
  EXPECT_FALSE(StageMount(*checked, root_ + "/open", "0", "m"));
  EXPECT_FALSE(StageMount(*checked, root_ + "/to-root", "0", "m"));  // a link
}

}  // namespace
}  // namespace gantry::testing
