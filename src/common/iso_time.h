// Calendar dates and ISO-8601 times, in UTC: the one reader of dates and times for every file,
// flag and API that carries them (traces, cloud CLIs' JSON, spot notices, the price catalog,
// `plan --from/--to`), and the civil-date arithmetic under it, done with <chrono>'s calendar.
//
// Accepted forms ("ISO-8601 as people write it"):
//   2017-10-09                       a date: midnight UTC
//   2017-10-09T07:01  2017-10-09 07:01:55  2017-10-09T07:01:55.250   ('t' for 'T' too)
//   any of the times with a zone:    Z (or z), +02:00, -0530, +02
// A time without a zone is UTC. Fractions of a second are kept to the millisecond (',' or '.'),
// leap seconds (:60) are refused, and so is a date that does not exist (2025-02-29).
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "common/time.h"

namespace gpufleet {

// Days since 1970-01-01 of a civil date; nullopt when the date does not exist.
std::optional<int64_t> DaysFromCivil(int64_t year, int64_t month, int64_t day);

// The time, or nullopt when `s` is not one of the forms above (with nothing before or after).
std::optional<Time> ParseIsoTime(std::string_view s);

// Whether `s` starts like an ISO date (ten characters or more, "2017-..."): for readers that
// accept seconds or a date, to say which was meant when neither parses.
bool LooksLikeIsoDate(std::string_view s);

// Options for ReadIsoTime, the reader with an error message.
struct IsoTimeRules {
  bool require_time = false;  // a bare date is refused
  bool require_zone = false;  // a time without Z or an offset is refused (documents from a cloud)
};

// ParseIsoTime with the rules above and an InvalidArgument that quotes the text and shows the
// form expected: "'2026-12-02 15:04' has no time zone (end it with Z or +00:00)".
Result<Time> ReadIsoTime(std::string_view s, IsoTimeRules rules = {});

// "2026-12-04" -> days since 1970-01-01; nullopt for anything else (no time, no zone).
std::optional<int64_t> ParseIsoDate(std::string_view s);

}  // namespace gpufleet
