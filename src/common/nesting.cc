#include "common/nesting.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace gpufleet {
namespace {

Status TooDeep(int max_depth, int64_t line, int64_t column) {
  return Status::InvalidArgument("nesting deeper than " + std::to_string(max_depth) + " levels at line " +
                                 std::to_string(line) + ", column " + std::to_string(column));
}

// JSON has one kind of string and no comments, so every '"' outside a string opens one (this is
// how nlohmann's lexer reads it, valid or not).
Status CheckJson(std::string_view text, int max_depth) {
  int depth = 0;
  int64_t line = 1;
  size_t line_start = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
      line_start = i + 1;
      continue;
    }
    if (in_string) {
      if (c == '\\') {
        if (i + 1 < text.size() && text[i + 1] != '\n') ++i;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return TooDeep(max_depth, line, static_cast<int64_t>(i - line_start) + 1);
    } else if (c == ']' || c == '}') {
      if (depth > 0) --depth;  // an unmatched closer is the parser's error to report
    }
  }
  return Status::Ok();
}

// Follows yaml-cpp's Scanner (scanner.cpp, scantoken.cpp, scanscalar.cpp, simplekey.cpp) token
// by token, keeping only what decides where tokens start and which collections open: the flow
// stack, the indentation stack and the pending simple keys. Where yaml-cpp would throw, the pass
// steps over the character and goes on, so it never reads less structure than the parser.
//
// Levels, as yaml-cpp's parser recurses: every flow collection; every valid block indentation
// (a block mapping or sequence); and every one-pair mapping the parser builds around a ':' that
// stands where a node is expected ("[a: b]", "[: b]", "{a: : b}", a ':' line under a key at
// the same indentation). A potential key's indentation counts once the ':' after it confirms
// it, and is then checked against the deepest flow nesting the key itself held; a ':' that
// turns the entry before it into a key is checked the same way.
class YamlDepth {
 public:
  YamlDepth(std::string_view text, int max_depth) : text_(text), max_depth_(max_depth) {}

  Status Run() {
    // yaml-cpp decodes UTF-16 and UTF-32 (told by a byte order mark or NUL bytes up front) and
    // garbles the bytes after a NUL elsewhere, so it would read other characters than this pass.
    if (text_.size() >= 2 && ((text_[0] == '\xFE' && text_[1] == '\xFF') || (text_[0] == '\xFF' && text_[1] == '\xFE'))) {
      return Status::InvalidArgument("not UTF-8 text: a UTF-16 or UTF-32 byte order mark at line 1, column 1");
    }
    if (size_t nul = text_.find('\0'); nul != std::string_view::npos) {
      const size_t newline = text_.find_last_of('\n', nul);
      const size_t line_start = newline == std::string_view::npos ? 0 : newline + 1;
      const int64_t line = 1 + std::count(text_.begin(), text_.begin() + static_cast<ptrdiff_t>(nul), '\n');
      return Status::InvalidArgument("a NUL byte at line " + std::to_string(line) + ", column " +
                                     std::to_string(nul - line_start + 1) + " (YAML text cannot hold one)");
    }
    if (text_.substr(0, 3) == "\xEF\xBB\xBF") pos_ = line_start_ = 3;  // yaml-cpp drops the BOM
    indents_.push_back({-1, IndentType::kNone, IndentStatus::kValid, next_id_++});
    simple_key_allowed_ = true;
    while (true) {
      SkipToNextToken();
      PopIndentToHere();
      if (AtEnd()) return Status::Ok();
      token_line_ = line_;
      token_column_ = Column();
      GF_RETURN_IF_ERROR(ScanToken());
    }
  }

