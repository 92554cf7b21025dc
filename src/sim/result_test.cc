#include "sim/result.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace gpufleet::sim {
namespace {

// 2017-10-09T07:00:00Z
constexpr Time kT0 = Time::FromSeconds(1507532400);

JobRecord FinishedJob(const std::string& id, Duration jct, Duration work = Duration::Seconds(1)) {
  JobRecord j;
  j.id = id;
  j.team = "team";
  j.gpus = 1;
  j.gpu_milli = 1000;
  j.submit = kT0;
  j.first_start = kT0;
  j.finish = kT0 + jct;
  j.work = work;
  return j;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string TempPath(const std::string& name) { return ::testing::TempDir() + "result_test_" + name; }

size_t CountOf(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t pos = haystack.find(needle); pos != std::string::npos; pos = haystack.find(needle, pos + 1)) ++n;
  return n;
}

// The line of a text block that starts with `prefix`, or "" if none does.
std::string LineStartingWith(const std::string& text, const std::string& prefix) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) == 0) return line;
  }
  return "";
}

SimResult RunWithSeries(const std::string& policy, int points, int64_t step_ms) {
  SimResult r;
  r.policy = policy;
  r.trace = "trace.csv";
  r.cluster_gpus = 8;
  r.start = kT0;
  for (int i = 0; i < points; ++i) {
    SeriesPoint p;
    p.t = kT0 + Duration::Millis(i * step_ms);
    p.total_gpu_milli = 8000;
    p.busy_gpu_milli = (i * 37) % 8001;
    p.pending_jobs = (i * 13) % 50;
    p.running_jobs = 3;
    r.series.push_back(p);
  }
  r.end = r.series.empty() ? kT0 : r.series.back().t;
  return r;
}

// ---------------------------------------------------------------------------------------------
// Summarize

TEST(SummarizeTest, PercentilesUseNearestRank) {
  // Given 20 finished jobs with JCTs of 1..20 s in shuffled order, expect nearest-rank
  // percentiles: p50 = 10th value, p95 = 19th, p99 = 20th, and the mean 10.5.
  SimResult r;
  for (int s : {7, 20, 3, 14, 1, 9, 18, 5, 11, 16, 2, 13, 19, 6, 10, 4, 17, 8, 15, 12}) {
    r.jobs.push_back(FinishedJob("j" + std::to_string(s), Duration::Seconds(s)));
  }
  Summary sum = Summarize(r);
  EXPECT_EQ(sum.jobs, 20);
  EXPECT_EQ(sum.finished, 20);
  EXPECT_DOUBLE_EQ(sum.jct_s.avg, 10.5);
  EXPECT_DOUBLE_EQ(sum.jct_s.p50, 10);
  EXPECT_DOUBLE_EQ(sum.jct_s.p95, 19);
  EXPECT_DOUBLE_EQ(sum.jct_s.p99, 20);
  EXPECT_DOUBLE_EQ(sum.jct_s.max, 20);
}

TEST(SummarizeTest, SingleValuePercentilesAreThatValue) {
  // Given one finished job of 42 s, expect every percentile to be 42 s.
  SimResult r;
  r.jobs.push_back(FinishedJob("only", Duration::Seconds(42)));
  Summary sum = Summarize(r);
  EXPECT_DOUBLE_EQ(sum.jct_s.p50, 42);
  EXPECT_DOUBLE_EQ(sum.jct_s.p99, 42);
  EXPECT_DOUBLE_EQ(sum.jct_s.avg, 42);
}

