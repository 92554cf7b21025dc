#include "model/csv.h"

#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace gpufleet::model {
namespace {

// A record as the tests compare it: its starting line, whether it is a comment, its fields.
struct Rec {
  int64_t line = 0;
  bool comment = false;
  std::vector<std::string> fields;
  bool operator==(const Rec&) const = default;
};

void PrintTo(const Rec& r, std::ostream* os) {
  *os << "{line " << r.line << (r.comment ? " comment" : "") << ":";
  for (const std::string& f : r.fields) *os << " [" << f << "]";
  *os << "}";
}

class CsvReaderTest : public ::testing::Test {
 protected:
  // Every record of `text`, read with Next(); the error message if reading fails.
  Result<std::vector<Rec>> Read(std::string_view text, CsvOptions options = {}) {
    CsvReader reader(text, "t.csv", options);
    std::vector<Rec> out;
    while (true) {
      GF_ASSIGN_OR_RETURN(bool more, reader.Next());
      if (!more) break;
      out.push_back(Rec{reader.line(), reader.comment(), reader.Fields()});
    }
    return out;
  }
  std::string ErrorOf(std::string_view text, CsvOptions options = {}) {
    auto read = Read(text, options);
    return read.ok() ? "(no error)" : read.status().message();
  }
};

TEST_F(CsvReaderTest, QuotedFieldsHoldCommasDoubledQuotesAndNewlines) {
  // Given quoted fields with a comma, a doubled quote, a line break and nothing at all, expect
  // their text as written inside the quotes.
  auto read = Read("a,\"b, c\",\"say \"\"hi\"\"\"\n\"two\nlines\",\"\",x\n");
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(*read, (std::vector<Rec>{{1, false, {"a", "b, c", "say \"hi\""}}, {2, false, {"two\nlines", "", "x"}}}));
}

TEST_F(CsvReaderTest, LineNumbersArePhysicalAfterQuotedNewlines) {
  // Given a record whose quoted field spans three lines, then a blank line, expect each later
  // record to carry the line it starts on in the file, and an error there to name that line.
  const std::string text = "h1,h2\n1,\"a\nb\nc\"\n\n2,x\n3,y\"\n";
  CsvReader reader(text, "t.csv");
  std::vector<int64_t> lines;
  Status error;
  while (true) {
    auto more = reader.Next();
    if (!more.ok()) {
      error = more.status();
      break;
    }
    if (!*more) break;
    lines.push_back(reader.line());
  }
  EXPECT_EQ(lines, (std::vector<int64_t>{1, 2, 6}));
  EXPECT_EQ(error.message(), "t.csv:7: stray '\"' inside an unquoted field (quote the whole field)");
}

TEST_F(CsvReaderTest, UnterminatedQuoteNamesFileAndTheLineItOpensOn) {
  // Given a quote opened on line 3 and never closed, expect an error naming t.csv:3 rather than
  // silently reading the rest of the file as one field.
  EXPECT_EQ(ErrorOf("a,b\n1,2\n3,\"4\n5,6\n"),
            "t.csv:3: unterminated quoted field (no closing '\"' before the end of the file)");
  EXPECT_EQ(ErrorOf("a,b\n\"x\n\ny\",\"open"),
            "t.csv:4: unterminated quoted field (no closing '\"' before the end of the file)");
}

TEST_F(CsvReaderTest, CrlfAndLoneCrEndLinesLikeLf) {
  // Given CRLF line ends, a lone CR (old Mac) and a CRLF inside quotes, expect no CR in unquoted
  // fields, the quoted one kept as written and lines counted once per line end.
  auto read = Read("a,b\r\n1,2\r\n\r\n3,\"x\r\ny\"\r\n4,5\r6,7");
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(*read, (std::vector<Rec>{{1, false, {"a", "b"}},
                                     {2, false, {"1", "2"}},
                                     {4, false, {"3", "x\r\ny"}},
                                     {6, false, {"4", "5"}},
                                     {7, false, {"6", "7"}}}));
}

TEST_F(CsvReaderTest, TrimDropsSpacesAroundFieldsButNotInsideQuotes) {
  // Given "a , b" style fields, with trimming, expect spaces and tabs around fields dropped (also
  // around quotes) and kept inside quotes; without it, expect every byte kept.
  const std::string text = " a ,\tb\t, \" c \" ,d\n";
  CsvOptions trim;
  trim.trim = true;
  auto trimmed = Read(text, trim);
  ASSERT_TRUE(trimmed.ok()) << trimmed.status().ToString();
  EXPECT_EQ(*trimmed, (std::vector<Rec>{{1, false, {"a", "b", " c ", "d"}}}));
  auto kept = Read(" a ,\tb\t,d\n");
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_EQ(*kept, (std::vector<Rec>{{1, false, {" a ", "\tb\t", "d"}}}));
  EXPECT_EQ(ErrorOf(text), "t.csv:1: stray '\"' inside an unquoted field (quote the whole field)");
}

TEST_F(CsvReaderTest, CommentLinesAreDataSkippedOrReturned) {
  // Given '#' lines before and among the records, expect them read as data by default, dropped
  // under kSkip and returned with their text under kReturn, each with its line.
  const std::string text = "# prices_as_of: 2026-05-20\nh1,h2\n#note, with comma\n1,\"#2\"\n";
  auto data = Read(text);
  ASSERT_TRUE(data.ok()) << data.status().ToString();
  EXPECT_EQ(data->size(), 4u);
  EXPECT_EQ((*data)[0].fields, (std::vector<std::string>{"# prices_as_of: 2026-05-20"}));

  CsvOptions skip;
  skip.comments = CsvComments::kSkip;
  auto skipped = Read(text, skip);
  ASSERT_TRUE(skipped.ok()) << skipped.status().ToString();
  EXPECT_EQ(*skipped, (std::vector<Rec>{{2, false, {"h1", "h2"}}, {4, false, {"1", "#2"}}}));

  CsvOptions keep;
  keep.comments = CsvComments::kReturn;
  auto returned = Read(text, keep);
  ASSERT_TRUE(returned.ok()) << returned.status().ToString();
  EXPECT_EQ(*returned, (std::vector<Rec>{{1, true, {" prices_as_of: 2026-05-20"}},
                                         {2, false, {"h1", "h2"}},
                                         {3, true, {"note, with comma"}},
                                         {4, false, {"1", "#2"}}}));
}

TEST_F(CsvReaderTest, SkippedCommentDoesNotBreakAQuotedFieldSpanningLines) {
  // Given a quoted field whose second line starts with '#', expect it part of the field, not a
  // comment.
  CsvOptions skip;
  skip.comments = CsvComments::kSkip;
  auto read = Read("# head\na,\"x\n# not a comment\"\nb,c\n", skip);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(*read, (std::vector<Rec>{{2, false, {"a", "x\n# not a comment"}}, {4, false, {"b", "c"}}}));
}

TEST_F(CsvReaderTest, BlankLinesAndEmptyTrailingLineAreNotRecords) {
  // Given blank and whitespace-only lines, a trailing comma and a file ending in an empty line,
  // expect no empty records, and the trailing comma an empty last field.
  auto read = Read("\n  \na,b,\n\t\nc,d\n\n");
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(*read, (std::vector<Rec>{{3, false, {"a", "b", ""}}, {5, false, {"c", "d"}}}));
  auto no_newline = Read("a,b\nc,");
  ASSERT_TRUE(no_newline.ok()) << no_newline.status().ToString();
  EXPECT_EQ(*no_newline, (std::vector<Rec>{{1, false, {"a", "b"}}, {2, false, {"c", ""}}}));
  auto empty = Read("");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

TEST_F(CsvReaderTest, TextAfterAClosingQuoteIsAnError) {
  // Given "ab"c and a quoted field ending in a space without trimming, expect errors naming the
  // line the text is on.
  EXPECT_EQ(ErrorOf("h\n\"a\nb\"c\n"), "t.csv:3: unexpected 'c' after a closing quote");
  EXPECT_EQ(ErrorOf("\"a\" ,b\n"), "t.csv:1: unexpected ' ' after a closing quote");
  CsvOptions trim;
  trim.trim = true;
  EXPECT_EQ(ErrorOf("\"a\" ,b\n", trim), "(no error)");
}

TEST_F(CsvReaderTest, ByteOrderMarkIsDropped) {
  // Given a UTF-8 byte order mark before the header, expect the first field without it.
  auto read = Read("\xEF\xBB\xBFid,t\n1,2\n");
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ((*read)[0].fields, (std::vector<std::string>{"id", "t"}));
}

TEST_F(CsvReaderTest, ParseCsvGivesEveryRecordWithItsLine) {
  // Given a small table read all at once, expect the same records and lines as Next() gives.
  CsvOptions keep;
  keep.comments = CsvComments::kReturn;
  auto records = ParseCsv("#c\na,\"b\nc\"\nd,e\n", "t.csv", keep);
  ASSERT_TRUE(records.ok()) << records.status().ToString();
  ASSERT_EQ(records->size(), 3u);
  EXPECT_TRUE((*records)[0].comment);
  EXPECT_EQ((*records)[1].line, 2);
  EXPECT_EQ((*records)[1].fields, (std::vector<std::string>{"a", "b\nc"}));
  EXPECT_EQ((*records)[2].line, 4);
  EXPECT_FALSE((*records)[2].comment);
}

}  // namespace
}  // namespace gpufleet::model