 private:
  enum class IndentType { kNone, kSeq, kMap };
  enum class IndentStatus { kValid, kUnknown, kInvalid };
  struct Indent {
    int64_t column;
    IndentType type;
    IndentStatus status;
    uint64_t id;
  };
  // A scalar, flow collection, anchor or tag that is a mapping key if a ':' follows on its line.
  struct SimpleKey {
    size_t flow_level;
    int64_t line;
    size_t pos;
    size_t indent_index;  // the indentation it opened, if indent_id != 0
    uint64_t indent_id;
  };
  struct Flow {
    char type;          // '[' or '{'
    size_t compact;     // one-pair mappings opened by ':' in the current entry
    size_t entry_peak;  // the most flow levels reached since the current entry began
  };
  // The previous token, to tell where a ':' stands in place of a node.
  enum class Last { kEntryStart, kKey, kValue, kNode };

  // --- Reading the text.
  bool AtEnd(size_t ahead = 0) const { return pos_ + ahead >= text_.size(); }
  char At(size_t ahead) const { return text_[pos_ + ahead]; }
  bool Is(size_t ahead, char c) const { return !AtEnd(ahead) && At(ahead) == c; }
  bool IsAnyOf(size_t ahead, std::string_view set) const {
    return !AtEnd(ahead) && set.find(At(ahead)) != std::string_view::npos;
  }
  bool IsBlank(size_t ahead) const { return Is(ahead, ' ') || Is(ahead, '\t'); }
  bool IsBreak(size_t ahead) const { return Is(ahead, '\n') || Is(ahead, '\r'); }
  bool IsBlankOrBreak(size_t ahead) const { return IsBlank(ahead) || IsBreak(ahead); }
  bool IsBlankBreakOrEnd(size_t ahead) const { return AtEnd(ahead) || IsBlankOrBreak(ahead); }
  int64_t Column() const { return static_cast<int64_t>(pos_ - line_start_); }
  bool InFlow() const { return !flows_.empty(); }

  void EatBreak() {
    pos_ += (Is(0, '\r') && Is(1, '\n')) ? 2 : 1;
    ++line_;
    line_start_ = pos_;
  }
  void SkipToBreak() {
    while (!AtEnd() && !IsBreak(0)) ++pos_;
  }
  bool AtDocumentIndicator() const {
    if (Column() != 0 || AtEnd(2)) return false;
    const bool start = At(0) == '-' && At(1) == '-' && At(2) == '-';
    const bool end = At(0) == '.' && At(1) == '.' && At(2) == '.';
    return (start || end) && IsBlankBreakOrEnd(3);
  }
  bool AtBlockEntry() const { return Is(0, '-') && IsBlankBreakOrEnd(1); }
  // A blank or line break followed by '#': a comment ends a plain scalar.
  bool AtCommentAfterBlank() const {
    if (IsBlank(0) || Is(0, '\n')) return Is(1, '#');
    if (Is(0, '\r')) return Is(1, '\n') ? Is(2, '#') : Is(1, '#');
    return false;
  }

  // --- Depth.
  // Checks the valid block indentations, the one-pair block mappings and `flow_levels` (the
  // flow part, which may be a peak reached earlier) against the limit, and remembers the flow
  // part as a peak for the pending block key and the current flow entry.
  Status Reached(size_t flow_levels) {
    key_flow_peak_ = std::max(key_flow_peak_, flow_levels);
    if (InFlow()) flows_.back().entry_peak = std::max(flows_.back().entry_peak, flow_levels);
    int64_t depth = static_cast<int64_t>(flow_levels + block_compact_);
    for (const Indent& i : indents_) {
      if (i.type != IndentType::kNone && i.status == IndentStatus::kValid) ++depth;
    }
    if (depth > max_depth_) return TooDeep(max_depth_, token_line_, token_column_ + 1);
    return Status::Ok();
  }
  Status Reached() { return Reached(flow_levels_); }

  // --- yaml-cpp's indentation stack and simple keys.
  // Returns the new indentation's id, or 0 when none is opened here.
  uint64_t PushIndentTo(int64_t column, IndentType type) {
    if (InFlow()) return 0;
    const Indent& last = indents_.back();
    if (column < last.column) return 0;
    if (column == last.column && !(type == IndentType::kSeq && last.type == IndentType::kMap)) return 0;
    indents_.push_back({column, type, IndentStatus::kValid, next_id_++});
    return indents_.back().id;
  }

