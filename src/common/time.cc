#include "common/time.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <ctime>

#include <chrono>

namespace gpufleet {

Time WallNow() {
  return Time::FromMillis(std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count());
}


std::string FormatIso8601(Time t) {
  int64_t ms = t.millis();
  int64_t secs = ms >= 0 ? ms / 1000 : (ms - 999) / 1000;
  int64_t rem = ms - secs * 1000;
  std::time_t tt = static_cast<std::time_t>(secs);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[48];
  if (rem == 0) {
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                  tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
  } else {
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(rem));
  }
  return buf;
}

std::string FormatDuration(Duration d) {
  int64_t s = d.seconds();
  std::string sign;
  if (s < 0) {
    sign = "-";
    s = -s;
  }
  int64_t days = s / 86400, hours = (s / 3600) % 24, mins = (s / 60) % 60, secs = s % 60;
  char buf[64];
  if (days > 0) {
    std::snprintf(buf, sizeof buf, "%lldd%lldh", static_cast<long long>(days), static_cast<long long>(hours));
  } else if (hours > 0) {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(hours), static_cast<long long>(mins));
  } else if (mins > 0) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(mins), static_cast<long long>(secs));
  } else {
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(secs));
  }
  return sign + buf;
}

std::optional<Duration> ParseDuration(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  if (s.empty()) return std::nullopt;
  double total_ms = 0;
  size_t i = 0;
  while (i < s.size()) {
    size_t start = i;
    while (i < s.size() && ((s[i] >= '0' && s[i] <= '9') || s[i] == '.')) ++i;
    if (i == start) return std::nullopt;
    std::string num(s.substr(start, i - start));
    char* end = nullptr;
    double v = std::strtod(num.c_str(), &end);
    if (end != num.c_str() + num.size()) return std::nullopt;
    double unit = 1000;
    if (i < s.size()) {
      if (s.substr(i, 2) == "ms") {
        unit = 1;
        i += 2;
      } else {
        switch (s[i]) {
          case 's': unit = 1000; break;
          case 'm': unit = 60'000; break;
          case 'h': unit = 3'600'000; break;
          case 'd': unit = 86'400'000; break;
          case 'w': unit = 7 * 86'400'000.0; break;  // as plan --since reads it (4w)
          default: return std::nullopt;
        }
        ++i;
      }
    } else if (start != 0) {
      return std::nullopt;  // "1h30" is ambiguous
    }
    total_ms += v * unit;
  }
  if (total_ms > 1e15) return std::nullopt;
  return Duration::Millis(static_cast<int64_t>(total_ms + 0.5));
}

std::optional<CalendarPeriod> ParseCalendarPeriod(std::string_view s) {
  if (s == "none") return CalendarPeriod::kNone;
  if (s == "daily" || s == "day") return CalendarPeriod::kDay;
  if (s == "weekly" || s == "week") return CalendarPeriod::kWeek;
  if (s == "monthly" || s == "month") return CalendarPeriod::kMonth;
  return std::nullopt;
}

const char* CalendarPeriodName(CalendarPeriod p) {
  switch (p) {
    case CalendarPeriod::kNone: return "none";
    case CalendarPeriod::kDay: return "daily";
    case CalendarPeriod::kWeek: return "weekly";
    case CalendarPeriod::kMonth: return "monthly";
  }
  return "none";
}

namespace {
constexpr int64_t kMsPerDay = 86'400'000;
// Floor division: days before 1970 round down too.
int64_t DayOf(Time t) {
  int64_t ms = t.millis();
  return ms >= 0 ? ms / kMsPerDay : -((-ms + kMsPerDay - 1) / kMsPerDay);
}
Time AtDay(int64_t day) { return Time::FromMillis(day * kMsPerDay); }
}  // namespace

Time PeriodStart(Time t, CalendarPeriod p) {
  const int64_t day = DayOf(t);
  switch (p) {
    case CalendarPeriod::kNone:
      return Time::Epoch();
    case CalendarPeriod::kDay:
      return AtDay(day);
    case CalendarPeriod::kWeek: {
      // 1970-01-01 was a Thursday: Monday is day 4 of that week (0 = Monday).
      const int64_t weekday = ((day + 3) % 7 + 7) % 7;
      return AtDay(day - weekday);
    }
    case CalendarPeriod::kMonth: {
      const std::chrono::sys_days d{std::chrono::days{day}};
      const std::chrono::year_month_day ymd{d};
      const std::chrono::sys_days first{ymd.year() / ymd.month() / std::chrono::day{1}};
      return AtDay(first.time_since_epoch().count());
    }
  }
  return Time::Epoch();
}

Time NextPeriodStart(Time t, CalendarPeriod p) {
  const Time start = PeriodStart(t, p);
  switch (p) {
    case CalendarPeriod::kNone:
      return Time::Max();
    case CalendarPeriod::kDay:
      return start + Duration::Hours(24);
    case CalendarPeriod::kWeek:
      return start + Duration::Hours(24 * 7);
    case CalendarPeriod::kMonth: {
      const std::chrono::sys_days d{std::chrono::days{DayOf(start)}};
      const std::chrono::year_month_day ymd{d};
      const std::chrono::sys_days next{(ymd.year() / ymd.month() / std::chrono::day{1}) + std::chrono::months{1}};
      return AtDay(next.time_since_epoch().count());
    }
  }
  return Time::Max();
}

}  // namespace gpufleet
