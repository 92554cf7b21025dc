#include "model/csv.h"

#include <array>
#include <utility>

namespace gpufleet::model {
namespace {

// Characters that end an unquoted field or make it malformed, looked up once per character of
// the text: this loop is where a trace spends its load time.
constexpr std::array<bool, 256> kSpecial = [] {
  std::array<bool, 256> t{};
  t[static_cast<unsigned char>(',')] = true;
  t[static_cast<unsigned char>('\n')] = true;
  t[static_cast<unsigned char>('\r')] = true;
  t[static_cast<unsigned char>('"')] = true;
  return t;
}();

bool IsBlank(char c) { return c == ' ' || c == '\t'; }

}  // namespace

CsvReader::CsvReader(std::string_view text, std::string path, CsvOptions options)
    : text_(text), path_(std::move(path)), options_(options) {
  if (text_.substr(0, 3) == "\xEF\xBB\xBF") text_.remove_prefix(3);  // UTF-8 byte order mark
}

std::vector<std::string> CsvReader::Fields() const {
  return std::vector<std::string>(fields_.begin(), fields_.begin() + static_cast<std::ptrdiff_t>(count_));
}

Status CsvReader::Error(int64_t line, std::string_view what) const {
  std::string msg = path_ + ":" + std::to_string(line) + ": ";
  msg.append(what);
  return Status::InvalidArgument(std::move(msg));
}

std::string& CsvReader::NextSlot() {
  if (count_ == fields_.size()) fields_.emplace_back();
  return fields_[count_++];
}

bool CsvReader::EndLine() {
  if (pos_ >= text_.size()) return false;
  if (text_[pos_] == '\r') {
    ++pos_;
    if (pos_ < text_.size() && text_[pos_] == '\n') ++pos_;
  } else if (text_[pos_] == '\n') {
    ++pos_;
  } else {
    return false;
  }
  ++line_;
  return true;
}

void CsvReader::SkipBlankLines() {
  while (pos_ < text_.size()) {
    size_t i = pos_;
    while (i < text_.size() && IsBlank(text_[i])) ++i;
    if (i >= text_.size()) {
      pos_ = i;  // trailing spaces at the end of the text
      return;
    }
    if (text_[i] != '\n' && text_[i] != '\r') return;  // a record starts at pos_
    pos_ = i;
    EndLine();
  }
}

void CsvReader::ReadComment() {
  size_t end = text_.find_first_of("\r\n", pos_);
  if (end == std::string_view::npos) end = text_.size();
  if (options_.comments == CsvComments::kReturn) {
    NextSlot().assign(text_.data() + pos_ + 1, end - pos_ - 1);
    comment_ = true;
  }
  pos_ = end;
  EndLine();
}

Status CsvReader::ReadQuoted(std::string& field) {
  const int64_t open_line = line_;
  field.clear();
  ++pos_;  // the opening quote
  while (true) {
    size_t quote = text_.find('"', pos_);
    if (quote == std::string_view::npos) {
      return Error(open_line, "unterminated quoted field (no closing '\"' before the end of the file)");
    }
    for (size_t i = pos_; i < quote; ++i) {
      if (text_[i] == '\n' || (text_[i] == '\r' && text_[i + 1] != '\n')) ++line_;
    }
    field.append(text_.data() + pos_, quote - pos_);
    pos_ = quote + 1;
    if (pos_ < text_.size() && text_[pos_] == '"') {  // a doubled quote is one quote
      field += '"';
      ++pos_;
      continue;
    }
    break;
  }
  if (options_.trim) {
    while (pos_ < text_.size() && IsBlank(text_[pos_])) ++pos_;
  }
  if (pos_ < text_.size()) {
    char c = text_[pos_];
    if (c != ',' && c != '\n' && c != '\r') {
      return Error(line_, std::string("unexpected '") + c + "' after a closing quote");
    }
  }
  return Status::Ok();
}

Result<bool> CsvReader::Next() {
  count_ = 0;
  comment_ = false;
  while (true) {
    SkipBlankLines();
    if (pos_ >= text_.size()) return false;
    record_line_ = line_;
    if (text_[pos_] != '#' || options_.comments == CsvComments::kNone) break;
    ReadComment();
    if (comment_) return true;
  }
  const size_t size = text_.size();
  while (true) {
    std::string& field = NextSlot();
    if (options_.trim) {
      while (pos_ < size && IsBlank(text_[pos_])) ++pos_;
    }
    if (pos_ < size && text_[pos_] == '"') {
      GF_RETURN_IF_ERROR(ReadQuoted(field));
    } else {
      size_t end = pos_;
      while (end < size && !kSpecial[static_cast<unsigned char>(text_[end])]) ++end;
      if (end < size && text_[end] == '"') {
        return Error(line_, "stray '\"' inside an unquoted field (quote the whole field)");
      }
      size_t stop = end;
      if (options_.trim) {
        while (stop > pos_ && IsBlank(text_[stop - 1])) --stop;
      }
      field.assign(text_.data() + pos_, stop - pos_);
      pos_ = end;
    }
    if (pos_ >= size) break;
    if (text_[pos_] == ',') {
      ++pos_;
      continue;
    }
    EndLine();
    break;
  }
  return true;
}

Result<std::vector<CsvRecord>> ParseCsv(std::string_view text, const std::string& path, CsvOptions options) {
  std::vector<CsvRecord> records;
  CsvReader reader(text, path, options);
  while (true) {
    GF_ASSIGN_OR_RETURN(bool more, reader.Next());
    if (!more) break;
    records.push_back(CsvRecord{static_cast<int>(reader.line()), reader.comment(), reader.Fields()});
  }
  return records;
}

}  // namespace gpufleet::model