  void PopIndent() {
    const bool valid = indents_.back().status == IndentStatus::kValid;
    indents_.pop_back();
    // One-pair block mappings live inside the value of the mapping they started in; once that
    // mapping is closed they surely are (they may have ended sooner: counting them on errs high).
    if (indents_.size() < block_compact_floor_) block_compact_ = 0;
    if (!valid) InvalidateSimpleKey();
  }

  void PopIndentToHere() {
    if (InFlow()) return;
    const int64_t column = Column();
    while (indents_.size() > 1) {
      const Indent& top = indents_.back();
      if (top.column < column) break;
      if (top.column == column && !(top.type == IndentType::kSeq && !AtBlockEntry())) break;
      PopIndent();
    }
    while (indents_.size() > 1 && indents_.back().status == IndentStatus::kInvalid) PopIndent();
  }

  void PopAllIndents() {
    if (InFlow()) return;
    while (indents_.back().type != IndentType::kNone) PopIndent();
    block_compact_ = 0;
  }

  void MarkKeyIndent(const SimpleKey& key, IndentStatus status) {
    if (key.indent_id != 0 && key.indent_index < indents_.size() && indents_[key.indent_index].id == key.indent_id) {
      indents_[key.indent_index].status = status;
    }
  }

  void InsertPotentialSimpleKey() {
    if (!simple_key_allowed_) return;
    if (!keys_.empty() && keys_.back().flow_level == flows_.size()) return;
    SimpleKey key{flows_.size(), line_, pos_, 0, 0};
    if (!InFlow()) {
      key.indent_id = PushIndentTo(Column(), IndentType::kMap);
      if (key.indent_id != 0) {
        key.indent_index = indents_.size() - 1;
        indents_.back().status = IndentStatus::kUnknown;
        key_flow_peak_ = 0;
      }
    }
    keys_.push_back(key);
  }

  void InvalidateSimpleKey() {
    if (keys_.empty() || keys_.back().flow_level != flows_.size()) return;
    MarkKeyIndent(keys_.back(), IndentStatus::kInvalid);
    keys_.pop_back();
  }

  // Confirms or refutes the pending key at this flow level; a confirmed key that opened a block
  // mapping is checked here, where that mapping starts to count, naming the key.
  Result<bool> VerifySimpleKey() {
    if (keys_.empty() || keys_.back().flow_level != flows_.size()) return false;
    const SimpleKey key = keys_.back();
    keys_.pop_back();
    const bool valid = key.line == line_ && pos_ - key.pos <= 1024;
    MarkKeyIndent(key, valid ? IndentStatus::kValid : IndentStatus::kInvalid);
    if (valid && key.indent_id != 0) {
      const int64_t at = token_column_;
      token_column_ = static_cast<int64_t>(key.pos - line_start_);
      GF_RETURN_IF_ERROR(Reached(key_flow_peak_));
      token_column_ = at;
    }
    return valid;
  }

  void PopAllSimpleKeys() {
    while (!keys_.empty()) {
      if (keys_.back().flow_level == 0) MarkKeyIndent(keys_.back(), IndentStatus::kInvalid);
      keys_.pop_back();
    }
  }

  // --- Tokens.
  void SkipToNextToken() {
    while (true) {
      while (IsBlank(0)) {
        if (!InFlow() && Is(0, '\t')) simple_key_allowed_ = false;
        ++pos_;
      }
      if (Is(0, '#')) SkipToBreak();
      if (!IsBreak(0)) return;
      EatBreak();
      InvalidateSimpleKey();
      if (!InFlow()) simple_key_allowed_ = true;
    }
  }