TEST(SummarizeTest, UnfinishedJobsCountButHaveNoCompletionTime) {
  // Given two finished jobs and one that ran and was cut off while queued again for 1 h, expect
  // 3 jobs, 2 finished, JCT over the finished ones only, and the cut-off job's wait in the
  // queueing delay.
  SimResult r;
  JobRecord a = FinishedJob("a", Duration::Seconds(100));
  a.queued = Duration::Seconds(10);
  JobRecord b = FinishedJob("b", Duration::Seconds(300));
  b.queued = Duration::Seconds(20);
  JobRecord c = FinishedJob("c", Duration::Seconds(1));
  c.finish.reset();
  c.queued = Duration::Hours(1);
  r.jobs = {a, b, c};
  Summary sum = Summarize(r);
  EXPECT_EQ(sum.jobs, 3);
  EXPECT_EQ(sum.finished, 2);
  EXPECT_TRUE(sum.never_ran.empty());
  EXPECT_DOUBLE_EQ(sum.jct_s.avg, 200);
  EXPECT_DOUBLE_EQ(sum.jct_s.max, 300);
  EXPECT_DOUBLE_EQ(sum.queue_s.max, 3600);
  EXPECT_DOUBLE_EQ(sum.queue_s.p50, 20);
}

TEST(SummarizeTest, JobsThatNeverStartedAreListedWithTheirReasonAndLeftOutOfTheAverages) {
  // Given two finished jobs that waited 10 s and 20 s and two that never started (waiting 1 h
  // and 2 h when the run ended), expect the two listed in trace order with their reasons,
  // queueing delay over the finished two only (avg 15 s, not 1,357.5 s), and the text report
  // grouping them by reason with their ids.
  SimResult r;
  JobRecord a = FinishedJob("a", Duration::Seconds(100));
  a.queued = Duration::Seconds(10);
  JobRecord b = FinishedJob("b", Duration::Seconds(300));
  b.queued = Duration::Seconds(20);
  JobRecord big = FinishedJob("big", Duration::Seconds(1));
  big.finish.reset();
  big.first_start.reset();
  big.queued = Duration::Hours(1);
  big.never_ran = "can never run: needs 16 A100 node(s) with 8 GPUs but only 2 such node(s) exist";
  JobRecord bigger = big;
  bigger.id = "bigger";
  bigger.queued = Duration::Hours(2);
  r.jobs = {a, big, b, bigger};
  Summary sum = Summarize(r);
  EXPECT_EQ(sum.jobs, 4);
  EXPECT_EQ(sum.finished, 2);
  ASSERT_EQ(sum.never_ran.size(), 2u);
  EXPECT_EQ(sum.never_ran[0].id, "big");
  EXPECT_EQ(sum.never_ran[1].id, "bigger");
  EXPECT_EQ(sum.never_ran[1].reason, big.never_ran);
  EXPECT_DOUBLE_EQ(sum.queue_s.avg, 15);
  EXPECT_DOUBLE_EQ(sum.queue_s.max, 20);
  std::string text = FormatSummaryText(sum);
  EXPECT_NE(LineStartingWith(text, "jobs").find("4 (2 finished, 2 never ran)"), std::string::npos) << text;
  EXPECT_NE(text.find("never ran         2 job(s), left out of the averages:\n  2 x can never run: needs 16 A100 "
                      "node(s) with 8 GPUs but only 2 such node(s) exist: big, bigger\n"),
            std::string::npos)
      << text;
}

TEST(SummarizeTest, ControlCharactersOfATracesIdsAndTeamsAreShownEscapedInTheTextReport) {
  // Given a finished job of a team named with an escape sequence and a job that never ran whose
  // id holds a newline, expect the text report to show both escaped (no raw control character
  // reaches a terminal) while the summary keeps the names as given (JSON and CSV escape them).
  SimResult r;
  JobRecord a = FinishedJob("a", Duration::Seconds(100));
  a.team = "evil\x1b[2Jteam";
  JobRecord never = FinishedJob("line1\nline2", Duration::Seconds(1));
  never.finish.reset();
  never.first_start.reset();
  never.never_ran = "can never run";
  r.jobs = {a, never};
  Summary sum = Summarize(r);
  ASSERT_EQ(sum.teams.count("evil\x1b[2Jteam"), 1u);
  std::string text = FormatSummaryText(sum);
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
  EXPECT_NE(text.find("evil\\x1b[2Jteam"), std::string::npos) << text;
  EXPECT_NE(text.find("1 x can never run: line1\\nline2\n"), std::string::npos) << text;
}

