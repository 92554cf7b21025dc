// A small RFC 4180 CSV reader for the data tables the model loads (data/gpu_specs.csv,
// data/gpu_speeds.csv): records with the line each starts on, so that errors can say
// "file.csv:7: ...".
//
// Thread-safety: a free function.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace gpufleet::model {

// One CSV record and the line it starts on (1-based), for error messages.
struct CsvRecord {
  int line = 0;
  std::vector<std::string> fields;
};

// Fields separated by ',', optionally quoted with '"', a doubled '"' inside quotes is one '"',
// quoted fields may hold commas and newlines. CRLF and LF line ends; blank lines are skipped.
// Errors name `path` and the line.
Result<std::vector<CsvRecord>> ParseCsv(const std::string& text, const std::string& path);

}  // namespace gpufleet::model
