#include "common/time.h"

#include <cstdio>
#include <ctime>

namespace gpufleet {

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

}  // namespace gpufleet