TEST(SummarizeTest, SlowdownDividesByWorkOfAtLeastOneSecond) {
  // Given a 10 s job with 5 s of work and a 10 s job with no recorded work, expect slowdowns 2
  // and 10 (the latter divided by the 1 s floor, not by zero).
  SimResult r;
  r.jobs.push_back(FinishedJob("a", Duration::Seconds(10), Duration::Seconds(5)));
  r.jobs.push_back(FinishedJob("b", Duration::Seconds(10), Duration::Zero()));
  Summary sum = Summarize(r);
  EXPECT_DOUBLE_EQ(sum.slowdown.p50, 2);
  EXPECT_DOUBLE_EQ(sum.slowdown.max, 10);
  EXPECT_DOUBLE_EQ(sum.slowdown.avg, 6);
}

TEST(SummarizeTest, UtilisationIsStepIntegralOfSeries) {
  // Given points (t, busy, total) = (0 s, 4, 8), (10 s, 8, 8), (30 s, 0, 4) GPUs and an end at
  // 40 s, each point holding until the next and the last until the end, expect
  // busy 4*10 + 8*20 + 0*10 = 200 over capacity 8*10 + 8*20 + 4*10 = 280.
  SimResult r;
  r.start = kT0;
  r.end = kT0 + Duration::Seconds(40);
  r.cluster_gpus = 8;
  r.series = {{kT0, 4000, 8000, 0, 0},
              {kT0 + Duration::Seconds(10), 8000, 8000, 0, 0},
              {kT0 + Duration::Seconds(30), 0, 4000, 0, 0}};
  Summary sum = Summarize(r);
  EXPECT_DOUBLE_EQ(sum.utilisation, 200.0 / 280.0);
  EXPECT_DOUBLE_EQ(sum.makespan_s, 40);
}

TEST(SummarizeTest, UtilisationFallsBackToRunTimeWithoutSeries) {
  // Given no series, 4 GPUs, a 10 h makespan and jobs that held 10 GPU-hours in all, expect
  // utilisation 10 / (4 * 10) = 25 %.
  SimResult r;
  r.start = kT0;
  r.end = kT0 + Duration::Hours(10);
  r.cluster_gpus = 4;
  JobRecord a = FinishedJob("a", Duration::Hours(1));
  a.run_gpu_ms = Duration::Hours(6).millis();
  JobRecord b = FinishedJob("b", Duration::Hours(1));
  b.run_gpu_ms = Duration::Hours(4).millis();
  r.jobs = {a, b};
  EXPECT_DOUBLE_EQ(Summarize(r).utilisation, 0.25);
}

TEST(SummarizeTest, EmptyRunGivesZeros) {
  // Given a run with no jobs and no series, expect an all-zero summary rather than NaNs.
  Summary sum = Summarize(SimResult{});
  EXPECT_EQ(sum.jobs, 0);
  EXPECT_EQ(sum.jct_s.avg, 0);
  EXPECT_EQ(sum.utilisation, 0);
  EXPECT_TRUE(sum.teams.empty());
}

TEST(SummarizeTest, TeamsShareGpuHoursAndSumsAddUp) {
  // Given team "nlp" holding 3 GPU-hours over two jobs and "vision" 1 GPU-hour over one, with
  // preemptions, failures and lost work spread over them, expect shares 75/25 %, per-team mean
  // JCT, and the run-wide sums.
  SimResult r;
  JobRecord a = FinishedJob("a", Duration::Seconds(100));
  a.team = "nlp";
  a.run_gpu_ms = Duration::Hours(2).millis();
  a.preemptions = 2;
  a.lost_gpu_ms = Duration::Minutes(30).millis();
  JobRecord b = FinishedJob("b", Duration::Seconds(300));
  b.team = "nlp";
  b.run_gpu_ms = Duration::Hours(1).millis();
  b.failures = 1;
  b.lost_gpu_ms = Duration::Minutes(15).millis();
  JobRecord c = FinishedJob("c", Duration::Seconds(50));
  c.team = "vision";
  c.run_gpu_ms = Duration::Hours(1).millis();
  c.preemptions = 1;
  r.jobs = {a, b, c};
  Summary sum = Summarize(r);
  ASSERT_EQ(sum.teams.size(), 2u);
  EXPECT_EQ(sum.teams["nlp"].jobs, 2);
  EXPECT_DOUBLE_EQ(sum.teams["nlp"].gpu_hours, 3);
  EXPECT_DOUBLE_EQ(sum.teams["nlp"].share, 0.75);
  EXPECT_DOUBLE_EQ(sum.teams["nlp"].avg_jct_s, 200);
  EXPECT_DOUBLE_EQ(sum.teams["vision"].share, 0.25);
  EXPECT_DOUBLE_EQ(sum.teams["vision"].avg_jct_s, 50);
  EXPECT_EQ(sum.preemptions, 3);
  EXPECT_EQ(sum.failures, 1);
  EXPECT_DOUBLE_EQ(sum.gpu_hours_used, 4);
  EXPECT_DOUBLE_EQ(sum.gpu_hours_lost, 0.75);
}

