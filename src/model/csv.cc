#include "model/csv.h"

namespace gpufleet::model {

Result<std::vector<CsvRecord>> ParseCsv(const std::string& text, const std::string& path) {
  std::vector<CsvRecord> records;
  CsvRecord rec;
  std::string field;
  bool in_quotes = false;
  bool field_was_quoted = false;
  bool record_empty = true;  // nothing seen on this record yet
  int line = 1;
  rec.line = 1;
  auto error = [&](int at, const std::string& msg) {
    return Status::InvalidArgument(path + ":" + std::to_string(at) + ": " + msg);
  };
  auto end_record = [&]() {
    if (!record_empty) {
      rec.fields.push_back(std::move(field));
      records.push_back(std::move(rec));
    }
    rec = CsvRecord();
    field.clear();
    field_was_quoted = false;
    record_empty = true;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_quotes) {
      if (c == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') {
          field += '"';
          ++i;
        } else {
          in_quotes = false;
        }
      } else {
        if (c == '\n') ++line;
        field += c;
      }
      continue;
    }
    if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') continue;
    if (c == '\n' || c == '\r') {
      end_record();
      ++line;
      rec.line = line;
      continue;
    }
    record_empty = false;
    if (c == ',') {
      rec.fields.push_back(std::move(field));
      field.clear();
      field_was_quoted = false;
    } else if (c == '"') {
      if (!field.empty() || field_was_quoted) {
        return error(line, "stray '\"' inside an unquoted field (quote the whole field)");
      }
      in_quotes = true;
      field_was_quoted = true;
    } else {
      if (field_was_quoted) {
        return error(line, std::string("unexpected '") + c + "' after a closing quote");
      }
      field += c;
    }
  }
  if (in_quotes) return error(rec.line, "quoted field is not closed before the end of the file");
  end_record();
  return records;
}

}  // namespace gpufleet::model
