#include "agent/progress.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <filesystem>

namespace gpufleet::agent {
namespace {

TEST(ProgressTest, ReadsKeyValueJsonAndBareSteps) {
  Progress p = ParseProgress("step=10 loss=0.9\nstep=1200 loss=0.4312 lr=3e-4\n\n");
  EXPECT_EQ(p.step, 1200);
  EXPECT_DOUBLE_EQ(*p.loss, 0.4312);
  p = ParseProgress("{\"step\": 7, \"loss\": 1.5, \"epoch\": 1}");
  EXPECT_EQ(p.step, 7);
  EXPECT_DOUBLE_EQ(*p.loss, 1.5);
  p = ParseProgress("42\n");
  EXPECT_EQ(p.step, 42);
  EXPECT_FALSE(p.loss);
}

TEST(ProgressTest, UnreadableLinesGiveNoStepButAreNotErrors) {
  Progress p = ParseProgress("epoch 3 done");
  EXPECT_FALSE(p.step);
  EXPECT_FALSE(p.loss);
  p = ParseProgress("{not json");
  EXPECT_FALSE(p.step);
  p = ParseProgress("step=abc loss=");
  EXPECT_FALSE(p.step);
  EXPECT_FALSE(p.loss);
  EXPECT_FALSE(ParseProgress("").step);
}

TEST(ProgressTest, FileGivesItsTimeAndLastLine) {
  std::string dir = ::testing::TempDir() + "/progress_test";
  std::filesystem::create_directories(dir);
  std::string path = dir + "/progress";
  std::filesystem::remove(path);
  EXPECT_FALSE(ReadProgressFile(path));
  { std::ofstream(path) << ""; }
  EXPECT_FALSE(ReadProgressFile(path)) << "an empty file is no report yet";
  {
    std::ofstream out(path);
    for (int i = 0; i < 2000; ++i) out << "step=" << i << " loss=1.0\n";  // longer than the 4 KiB read
  }
  auto f = ReadProgressFile(path);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->progress.step, 1999);
  EXPECT_GT(f->written.millis(), 0);
  EXPECT_EQ(LastWritten(path), f->written);
  EXPECT_FALSE(LastWritten(dir + "/none"));
}

}  // namespace
}  // namespace gpufleet::agent