// ---------------------------------------------------------------------------------------------
// Text reports

Summary SampleSummary(const std::string& policy) {
  Summary s;
  s.policy = policy;
  s.jobs = 82247;
  s.finished = 82247;
  s.jct_s = {11520, 3600, 36000, 90000, 200000, 82247};
  s.queue_s = {600, 60, 3600, 7200, 9000, 82247};
  s.slowdown = {4.2, 1.3, 18.25, 40, 99, 82247};
  s.makespan_s = 86400.0 * 31;
  s.utilisation = 0.71349;
  s.preemptions = 1234;
  s.gpu_hours_used = 123456.78;
  s.gpu_hours_lost = 1234.5;
  s.teams["nlp"] = {10, 300.0, 0.75, 100};
  s.teams["vision"] = {5, 100.0, 0.25, 50};
  return s;
}

TEST(SummaryTextTest, ReportsHeadlineMetricsReadably) {
  // Given a summary of 82,247 finished jobs at 71.349 % utilisation, expect grouped counts, short
  // durations and a one-decimal percentage.
  std::string text = FormatSummaryText(SampleSummary("las"));
  EXPECT_NE(LineStartingWith(text, "jobs").find("82,247 (82,247 finished)"), std::string::npos) << text;
  std::string jct = LineStartingWith(text, "JCT");
  EXPECT_NE(jct.find("avg 3h12m"), std::string::npos) << text;
  EXPECT_NE(jct.find("p50 1h00m"), std::string::npos) << text;
  EXPECT_NE(jct.find("p99 1d1h"), std::string::npos) << text;
  EXPECT_NE(LineStartingWith(text, "GPU utilisation").find("71.3 %"), std::string::npos) << text;
  EXPECT_NE(LineStartingWith(text, "makespan").find("31d0h"), std::string::npos) << text;
  EXPECT_NE(LineStartingWith(text, "GPU-hours").find("used 123,456.8 / lost 1,234.5"), std::string::npos) << text;
  EXPECT_NE(LineStartingWith(text, "preemptions").find("1,234"), std::string::npos) << text;
  EXPECT_EQ(text.find("restart overhead"), std::string::npos) << text;  // none in this run
  EXPECT_EQ(text.find("never ran"), std::string::npos) << text;
}

TEST(SummaryTextTest, OverheadAndSpotReclaimsHaveTheirOwnLines) {
  // Given 12.34 GPU-hours of restart overhead, 3 spot nodes taken back and 5 job runs stopped by
  // them, expect a "restart overhead" line and the reclaims beside the interruptions, apart
  // from the preemptions.
  Summary s = SampleSummary("las");
  s.gpu_hours_overhead = 12.34;
  s.spot_interruptions = 3;
  s.reclaims = 5;
  std::string text = FormatSummaryText(s);
  EXPECT_EQ(LineStartingWith(text, "restart overhead"), "restart overhead  12.3 GPU-hours") << text;
  EXPECT_EQ(LineStartingWith(text, "interruptions"),
            "interruptions     3 spot nodes taken back, 5 job runs stopped (not counted as preemptions)")
      << text;
  std::string table = FormatCompareTable({SampleSummary("fifo"), s});
  EXPECT_NE(LineStartingWith(table, "GPU-hours overhead").find("12.3"), std::string::npos) << table;
  EXPECT_EQ(FormatCompareTable({SampleSummary("fifo")}).find("GPU-hours overhead"), std::string::npos);
}

