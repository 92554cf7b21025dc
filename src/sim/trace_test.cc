#include "sim/trace.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "common/strings.h"

namespace gpufleet::sim {
namespace {

class TraceTest : public ::testing::Test {
 protected:
  static std::string Fixture(const std::string& name) {
    return std::string(GPUFLEET_SOURCE_DIR) + "/tests/data/traces/" + name;
  }
  static std::string RealData(const std::string& name) {
    return std::string(GPUFLEET_SOURCE_DIR) + "/data/traces/" + name;
  }
  static std::string TempPath(const std::string& name) { return ::testing::TempDir() + "/" + name; }
  static void WriteText(const std::string& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
  }
  static Trace Read(const std::string& path, TraceOptions options = {}) {
    auto trace = ReadTrace(path, options);
    EXPECT_TRUE(trace.ok()) << trace.status().ToString();
    return trace.ok() ? std::move(trace).value() : Trace{};
  }
  static Time Utc(int64_t y, int64_t mo, int64_t d, int64_t h, int64_t mi, int64_t s) {
    // Independent of the reader's own date code: count days by hand.
    static constexpr int kCum[] = {0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334};
    int64_t days = 0;
    for (int64_t year = 1970; year < y; ++year) {
      days += (year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)) ? 366 : 365;
    }
    days += kCum[mo - 1] + (d - 1);
    if (mo > 2 && y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)) ++days;
    return Time::FromSeconds(days * 86400 + h * 3600 + mi * 60 + s);
  }
};

// ---- Philly ----

// Given Philly rows out of time order with two rows sharing a submit time, expect jobs sorted by
// submit time, ties in file order.
TEST_F(TraceTest, PhillyRowsComeOutSortedBySubmitThenFileOrder) {
  Trace trace = Read(Fixture("philly_small.csv"));
  ASSERT_EQ(trace.jobs.size(), 5u);
  std::vector<std::string> ids;
  for (const auto& j : trace.jobs) ids.push_back(j.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"3", "2", "4", "1", "5"}));
  for (size_t i = 1; i < trace.jobs.size(); ++i) {
    EXPECT_LE(trace.jobs[i - 1].spec.submit, trace.jobs[i].spec.submit);
  }
}

// Given a Philly row "2017-10-09 07:01:55,66.0,1,66.0,11cb48", expect submit at that UTC time,
// 66 s of work, one GPU, team = cluster and the 1-based row number as id.
TEST_F(TraceTest, PhillyRowMapsToJobSpec) {
  Trace trace = Read(Fixture("philly_small.csv"));
  EXPECT_EQ(trace.format, TraceFormat::kPhilly);
  const TraceJob& j = trace.jobs[3];
  EXPECT_EQ(j.id, "1");
  EXPECT_EQ(j.spec.submit, Utc(2017, 10, 9, 7, 1, 55));
  EXPECT_EQ(j.work, Duration::Seconds(66));
  EXPECT_EQ(j.spec.total_gpus(), 1);
  EXPECT_EQ(j.spec.team, "11cb48");
  EXPECT_EQ(trace.jobs[2].work, Duration::Millis(2'759'500));  // "2759.5" is exact
}

// Given a 128-GPU Philly job, expect one part of 128 GPUs (the simulator splits it later).
TEST_F(TraceTest, LargeJobKeepsWholeDemandInOnePart) {
  Trace trace = Read(Fixture("philly_small.csv"));
  const TraceJob& big = trace.jobs.back();
  EXPECT_EQ(big.id, "5");
  EXPECT_EQ(big.spec.gpus_per_node, 128);
  EXPECT_EQ(big.spec.nodes, 1);
}

// Given a Philly file whose second data row has duration 'abc', expect the read to fail naming
// file, line 3, the column and the value.
TEST_F(TraceTest, BadRowFailsWithFileAndLine) {
  std::string path = Fixture("philly_bad.csv");
  auto trace = ReadTrace(path, {});
  ASSERT_FALSE(trace.ok());
  EXPECT_EQ(trace.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(trace.status().message(),
            path + ":3: duration: expected a number of seconds (at most 1000000000000, about 31,700 years), got 'abc'");
}

// Given seven bad rows (non-numeric, zero GPUs, negative duration, bad month, too many GPUs,
// missing column) and skip_bad_rows, expect the two good jobs, a count of 7 and the first five
// messages plus a line saying how many more there were.
TEST_F(TraceTest, SkipBadRowsCountsThemAndKeepsFirstMessages) {
  TraceOptions options;
  options.skip_bad_rows = true;
  Trace trace = Read(Fixture("philly_bad.csv"), options);
  ASSERT_EQ(trace.jobs.size(), 2u);
  EXPECT_EQ(trace.bad_rows_skipped, 7);
  ASSERT_EQ(trace.warnings.size(), 6u);
  EXPECT_NE(trace.warnings[0].find(":3: duration:"), std::string::npos) << trace.warnings[0];
  EXPECT_NE(trace.warnings[1].find(":4: num_gpus: must be a positive number of GPUs, got '0'"), std::string::npos)
      << trace.warnings[1];
  EXPECT_NE(trace.warnings[2].find(":5: duration: must not be negative, got '-5'"), std::string::npos)
      << trace.warnings[2];
  EXPECT_NE(trace.warnings[3].find(":6: timestamp: not a valid date and time"), std::string::npos)
      << trace.warnings[3];
  EXPECT_NE(trace.warnings[4].find(":7: num_gpus: must be at most 4096 GPUs, got '4097'"), std::string::npos)
      << trace.warnings[4];
  EXPECT_EQ(trace.warnings[5], "... and 2 more bad rows");
}

// Given max_jobs 2 on an unsorted trace, expect the two earliest submissions.
TEST_F(TraceTest, MaxJobsKeepsEarliestSubmissions) {
  TraceOptions options;
  options.max_jobs = 2;
  Trace trace = Read(Fixture("philly_small.csv"), options);
  ASSERT_EQ(trace.jobs.size(), 2u);
  EXPECT_EQ(trace.jobs[0].id, "3");
  EXPECT_EQ(trace.jobs[1].id, "2");
}

// ---- Alibaba 2023 ----

// Given whole, shared and constrained GPU pods of each QoS, expect their shape, GPU share, model
// list (repeats dropped), CPU, memory, priority, team, submit and work = deletion - scheduled.
TEST_F(TraceTest, AlibabaPodsMapToJobSpecs) {
  TraceOptions options;
  options.skip_bad_rows = true;
  Trace trace = Read(Fixture("alibaba_small.csv"), options);
  EXPECT_EQ(trace.format, TraceFormat::kAlibaba2023);
  ASSERT_EQ(trace.jobs.size(), 4u);
  std::vector<std::string> ids;
  for (const auto& j : trace.jobs) ids.push_back(j.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"pod-b", "pod-a", "pod-c", "pod-f"}));

  const TraceJob& shared = trace.jobs[0];
  EXPECT_EQ(shared.spec.gpu_milli, 460);
  EXPECT_EQ(shared.spec.total_gpu_milli(), 460);
  EXPECT_EQ(shared.spec.submit, Time::FromSeconds(50));
  EXPECT_EQ(shared.work, Duration::Seconds(890));
  EXPECT_EQ(shared.spec.priority, 0);
  EXPECT_EQ(shared.spec.team, "be");

  const TraceJob& whole = trace.jobs[1];
  EXPECT_EQ(whole.spec.name, "pod-a");
  EXPECT_EQ(whole.spec.cpu_milli, 12000);
  EXPECT_EQ(whole.spec.mem_mib, 16384);
  EXPECT_EQ(whole.spec.gpu_milli, 1000);
  EXPECT_EQ(whole.spec.priority, 2);
  EXPECT_EQ(whole.spec.team, "ls");
  EXPECT_TRUE(whole.spec.gpu_models.empty());

  const TraceJob& constrained = trace.jobs[2];
  EXPECT_EQ(constrained.spec.total_gpus(), 8);
  EXPECT_EQ(constrained.spec.gpu_models, (std::vector<std::string>{"V100M16", "V100M32"}));
  EXPECT_EQ(constrained.spec.priority, 3);
  EXPECT_EQ(constrained.work, Duration::Seconds(4900));

  EXPECT_EQ(trace.jobs[3].spec.priority, 1);
  EXPECT_EQ(trace.jobs[3].spec.team, "burstable");
}

