// Where in a user's file an error is: "job.yaml:12:5: ", the prefix every reader of a YAML file
// (job, cluster, pool, provider, client config, user map, alert rules) puts before the field and
// what is wrong with it: "job.yaml:12:5: resources.gpus: must be a positive integer, got 'eight'".
// It is the form compilers print, so editors and terminals jump to the spot.
//
// Header-only and free of parser types, so that every layer can use it: a yaml-cpp YAML::Mark
// goes in through SourcePrefixAt (any type with 0-based `line` and `column` members).
//
// Thread-safety: pure functions.
#pragma once

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace gpufleet {

// "source:line:column: " for a 1-based line and column; "source: " when the line is unknown
// (below 1), rather than a made-up position.
inline std::string SourcePrefix(std::string_view source, int64_t line, int64_t column) {
  std::string out(source);
  if (line >= 1) {
    out += ":" + std::to_string(line) + ":" + std::to_string(column >= 1 ? column : 1);
  }
  return out + ": ";
}

// The same for a parser's 0-based position, such as yaml-cpp's YAML::Mark (line -1 when the node
// has no position: one built in code, or an absent key's placeholder).
template <typename Mark>
  requires requires(const Mark& m) {
    m.line;
    m.column;
  }
std::string SourcePrefixAt(std::string_view source, const Mark& mark) {
  return SourcePrefix(source, static_cast<int64_t>(mark.line) + 1, static_cast<int64_t>(mark.column) + 1);
}

// An error about `source` whose message says where in the text with " at line L, column C" (as
// CheckNestingDepth's do, common/nesting.h), as an InvalidArgument in the form above:
//   "nesting deeper than 64 levels at line 3, column 9"  ->  "job.yaml:3:9: nesting deeper than 64 levels"
// A message without a position gets "source: " in front.
inline Status InSource(std::string_view source, const Status& error) {
  const std::string_view msg = error.message();
  static constexpr std::string_view kLine = " at line ", kColumn = ", column ";
  for (size_t at = msg.find(kLine); at != std::string_view::npos; at = msg.find(kLine, at + 1)) {
    std::string_view rest = msg.substr(at + kLine.size());
    int64_t line = 0, column = 0;
    auto parsed = std::from_chars(rest.data(), rest.data() + rest.size(), line);
    rest.remove_prefix(static_cast<size_t>(parsed.ptr - rest.data()));
    if (parsed.ec != std::errc() || !rest.starts_with(kColumn)) continue;
    rest.remove_prefix(kColumn.size());
    parsed = std::from_chars(rest.data(), rest.data() + rest.size(), column);
    if (parsed.ec != std::errc()) continue;
    const size_t stop = static_cast<size_t>(parsed.ptr - msg.data());
    return Status::InvalidArgument(SourcePrefix(source, line, column) + std::string(msg.substr(0, at)) +
                                   std::string(msg.substr(stop)));
  }
  return Status::InvalidArgument(std::string(source) + ": " + std::string(msg));
}

}  // namespace gpufleet