TEST(SummaryTextTest, TeamTableIsSortedAndCapped) {
  // Given 17 teams where team tNN used NN GPU-hours, expect the biggest first and only 15 rows,
  // followed by "(+2 more teams)".
  Summary s;
  for (int i = 1; i <= 17; ++i) {
    char name[8];
    std::snprintf(name, sizeof name, "t%02d", i);
    s.teams[name] = {1, static_cast<double>(i), i / 153.0, 60, 0, 1};
  }
  std::string text = FormatSummaryText(s);
  size_t t17 = text.find("\nt17 "), t16 = text.find("\nt16 "), t03 = text.find("\nt03 ");
  ASSERT_NE(t17, std::string::npos) << text;
  EXPECT_LT(t17, t16);
  EXPECT_LT(t16, t03);
  EXPECT_EQ(text.find("\nt02 "), std::string::npos) << text;
  EXPECT_EQ(text.find("\nt01 "), std::string::npos) << text;
  EXPECT_NE(text.find("(+2 more teams)"), std::string::npos) << text;
  EXPECT_NE(LineStartingWith(text, "t17 ").find(" 1m00s"), std::string::npos) << text;
}

TEST(SummaryTextTest, ARunWhereNoJobFinishedShowsNoCompletionTimesAndWinsNoComparison) {
  // Given a run in which no job finished or started (no values), expect "-" for JCT, queueing
  // delay and slowdown in the text, null in the JSON, and in a comparison with a run that
  // finished jobs, no "best" mark for the empty run's JCT (its zeros used to win).
  Summary none;
  none.policy = "none";
  none.jobs = 3;
  Summary some = SampleSummary("fifo");
  std::string text = FormatSummaryText(none);
  EXPECT_EQ(LineStartingWith(text, "JCT"), "JCT               -") << text;
  EXPECT_EQ(LineStartingWith(text, "queueing delay"), "queueing delay    -") << text;
  EXPECT_EQ(LineStartingWith(text, "slowdown"), "slowdown          -") << text;
  std::string json = SummaryToJson(none);
  EXPECT_NE(json.find("\"jct_s\": null"), std::string::npos) << json;
  EXPECT_NE(json.find("\"slowdown\": null"), std::string::npos) << json;
  std::string table = FormatCompareTable({none, some});
  std::string jct = LineStartingWith(table, "JCT avg");
  ASSERT_FALSE(jct.empty()) << table;
  EXPECT_NE(jct.find("- "), std::string::npos) << jct;
  EXPECT_EQ(jct.find("-*"), std::string::npos) << jct;
  EXPECT_NE(jct.find("*"), std::string::npos) << jct;
}

TEST(SummaryTextTest, ATeamWithNoFinishedJobShowsNoAverageCompletionTime) {
  // Given a team whose one job never finished, expect "-" for its average JCT, not "0s" (which
  // would read as instant completions); a team with finished jobs shows its average.
  Summary s;
  s.teams["waiting"] = {1, 0.0, 0.0, 0, 0, 0};
  s.teams["done"] = {1, 2.0, 1.0, 90, 0, 1};
  std::string text = FormatSummaryText(s);
  std::string waiting = LineStartingWith(text, "waiting ");
  ASSERT_FALSE(waiting.empty()) << text;
  EXPECT_EQ(waiting.find("0s"), std::string::npos) << waiting;
  EXPECT_EQ(waiting.back(), '-') << waiting;
  EXPECT_NE(LineStartingWith(text, "done ").find("1m30s"), std::string::npos) << text;
}