// Given a CPU-only pod and a never-scheduled pod while skipping bad rows, expect the CPU-only pod
// left out silently but counted in a warning, and the never-scheduled pod counted as a bad row.
TEST_F(TraceTest, AlibabaSkipsCpuOnlyPodsWithWarning) {
  TraceOptions options;
  options.skip_bad_rows = true;
  Trace trace = Read(Fixture("alibaba_small.csv"), options);
  EXPECT_EQ(trace.bad_rows_skipped, 1);
  ASSERT_EQ(trace.warnings.size(), 2u);
  EXPECT_NE(trace.warnings[0].find(":6: scheduled_time: empty: never scheduled"), std::string::npos)
      << trace.warnings[0];
  EXPECT_EQ(trace.warnings[1], "skipped 1 CPU-only pods");
}

// Given a never-scheduled pod without skip_bad_rows, expect the read to fail saying so.
TEST_F(TraceTest, AlibabaNeverScheduledPodFailsTheRead) {
  auto trace = ReadTrace(Fixture("alibaba_small.csv"), {});
  ASSERT_FALSE(trace.ok());
  EXPECT_NE(trace.status().message().find("alibaba_small.csv:6: scheduled_time: empty: never scheduled"),
            std::string::npos)
      << trace.status().message();
}

// Given the real gpuspec33 pod list, expect 8,152 pods split into 1,088 CPU-only, 861 never
// scheduled GPU pods and 6,203 jobs.
TEST_F(TraceTest, RealAlibabaPodList) {
  TraceOptions options;
  options.skip_bad_rows = true;
  Trace trace = Read(RealData("alibaba-gpu-v2023/openb_pod_list_gpuspec33.csv"), options);
  EXPECT_EQ(trace.jobs.size(), 6203u);
  EXPECT_EQ(trace.bad_rows_skipped, 861);
  ASSERT_FALSE(trace.warnings.empty());
  EXPECT_EQ(trace.warnings.back(), "skipped 1088 CPU-only pods");
  int64_t constrained = 0;
  for (const auto& j : trace.jobs) constrained += j.spec.gpu_models.empty() ? 0 : 1;
  EXPECT_GT(constrained, 0);
}

// ---- Tiresias ----

// Given a Tiresias trace, expect job_id as id, submit seconds, duration as work and the model
// name as job name.
TEST_F(TraceTest, TiresiasRowsMapToJobs) {
  Trace trace = Read(Fixture("tiresias_small.csv"));
  EXPECT_EQ(trace.format, TraceFormat::kTiresias);
  ASSERT_EQ(trace.jobs.size(), 3u);
  EXPECT_EQ(trace.jobs[1].id, "1");
  EXPECT_EQ(trace.jobs[1].spec.submit, Time::FromSeconds(30));
  EXPECT_EQ(trace.jobs[1].work, Duration::Seconds(147));
  EXPECT_EQ(trace.jobs[1].spec.total_gpus(), 8);
  EXPECT_EQ(trace.jobs[1].spec.name, "vgg11");
}

// Given the real 60-job Tiresias example, expect 60 jobs submitted within 0..1779 s.
TEST_F(TraceTest, RealTiresiasTrace) {
  Trace trace = Read(RealData("tiresias/60_job.csv"));
  ASSERT_EQ(trace.jobs.size(), 60u);
  EXPECT_EQ(trace.jobs.front().spec.submit, Time::FromSeconds(0));
  EXPECT_LE(trace.jobs.back().spec.submit, Time::FromSeconds(1779));
}

// ---- Generic CSV ----

TraceOptions GenericOptions() {
  TraceOptions options;
  options.columns = {{"id", "job"},       {"submit", "submitted_at"}, {"duration", "runtime_s"},
                     {"gpus", "gpu_count"}, {"team", "owner"},         {"name", "title"},
                     {"priority", "prio"}, {"gpu_milli", "share"},     {"gpu_type", "gpu"},
                     {"nodes", "hosts"},   {"cpus", "cores"},          {"memory", "mem"}};
  return options;
}

