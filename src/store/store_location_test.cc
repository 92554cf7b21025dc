#include <string>

#include <gtest/gtest.h>

#include "store/state_store.h"

namespace gpufleet::store {
namespace {

TEST(StoreLocationTest, SqlitePathsAndPostgresUrlsAreRecognised) {
  // Given each accepted spelling, expect its engine and target.
  auto a = ParseStoreLocation("sqlite:/var/lib/gpufleet/state.db");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->engine, StoreLocation::Engine::kSqlite);
  EXPECT_EQ(a->target, "/var/lib/gpufleet/state.db");
  auto b = ParseStoreLocation("sqlite:///var/lib/state.db");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->target, "/var/lib/state.db");
  auto c = ParseStoreLocation("sqlite:state.db");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->target, "state.db");
  for (const std::string url : {"postgresql://gf@db:5432/gpufleet", "postgres://db/gpufleet?sslmode=require"}) {
    auto p = ParseStoreLocation(url);
    ASSERT_TRUE(p.ok()) << url;
    EXPECT_EQ(p->engine, StoreLocation::Engine::kPostgres);
    EXPECT_EQ(p->target, url);
  }
}

TEST(StoreLocationTest, AnythingElseIsRefusedWithWhatIsAccepted) {
  // Given an unknown scheme, a bare path or an empty SQLite path, expect InvalidArgument that
  // shows both accepted forms.
  for (const std::string bad : {"mysql://db/x", "/var/lib/state.db", "", "sqlite:", "postgresql:/db"}) {
    auto r = ParseStoreLocation(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("sqlite:PATH"), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("postgresql://"), std::string::npos) << r.status().message();
  }
}

TEST(StoreLocationTest, RedactedHidesPasswords) {
  // Given passwords in the user part or in the query, expect them replaced; other parts stay.
  auto show = [](const std::string& text) { return Redacted(*ParseStoreLocation(text)); };
  EXPECT_EQ(show("postgresql://gf:s3cr@t@db:5432/gpufleet"), "postgresql://gf:***@db:5432/gpufleet");
  EXPECT_EQ(show("postgresql://gf@db/gpufleet"), "postgresql://gf@db/gpufleet");
  EXPECT_EQ(show("postgresql://db/gpufleet?user=gf&password=s3cret&sslmode=require"),
            "postgresql://db/gpufleet?user=gf&password=***&sslmode=require");
  EXPECT_EQ(show("postgresql:///gpufleet?host=/run/postgresql"), "postgresql:///gpufleet?host=/run/postgresql");
  EXPECT_EQ(show("sqlite:/data/state.db"), "sqlite:/data/state.db");
}

}  // namespace
}  // namespace gpufleet::store