TEST(CompareTableTest, MarksBestValueOfEachRow) {
  // Given fifo with JCT avg 2 h and 60 % utilisation and las with 1 h and 70 %, expect las
  // marked on both rows (lower JCT, higher utilisation) and fifo on neither.
  Summary fifo = SampleSummary("fifo");
  fifo.jct_s.avg = 7200;
  fifo.utilisation = 0.6;
  Summary las = SampleSummary("las");
  las.jct_s.avg = 3600;
  las.utilisation = 0.7;
  std::string table = FormatCompareTable({fifo, las});
  std::string header = LineStartingWith(table, "metric");
  EXPECT_LT(header.find("fifo"), header.find("las")) << table;
  std::string jct = LineStartingWith(table, "JCT avg");
  EXPECT_NE(jct.find("2h00m "), std::string::npos) << table;
  EXPECT_NE(jct.find("1h00m*"), std::string::npos) << table;
  std::string util = LineStartingWith(table, "GPU utilisation");
  EXPECT_NE(util.find("60.0 % "), std::string::npos) << table;
  EXPECT_NE(util.find("70.0 %*"), std::string::npos) << table;
  // Ties mark every tied column.
  EXPECT_EQ(CountOf(LineStartingWith(table, "makespan"), "*"), 2u) << table;
}

TEST(CompareTableTest, ColumnsAreAligned) {
  // Given two tied policies, expect the values right-aligned under the policy names, with the
  // '*' marker in the column just after them.
  std::string table = FormatCompareTable({SampleSummary("fifo"), SampleSummary("las+backfill")});
  std::string header = LineStartingWith(table, "metric");
  std::string jct = LineStartingWith(table, "JCT p95");
  size_t fifo_end = header.find("fifo") + 4, las_end = header.find("las+backfill") + 12;
  ASSERT_EQ(jct.size(), las_end + 1) << table;
  EXPECT_EQ(jct[las_end], '*') << table;
  EXPECT_EQ(jct[fifo_end], '*') << table;
  EXPECT_EQ(jct.substr(fifo_end - 6, 6), "10h00m") << table;
}

// ---------------------------------------------------------------------------------------------
// JSON

TEST(SummaryJsonTest, HasStableKeysAndRoundedNumbers) {
  // Given a summary, expect its keys in declaration order, numbers rounded to 3 decimals, teams
  // keyed by name, and the same bytes when rendered twice.
  Summary s = SampleSummary("las");
  std::string json = SummaryToJson(s);
  EXPECT_EQ(json.front(), '{');
  EXPECT_NE(json.find("\"policy\": \"las\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"jobs\": 82247"), std::string::npos) << json;
  EXPECT_NE(json.find("\"utilisation\": 0.713"), std::string::npos) << json;
  EXPECT_EQ(json.find("0.71349"), std::string::npos) << json;
  EXPECT_NE(json.find("\"p95\": 18.25"), std::string::npos) << json;
  EXPECT_NE(json.find("\"gpu_hours_used\": 123456.78"), std::string::npos) << json;
  EXPECT_NE(json.find("\"gpu_hours_overhead\": 0.0"), std::string::npos) << json;
  EXPECT_NE(json.find("\"reclaims\": 0"), std::string::npos) << json;
  EXPECT_NE(json.find("\"never_ran\": 0,\n  \"never_ran_jobs\": []"), std::string::npos) << json;
  EXPECT_NE(json.find("\"nlp\": {"), std::string::npos) << json;
  EXPECT_NE(json.find("\"share\": 0.75"), std::string::npos) << json;
  size_t policy = json.find("\"policy\""), jct = json.find("\"jct_s\""), util = json.find("\"utilisation\""),
         teams = json.find("\"teams\"");
  EXPECT_LT(policy, jct);
  EXPECT_LT(jct, util);
  EXPECT_LT(util, teams);
  EXPECT_EQ(json, SummaryToJson(s));
}

TEST(SummaryJsonTest, CompareIsAnArrayInInputOrder) {
  // Given fifo then las, expect a JSON array with fifo's object before las's.
  std::string json = CompareToJson({SampleSummary("fifo"), SampleSummary("las")});
  EXPECT_EQ(json.front(), '[');
  EXPECT_LT(json.find("\"policy\": \"fifo\""), json.find("\"policy\": \"las\"")) << json;
  EXPECT_EQ(CompareToJson({}), "[]\n");
}