// Given a CRLF CSV with blank lines, quoted fields holding commas and doubled quotes and a full
// column map, expect every mapped field read, gangs split over `nodes` and an any-of GPU list.
TEST_F(TraceTest, GenericCsvReadsQuotedFieldsAndCrlf) {
  Trace trace = Read(Fixture("generic.csv"), GenericOptions());
  EXPECT_EQ(trace.format, TraceFormat::kCsv);
  ASSERT_EQ(trace.jobs.size(), 3u);
  const TraceJob& j1 = trace.jobs[0];
  EXPECT_EQ(j1.id, "j1");
  EXPECT_EQ(j1.spec.name, "resnet, big");
  EXPECT_EQ(j1.spec.team, "vision");
  EXPECT_EQ(j1.spec.priority, 2);
  EXPECT_EQ(j1.spec.gpu_models, (std::vector<std::string>{"H100", "A100"}));
  EXPECT_EQ(j1.spec.cpu_milli, 4500);
  EXPECT_EQ(j1.spec.mem_mib, 16384);
  EXPECT_EQ(j1.work, Duration::Hours(1));
  const TraceJob& j2 = trace.jobs[1];
  EXPECT_EQ(j2.spec.name, "say \"hi\"");
  EXPECT_EQ(j2.spec.team, "nlp");
  EXPECT_EQ(j2.spec.gpus_per_node, 4);
  EXPECT_EQ(j2.spec.nodes, 2);
  EXPECT_EQ(j2.work, Duration::Millis(60'250));
  const TraceJob& j3 = trace.jobs[2];
  EXPECT_EQ(j3.spec.gpu_milli, 500);
}

// Given the same instant written as "2017-10-09 07:01:55", as "2017-10-09T07:01:55Z" and (plus
// 250 ms) as "2017-10-09T07:01:55.250Z", expect equal times.
TEST_F(TraceTest, GenericCsvDatetimesInEachWrittenFormReadTheSame) {
  Trace trace = Read(Fixture("generic.csv"), GenericOptions());
  ASSERT_EQ(trace.jobs.size(), 3u);
  Time t = Utc(2017, 10, 9, 7, 1, 55);
  EXPECT_EQ(trace.jobs[0].spec.submit, t);
  EXPECT_EQ(trace.jobs[1].spec.submit, t);
  EXPECT_EQ(trace.jobs[2].spec.submit, t + Duration::Millis(250));
}

// Given an `end` column instead of a duration, with datetimes in UTC, without a zone and with
// an offset, expect work = end - submit.
TEST_F(TraceTest, GenericCsvEndColumnGivesWork) {
  TraceOptions options;
  options.columns = {{"id", "id"}, {"submit", "start"}, {"end", "finish"}, {"gpus", "gpus"}};
  Trace trace = Read(Fixture("generic_end.csv"), options);
  ASSERT_EQ(trace.jobs.size(), 3u);
  EXPECT_EQ(trace.jobs[0].work, Duration::Minutes(90));
  EXPECT_EQ(trace.jobs[1].work, Duration::Millis(10'500));
  EXPECT_EQ(trace.jobs[2].spec.submit, Utc(2020, 1, 1, 0, 0, 0));  // 02:00+02:00
  EXPECT_EQ(trace.jobs[2].work, Duration::Seconds(10));
}

// Given a map naming a column the header lacks, expect an error naming the column and listing
// the header's columns.
TEST_F(TraceTest, ColumnMappedToMissingColumnIsError) {
  TraceOptions options = GenericOptions();
  options.columns["submit"] = "created";
  auto trace = ReadTrace(Fixture("generic.csv"), options);
  ASSERT_FALSE(trace.ok());
  EXPECT_NE(trace.status().message().find("column 'created' (mapped to submit) is not in the header"),
            std::string::npos)
      << trace.status().message();
  EXPECT_NE(trace.status().message().find("submitted_at"), std::string::npos);
}

// Given a map without gpus, expect an error saying which fields are required.
TEST_F(TraceTest, ColumnMapWithoutRequiredFieldIsError) {
  TraceOptions options;
  options.columns = {{"submit", "submitted_at"}, {"duration", "runtime_s"}};
  auto trace = ReadTrace(Fixture("generic.csv"), options);
  ASSERT_FALSE(trace.ok());
  EXPECT_NE(trace.status().message().find("must name gpus"), std::string::npos) << trace.status().message();
}

// Given an unterminated quoted field, expect an error naming the line where it starts.
TEST_F(TraceTest, UnterminatedQuoteIsError) {
  TraceOptions options;
  options.columns = {{"id", "job"}, {"submit", "t"}, {"duration", "d"}, {"gpus", "g"}};
  auto trace = ReadTrace(Fixture("unterminated_quote.csv"), options);
  ASSERT_FALSE(trace.ok());
  EXPECT_NE(trace.status().message().find("unterminated_quote.csv:3: unterminated quoted field"),
            std::string::npos)
      << trace.status().message();
}

// Given two rows with the same id, expect the second to be a bad row naming the first's line.
TEST_F(TraceTest, RepeatedIdIsBadRow) {
  std::string path = TempPath("repeated_id.csv");
  WriteText(path, "job,t,d,g\nj1,0,10,1\nj2,5,10,1\nj1,9,10,1\n");
  TraceOptions options;
  options.columns = {{"id", "job"}, {"submit", "t"}, {"duration", "d"}, {"gpus", "g"}};
  auto trace = ReadTrace(path, options);
  ASSERT_FALSE(trace.ok());
  EXPECT_EQ(trace.status().message(), path + ":4: id: repeats the id of line 2, got 'j1'");
}

// Given a duration of 1e15 seconds (a number, past what milliseconds hold), expect the error to
// give the limit rather than say it is not a number of seconds.
TEST_F(TraceTest, ADurationPastTheLimitIsToldTheLimit) {
  std::string path = TempPath("huge.csv");
  WriteText(path, "t,d,g\n0,100,1\n10,1e15,1\n");
  TraceOptions options;
  options.columns = {{"submit", "t"}, {"duration", "d"}, {"gpus", "g"}};
  auto trace = ReadTrace(path, options);
  ASSERT_FALSE(trace.ok());
  EXPECT_EQ(trace.status().message(), path + ":3: d: expected a number of seconds (at most 1000000000000, about 31,700 years), got '1e15'");
}

// Given a row whose quoted name spans two lines, then a bad row, expect the error to name the
// bad row's physical line (4), not its record number (3).
TEST_F(TraceTest, CsvRowLinesArePhysicalAfterAQuotedNewline) {
  std::string path = TempPath("quoted_newline.csv");
  WriteText(path, "job,t,d,g,title\nj1,0,10,1,\"two\nlines\"\nj2,0,ten,1,x\n");
  TraceOptions options;
  options.columns = {{"id", "job"}, {"submit", "t"}, {"duration", "d"}, {"gpus", "g"}, {"name", "title"}};
  auto trace = ReadTrace(path, options);
  ASSERT_FALSE(trace.ok());
  EXPECT_EQ(trace.status().message(), path + ":4: d: expected a number of seconds (at most 1000000000000, about 31,700 years), got 'ten'");
  options.skip_bad_rows = true;
  Trace read = Read(path, options);
  ASSERT_EQ(read.jobs.size(), 1u);
  EXPECT_EQ(read.jobs[0].spec.name, "two\nlines");
}

// Given "a, b" style rows with spaces around fields, also around a quoted one, expect the
// spaces dropped outside quotes and kept inside.
TEST_F(TraceTest, CsvFieldsAreTrimmedOutsideQuotes) {
  std::string path = TempPath("spaced.csv");
  WriteText(path, "job , t, d ,g, title\n j1 , 5 ,10, 2 ,  \" big \"  \n");
  TraceOptions options;
  options.columns = {{"id", "job"}, {"submit", "t"}, {"duration", "d"}, {"gpus", "g"}, {"name", "title"}};
  Trace trace = Read(path, options);
  ASSERT_EQ(trace.jobs.size(), 1u);
  EXPECT_EQ(trace.jobs[0].id, "j1");
  EXPECT_EQ(trace.jobs[0].spec.gpus_per_node, 2);
  EXPECT_EQ(trace.jobs[0].spec.name, " big ");
}

// ---- ParseColumnMap ----

// Given "id=job, submit=submitted_at", expect a two-entry map with spaces trimmed.
TEST_F(TraceTest, ParseColumnMapReadsPairs) {
  auto map = ParseColumnMap("id=job, submit=submitted_at");
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  EXPECT_EQ(*map, (std::map<std::string, std::string>{{"id", "job"}, {"submit", "submitted_at"}}));
}

// Given an unknown field, expect an error naming it and listing the valid fields.
TEST_F(TraceTest, ParseColumnMapRejectsUnknownField) {
  auto map = ParseColumnMap("id=job,start=submitted_at");
  ASSERT_FALSE(map.ok());
  EXPECT_NE(map.status().message().find("unknown field 'start'"), std::string::npos);
  EXPECT_NE(map.status().message().find("id, submit, duration, end, gpus"), std::string::npos)
      << map.status().message();
}

// Given pairs without '=', without a column, or repeated, expect errors.
TEST_F(TraceTest, ParseColumnMapRejectsMalformedPairs) {
  EXPECT_FALSE(ParseColumnMap("id").ok());
  EXPECT_FALSE(ParseColumnMap("id=").ok());
  EXPECT_FALSE(ParseColumnMap("id=a,id=b").ok());
  EXPECT_FALSE(ParseColumnMap("").ok());
  auto map = ParseColumnMap("id=job,,submit=t");
  ASSERT_FALSE(map.ok());
  EXPECT_NE(map.status().message().find("fields are:"), std::string::npos);
}

// ---- JSONL ----

// Given JSONL jobs using every key, expect each mapped, blank lines ignored and an ISO submit.
TEST_F(TraceTest, JsonlReadsEveryField) {
  Trace trace = Read(Fixture("jobs.jsonl"));
  EXPECT_EQ(trace.format, TraceFormat::kJsonl);
  ASSERT_EQ(trace.jobs.size(), 3u);
  const TraceJob& j2 = trace.jobs[0];
  EXPECT_EQ(j2.id, "j2");
  EXPECT_EQ(j2.spec.submit, Time::FromMillis(50'500));
  EXPECT_EQ(j2.spec.gpus_per_node, 8);
  EXPECT_EQ(j2.spec.nodes, 4);
  const TraceJob& j1 = trace.jobs[1];
  EXPECT_EQ(j1.spec.name, "bert");
  EXPECT_EQ(j1.spec.team, "nlp");
  EXPECT_EQ(j1.spec.priority, 2);
  EXPECT_EQ(j1.spec.total_gpus(), 8);
  EXPECT_EQ(j1.work, Duration::Hours(1));
  EXPECT_EQ(j1.spec.gpu_models, (std::vector<std::string>{"H100", "A100-80GB"}));
  EXPECT_EQ(j1.spec.cpu_milli, 32000);
  EXPECT_EQ(j1.spec.mem_mib, 262144);
  ASSERT_TRUE(j1.spec.duration_estimate.has_value());
  EXPECT_EQ(*j1.spec.duration_estimate, Duration::Seconds(4000));
  EXPECT_EQ(j1.spec.checkpoint_interval, Duration::Minutes(10));
  EXPECT_EQ(j1.spec.constraints, (model::Labels{{"region", "eu-west-1"}}));
  EXPECT_EQ(j1.spec.market, model::MarketPreference::kSpot);
  const TraceJob& j3 = trace.jobs[2];
  EXPECT_EQ(j3.spec.submit, Utc(2017, 10, 9, 7, 1, 55));
  EXPECT_EQ(j3.spec.gpu_milli, 250);
  EXPECT_EQ(j3.spec.market, model::MarketPreference::kOnDemand);
}

// Given a JSONL line with the unknown key "gpu", expect an error naming the key and line 2.
TEST_F(TraceTest, JsonlUnknownKeyIsError) {
  std::string path = Fixture("jobs_unknown_key.jsonl");
  auto trace = ReadTrace(path, {});
  ASSERT_FALSE(trace.ok());
  EXPECT_EQ(trace.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(StartsWith(trace.status().message(), path + ":2: unknown key 'gpu'")) << trace.status().message();
}

// Given malformed JSON and a line that is not an object, expect row errors with their lines.
TEST_F(TraceTest, JsonlMalformedLineIsBadRow) {
  std::string path = TempPath("malformed.jsonl");
  WriteText(path, "{\"id\":\"a\",\"submit\":0,\"work\":1,\"gpus\":1}\n{\"id\":\n[1,2]\n");
  TraceOptions options;
  options.format = TraceFormat::kJsonl;
  options.skip_bad_rows = true;
  Trace trace = Read(path, options);
  EXPECT_EQ(trace.jobs.size(), 1u);
  EXPECT_EQ(trace.bad_rows_skipped, 2);
  ASSERT_EQ(trace.warnings.size(), 2u);
  EXPECT_EQ(trace.warnings[0], path + ":2:7: JSON syntax error while parsing value: unexpected end of input; "
                                "expected '[', '{', or a literal");
  EXPECT_NE(trace.warnings[1].find(":3: json: expected one JSON object per line"), std::string::npos)
      << trace.warnings[1];
}

// Given a JSON syntax error on an indented line, expect FILE:LINE:COLUMN with the column counted
// in the file's line, and nlohmann's message without its exception name and inner position.
TEST_F(TraceTest, JsonlSyntaxErrorNamesLineAndColumn) {
  std::string path = TempPath("syntax.jsonl");
  WriteText(path, "{\"id\":\"a\",\"submit\":0,\"work\":1,\"gpus\":1}\n  {\"id\": x}\n");
  TraceOptions options;
  options.format = TraceFormat::kJsonl;
  auto trace = ReadTrace(path, options);
  ASSERT_FALSE(trace.ok());
  EXPECT_EQ(trace.status().message(),
            path + ":2:10: JSON syntax error while parsing value: invalid literal; last read: '\"id\": x'");
}

// Given a line nesting 100,000 arrays (which would overflow the stack in the JSON parser), expect
// a row error naming the depth, and the other rows read.
TEST_F(TraceTest, JsonlDeeplyNestedLineIsBadRow) {
  std::string path = TempPath("deep.jsonl");
  WriteText(path, "{\"id\":\"a\",\"submit\":0,\"work\":1,\"gpus\":1}\n{\"id\": " + std::string(100'000, '[') + "}\n");
  TraceOptions options;
  options.format = TraceFormat::kJsonl;
  options.skip_bad_rows = true;
  Trace trace = Read(path, options);
  EXPECT_EQ(trace.jobs.size(), 1u);
  ASSERT_EQ(trace.warnings.size(), 1u);
  EXPECT_NE(trace.warnings[0].find(":2: json: nesting deeper than 64 levels at line 1, column 71"), std::string::npos)
      << trace.warnings[0];
}

// Given jobs using every field (sub-second times, a gang, a GPU share, fractional cores), expect
// WriteJsonl then ReadTrace to give equal jobs and a second write to give identical bytes.
TEST_F(TraceTest, JsonlRoundTripIsExact) {
  std::vector<TraceJob> jobs(3);
  jobs[0].id = "a";
  jobs[0].spec.name = "llm \"pretrain\"";
  jobs[0].spec.team = "research";
  jobs[0].spec.priority = -1;
  jobs[0].spec.submit = Time::FromMillis(1'507'532'515'123);
  jobs[0].work = Duration::Millis(3'600'001);
  jobs[0].spec.gpus_per_node = 8;
  jobs[0].spec.nodes = 16;
  jobs[0].spec.gpu_models = {"H100", "A100-80GB"};
  jobs[0].spec.cpu_milli = 96'500;
  jobs[0].spec.mem_mib = 1'048'576;
  jobs[0].spec.duration_estimate = Duration::Millis(7'200'250);
  jobs[0].spec.checkpoint_interval = Duration::Seconds(900);
  jobs[0].spec.constraints = {{"region", "eu-west-1"}, {"gdpr", "true"}};
  jobs[0].spec.market = model::MarketPreference::kOnDemand;
  jobs[1].id = "b";
  jobs[1].spec.submit = Time::FromSeconds(10);
  jobs[1].work = Duration::Millis(1);
  jobs[1].spec.gpus_per_node = 1;
  jobs[1].spec.gpu_milli = 125;
  jobs[1].spec.market = model::MarketPreference::kSpot;
  jobs[2].id = "c";
  jobs[2].spec.submit = Time::FromSeconds(10);
  jobs[2].work = Duration::Zero();
  jobs[2].spec.gpus_per_node = 128;

  std::string first = TempPath("roundtrip1.jsonl");
  ASSERT_TRUE(WriteJsonl(first, jobs).ok());
  Trace trace = Read(first);
  ASSERT_EQ(trace.jobs.size(), jobs.size());
  // Read() sorts by submit: b and c (t = 10 s, file order) come before a.
  const std::vector<const TraceJob*> expected = {&jobs[1], &jobs[2], &jobs[0]};
  for (size_t i = 0; i < jobs.size(); ++i) {
    const TraceJob& want = *expected[i];
    const TraceJob& got = trace.jobs[i];
    SCOPED_TRACE(want.id);
    EXPECT_EQ(got.id, want.id);
    EXPECT_EQ(got.work, want.work);
    EXPECT_EQ(got.spec.name, want.spec.name);
    EXPECT_EQ(got.spec.team, want.spec.team);
    EXPECT_EQ(got.spec.priority, want.spec.priority);
    EXPECT_EQ(got.spec.submit, want.spec.submit);
    EXPECT_EQ(got.spec.gpus_per_node, want.spec.gpus_per_node);
    EXPECT_EQ(got.spec.nodes, want.spec.nodes);
    EXPECT_EQ(got.spec.gpu_milli, want.spec.gpu_milli);
    EXPECT_EQ(got.spec.gpu_models, want.spec.gpu_models);
    EXPECT_EQ(got.spec.cpu_milli, want.spec.cpu_milli);
    EXPECT_EQ(got.spec.mem_mib, want.spec.mem_mib);
    EXPECT_EQ(got.spec.duration_estimate, want.spec.duration_estimate);
    EXPECT_EQ(got.spec.checkpoint_interval, want.spec.checkpoint_interval);
    EXPECT_EQ(got.spec.constraints, want.spec.constraints);
    EXPECT_EQ(got.spec.market, want.spec.market);
  }
  std::string second = TempPath("roundtrip2.jsonl");
  ASSERT_TRUE(WriteJsonl(second, trace.jobs).ok());
  Trace again = Read(second);
  std::string third = TempPath("roundtrip3.jsonl");
  ASSERT_TRUE(WriteJsonl(third, again.jobs).ok());
  auto slurp = [](const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  EXPECT_EQ(slurp(second), slurp(third));
  EXPECT_NE(slurp(second).find("\"submit\":10,"), std::string::npos) << slurp(second);
}

// ---- Times every reader checks ----

// Given a trace of second offsets with one datetime among them (or the reverse), expect an error
// naming the file, the line, the field and the first row's form; with --skip-bad-rows the odd
// row is skipped and counted. Either way the jobs keep the trace's one form.
TEST_F(TraceTest, MixedTimeFormsAreRejectedWithFileLineAndField) {
  TraceOptions options;
  options.columns = {{"submit", "t"}, {"duration", "d"}, {"gpus", "g"}};
  std::string seconds_first = TempPath("mixed_seconds_first.csv");
  WriteText(seconds_first, "t,d,g\n0,10,1\n60,10,1\n2024-05-01T09:00:00Z,10,1\n120,10,1\n");
  auto bad = ReadTrace(seconds_first, options);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(),
            seconds_first + ":4: t: a datetime in a trace that gives its times as seconds (line 2: '0'); use one "
                            "form throughout, got '2024-05-01T09:00:00Z'");
  std::string iso_first = TempPath("mixed_iso_first.csv");
  WriteText(iso_first, "t,d,g\n2024-05-01 09:00:00,10,1\n1714554000,10,1\n");
  auto reverse = ReadTrace(iso_first, options);
  ASSERT_FALSE(reverse.ok());
  EXPECT_NE(reverse.status().message().find(":3: t: a time in seconds in a trace that gives its times as datetimes"),
            std::string::npos)
      << reverse.status().message();
  // A mapped column named twice in the header cannot be told apart.
  std::string twice = TempPath("twice.csv");
  WriteText(twice, "t,t,d,g\n0,5,10,1\n");
  auto ambiguous = ReadTrace(twice, options);
  ASSERT_FALSE(ambiguous.ok());
  EXPECT_EQ(ambiguous.status().message(),
            twice + ":1: column 't' (mapped to submit) appears twice in the header (columns 1 and 2); rename one");
  // A value of a megabyte is shown by its first 200 bytes and its size.
  std::string huge = TempPath("huge_value.csv");
  WriteText(huge, "t,d,g\n0,10,1\n" + std::string(1'000'000, '7') + "x,10,1\n");
  auto long_value = ReadTrace(huge, options);
  ASSERT_FALSE(long_value.ok());
  EXPECT_NE(long_value.status().message().find(", got '" + std::string(200, '7') + "...' (1000001 bytes)"), std::string::npos)
      << long_value.status().message().substr(0, 400);
  EXPECT_LT(long_value.status().message().size(), 600u);
  // One row of two forms (seconds for the submit, a datetime for the end: a job of 54 years),
  // even the first.
  TraceOptions with_end;
  with_end.columns = {{"id", "id"}, {"submit", "start"}, {"end", "finish"}, {"gpus", "g"}};
  std::string one_row = TempPath("mixed_row.csv");
  WriteText(one_row, "id,start,finish,g\na,100,2024-05-01T09:00:00Z,1\n");
  auto row = ReadTrace(one_row, with_end);
  ASSERT_FALSE(row.ok());
  EXPECT_EQ(row.status().message(),
            one_row + ":2: finish: a datetime in a row whose start is a time in seconds ('100'); use one form "
                      "throughout, got '2024-05-01T09:00:00Z'");
  options.skip_bad_rows = true;
  Trace skipped = Read(seconds_first, options);
  EXPECT_EQ(skipped.jobs.size(), 3u);
  EXPECT_EQ(skipped.bad_rows_skipped, 1);
  EXPECT_EQ(skipped.jobs.back().spec.submit, Time::FromSeconds(120));
}

// Given --skip-bad-rows and a trace of second offsets whose first row is a datetime (CSV and JSON
// Lines), expect an error naming that row, its datetime and how many rows would be skipped, not a
// replay of the one job: the first good row sets the form, so every other row was skipped.
TEST_F(TraceTest, AStrayFirstRowOfTheOtherTimeFormIsNamedInsteadOfSkippingTheRest) {
  TraceOptions options;
  options.columns = {{"submit", "t"}, {"duration", "d"}, {"gpus", "g"}};
  options.skip_bad_rows = true;
  std::string csv = TempPath("stray_first.csv");
  WriteText(csv, "t,d,g\n2024-05-01T09:00:00Z,10,1\n0,10,1\n60,10,1\n120,10,1\n");
  auto bad = ReadTrace(csv, options);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(),
            csv + ":2: this row set the trace's times as datetimes ('2024-05-01T09:00:00Z'), but 3 row(s) after it "
                  "give theirs as seconds and would be skipped, more than the 1 read: fix or remove line 2 (one form "
                  "throughout)");
  std::string jsonl = TempPath("stray_first.jsonl");
  WriteText(jsonl, "{\"submit\": \"2024-05-01T09:00:00Z\", \"work\": 5, \"gpus\": 1}\n"
                   "{\"submit\": 10, \"work\": 5, \"gpus\": 1}\n{\"submit\": 20, \"work\": 5, \"gpus\": 1}\n");
  TraceOptions skip;
  skip.skip_bad_rows = true;
  auto bad_jsonl = ReadTrace(jsonl, skip);
  ASSERT_FALSE(bad_jsonl.ok());
  EXPECT_NE(bad_jsonl.status().message().find(jsonl + ":1: this row set the trace's times as datetimes"),
            std::string::npos)
      << bad_jsonl.status().message();
  // As many rows of the other form as were read: skipped and counted, as before.
  WriteText(csv, "t,d,g\n2024-05-01T09:00:00Z,10,1\n2024-05-01T09:01:00Z,10,1\n0,10,1\n60,10,1\n");
  Trace even = Read(csv, options);
  EXPECT_EQ(even.jobs.size(), 2u);
  EXPECT_EQ(even.bad_rows_skipped, 2);
}

// Given a JSON Lines number beyond a double, expect the line and the number, without the JSON
// library's exception tag.
TEST_F(TraceTest, AJsonlNumberTooLargeForADoubleIsNamedPlainly) {
  std::string path = TempPath("huge_number.jsonl");
  WriteText(path, "{\"submit\": 0, \"work\": 1e400, \"gpus\": 1}\n");
  auto trace = ReadTrace(path, {});
  ASSERT_FALSE(trace.ok());
  EXPECT_EQ(trace.status().message(),
            path + ":1: json: number overflow parsing '1e400' (a number too large for any field)");
}

// Given JSON Lines whose submits are numbers with one datetime string among them, expect the
// same error for the `submit` key.
TEST_F(TraceTest, JsonlMixedTimeFormsAreRejected) {
  std::string path = TempPath("mixed.jsonl");
  WriteText(path, "{\"submit\": 10, \"work\": 5, \"gpus\": 1}\n{\"submit\": \"2024-05-01T09:00:00Z\", \"work\": 5, \"gpus\": 1}\n");
  auto trace = ReadTrace(path, {});
  ASSERT_FALSE(trace.ok());
  EXPECT_NE(trace.status().message().find(path + ":2: submit: a datetime in a trace that gives its times as seconds"),
            std::string::npos)
      << trace.status().message();
  // A number in a string is seconds, as the bare number: beside a datetime, the same error.
  WriteText(path, "{\"submit\": \"100\", \"work\": 1, \"gpus\": 1}\n{\"submit\": \"2020-01-01T00:00:00Z\", \"work\": 1, \"gpus\": 1}\n");
  auto quoted = ReadTrace(path, {});
  ASSERT_FALSE(quoted.ok());
  EXPECT_NE(quoted.status().message().find(path + ":2: submit: a datetime in a trace that gives its times as seconds"),
            std::string::npos)
      << quoted.status().message();
  WriteText(path, "{\"submit\": \"100\", \"work\": 1, \"gpus\": 1}\n{\"submit\": 160, \"work\": 1, \"gpus\": 1}\n");
  auto seconds = ReadTrace(path, {});
  ASSERT_TRUE(seconds.ok()) << seconds.status().message();
  EXPECT_EQ(seconds->jobs.size(), 2u);
}

// Given a negative submit time in a mapped CSV, a Tiresias trace, a JSON Lines trace (a number,
// or a datetime before 1970) and an Alibaba pod list, expect an error naming file:line and the
// field, and no jobs.
TEST_F(TraceTest, NegativeSubmitIsRejectedInEveryFormat) {
  struct Case {
    std::string name, text, where;
    TraceOptions options;
  };
  TraceOptions mapped;
  mapped.columns = {{"submit", "t"}, {"duration", "d"}, {"gpus", "g"}};
  std::vector<Case> cases = {
      {"neg.csv", "t,d,g\n0,10,1\n-5,10,1\n", ":3: t: must not be negative", mapped},
      {"neg_tiresias.csv", "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n1,1,-30,10,vgg,100,0\n",
       ":2: submit_time: must not be negative", {}},
      {"neg.jsonl", "{\"submit\": -1.5, \"work\": 5, \"gpus\": 1}\n", ":1: submit: must not be negative", {}},
      {"neg_iso.jsonl", "{\"submit\": \"1969-12-31T23:00:00Z\", \"work\": 5, \"gpus\": 1}\n",
       ":1: submit: must not be negative", {}},
      {"neg_alibaba.csv",
       "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
       "p1,1000,1024,1,1000,,BE,Succeeded,-100,50,10\n",
       ":2: creation_time: must not be negative", {}},
  };
  for (const Case& c : cases) {
    std::string path = TempPath(c.name);
    WriteText(path, c.text);
    auto trace = ReadTrace(path, c.options);
    ASSERT_FALSE(trace.ok()) << c.name;
    EXPECT_EQ(trace.status().code(), StatusCode::kInvalidArgument) << c.name;
    EXPECT_NE(trace.status().message().find(path + c.where), std::string::npos) << trace.status().message();
  }
}

// ---- Gavel ----

TraceOptions GavelOptions(const std::string& throughputs) {
  TraceOptions o;
  o.gavel_throughputs = throughputs;
  return o;
}

// Given the hand-written Gavel sample (10 tab-separated fields, no header) and its throughputs
// file, expect the format detected from the tabs, one job per line numbered from 1, the job type
// as the name, scale_factor GPUs, arrival_time as submit and work = steps / steps-per-second of
// the job type alone on the chosen worker type (v100 by default, k80 when asked).
TEST_F(TraceTest, GavelTraceTurnsStepsIntoRunTimeWithItsThroughputs) {
  Trace trace = Read(Fixture("gavel_small.trace"), GavelOptions(Fixture("gavel_throughputs.json")));
  EXPECT_EQ(trace.format, TraceFormat::kGavel);
  ASSERT_EQ(trace.jobs.size(), 5u);
  std::vector<int64_t> work_s, submit_s, gpus;
  for (const TraceJob& j : trace.jobs) {
    work_s.push_back(j.work.seconds());
    submit_s.push_back(j.spec.submit.seconds());
    gpus.push_back(j.spec.total_gpus());
  }
  EXPECT_EQ(work_s, (std::vector<int64_t>{600, 300, 600, 300, 100}));
  EXPECT_EQ(submit_s, (std::vector<int64_t>{0, 0, 60, 120, 900}));
  EXPECT_EQ(gpus, (std::vector<int64_t>{1, 1, 4, 2, 1}));
  EXPECT_EQ(trace.jobs[0].id, "1");
  EXPECT_EQ(trace.jobs[2].spec.name, "LM (batch size 20)");
  TraceOptions k80 = GavelOptions(Fixture("gavel_throughputs.json"));
  k80.gavel_worker = "k80";
  k80.format = TraceFormat::kGavel;
  Trace slow = Read(Fixture("gavel_small.trace"), k80);
  ASSERT_EQ(slow.jobs.size(), 5u);
  EXPECT_EQ(slow.jobs[0].work, Duration::Seconds(2400));  // 6,000 steps at 2.5 steps/s
}

// Given Gavel's older 9-field lines (no working_directory), expect the same reading.
TEST_F(TraceTest, GavelOlderLayoutWithoutWorkingDirectoryReads) {
  std::string path = TempPath("old.trace");
  WriteText(path, "Transformer (batch size 32)\tpython3 train.py\t-step\t1\t800\t1\t1\tNone\t12.5\r\n");
  Trace trace = Read(path, GavelOptions(Fixture("gavel_throughputs.json")));
  ASSERT_EQ(trace.jobs.size(), 1u);
  EXPECT_EQ(trace.jobs[0].work, Duration::Seconds(200));
  EXPECT_EQ(trace.jobs[0].spec.submit, Time::FromMillis(12'500));
}

// Given malformed Gavel rows, expect each error to name the file, the line and the field; a job
// type the throughputs lack and a missing throughputs file are errors too.
TEST_F(TraceTest, GavelBadRowsNameFileLineAndField) {
  const std::string tput = Fixture("gavel_throughputs.json");
  auto steps = ReadTrace(Fixture("gavel_bad_steps.trace"), GavelOptions(tput));
  ASSERT_FALSE(steps.ok());
  EXPECT_EQ(steps.status().message(),
            Fixture("gavel_bad_steps.trace") + ":2: total_steps: expected a positive whole number of steps, got 'many'");
  struct Case {
    std::string line, where;
  };
  const std::string ok = "ResNet-18 (batch size 64)\tcmd\tdir\t--num_steps\t1\t100\t1\t1\t-1\t0\n";
  std::vector<Case> cases = {
      {"ResNet-18 (batch size 64)\tcmd\tdir\t--num_steps\t1\t100\t1\t1\n",
       ":2: row: expected 10 tab-separated fields"},
      {"ResNet-18 (batch size 64)\tcmd\tdir\t--num_steps\t1\t100\t0\t1\t-1\t0\n", ":2: scale_factor: "},
      {"ResNet-18 (batch size 64)\tcmd\tdir\t--num_steps\t1\t100\t1\t1\t-1\t-7\n", ":2: arrival_time: must not be negative"},
      {"ResNet-18 (batch size 64)\tcmd\tdir\t--num_steps\tmaybe\t100\t1\t1\t-1\t0\n", ":2: needs_data_dir: "},
      {"ResNet-18 (batch size 64)\tcmd\tdir\t--num_steps\t1\t100\t1\t0\t-1\t0\n", ":2: priority_weight: "},
      {"ResNet-18 (batch size 64)\tcmd\tdir\t--num_steps\t1\t100\t1\t1\tsoon\t0\n", ":2: SLO: "},
      {"ResNet-18 (batch size 64)\tcmd\tdir\t--num_steps\t1\t100\t8\t1\t-1\t0\n",
       ":2: job_type: has no throughput for scale factor 8 on worker type v100"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    std::string path = TempPath("bad" + std::to_string(i) + ".trace");
    WriteText(path, ok + cases[i].line);
    auto trace = ReadTrace(path, GavelOptions(tput));
    ASSERT_FALSE(trace.ok()) << cases[i].line;
    EXPECT_NE(trace.status().message().find(path + cases[i].where), std::string::npos) << trace.status().message();
  }
  auto no_tput = ReadTrace(Fixture("gavel_small.trace"), {});
  ASSERT_FALSE(no_tput.ok());
  EXPECT_NE(no_tput.status().message().find("--gavel-throughputs"), std::string::npos) << no_tput.status().message();
  TraceOptions bad_worker = GavelOptions(tput);
  bad_worker.gavel_worker = "a100";
  auto worker = ReadTrace(Fixture("gavel_small.trace"), bad_worker);
  ASSERT_FALSE(worker.ok());
  EXPECT_NE(worker.status().message().find("no worker type 'a100' (the file has: k80, v100)"), std::string::npos)
      << worker.status().message();
}

// ---- Detection, names, files ----

// Given one file of each format and no format named, expect each detected from its first line.
TEST_F(TraceTest, AutoDetectsFormatFromHeader) {
  EXPECT_EQ(Read(Fixture("philly_small.csv")).format, TraceFormat::kPhilly);
  EXPECT_EQ(Read(Fixture("tiresias_small.csv")).format, TraceFormat::kTiresias);
  TraceOptions skip;
  skip.skip_bad_rows = true;
  EXPECT_EQ(Read(Fixture("alibaba_small.csv"), skip).format, TraceFormat::kAlibaba2023);
  EXPECT_EQ(Read(Fixture("jobs.jsonl")).format, TraceFormat::kJsonl);
  EXPECT_EQ(Read(Fixture("generic.csv"), GenericOptions()).format, TraceFormat::kCsv);
}

// Given an unrecognised header and no column map, expect an error listing the supported formats
// and suggesting --format and --columns.
TEST_F(TraceTest, UnknownHeaderErrorListsFormats) {
  auto trace = ReadTrace(Fixture("unknown_format.csv"), {});
  ASSERT_FALSE(trace.ok());
  const std::string& msg = trace.status().message();
  for (const char* word : {"philly", "alibaba2023", "tiresias", "jsonl", "csv", "--format", "--columns",
                           "user,when,how_long"}) {
    EXPECT_NE(msg.find(word), std::string::npos) << word << " missing from: " << msg;
  }
}

// Given the csv format without a column map, or a column map with another format, expect errors.
TEST_F(TraceTest, ColumnMapAndFormatMustAgree) {
  TraceOptions csv;
  csv.format = TraceFormat::kCsv;
  EXPECT_FALSE(ReadTrace(Fixture("generic.csv"), csv).ok());
  TraceOptions philly = GenericOptions();
  philly.format = TraceFormat::kPhilly;
  EXPECT_FALSE(ReadTrace(Fixture("philly_small.csv"), philly).ok());
}

// Given a path that does not exist, expect NotFound naming the path.
TEST_F(TraceTest, MissingFileIsNotFound) {
  std::string path = Fixture("no_such_trace.csv");
  auto trace = ReadTrace(path, {});
  ASSERT_FALSE(trace.ok());
  EXPECT_EQ(trace.status().code(), StatusCode::kNotFound);
  EXPECT_NE(trace.status().message().find(path), std::string::npos);
}

// Given each format's name, expect ParseTraceFormat(TraceFormatName(f)) == f, and an unknown name
// to be an error listing the names.
TEST_F(TraceTest, FormatNamesRoundTrip) {
  for (TraceFormat f : {TraceFormat::kAuto, TraceFormat::kPhilly, TraceFormat::kAlibaba2023, TraceFormat::kCsv,
                        TraceFormat::kTiresias, TraceFormat::kJsonl, TraceFormat::kGavel}) {
    auto parsed = ParseTraceFormat(TraceFormatName(f));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, f);
  }
  auto bad = ParseTraceFormat("swf");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("philly"), std::string::npos);
}

// ---- The real Philly trace ----

// Given the full Philly trace, expect 82,247 jobs, the first submitted 2017-09-04 10:30:41 UTC,
// and total GPU-seconds equal to the sum of the file's own gpu_time column.
TEST_F(TraceTest, RealPhillyTrace) {
  std::string path = RealData("philly/philly.csv");
  Trace trace = Read(path);
  ASSERT_EQ(trace.jobs.size(), 82'247u);
  EXPECT_EQ(trace.bad_rows_skipped, 0);
  EXPECT_EQ(trace.jobs.front().spec.submit, Utc(2017, 9, 4, 10, 30, 41));
  EXPECT_EQ(FormatIso8601(trace.jobs.front().spec.submit), "2017-09-04T10:30:41Z");
  EXPECT_EQ(trace.jobs.back().spec.submit, Utc(2017, 12, 22, 8, 2, 11));

  int64_t gpu_ms = 0;
  for (const auto& j : trace.jobs) gpu_ms += j.work.millis() * j.spec.total_gpus();

  // Independent sum of the gpu_time column (4th field).
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);  // header
  double file_gpu_seconds = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;  // the file ends with a blank line
    std::vector<std::string> f = Split(line, ',');
    ASSERT_EQ(f.size(), 5u) << line;
    file_gpu_seconds += std::strtod(f[3].c_str(), nullptr);
  }
  EXPECT_EQ(gpu_ms, static_cast<int64_t>(std::llround(file_gpu_seconds * 1000.0)));
  EXPECT_EQ(gpu_ms, int64_t{3'521'082'502'000});
}

}  // namespace
}  // namespace gpufleet::sim
