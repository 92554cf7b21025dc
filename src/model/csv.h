// The one CSV reader for every table gpufleet loads: the model's data tables (data/gpu_specs.csv,
// data/gpu_speeds.csv), job traces (Philly, Tiresias, Alibaba 2023, generic CSV), the offer
// catalog and the spot availability table. It streams record by record over text in memory
// (an 82k-row trace loads in tens of milliseconds) and gives each record the physical line it
// starts on, so that errors can say "file.csv:7: ..." even after a quoted field that holds a
// newline.
//
// The dialect is RFC 4180: fields separated by ',', optionally quoted with '"'; a doubled '"'
// inside quotes is one '"'; quoted fields may hold commas and line breaks, kept as written.
// Lines end in LF, CRLF or a lone CR. A UTF-8 byte order mark at the start is dropped. Lines
// holding nothing but spaces and tabs are blank and skipped. A '"' inside an unquoted field,
// text after a closing quote and a quote left open at the end of the text are errors that
// name the path and the line.
//
// Thread-safety: a CsvReader is used by one thread at a time; ParseCsv is a free function.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace gpufleet::model {

// What a line whose first character is '#' is.
enum class CsvComments {
  kNone,    // data like any other line
  kSkip,    // a comment, dropped
  kReturn,  // a comment, returned as a record of one field (the text after '#') marked comment()
};

struct CsvOptions {
  // Drop spaces and tabs around each field (outside the quotes of a quoted one), as hand-edited
  // traces write "a, b". The text inside quotes is always kept as written.
  bool trim = false;
  CsvComments comments = CsvComments::kNone;
};

// Reads records one at a time; the fields of the current record stay valid until the next
// call to Next(). Field storage is reused between records, so a long file costs no allocation
// per record once the longest field has been seen.
class CsvReader {
 public:
  // `text` must outlive the reader; `path` names the text in error messages.
  CsvReader(std::string_view text, std::string path, CsvOptions options = {});

  // Moves to the next record: true if there is one, false at the end of the text, or an error
  // "PATH:LINE: what is wrong" for malformed quoting.
  [[nodiscard]] Result<bool> Next();

  // The physical line (1-based) on which the current record starts.
  int64_t line() const { return record_line_; }
  // Whether the current record is a comment line (CsvComments::kReturn): then it has one field,
  // the text after the '#' up to the line end.
  bool comment() const { return comment_; }
  size_t size() const { return count_; }
  const std::string& field(size_t i) const { return fields_[i]; }
  // A copy of the current record's fields.
  std::vector<std::string> Fields() const;

 private:
  void SkipBlankLines();
  void ReadComment();
  Status ReadQuoted(std::string& field);
  std::string& NextSlot();
  // Consumes a line end (LF, CRLF or CR) at pos_, if there is one; true if it did.
  bool EndLine();
  Status Error(int64_t line, std::string_view what) const;

  std::string_view text_;
  std::string path_;
  CsvOptions options_;
  size_t pos_ = 0;
  int64_t line_ = 1;
  int64_t record_line_ = 0;
  bool comment_ = false;
  std::vector<std::string> fields_;
  size_t count_ = 0;
};

// One whole CSV record and the line it starts on (1-based), for error messages.
struct CsvRecord {
  int line = 0;
  bool comment = false;  // a comment line, returned under CsvComments::kReturn
  std::vector<std::string> fields;
};

// Every record of `text` at once, for small tables; errors name `path` and the line.
Result<std::vector<CsvRecord>> ParseCsv(std::string_view text, const std::string& path, CsvOptions options = {});

}  // namespace gpufleet::model
