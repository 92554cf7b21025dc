#include "common/iso_time.h"

#include <chrono>

namespace gpufleet {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Exactly `n` digits at `pos`.
std::optional<int64_t> Digits(std::string_view s, size_t pos, size_t n) {
  if (pos + n > s.size()) return std::nullopt;
  int64_t v = 0;
  for (size_t i = pos; i < pos + n; ++i) {
    if (!IsDigit(s[i])) return std::nullopt;
    v = v * 10 + (s[i] - '0');
  }
  return v;
}

struct Parsed {
  Time time;
  bool has_time = false;
  bool has_zone = false;
};

std::optional<Parsed> Parse(std::string_view s) {
  auto year = Digits(s, 0, 4);
  auto month = Digits(s, 5, 2);
  auto day = Digits(s, 8, 2);
  if (!year || !month || !day || s[4] != '-' || s[7] != '-') return std::nullopt;
  auto days = DaysFromCivil(*year, *month, *day);
  if (!days) return std::nullopt;
  Parsed out;
  int64_t ms = *days * 86'400'000;
  size_t i = 10;
  if (i < s.size() && (s[i] == ' ' || s[i] == 'T' || s[i] == 't')) {
    auto hour = Digits(s, i + 1, 2);
    auto minute = Digits(s, i + 4, 2);
    if (!hour || !minute || s[i + 3] != ':' || *hour > 23 || *minute > 59) return std::nullopt;
    out.has_time = true;
    ms += (*hour * 3600 + *minute * 60) * 1000;
    i += 6;
    if (i < s.size() && s[i] == ':') {
      auto second = Digits(s, i + 1, 2);
      if (!second || *second > 59) return std::nullopt;
      ms += *second * 1000;
      i += 3;
      if (i < s.size() && (s[i] == '.' || s[i] == ',')) {
        ++i;
        const size_t start = i;
        int64_t frac = 0;
        while (i < s.size() && IsDigit(s[i])) {
          if (i - start < 3) frac = frac * 10 + (s[i] - '0');
          ++i;
        }
        if (i == start) return std::nullopt;
        for (size_t k = std::min<size_t>(i - start, 3); k < 3; ++k) frac *= 10;
        ms += frac;
      }
    }
  }
  if (i < s.size()) {
    out.has_zone = true;
    if ((s[i] == 'Z' || s[i] == 'z') && i + 1 == s.size()) {
      out.time = Time::FromMillis(ms);
      return out;
    }
    if (s[i] != '+' && s[i] != '-') return std::nullopt;
    const int64_t sign = s[i] == '+' ? 1 : -1;
    auto oh = Digits(s, i + 1, 2);
    if (!oh) return std::nullopt;
    int64_t om = 0;
    size_t end = i + 3;
    if (end < s.size()) {
      if (s[end] == ':') ++end;
      auto mm = Digits(s, end, 2);
      if (!mm) return std::nullopt;
      om = *mm;
      end += 2;
    }
    if (end != s.size() || *oh > 23 || om > 59) return std::nullopt;
    ms -= sign * (*oh * 3600 + om * 60) * 1000;
  }
  out.time = Time::FromMillis(ms);
  return out;
}

}  // namespace

std::optional<int64_t> DaysFromCivil(int64_t year, int64_t month, int64_t day) {
  if (year < -32767 || year > 32767 || month < 1 || month > 12 || day < 1 || day > 31) return std::nullopt;
  const std::chrono::year_month_day ymd{std::chrono::year{static_cast<int>(year)},
                                        std::chrono::month{static_cast<unsigned>(month)},
                                        std::chrono::day{static_cast<unsigned>(day)}};
  if (!ymd.ok()) return std::nullopt;
  return std::chrono::sys_days{ymd}.time_since_epoch().count();
}

std::optional<Time> ParseIsoTime(std::string_view s) {
  auto p = Parse(s);
  if (!p) return std::nullopt;
  return p->time;
}

bool LooksLikeIsoDate(std::string_view s) {
  return s.size() >= 10 && IsDigit(s[0]) && IsDigit(s[1]) && IsDigit(s[2]) && IsDigit(s[3]) && s[4] == '-';
}

Result<Time> ReadIsoTime(std::string_view s, IsoTimeRules rules) {
  const std::string quoted = "'" + std::string(s) + "'";
  auto p = Parse(s);
  if (!p) {
    return Status::InvalidArgument(quoted + " is not a " + (rules.require_time ? "time" : "date or time") +
                                   " like 2026-12-02T15:04:05Z" + (rules.require_time ? "" : " or 2026-12-02"));
  }
  if (rules.require_time && !p->has_time) {
    return Status::InvalidArgument(quoted + " is a date without a time of day (like 2026-12-02T15:04:05Z)");
  }
  if (rules.require_zone && !p->has_zone) {
    return Status::InvalidArgument(quoted + " has no time zone (end it with Z or +00:00)");
  }
  return p->time;
}

std::optional<int64_t> ParseIsoDate(std::string_view s) {
  auto year = Digits(s, 0, 4);
  auto month = Digits(s, 5, 2);
  auto day = Digits(s, 8, 2);
  if (s.size() != 10 || !year || !month || !day || s[4] != '-' || s[7] != '-') return std::nullopt;
  return DaysFromCivil(*year, *month, *day);
}

}  // namespace gpufleet
