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
// A size in bytes for people: "512 B", "1.5 KiB", "12.3 GiB", "2.0 TiB" (binary units; one decimal
// past bytes).
std::string FormatBytes(int64_t bytes);

// Levenshtein distance (insertions, deletions, substitutions), for "did you mean" hints.
size_t EditDistance(std::string_view a, std::string_view b);
// The names of `known` close enough to `word` to be what was meant, closest first (ties in
// `known`'s order), at most `max_results`: the names equal to it but for case where there are
// any, else those within about a third of the word's length in edits (at least one). Empty when
// none is close: "awz" -> {"aws"}, "EU" -> {"eu"} (not "us"), "mars-1" -> {} among regions.
std::vector<std::string> NearMatches(std::string_view word, const std::vector<std::string>& known,
                                     size_t max_results = 3);
// Glob with '*' and '?' only (for region patterns such as 'europe-*').
bool GlobMatch(std::string_view pattern, std::string_view text);

// Text for XML and SVG: &, <, >, " and ' as entities; control characters other than tab and
// newline (not allowed in XML 1.0) dropped.
std::string XmlEscape(std::string_view text);

// FNV-1a: hashes that are the same in every build and on every machine (std::hash is not), for
// file and folder names and seeds derived from text. kFnv1a64Basis is the standard offset basis;
// a caller whose hashes are already on disk or decide results keeps the basis it used.
// Inline: hash tables keyed by short names (team names) call it in hot loops.
inline constexpr uint64_t kFnv1a64Basis = 14695981039346656037ull;
inline constexpr uint64_t Fnv1a64(std::string_view s, uint64_t basis = kFnv1a64Basis) {
  uint64_t h = basis;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}
uint32_t Fnv1a32(std::string_view s);

// Text as it may go to a terminal (job reasons, commands, audit notes, trace ids and teams: some
// of it written by other people): control characters (C0, DEL and UTF-8's C1) written as \n,
// \r, \t or \xNN, so no escape sequence can move the cursor, erase lines or fake output.
std::string Printable(std::string_view text);

}  // namespace gpufleet