// ---------------------------------------------------------------------------------------------
// CSV

TEST(CsvTest, JobsCsvHasHeaderAndExactRows) {
  // Given one finished job and one cut off before starting, expect the documented header, ISO
  // times, seconds with 3 decimals, and empty fields for what never happened.
  SimResult r;
  JobRecord a;
  a.id = "j1";
  a.team = "vision";
  a.gpus = 2;
  a.gpu_milli = 2000;
  a.submit = kT0;
  a.first_start = kT0 + Duration::Seconds(90);
  a.finish = kT0 + Duration::Hours(1) + Duration::Millis(500);
  a.work = Duration::Millis(3000500);
  a.queued = Duration::Seconds(90);
  a.preemptions = 1;
  a.lost_gpu_ms = 120000;
  a.overhead_gpu_ms = 60000;
  a.run_gpu_ms = 7021000;
  a.gpu_model = "A100-80GB";
  a.reclaims = 2;
  JobRecord b;
  b.id = "j2";
  b.team = "team, with comma";
  b.gpus = 1;
  b.gpu_milli = 500;
  b.submit = kT0;
  b.work = Duration::Seconds(60);
  b.queued = Duration::Seconds(5);
  b.never_ran = "can never run: no node has GPU model H100 (the cluster has: A100, L4)";
  r.jobs = {a, b};
  std::string path = TempPath("jobs.csv");
  ASSERT_TRUE(WriteJobsCsv(path, r).ok());
  EXPECT_EQ(ReadFile(path),
            "id,team,gpus,gpu_milli,submit,first_start,finish,work_s,queued_s,jct_s,preemptions,failures,"
            "lost_gpu_s,run_gpu_s,gpu_model,reclaims,overhead_gpu_s,never_ran\n"
            "j1,vision,2,2000,2017-10-09T07:00:00Z,2017-10-09T07:01:30Z,2017-10-09T08:00:00.500Z,3000.500,90.000,"
            "3600.500,1,0,120.000,7021.000,A100-80GB,2,60.000,\n"
            "j2,\"team, with comma\",1,500,2017-10-09T07:00:00Z,,,60.000,5.000,,0,0,0.000,0.000,,0,0.000,"
            "\"can never run: no node has GPU model H100 (the cluster has: A100, L4)\"\n");
}

TEST(CsvTest, SeriesCsvHasHeaderAndExactRows) {
  // Given one point with 6 of 8 GPUs busy, expect the header and a row with GPUs as decimals and
  // utilisation 0.7500.
  SimResult r;
  r.series = {{kT0, 6000, 8000, 12, 3}};
  std::string path = TempPath("series.csv");
  ASSERT_TRUE(WriteSeriesCsv(path, r).ok());
  EXPECT_EQ(ReadFile(path),
            "time,busy_gpus,total_gpus,utilisation,pending,running\n"
            "2017-10-09T07:00:00Z,6.000,8.000,0.7500,12,3\n");
}

TEST(CsvTest, UnwritablePathIsUnavailableAndNamed) {
  // Given a path in a directory that does not exist, expect Unavailable naming the path.
  const std::string path = "/nonexistent-gpufleet-dir/out/jobs.csv";
  Status jobs = WriteJobsCsv(path, SimResult{});
  EXPECT_EQ(jobs.code(), StatusCode::kUnavailable);
  EXPECT_NE(jobs.message().find(path), std::string::npos) << jobs.ToString();
  Status series = WriteSeriesCsv(path, SimResult{});
  EXPECT_EQ(series.code(), StatusCode::kUnavailable);
}

// ---------------------------------------------------------------------------------------------
// SVG

// Number of "x,y" pairs in each polyline's points attribute.
std::vector<size_t> PolylinePointCounts(const std::string& svg) {
  std::vector<size_t> counts;
  const std::string key = "points=\"";
  for (size_t pos = svg.find("<polyline"); pos != std::string::npos; pos = svg.find("<polyline", pos + 1)) {
    size_t begin = svg.find(key, pos) + key.size();
    size_t end = svg.find('"', begin);
    std::string pts = svg.substr(begin, end - begin);
    counts.push_back(pts.empty() ? 0 : static_cast<size_t>(std::count(pts.begin(), pts.end(), ' ')) + 1);
  }
  return counts;
}

