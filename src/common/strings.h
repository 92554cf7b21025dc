// Small string helpers shared by the readers and reports (no locale, no exceptions).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpufleet {

std::vector<std::string> Split(std::string_view s, char sep);
std::string_view Trim(std::string_view s);
std::string ToLower(std::string_view s);
bool StartsWith(std::string_view s, std::string_view prefix);
std::string Join(const std::vector<std::string>& parts, std::string_view sep);
// Whole-string parses: no trailing junk, no overflow.
std::optional<int64_t> ParseInt(std::string_view s);
std::optional<double> ParseDouble(std::string_view s);
// Levenshtein distance (insertions, deletions, substitutions), for "did you mean" hints.
size_t EditDistance(std::string_view a, std::string_view b);
// Glob with '*' and '?' only (for region patterns such as 'europe-*').
bool GlobMatch(std::string_view pattern, std::string_view text);

// Text for XML and SVG: &, <, >, " and ' as entities; control characters other than tab and
// newline (not allowed in XML 1.0) dropped.
std::string XmlEscape(std::string_view text);

}  // namespace gpufleet
