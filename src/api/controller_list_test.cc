#include "api/controller_list.h"

#include <gtest/gtest.h>

namespace gpufleet::api {
namespace {

ControllerList ListOf(std::string_view text) {
  auto list = ControllerList::Parse(text);
  EXPECT_TRUE(list.ok()) << list.status().ToString();
  return std::move(list).value();
}

TEST(ControllerListTest, ParsesACommaSeparatedListAndStartsAtTheFirst) {
  // Given URLs with spaces, trailing slashes and a repeat, expect each once, in order, the first current.
  ControllerList list = ListOf(" http://a:1/ , https://b:2,http://a:1,");
  EXPECT_EQ(list.urls(), (std::vector<std::string>{"http://a:1", "https://b:2"}));
  EXPECT_EQ(list.Current(), "http://a:1");
  EXPECT_EQ(list.Joined(), "http://a:1,https://b:2");
  EXPECT_EQ(list.MaxTries(), 3);
}

TEST(ControllerListTest, RefusesAnEntryThatIsNotAUrlAndAnEmptyList) {
  // Given an entry without a scheme, or nothing, expect InvalidArgument naming it.
  auto bad = ControllerList::Parse("http://a:1,b:2");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'b:2'"), std::string::npos) << bad.status().message();
  EXPECT_FALSE(ControllerList::Parse(" , ").ok());
}

TEST(ControllerListTest, UnreachableUrlMovesToTheNextAndWrapsAround) {
  // Given three URLs, expect connection failures to walk the list in order and wrap around.
  ControllerList list = ListOf("http://a,http://b,http://c");
  EXPECT_TRUE(list.Redirect("http://a", ""));
  EXPECT_EQ(list.Current(), "http://b");
  EXPECT_TRUE(list.Redirect("http://b", ""));
  EXPECT_EQ(list.Current(), "http://c");
  EXPECT_TRUE(list.Redirect("http://c", ""));
  EXPECT_EQ(list.Current(), "http://a");
}

TEST(ControllerListTest, StartsAtARememberedListedUrlAndGoesOnAfterIt) {
  // Given a remembered leader that is listed (with a trailing slash), expect the list to start
  // there and a connection failure to move to the URL after it; an unlisted one changes nothing.
  ControllerList list = ListOf("http://a,http://b,http://c");
  EXPECT_FALSE(list.StartAt("http://elsewhere"));
  EXPECT_EQ(list.Current(), "http://a");
  EXPECT_TRUE(list.StartAt("http://b/"));
  EXPECT_EQ(list.Current(), "http://b");
  EXPECT_TRUE(list.Redirect("http://b", ""));
  EXPECT_EQ(list.Current(), "http://c");
}

TEST(ControllerListTest, StandbyNamingTheLeaderSendsThereAndItIsRemembered) {
  // Given a standby that names a listed leader, expect the leader next (skipping the URLs
  // between), and it to stay current for later requests.
  ControllerList list = ListOf("http://a,http://b,http://c");
  EXPECT_TRUE(list.Redirect("http://a", "http://c/"));
  EXPECT_EQ(list.Current(), "http://c");
  EXPECT_EQ(list.Current(), "http://c");
  // c dies: the list goes on after c, not after a.
  EXPECT_TRUE(list.Redirect("http://c", ""));
  EXPECT_EQ(list.Current(), "http://a");
}

TEST(ControllerListTest, LeaderNamedOutsideTheListIsFollowedThenTheListResumes) {
  // Given a standby naming a leader that is not listed, expect that leader next; when it cannot
  // be reached, expect the listed URL after the standby that named it.
  ControllerList list = ListOf("http://a,http://b");
  EXPECT_TRUE(list.Redirect("http://a", "http://elsewhere:8470"));
  EXPECT_EQ(list.Current(), "http://elsewhere:8470");
  EXPECT_TRUE(list.Redirect("http://elsewhere:8470", ""));
  EXPECT_EQ(list.Current(), "http://b");
}

TEST(ControllerListTest, OneUnreachableUrlHasNothingElseToTry) {
  // Given a single URL that cannot be reached, expect no other URL to try, and it to stay current.
  ControllerList list = ListOf("http://a");
  EXPECT_FALSE(list.Redirect("http://a", ""));
  EXPECT_EQ(list.Current(), "http://a");
  // A standby that names no leader (it does not know yet), or itself, moves on like a failure.
  ControllerList two = ListOf("http://a,http://b");
  EXPECT_TRUE(two.Redirect("http://a", "http://a"));
  EXPECT_EQ(two.Current(), "http://b");
}

TEST(ControllerListTest, RedirectFromAUrlAlreadyLeftChangesNothing) {
  // Given two threads failing on the same URL, expect the second report not to skip a URL.
  ControllerList list = ListOf("http://a,http://b,http://c");
  EXPECT_TRUE(list.Redirect("http://a", ""));
  EXPECT_TRUE(list.Redirect("http://a", ""));
  EXPECT_EQ(list.Current(), "http://b");
}

}  // namespace
}  // namespace gpufleet::api
