// Tests of the cgroup helpers that need no cgroup file system: parsing /proc/self/mountinfo and
// /proc/self/cgroup, naming part cgroups, and what the limits note says for a tree of plain files
// laid out like cgroupfs. The launcher's tests use real cgroups.
#include "agent/cgroup.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace gpufleet::agent {
namespace {

TEST(CgroupTest, FindsTheCgroup2MountOnAHybridSystem) {
  // Given v1 hierarchies beside a cgroup2 mount at /sys/fs/cgroup/unified, expect that mount.
  const char* mountinfo =
      "30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
      "34 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
      "40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
  auto mount = FindCgroup2Mount(mountinfo);
  ASSERT_TRUE(mount.ok()) << mount.status().ToString();
  EXPECT_EQ(mount->mount_point, "/sys/fs/cgroup/unified");
  EXPECT_EQ(mount->root, "/");
}

TEST(CgroupTest, ReadsOptionalFieldsAndEscapedMountPoints) {
  // Given a pure v2 line with optional fields (shared:N) and an escaped space in the mount
  // point, expect the fields after the "-" separator read correctly and the space restored.
  const char* mountinfo =
      "25 1 0:22 / / rw shared:1 - ext4 /dev/sda1 rw\n"
      "26 25 0:23 /sub /sys/fs/my\\040cgroup rw,nosuid shared:4 master:2 - cgroup2 cgroup2 rw\n";
  auto mount = FindCgroup2Mount(mountinfo);
  ASSERT_TRUE(mount.ok());
  EXPECT_EQ(mount->mount_point, "/sys/fs/my cgroup");
  EXPECT_EQ(mount->root, "/sub");
}

TEST(CgroupTest, NoCgroup2MountIsNotFound) {
  // Given only cgroup v1 mounts, expect NotFound.
  auto mount = FindCgroup2Mount("34 30 0:31 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n");
  EXPECT_EQ(mount.status().code(), StatusCode::kNotFound);
}

TEST(CgroupTest, OwnCgroupIsTheV2Line) {
  // Given v1 lines before the "0::" line, expect the v2 path; none at all is NotFound.
  auto own = FindOwnCgroup("4:memory:/process_api/9e2b\n1:cpu:/\n0::/system.slice/agent.service\n");
  ASSERT_TRUE(own.ok());
  EXPECT_EQ(*own, "/system.slice/agent.service");
  EXPECT_EQ(FindOwnCgroup("0::/\n").value(), "/");
  EXPECT_EQ(FindOwnCgroup("1:cpu:/\n").status().code(), StatusCode::kNotFound);
}

TEST(CgroupTest, PartNamesKeepOnlySafeCharacters) {
  // Given keys with '#', '/', spaces and dots, expect names of [A-Za-z0-9._-] that cannot climb
  // out of the root.
  EXPECT_EQ(CgroupNameForKey("job-42.a1.p0#0"), "job-42.a1.p0_0");
  EXPECT_EQ(CgroupNameForKey("job/0 x"), "job_0_x");
  EXPECT_EQ(CgroupNameForKey("../etc"), ".._etc");
  EXPECT_EQ(CgroupNameForKey(".."), "__");
  EXPECT_EQ(CgroupNameForKey("."), "_");
  EXPECT_EQ(CgroupNameForKey(""), "_");
}

namespace fs = std::filesystem;

// A directory laid out like a cgroup: cgroup.procs, and cgroup.controllers listing `offered`.
void FakeCgroup(const fs::path& dir, const std::string& offered) {
  fs::create_directories(dir);
  std::ofstream(dir / "cgroup.procs") << "";
  std::ofstream(dir / "cgroup.controllers") << offered << "\n";
  std::ofstream(dir / "cgroup.subtree_control") << "";
}

class CgroupTreeNoteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::temp_directory_path() /
            ("cgroup_test_" + std::to_string(getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(base_);
  }
  void TearDown() override { fs::remove_all(base_); }
  fs::path base_;
};

TEST_F(CgroupTreeNoteTest, NamesTheControllerThatIsNotOffered) {
  // Given a tree whose top offers cpu but not memory, expect cpu turned on down to the root and
  // the note to say that memory limits are not enforced and why.
  FakeCgroup(base_, "cpu io");
  FakeCgroup(base_ / "gpufleet", "cpu io");
  FakeCgroup(base_ / "gpufleet" / "dev-1", "cpu io");
  auto tree = CgroupTree::Open((base_ / "gpufleet" / "dev-1").string(), base_.string());
  ASSERT_TRUE(tree.ok()) << tree.status().ToString();
  EXPECT_FALSE(tree->created_root());
  EXPECT_FALSE(tree->limits_memory());
  EXPECT_TRUE(tree->limits_cpu());
  EXPECT_EQ(tree->LimitsNote(),
            "memory limits not enforced: the cgroup offers no memory controller; cpu limits enforced");
  std::ifstream control(base_ / "gpufleet" / "cgroup.subtree_control");
  std::string written;
  std::getline(control, written);
  EXPECT_EQ(written, "+cpu");
}

TEST_F(CgroupTreeNoteTest, SaysWhenNeitherControllerIsOffered) {
  // Given a tree that offers neither memory nor cpu, expect one short reason for both.
  FakeCgroup(base_, "io");
  FakeCgroup(base_ / "dev-1", "io");
  auto tree = CgroupTree::Open((base_ / "dev-1").string());
  ASSERT_TRUE(tree.ok()) << tree.status().ToString();
  EXPECT_EQ(tree->LimitsNote(),
            "memory/cpu limits not enforced: the cgroup offers no memory or cpu controller");
}

TEST_F(CgroupTreeNoteTest, OomKillsAreReadFromMemoryEvents) {
  // Given a part's cgroup whose memory.events counts two OOM kills, expect 2; none counted, or no
  // memory controller (no file), 0.
  fs::create_directories(base_);
  std::ofstream(base_ / "memory.events") << "low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 0\n";
  EXPECT_EQ(CgroupOomKills(base_.string()), 2);
  std::ofstream(base_ / "memory.events") << "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n";
  EXPECT_EQ(CgroupOomKills(base_.string()), 0);
  EXPECT_EQ(CgroupOomKills((base_ / "none").string()), 0);
}

TEST_F(CgroupTreeNoteTest, DirectoryThatIsNotACgroupIsUnavailable) {
  // Given a root that is a plain directory (no cgroup.procs), expect Unavailable saying so.
  auto tree = CgroupTree::Open((base_ / "plain").string());
  ASSERT_FALSE(tree.ok());
  EXPECT_EQ(tree.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(tree.status().message().find("is not a cgroup v2 directory"), std::string::npos);
}

}  // namespace
}  // namespace gpufleet::agent
