// DefaultWorkDir: where jobs with no working directory of their own run.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "agent/agent.h"

namespace gpufleet::agent {
namespace {

class WorkDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpufleet-workdir.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    ::chmod(root_.c_str(), 0711);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  std::string root_;
};

TEST_F(WorkDirTest, JobsOfTheAgentsOwnUserWorkInItsDataDirectory) {
  // Given jobs that run as the agent's own user, expect <data_dir>/work even below a closed folder.
  ASSERT_EQ(::mkdir((root_ + "/closed").c_str(), 0700), 0);
  std::string why;
  EXPECT_EQ(DefaultWorkDir(root_ + "/closed/data", "n1", false, &why), root_ + "/closed/data/work");
  EXPECT_EQ(why, "");
}

TEST_F(WorkDirTest, OpenFoldersAboveKeepTheDataDirectory) {
  // Given jobs of another user and every folder above the data directory passable, expect it kept.
  ASSERT_EQ(::mkdir((root_ + "/open").c_str(), 0711), 0);
  std::string why;
  EXPECT_EQ(DefaultWorkDir(root_ + "/open/data", "n1", true, &why), root_ + "/open/data/work");
  EXPECT_EQ(why, "");
}

TEST_F(WorkDirTest, AClosedFolderAboveMovesJobsToVarTmpAndSaysWhich) {
  // Given jobs of another user and a folder above the data directory that others may not pass
  // (a home such as /root), expect a folder under /var/tmp named for the node and the data
  // directory, and the reason naming the closed folder and its mode.
  ASSERT_EQ(::mkdir((root_ + "/home").c_str(), 0700), 0);
  std::string why;
  const std::string a = DefaultWorkDir(root_ + "/home/a/data", "n1", true, &why);
  EXPECT_EQ(a.rfind("/var/tmp/gpufleet-n1-", 0), 0u) << a;
  EXPECT_EQ(a.substr(a.size() - 5), "/work") << a;
  EXPECT_EQ(why, root_ + "/home does not let other users through (mode 0700)");
  // Two clusters on one machine, both with a node n1: two folders.
  const std::string b = DefaultWorkDir(root_ + "/home/b/data", "n1", true, &why);
  EXPECT_NE(a, b);
  EXPECT_EQ(DefaultWorkDir(root_ + "/home/a/data", "n1", true, &why), a);
}

}  // namespace
}  // namespace gpufleet::agent