  Status ScanToken() {
    const char c = At(0);
    if (Column() == 0 && (c == '%' || AtDocumentIndicator())) {  // a directive or "---" / "..."
      PopAllIndents();
      PopAllSimpleKeys();
      simple_key_allowed_ = json_value_ = false;
      last_ = Last::kEntryStart;
      if (c == '%') {
        SkipToBreak();
      } else {
        pos_ += 3;
      }
      return Status::Ok();
    }
    if (c == '[' || c == '{') {
      InsertPotentialSimpleKey();
      simple_key_allowed_ = true;
      json_value_ = false;
      flows_.push_back({c, 0, 0});
      ++flow_levels_;
      last_ = Last::kEntryStart;
      ++pos_;
      return Reached();
    }
    if (c == ']' || c == '}' || c == ',') {
      if (InFlow()) {
        if (flows_.back().type == '{') {
          GF_RETURN_IF_ERROR(VerifySimpleKey().status());
        } else {
          InvalidateSimpleKey();
        }
      }
      if (c == ',' && InFlow()) {
        flow_levels_ -= flows_.back().compact;  // the entry's one-pair mappings end with it
        flows_.back().compact = 0;
        flows_.back().entry_peak = flow_levels_;
      }
      if (c == ',') {
        simple_key_allowed_ = true;
        json_value_ = false;
        last_ = Last::kEntryStart;
      } else {
        if (InFlow()) {
          const size_t peak = flows_.back().entry_peak;
          flow_levels_ -= 1 + flows_.back().compact;
          flows_.pop_back();
          if (InFlow()) flows_.back().entry_peak = std::max(flows_.back().entry_peak, peak);
        }
        simple_key_allowed_ = false;
        json_value_ = true;
        last_ = Last::kNode;
      }
      ++pos_;
      return Status::Ok();
    }
    if (AtBlockEntry()) {
      PushIndentTo(Column(), IndentType::kSeq);
      simple_key_allowed_ = true;
      json_value_ = false;
      last_ = Last::kEntryStart;
      ++pos_;
      return Reached();
    }
    if (c == '?' && IsBlankOrBreak(1)) {
      PushIndentTo(Column(), IndentType::kMap);
      simple_key_allowed_ = !InFlow();
      ++pos_;
      if (InFlow() && flows_.back().type == '[') {  // "[? a : b]" is a one-pair mapping
        ++flows_.back().compact;
        ++flow_levels_;
      }
      last_ = Last::kKey;
      return Reached();
    }
    const bool value = c == ':' && (InFlow() ? json_value_ || IsBlankOrBreak(1) || IsAnyOf(1, ",]}")
                                             : IsBlankBreakOrEnd(1));
    if (value) return ScanValue();
    if (c == '*' || c == '&') {  // an alias, or an anchor (which, like a tag, leaves last_ alone)
      InsertPotentialSimpleKey();
      simple_key_allowed_ = json_value_ = false;
      if (c == '*') last_ = Last::kNode;
      ++pos_;
      while (!AtEnd() && !IsBlankOrBreak(0) && !IsAnyOf(0, "[]{},")) ++pos_;
      return Status::Ok();
    }
    if (c == '!') {
      InsertPotentialSimpleKey();
      simple_key_allowed_ = json_value_ = false;
      ++pos_;
      SkipTag();
      return Status::Ok();
    }
    if (!InFlow() && (c == '|' || c == '>')) {
      ScanBlockScalar();
      last_ = Last::kNode;
      return Status::Ok();
    }
    if (c == '\'' || c == '"') {
      InsertPotentialSimpleKey();
      ScanQuotedScalar(c);
      simple_key_allowed_ = false;
      json_value_ = true;
      last_ = Last::kNode;
      return Status::Ok();
    }
    if (PlainScalarStartsHere()) {
      ScanPlainScalar();
      last_ = Last::kNode;
      return Status::Ok();
    }
    ++pos_;  // yaml-cpp refuses this character ("unknown token"); step over it
    return Status::Ok();
  }