TEST(SvgPlotTest, DrawsOneLinePerRunAndPanelWithLegend) {
  // Given two runs over 10 hours, expect a standalone SVG document with both policy names, two
  // polylines per run (utilisation and pending), an hour-labelled axis and no external refs.
  SimResult fifo = RunWithSeries("fifo", 61, 600'000);
  SimResult las = RunWithSeries("las", 61, 600'000);
  std::string svg = RenderSvgPlot({&fifo, &las});
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
  EXPECT_NE(svg.find(">fifo<"), std::string::npos);
  EXPECT_NE(svg.find(">las<"), std::string::npos);
  EXPECT_NE(svg.find("time since start (hours)"), std::string::npos);
  EXPECT_NE(svg.find("GPU utilisation (%)"), std::string::npos);
  EXPECT_NE(svg.find("pending jobs"), std::string::npos);
  EXPECT_NE(svg.find("trace.csv"), std::string::npos);
  EXPECT_EQ(CountOf(svg, "<polyline"), 4u);
  EXPECT_EQ(CountOf(svg, "<script"), 0u);
  EXPECT_EQ(CountOf(svg, "href"), 0u);
  EXPECT_EQ(CountOf(svg, "<svg"), 1u);
  for (size_t n : PolylinePointCounts(svg)) EXPECT_EQ(n, 61u);
}

TEST(SvgPlotTest, LongRunsAreLabelledInDays) {
  // Given a run spanning 30 days, expect the time axis in days.
  SimResult r = RunWithSeries("fifo", 721, 3'600'000);
  EXPECT_NE(RenderSvgPlot({&r}).find("time since start (days)"), std::string::npos);
}

TEST(SvgPlotTest, DownsamplesHugeSeriesDeterministically) {
  // Given a run with 100,000 points, expect each polyline capped at kMaxPlotPointsPerRun points, a
  // file well under a megabyte, and the same bytes when rendered twice.
  SimResult r = RunWithSeries("las", 100'000, 60'000);
  std::string svg = RenderSvgPlot({&r});
  std::vector<size_t> counts = PolylinePointCounts(svg);
  ASSERT_EQ(counts.size(), 2u);
  for (size_t n : counts) {
    EXPECT_LE(n, static_cast<size_t>(kMaxPlotPointsPerRun));
    EXPECT_GT(n, 1000u);
  }
  EXPECT_LT(svg.size(), 200'000u);
  EXPECT_EQ(svg, RenderSvgPlot({&r}));
}

TEST(SvgPlotTest, EscapesNamesForXml) {
  // Given a policy and trace name with XML metacharacters, expect them escaped in the output.
  SimResult r = RunWithSeries("a<b&\"c\"", 10, 60'000);
  r.trace = "x>y.csv";
  std::string svg = RenderSvgPlot({&r});
  EXPECT_NE(svg.find("a&lt;b&amp;&quot;c&quot;"), std::string::npos);
  EXPECT_NE(svg.find("x&gt;y.csv"), std::string::npos);
  EXPECT_EQ(svg.find("a<b"), std::string::npos);
}

TEST(SvgPlotTest, EmptyInputStillGivesADocument) {
  // Given no runs, and a run without series, expect well-formed documents with axes and no lines.
  std::string none = RenderSvgPlot({});
  EXPECT_EQ(none.rfind("<svg", 0), 0u);
  EXPECT_EQ(CountOf(none, "<polyline"), 0u);
  SimResult empty;
  empty.policy = "fifo";
  std::string one = RenderSvgPlot({&empty});
  EXPECT_EQ(CountOf(one, "<polyline"), 2u);
  EXPECT_EQ(one.substr(one.size() - 7), "</svg>\n");
}

}  // namespace
}  // namespace gpufleet::sim
