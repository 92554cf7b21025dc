#include "common/iso_time.h"

#include <gtest/gtest.h>

namespace gpufleet {
namespace {

constexpr int64_t kJan1st2026 = 1'767'225'600;  // seconds

TEST(IsoTimeTest, DaysFromCivilFollowsTheGregorianCalendar) {
  EXPECT_EQ(DaysFromCivil(1970, 1, 1), 0);
  EXPECT_EQ(DaysFromCivil(2000, 3, 1), 11017);
  EXPECT_EQ(DaysFromCivil(1969, 12, 31), -1);
  EXPECT_EQ(*DaysFromCivil(2024, 3, 1) - *DaysFromCivil(2024, 2, 28), 2);  // leap year
  EXPECT_EQ(*DaysFromCivil(2100, 3, 1) - *DaysFromCivil(2100, 2, 28), 1);  // not a leap year
  EXPECT_FALSE(DaysFromCivil(2025, 2, 29));
  EXPECT_FALSE(DaysFromCivil(2026, 4, 31));
  EXPECT_FALSE(DaysFromCivil(2026, 13, 1));
  EXPECT_FALSE(DaysFromCivil(2026, 0, 1));
}

TEST(IsoTimeTest, ReadsEveryFormPeopleWrite) {
  EXPECT_EQ(ParseIsoTime("2026-01-01")->seconds(), kJan1st2026);
  EXPECT_EQ(ParseIsoTime("2026-01-01T00:00:00Z")->seconds(), kJan1st2026);
  EXPECT_EQ(ParseIsoTime("2026-01-01 01:30")->seconds(), kJan1st2026 + 5400);
  EXPECT_EQ(ParseIsoTime("2026-01-01t01:30:15")->seconds(), kJan1st2026 + 5415);
  EXPECT_EQ(ParseIsoTime("2026-01-01T01:00:00+01:00")->seconds(), kJan1st2026);
  EXPECT_EQ(ParseIsoTime("2026-01-01T01:00:00+0100")->seconds(), kJan1st2026);
  EXPECT_EQ(ParseIsoTime("2025-12-31T19:00:00-05")->seconds(), kJan1st2026);
  EXPECT_EQ(ParseIsoTime("2026-01-01T00:00:00.250Z")->millis(), kJan1st2026 * 1000 + 250);
  EXPECT_EQ(ParseIsoTime("2026-01-01T00:00:00,5")->millis(), kJan1st2026 * 1000 + 500);
  EXPECT_EQ(ParseIsoTime("2026-01-01T00:00:00.123456789Z")->millis(), kJan1st2026 * 1000 + 123);
}

TEST(IsoTimeTest, FormatThenParseIsTheSameTime) {
  for (int64_t ms : {int64_t{0}, kJan1st2026 * 1000 + 7, int64_t{951'782'400'000}, int64_t{-86'400'000}}) {
    EXPECT_EQ(ParseIsoTime(FormatIso8601(Time::FromMillis(ms))), Time::FromMillis(ms)) << ms;
  }
}

TEST(IsoTimeTest, RefusesWhatIsNotATime) {
  for (const char* bad : {"", "yesterday", "2026-1-01", "20260101", "2026-02-29", "2026-01-01T24:00",
                          "2026-01-01T10:60", "2026-01-01T10:00:60", "2026-01-01T10",
                          "2026-01-01T10:00:00.Z", "2026-01-01T10:00:00+1", "2026-01-01T10:00:00+01:00x",
                          "2026-01-01T10:00:00 Z", " 2026-01-01"}) {
    EXPECT_FALSE(ParseIsoTime(bad)) << bad;
  }
}

TEST(IsoTimeTest, ReadIsoTimeSaysWhatIsMissing) {
  EXPECT_EQ(ReadIsoTime("2026-01-01T00:00:00Z", {true, true})->seconds(), kJan1st2026);
  auto no_zone = ReadIsoTime("2026-01-01T00:00:00", {.require_time = true, .require_zone = true});
  ASSERT_FALSE(no_zone.ok());
  EXPECT_EQ(no_zone.status().message(), "'2026-01-01T00:00:00' has no time zone (end it with Z or +00:00)");
  auto date_only = ReadIsoTime("2026-01-01", {.require_time = true});
  ASSERT_FALSE(date_only.ok());
  EXPECT_EQ(date_only.status().message(),
            "'2026-01-01' is a date without a time of day (like 2026-12-02T15:04:05Z)");
  auto bad = ReadIsoTime("soon");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "'soon' is not a date or time like 2026-12-02T15:04:05Z or 2026-12-02");
}

TEST(IsoTimeTest, ParseIsoDateTakesOnlyADate) {
  EXPECT_EQ(ParseIsoDate("1970-01-01"), 0);
  EXPECT_EQ(ParseIsoDate("2026-12-04"), 20791);
  EXPECT_FALSE(ParseIsoDate("2026-12-04T00:00"));
  EXPECT_FALSE(ParseIsoDate("2026-5-20"));
  EXPECT_FALSE(ParseIsoDate("2025-02-29"));
}

TEST(IsoTimeTest, LooksLikeIsoDateTellsDatesFromSeconds) {
  EXPECT_TRUE(LooksLikeIsoDate("2017-10-09 07:01"));
  EXPECT_TRUE(LooksLikeIsoDate("2017-13-99"));  // looks like one; ParseIsoTime says it is not
  EXPECT_FALSE(LooksLikeIsoDate("1507532515"));
  EXPECT_FALSE(LooksLikeIsoDate("2017-1"));
}

}  // namespace
}  // namespace gpufleet
