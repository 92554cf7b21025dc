// Time and Duration: integer milliseconds, so that simulated and real time compare exactly and
// runs repeat bit for bit. Time counts from the Unix epoch (UTC). Plain values; thread-safe.
#pragma once

#include <compare>
#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>
#include <string>

namespace gpufleet {

class Duration {
 public:
  constexpr Duration() = default;
  static constexpr Duration Millis(int64_t ms) { return Duration(ms); }
  static constexpr Duration Seconds(int64_t s) { return Duration(s * 1000); }
  static constexpr Duration Minutes(int64_t m) { return Duration(m * 60'000); }
  static constexpr Duration Hours(int64_t h) { return Duration(h * 3'600'000); }
  static constexpr Duration Zero() { return Duration(0); }
  static constexpr Duration Max() { return Duration(std::numeric_limits<int64_t>::max() / 4); }

  constexpr int64_t millis() const { return ms_; }
  constexpr int64_t seconds() const { return ms_ / 1000; }  // truncated toward zero
  constexpr double seconds_f() const { return static_cast<double>(ms_) / 1000.0; }
  constexpr double hours_f() const { return static_cast<double>(ms_) / 3'600'000.0; }

  constexpr auto operator<=>(const Duration&) const = default;
  constexpr Duration operator+(Duration o) const { return Duration(ms_ + o.ms_); }
  constexpr Duration operator-(Duration o) const { return Duration(ms_ - o.ms_); }
  constexpr Duration operator*(int64_t k) const { return Duration(ms_ * k); }
  constexpr Duration operator/(int64_t k) const { return Duration(ms_ / k); }
  constexpr Duration& operator+=(Duration o) { ms_ += o.ms_; return *this; }
  constexpr Duration& operator-=(Duration o) { ms_ -= o.ms_; return *this; }

 private:
  constexpr explicit Duration(int64_t ms) : ms_(ms) {}
  int64_t ms_ = 0;
};

class Time {
 public:
  constexpr Time() = default;
  static constexpr Time FromMillis(int64_t ms) { return Time(ms); }
  static constexpr Time FromSeconds(int64_t s) { return Time(s * 1000); }
  static constexpr Time Epoch() { return Time(0); }
  static constexpr Time Max() { return Time(std::numeric_limits<int64_t>::max() / 4); }

  constexpr int64_t millis() const { return ms_; }
  constexpr int64_t seconds() const { return ms_ / 1000; }

  constexpr auto operator<=>(const Time&) const = default;
  constexpr Time operator+(Duration d) const { return Time(ms_ + d.millis()); }
  constexpr Time operator-(Duration d) const { return Time(ms_ - d.millis()); }
  constexpr Duration operator-(Time o) const { return Duration::Millis(ms_ - o.ms_); }
  constexpr Time& operator+=(Duration d) { ms_ += d.millis(); return *this; }

 private:
  constexpr explicit Time(int64_t ms) : ms_(ms) {}
  int64_t ms_ = 0;
};

// The OS's wall clock, for the live controller, the agent and the CLI. The scheduler core never
// calls it (it reads an injected sched::Clock; scripts/check_layering.py enforces that).
Time WallNow();

// "2017-10-09T07:01:55Z" (UTC, second precision; milliseconds appended when not zero).
std::string FormatIso8601(Time t);
// "1h23m", "45s", "2d3h": short human form for reports and explanations.
std::string FormatDuration(Duration d);
// Parses "90", "90s", "15m", "1h30m", "2d", "1w", "1.5h" (plain numbers are seconds). Negative
// values are rejected.
std::optional<Duration> ParseDuration(std::string_view s);

// Calendar periods for budgets that roll over, in UTC: a day starts at midnight, a week on
// Monday at midnight, a month on its first day at midnight.
enum class CalendarPeriod { kNone, kDay, kWeek, kMonth };
// "none", "daily", "weekly", "monthly" (also "day", "week", "month").
std::optional<CalendarPeriod> ParseCalendarPeriod(std::string_view s);
const char* CalendarPeriodName(CalendarPeriod p);  // "none", "daily", "weekly", "monthly"
// The start of the period holding `t` (kNone: Time::Epoch(), one period for all time).
Time PeriodStart(Time t, CalendarPeriod p);
// The start of the period after the one holding `t` (kNone: Time::Max()).
Time NextPeriodStart(Time t, CalendarPeriod p);

}  // namespace gpufleet
