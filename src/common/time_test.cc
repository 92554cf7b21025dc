#include "common/time.h"

#include <optional>
#include <string>

#include <gtest/gtest.h>

namespace gpufleet {
namespace {

std::optional<int64_t> Ms(std::string_view s) {
  std::optional<Duration> d = ParseDuration(s);
  if (!d) return std::nullopt;
  return d->millis();
}

TEST(TimeTest, DurationConstructorsAndArithmeticAreExactMilliseconds) {
  // Given each unit, expect exact milliseconds, truncated seconds and the arithmetic operators.
  EXPECT_EQ(Duration::Seconds(90).millis(), 90'000);
  EXPECT_EQ(Duration::Minutes(15).millis(), 900'000);
  EXPECT_EQ(Duration::Hours(2).millis(), 7'200'000);
  EXPECT_EQ(Duration::Millis(1999).seconds(), 1);
  EXPECT_EQ(Duration::Millis(-1999).seconds(), -1);  // toward zero
  EXPECT_EQ(Duration::Millis(1500).seconds_f(), 1.5);
  EXPECT_EQ(Duration::Minutes(90).hours_f(), 1.5);
  EXPECT_EQ(Duration::Seconds(10) * 3, Duration::Seconds(30));
  EXPECT_EQ(Duration::Seconds(10) / 4, Duration::Millis(2500));
  Duration d = Duration::Seconds(1);
  d += Duration::Millis(5);
  d -= Duration::Millis(2);
  EXPECT_EQ(d.millis(), 1003);
  EXPECT_LT(Duration::Zero(), Duration::Millis(1));
}

TEST(TimeTest, TimeArithmeticYieldsTimesAndDurations) {
  // Given times and durations, expect time + duration, time - time and ordering.
  Time t = Time::FromSeconds(100);
  EXPECT_EQ((t + Duration::Seconds(5)).millis(), 105'000);
  EXPECT_EQ((t - Duration::Seconds(5)).seconds(), 95);
  EXPECT_EQ(Time::FromSeconds(130) - t, Duration::Seconds(30));
  EXPECT_EQ(t - Time::FromSeconds(130), Duration::Seconds(-30));
  t += Duration::Millis(1);
  EXPECT_EQ(t.millis(), 100'001);
  EXPECT_LT(Time::Epoch(), t);
  EXPECT_LT(t, Time::Max());
}

TEST(TimeTest, ParseDurationPlainNumberIsSeconds) {
  // Given a bare number, expect seconds, fractions rounded to the millisecond.
  EXPECT_EQ(Ms("90"), 90'000);
  EXPECT_EQ(Ms("0"), 0);
  EXPECT_EQ(Ms("1.5"), 1'500);
  EXPECT_EQ(Ms(" 90 "), 90'000);
}

TEST(TimeTest, ParseDurationReadsUnitsAndCompounds) {
  // Given each unit and compound forms, expect exact milliseconds.
  EXPECT_EQ(Ms("90s"), 90'000);
  EXPECT_EQ(Ms("15m"), 900'000);
  EXPECT_EQ(Ms("2h"), 7'200'000);
  EXPECT_EQ(Ms("2d"), 172'800'000);
  EXPECT_EQ(Ms("1w"), 604'800'000);  // (cost/audit --since, job files: as plan --since reads it)
  EXPECT_EQ(Ms("1w2d"), 777'600'000);
  EXPECT_EQ(Ms("250ms"), 250);
  EXPECT_EQ(Ms("1h30m"), 5'400'000);
  EXPECT_EQ(Ms("1.5h"), 5'400'000);
  EXPECT_EQ(Ms("1d2h3m4s"), 93'784'000);
  EXPECT_EQ(Ms("0.5s"), 500);
  EXPECT_EQ(Ms("1m30s"), 90'000);
}

TEST(TimeTest, ParseDurationRejectsMalformedInput) {
  // Given empty input, a unit without a number, a trailing bare number after a unit, a
  // negative value, unknown units, inner spaces and huge values, expect nothing.
  for (const char* bad : {"", "   ", "h", "1h30", "-5", "-1h", "5x", "1.2.3s", ".", "1h 30m", "1e3",
                          "abc", "99999999999999d"}) {
    EXPECT_EQ(ParseDuration(bad), std::nullopt) << "'" << bad << "'";
  }
}

TEST(TimeTest, FormatDurationUsesTheTwoLargestUnits) {
  // Given durations from seconds to days, expect the short human forms.
  EXPECT_EQ(FormatDuration(Duration::Zero()), "0s");
  EXPECT_EQ(FormatDuration(Duration::Seconds(45)), "45s");
  EXPECT_EQ(FormatDuration(Duration::Seconds(90)), "1m30s");
  EXPECT_EQ(FormatDuration(Duration::Seconds(65 * 60)), "1h05m");
  EXPECT_EQ(FormatDuration(Duration::Hours(1)), "1h00m");
  EXPECT_EQ(FormatDuration(Duration::Hours(1) + Duration::Minutes(23) + Duration::Seconds(59)), "1h23m");
  EXPECT_EQ(FormatDuration(Duration::Hours(51)), "2d3h");
  EXPECT_EQ(FormatDuration(Duration::Hours(24)), "1d0h");
  EXPECT_EQ(FormatDuration(Duration::Millis(59'999)), "59s");  // truncated, not rounded
  EXPECT_EQ(FormatDuration(Duration::Seconds(-90)), "-1m30s");
}

TEST(TimeTest, ParseDurationReadsWhatFormatDurationWrites) {
  // Given formatted durations with whole units, expect ParseDuration to read them back.
  for (Duration d : {Duration::Seconds(45), Duration::Seconds(90), Duration::Minutes(83),
                     Duration::Hours(51)}) {
    EXPECT_EQ(ParseDuration(FormatDuration(d)), d) << FormatDuration(d);
  }
}

TEST(TimeTest, FormatIso8601IsUtcWithOptionalMilliseconds) {
  // Given the epoch, a known instant and instants with milliseconds, expect UTC ISO-8601 text
  // with a millisecond suffix only when it is not zero.
  EXPECT_EQ(FormatIso8601(Time::Epoch()), "1970-01-01T00:00:00Z");
  EXPECT_EQ(FormatIso8601(Time::FromSeconds(1'507'532'515)), "2017-10-09T07:01:55Z");
  EXPECT_EQ(FormatIso8601(Time::FromMillis(1'507'532'515'123)), "2017-10-09T07:01:55.123Z");
  EXPECT_EQ(FormatIso8601(Time::FromMillis(5)), "1970-01-01T00:00:00.005Z");
  EXPECT_EQ(FormatIso8601(Time::FromSeconds(951'782'400)), "2000-02-29T00:00:00Z");  // leap day
}

TEST(TimeTest, FormatIso8601HandlesTimesBeforeTheEpoch) {
  // Given times just before the epoch, expect the previous second with positive milliseconds.
  EXPECT_EQ(FormatIso8601(Time::FromMillis(-1)), "1969-12-31T23:59:59.999Z");
  EXPECT_EQ(FormatIso8601(Time::FromSeconds(-1)), "1969-12-31T23:59:59Z");
}

}  // namespace
}  // namespace gpufleet

namespace gpufleet {
namespace {

TEST(CalendarPeriodTest, PeriodsStartAtUtcMidnightMondayAndTheFirst) {
  // 2026-12-02T15:30:00Z is a Wednesday.
  const Time t = Time::FromSeconds(1796225400);
  EXPECT_EQ(FormatIso8601(PeriodStart(t, CalendarPeriod::kDay)), "2026-12-02T00:00:00Z");
  EXPECT_EQ(FormatIso8601(PeriodStart(t, CalendarPeriod::kWeek)), "2026-11-30T00:00:00Z");
  EXPECT_EQ(FormatIso8601(PeriodStart(t, CalendarPeriod::kMonth)), "2026-12-01T00:00:00Z");
  EXPECT_EQ(FormatIso8601(NextPeriodStart(t, CalendarPeriod::kDay)), "2026-12-03T00:00:00Z");
  EXPECT_EQ(FormatIso8601(NextPeriodStart(t, CalendarPeriod::kWeek)), "2026-12-07T00:00:00Z");
  // December rolls over into the next year.
  EXPECT_EQ(FormatIso8601(NextPeriodStart(t, CalendarPeriod::kMonth)), "2027-01-01T00:00:00Z");
  EXPECT_EQ(PeriodStart(t, CalendarPeriod::kNone), Time::Epoch());
  EXPECT_EQ(NextPeriodStart(t, CalendarPeriod::kNone), Time::Max());
}

TEST(CalendarPeriodTest, MonthsHaveTheirOwnLengths) {
  // 2028-02-10T00:00:00Z (a leap year): February has 29 days.
  const Time feb = Time::FromSeconds(1833753600);
  EXPECT_EQ(FormatIso8601(PeriodStart(feb, CalendarPeriod::kMonth)), "2028-02-01T00:00:00Z");
  EXPECT_EQ(NextPeriodStart(feb, CalendarPeriod::kMonth) - PeriodStart(feb, CalendarPeriod::kMonth),
            Duration::Hours(24 * 29));
  // The first instant of a period is in that period.
  const Time first = PeriodStart(feb, CalendarPeriod::kWeek);
  EXPECT_EQ(PeriodStart(first, CalendarPeriod::kWeek), first);
  EXPECT_EQ(PeriodStart(first - Duration::Millis(1), CalendarPeriod::kWeek), first - Duration::Hours(24 * 7));
}

TEST(CalendarPeriodTest, NamesParseBack) {
  for (CalendarPeriod p : {CalendarPeriod::kNone, CalendarPeriod::kDay, CalendarPeriod::kWeek, CalendarPeriod::kMonth}) {
    EXPECT_EQ(ParseCalendarPeriod(CalendarPeriodName(p)), p);
  }
  EXPECT_EQ(ParseCalendarPeriod("month"), CalendarPeriod::kMonth);
  EXPECT_FALSE(ParseCalendarPeriod("fortnightly").has_value());
}

}  // namespace
}  // namespace gpufleet