  Status ScanValue() {
    json_value_ = false;
    GF_ASSIGN_OR_RETURN(const bool key, VerifySimpleKey());
    uint64_t indent = 0;
    if (key) {
      simple_key_allowed_ = false;
    } else {
      indent = PushIndentTo(Column(), IndentType::kMap);
      simple_key_allowed_ = !InFlow();
    }
    ++pos_;
    const Last before = last_;
    last_ = Last::kValue;
    // A ':' straight after '?' or ':' stands where the key or value node is expected, so the
    // parser makes that node a one-pair mapping of its own.
    const bool in_place_of_node = before == Last::kKey || before == Last::kValue;
    if (InFlow()) {
      // Inside [...] every ':' also makes its entry a one-pair mapping.
      Flow& flow = flows_.back();
      if (in_place_of_node || flow.type == '[') {
        const size_t held = flow.entry_peak + 1;  // the mapping holds what the entry held so far
        ++flow.compact;
        ++flow_levels_;
        return Reached(std::max(flow_levels_, held));
      }
      return Reached();
    }
    const bool at_document_level = std::none_of(indents_.begin(), indents_.end(), [](const Indent& i) {
      return i.type != IndentType::kNone && i.status == IndentStatus::kValid;
    });
    if (!key && indent == 0 && (in_place_of_node || at_document_level)) {
      // A ':' at no new indentation in place of the node after '?' or ':', or after a whole
      // document (yaml-cpp starts the next document at any token after a top-level node).
      if (block_compact_ == 0) block_compact_floor_ = indents_.size();
      ++block_compact_;
    }
    return Reached();
  }

  // Tag characters as yaml-cpp reads them: word characters, "#;/?:@&=+$_.~*'()", %-escapes and
  // the '!' between handle and suffix; a verbatim tag !<...> also takes URI characters.
  void SkipTag() {
    auto tag_char = [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             std::string_view("-#;/?:@&=+$_.~*'()%!").find(c) != std::string_view::npos;
    };
    if (Is(0, '<')) {
      ++pos_;
      while (!AtEnd() && (tag_char(At(0)) || IsAnyOf(0, ",[]"))) ++pos_;
      if (Is(0, '>')) ++pos_;
      return;
    }
    while (!AtEnd() && tag_char(At(0))) ++pos_;
  }

  bool PlainScalarStartsHere() const {
    if (IsBlankOrBreak(0)) return false;
    if (InFlow()) {
      if (IsAnyOf(0, "?,[]{}#&*!|>'\"%@`")) return false;
      return !(IsAnyOf(0, "-:") && (AtEnd(1) || IsBlank(1)));
    }
    if (IsAnyOf(0, ",[]{}#&*!|>'\"%@`")) return false;
    return !(IsAnyOf(0, "-?:") && IsBlankBreakOrEnd(1));
  }

  bool AtPlainScalarEnd() const {
    if (AtCommentAfterBlank()) return true;
    if (!InFlow()) return Is(0, ':') && IsBlankBreakOrEnd(1);
    if (IsAnyOf(0, ",?[]{}")) return true;
    return Is(0, ':') && (IsBlankBreakOrEnd(1) || IsAnyOf(1, ",]}"));
  }

  // A plain scalar runs on over lines indented further than the collection around it (in flow
  // context, over any line) until ": ", " #", a flow indicator in flow context, or a document
  // marker.
  void ScanPlainScalar() {
    const int64_t indent = InFlow() ? 0 : indents_.back().column + 1;
    InsertPotentialSimpleKey();
    bool leading_spaces = false;
    while (!AtEnd()) {
      while (!AtEnd() && !AtPlainScalarEnd() && !IsBreak(0) && !AtDocumentIndicator()) ++pos_;
      if (AtEnd() || AtDocumentIndicator() || AtPlainScalarEnd()) break;
      EatBreak();
      while (Is(0, ' ') && Column() < indent && !AtPlainScalarEnd()) ++pos_;
      while (IsBlank(0) && !AtPlainScalarEnd()) ++pos_;
      if (!IsBreak(0) && Column() < indent) {
        leading_spaces = true;
        break;
      }
    }
    simple_key_allowed_ = leading_spaces;
    json_value_ = false;
  }

