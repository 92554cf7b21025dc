#include "store/schema_version.h"

#include <gtest/gtest.h>

namespace gpufleet::store {
namespace {

TEST(SchemaVersionTest, ANewDatabaseIsVersionZeroAndAStoredNumberIsRead) {
  EXPECT_EQ(*ParseSchemaVersion(std::nullopt, "db"), 0);
  EXPECT_EQ(*ParseSchemaVersion(std::string("2"), "db"), 2);
}

TEST(SchemaVersionTest, AValueThatIsNotAVersionNamesTheDatabaseAndTheValue) {
  for (const char* bad : {"", "two", "2x", "-1"}) {
    auto v = ParseSchemaVersion(std::string(bad), "state.db");
    ASSERT_FALSE(v.ok()) << bad;
    EXPECT_EQ(v.status().message(), std::string("state.db: schema_version '") + bad + "' is not a number");
  }
}

TEST(SchemaVersionTest, ANewerSchemaAsksForANewerGpufleet) {
  EXPECT_TRUE(CheckSchemaVersion(2, 2, "db").ok());
  EXPECT_TRUE(CheckSchemaVersion(0, 2, "db").ok());
  Status s = CheckSchemaVersion(3, 2, "db");
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "db: database schema version 3 is newer than this gpufleet knows (2); upgrade gpufleet to open it");
}

}  // namespace
}  // namespace gpufleet::store
