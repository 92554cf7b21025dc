#include "common/read_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace gpufleet {
namespace {

namespace fs = std::filesystem;

TEST(ReadFileTextTest, SaysWhatIsWrongWithThePath) {
  // Given a file, a missing path, a directory and an empty path, expect the bytes, then errors
  // that start with the path and say which.
  const fs::path dir = fs::temp_directory_path() / ("read_file_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  { std::ofstream(dir / "a.yaml", std::ios::binary) << "name: a\n\0x"; }
  auto ok = ReadFileText((dir / "a.yaml").string());
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(*ok, "name: a\n");
  auto missing = ReadFileText((dir / "nope.yaml").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), (dir / "nope.yaml").string() + ": no such file");
  auto folder = ReadFileText(dir.string());
  ASSERT_FALSE(folder.ok());
  EXPECT_EQ(folder.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(folder.status().message(), dir.string() + ": is a directory, not a file");
  EXPECT_FALSE(ReadFileText("").ok());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace gpufleet