  void ScanQuotedScalar(char quote) {
    ++pos_;
    while (!AtEnd()) {
      if (IsBreak(0)) {
        EatBreak();
      } else if (quote == '\'' && Is(0, '\'')) {
        if (!Is(1, '\'')) {
          ++pos_;
          return;
        }
        pos_ += 2;
      } else if (quote == '"' && Is(0, '\\')) {
        ++pos_;
        if (IsBreak(0)) {
          EatBreak();
        } else if (!AtEnd()) {
          ++pos_;
        }
      } else if (quote == '"' && Is(0, '"')) {
        ++pos_;
        return;
      } else {
        ++pos_;
      }
    }
  }

  // '|' or '>': the header line, then every line indented at least as far as the first
  // non-empty one (and further than the collection around it) is text.
  void ScanBlockScalar() {
    ++pos_;
    int64_t indent = 1;
    bool detect = true;
    auto chomp = [this](size_t a) { return Is(a, '+') || Is(a, '-'); };
    auto digit = [this](size_t a) { return !AtEnd(a) && At(a) >= '0' && At(a) <= '9'; };
    size_t n = 0;
    if ((chomp(0) && digit(1)) || (digit(0) && chomp(1))) {
      n = 2;
    } else if (chomp(0) || digit(0)) {
      n = 1;
    }
    for (size_t i = 0; i < n; ++i, ++pos_) {
      if (digit(0) && At(0) != '0') {
        indent = At(0) - '0';
        detect = false;
      }
    }
    while (IsBlank(0)) ++pos_;
    if (Is(0, '#')) SkipToBreak();
    if (!AtEnd() && !IsBreak(0)) return;  // yaml-cpp refuses the header; read on as tokens
    if (indents_.back().column >= 0) indent += indents_.back().column;
    bool found_text = false;
    while (!AtEnd()) {
      while (!AtEnd() && !IsBreak(0)) {
        found_text = true;
        ++pos_;
      }
      if (AtEnd()) break;
      EatBreak();
      while (Is(0, ' ') && (Column() < indent || (detect && !found_text))) ++pos_;
      if (detect && !found_text) indent = std::max(indent, Column());
      if (!IsBreak(0) && Column() < indent) break;
    }
    simple_key_allowed_ = true;
    json_value_ = false;
  }

  std::string_view text_;
  const int max_depth_;
  size_t pos_ = 0;
  size_t line_start_ = 0;
  int64_t line_ = 1;
  int64_t token_line_ = 1;
  int64_t token_column_ = 0;
  std::vector<Indent> indents_;  // [0] is yaml-cpp's sentinel at column -1
  std::vector<SimpleKey> keys_;
  std::vector<Flow> flows_;
  size_t flow_levels_ = 0;         // flows_.size() plus their one-pair mappings
  size_t block_compact_ = 0;       // one-pair block mappings in a chain of ':' lines
  size_t block_compact_floor_ = 0;  // indents_.size() when that chain began
  size_t key_flow_peak_ = 0;       // the most flow levels since the pending block key began
  uint64_t next_id_ = 1;
  Last last_ = Last::kEntryStart;
  bool simple_key_allowed_ = false;
  bool json_value_ = false;  // after a quoted scalar or a flow end, ':' is a value even unspaced
};

}  // namespace

Status CheckNestingDepth(std::string_view text, NestingSyntax syntax, int max_depth) {
  if (syntax == NestingSyntax::kJson) return CheckJson(text, max_depth);
  return YamlDepth(text, max_depth).Run();
}

}  // namespace gpufleet
