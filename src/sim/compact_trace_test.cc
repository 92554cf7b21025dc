#include "sim/compact_trace.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "sim/trace.h"

namespace gpufleet::sim {
namespace {

TraceJob Job(const std::string& id, int64_t submit_s, const std::string& team, int gpus, int64_t work_s) {
  TraceJob j;
  j.id = id;
  j.spec.submit = Time::FromSeconds(submit_s);
  j.spec.team = team;
  j.spec.gpus_per_node = gpus;
  j.work = Duration::Seconds(work_s);
  return j;
}

// Every field of a job, the ones the JSON Lines writer leaves out included.
std::string Everything(const TraceJob& j) {
  return TraceJsonLine(j) + " max_cost=" + std::to_string(j.spec.max_cost_micros) + " env=" + j.spec.environment;
}

class CompactTraceTest : public ::testing::Test {};

TEST_F(CompactTraceTest, GivesBackEveryJobExactlyAsAdded) {
  // Given jobs that differ in every field a spec has, expect Job(i) to give each back unchanged
  // and in the order added.
  std::vector<TraceJob> jobs;
  jobs.push_back(Job("a", 10, "x", 1, 60));
  TraceJob b = Job("b", 5, "y", 4, 7);
  b.spec.name = "resnet";
  b.spec.priority = 3;
  b.spec.nodes = 2;
  b.spec.gpu_models = {"A100", "H100"};
  b.spec.cpu_milli = 1500;
  b.spec.mem_mib = 2048;
  b.spec.duration_estimate = Duration::Seconds(9);
  b.spec.checkpoint_interval = Duration::Minutes(5);
  b.spec.constraints["zone"] = "a";
  b.spec.market = model::MarketPreference::kSpot;
  b.spec.max_cost_micros = 42;
  b.spec.environment = "torch";
  jobs.push_back(b);
  TraceJob c = Job("pod-7", 5, "z", 1, 3);
  c.spec.gpu_milli = 250;
  c.spec.name = "pod-7";  // named by its id, as Alibaba's pods are
  jobs.push_back(c);
  jobs.push_back(Job("", 0, "", 1, 0));

  CompactTrace t = CompactTrace::Of(jobs);
  ASSERT_EQ(t.size(), jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_EQ(Everything(t.Job(i)), Everything(jobs[i])) << i;
    EXPECT_EQ(t.id(i), jobs[i].id);
    EXPECT_EQ(t.submit(i), jobs[i].spec.submit);
    EXPECT_EQ(t.work(i), jobs[i].work);
  }
}

TEST_F(CompactTraceTest, JobsOfOneShapeShareItsSpec) {
  // Given 1,000 jobs of two teams and two sizes, each with its own id, submit time and work, and
  // 100 pods each named by its id, expect four shapes for the first and one for the pods.
  std::vector<TraceJob> jobs;
  for (int i = 0; i < 1000; ++i) jobs.push_back(Job(std::to_string(i + 1), i, i % 2 ? "vc1" : "vc2", i % 3 ? 1 : 8, i));
  CompactTrace t = CompactTrace::Of(jobs);
  EXPECT_EQ(t.shapes(), 4u);
  EXPECT_EQ(t.shape(7).team, "vc1");
  EXPECT_EQ(t.Spec(7).submit, Time::FromSeconds(7));
  std::vector<TraceJob> pods;
  for (int i = 0; i < 100; ++i) {
    pods.push_back(Job("pod-" + std::to_string(i), i, "be", 1, 10));
    pods.back().spec.name = pods.back().id;
  }
  CompactTrace p = CompactTrace::Of(pods);
  EXPECT_EQ(p.shapes(), 1u);
  EXPECT_EQ(p.Spec(42).name, "pod-42");
  EXPECT_EQ(p.shape(42).name, "");
}

TEST_F(CompactTraceTest, SortsBySubmitKeepingTiesInOrderAndTruncates) {
  // Given jobs c(30) a(10) b(10) d(20), expect a b d c after sorting, and a b after Truncate(2).
  CompactTrace t = CompactTrace::Of({Job("c", 30, "t", 1, 1), Job("a", 10, "t", 2, 2), Job("b", 10, "u", 1, 3),
                                     Job("d", 20, "t", 1, 4)});
  t.SortBySubmit();
  std::vector<std::string> ids;
  for (size_t i = 0; i < t.size(); ++i) ids.emplace_back(t.id(i));
  EXPECT_EQ(ids, (std::vector<std::string>{"a", "b", "d", "c"}));
  EXPECT_EQ(t.work(2), Duration::Seconds(4));
  EXPECT_EQ(t.shape(1).team, "u");
  t.Truncate(2);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t.id(1), "b");
  EXPECT_EQ(t.Job(0).spec.gpus_per_node, 2);
}

TEST_F(CompactTraceTest, JobSpecHasTheFieldsTheShapeKnows) {
  // Given JobSpec as the shape's comparison knows it (sim/compact_trace.cc, SameShape), expect its
  // size unchanged: a new field must be compared there too, or jobs that differ in it would
  // share one shape.
  EXPECT_EQ(sizeof(model::JobSpec), 256u);
}

TEST_F(CompactTraceTest, ReadCompactTraceHoldsWhatReadTraceReads) {
  // Given the Philly, Alibaba, Tiresias and JSON Lines fixtures, and Philly cut at 3 jobs, expect
  // ReadCompactTrace to give the jobs ReadTrace gives, in the same order, with the same notes.
  const std::string dir = std::string(GPUFLEET_SOURCE_DIR) + "/tests/data/traces/";
  for (const char* name : {"philly_small.csv", "alibaba_small.csv", "tiresias_small.csv", "jobs.jsonl"}) {
    for (size_t max_jobs : {size_t{0}, size_t{3}}) {
      TraceOptions o;
      o.skip_bad_rows = true;
      o.max_jobs = max_jobs;
      auto full = ReadTrace(dir + name, o);
      auto compact = ReadCompactTrace(dir + name, o);
      ASSERT_TRUE(full.ok()) << name << ": " << full.status().ToString();
      ASSERT_TRUE(compact.ok()) << name << ": " << compact.status().ToString();
      EXPECT_TRUE(compact->info.jobs.empty());
      EXPECT_EQ(compact->info.format, full->format) << name;
      EXPECT_EQ(compact->info.warnings, full->warnings) << name;
      ASSERT_EQ(compact->jobs.size(), full->jobs.size()) << name;
      for (size_t i = 0; i < full->jobs.size(); ++i) {
        EXPECT_EQ(Everything(compact->jobs.Job(i)), Everything(full->jobs[i])) << name << " job " << i;
      }
    }
  }
}

// A Philly-form trace of `rows` random rows: out of time order, some submit times shared, decimals,
// five teams, GPU counts up to 16, and (as real files have) blank lines, spaces around fields and
// CRLF line ends here and there. `form` 's' writes submit times as seconds, else as datetimes.
std::string RandomPhilly(int rows, uint32_t seed, char form = 'd') {
  std::mt19937 rng(seed);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
  const char* teams[] = {"11cb48", "6214e9", "6c71a0", "b436b2", "ee9e8c"};
  const int gpus[] = {1, 1, 1, 2, 4, 8, 16};
  std::string text = "timestamp,duration,num_gpus,gpu_time,cluster\n";
  char line[160];
  for (int i = 0; i < rows; ++i) {
    const int day = 1 + pick(28), hour = pick(24), minute = pick(60), second = pick(3) == 0 ? 0 : pick(60);
    char submit[40];
    if (form == 's') {
      std::snprintf(submit, sizeof(submit), "%d", ((day * 24 + hour) * 60 + minute) * 60 + second);
    } else {
      std::snprintf(submit, sizeof(submit), "2017-10-%02d %02d:%02d:%02d", day, hour, minute, second);
    }
    const int g = gpus[pick(7)];
    const double duration = pick(2) == 0 ? pick(100000) : pick(100000) + 0.5;
    std::snprintf(line, sizeof(line), "%s%s,%.1f,%d,%.1f,%s%s", pick(20) == 0 ? " " : "", submit, duration, g,
                  duration * g, teams[pick(5)], pick(10) == 0 ? "\r\n" : "\n");
    text += line;
    if (pick(50) == 0) text += "\n";
  }
  return text;
}

// Reads `text` as a trace (Philly unless `base` says otherwise) in one pass and with a split
// allowed: both reads must give the same result, jobs (every field, ids included), notes and
// errors alike; and the second read must have split the text exactly when `splits` says.
void ExpectSplitReadsAsOne(const std::string& text, const std::string& what, bool splits, bool skip_bad_rows = false,
                           const TraceOptions& base = {}) {
  // (One file per test: ctest runs the tests of this binary at once.)
  const std::string path =
      ::testing::TempDir() + "/split_trace_" + ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".csv";
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
  }
  TraceOptions one = base;
  one.skip_bad_rows = skip_bad_rows;
  one.split_min_bytes = std::numeric_limits<size_t>::max();
  TraceOptions split = one;
  split.split_min_bytes = 0;
  auto a = ReadCompactTrace(path, one);
  auto b = ReadCompactTrace(path, split);
  ASSERT_EQ(a.ok(), b.ok()) << what << ": " << a.status().ToString() << " / " << b.status().ToString();
  if (!a.ok()) {
    EXPECT_EQ(b.status().ToString(), a.status().ToString()) << what;
    EXPECT_FALSE(splits) << what << ": the read failed, so it cannot have been split";
    return;
  }
  EXPECT_FALSE(a->info.read_in_halves) << what;
  EXPECT_EQ(b->info.read_in_halves, splits) << what;
  EXPECT_EQ(b->info.format, a->info.format) << what;
  EXPECT_EQ(b->info.bad_rows_skipped, a->info.bad_rows_skipped) << what;
  EXPECT_EQ(b->info.warnings, a->info.warnings) << what;
  EXPECT_EQ(b->jobs.shapes(), a->jobs.shapes()) << what;
  ASSERT_EQ(b->jobs.size(), a->jobs.size()) << what;
  for (size_t i = 0; i < a->jobs.size(); ++i) {
    ASSERT_EQ(Everything(b->jobs.Job(i)), Everything(a->jobs.Job(i))) << what << ": job " << i;
  }
}

TEST_F(CompactTraceTest, TraceReadInHalvesIsTheTraceReadInOnePass) {
  // Given random Philly-form traces (blank lines, CRLF, spaces, shared submit times, shapes first
  // seen in the second half), expect a read that may split the text in two to give exactly the
  // jobs, ids, shapes and notes of a read in one pass.
  for (uint32_t seed : {1u, 2u, 3u}) {
    const std::string text = RandomPhilly(3000, seed);
    ExpectSplitReadsAsOne(text, "seed " + std::to_string(seed), /*split=*/true);
  }
  // Jobs of a shape that the first half never has.
  std::string text = RandomPhilly(1000, 4);
  text += "2017-10-02 01:02:03,10.0,3,30.0,newteam\n";
  ExpectSplitReadsAsOne(text, "a shape only in the second half", /*split=*/true);
  ExpectSplitReadsAsOne(RandomPhilly(3000, 5, 's'), "seconds", /*split=*/true);
}

// `text` with `row` put where it becomes the first row of a split read's second half: at a line
// start p such that the first LF at or after the middle of the new text ends the line before p.
std::string WithRowStartingSecondHalf(const std::string& text, const std::string& row) {
  for (size_t p = text.find('\n', text.size() / 2 - std::min<size_t>(text.size() / 2, 400)) + 1; p < text.size();
       p = text.find('\n', p) + 1) {
    std::string candidate = text.substr(0, p) + row + text.substr(p);
    if (candidate.find('\n', candidate.size() / 2) + 1 == p) return candidate;
  }
  ADD_FAILURE() << "no line start makes the row the second half's first";
  return text;
}

TEST_F(CompactTraceTest, TraceWithAnythingIrregularIsReadInOnePass) {
  // Given traces a split would get wrong if it did not step back (a bad row in either half, when
  // failing and when skipping; seconds in one half and datetimes in the other; a quoted field),
  // expect the same error, or the same jobs and warnings, as a read in one pass.
  const std::string good = RandomPhilly(2000, 7);
  const size_t mid = good.find('\n', good.size() / 2) + 1;
  auto with_row_at = [&](size_t at, const std::string& row) { return good.substr(0, at) + row + good.substr(at); };
  const std::string bad_row = "2017-10-03 00:00:00,abc,1,1.0,11cb48\n";
  for (bool skip : {false, true}) {
    const std::string mode = skip ? " (skipping)" : "";
    ExpectSplitReadsAsOne(with_row_at(mid + good.substr(mid).find('\n') + 1, bad_row), "bad row in the second half" + mode,
                          false, skip);
    ExpectSplitReadsAsOne(with_row_at(good.find('\n') + 1, bad_row), "bad row in the first half" + mode, false, skip);
    ExpectSplitReadsAsOne(with_row_at(mid, "2017-10-03 00:00:00,1.0,1,1.0\n"), "short row at the split" + mode, false,
                          skip);
    // A byte order mark where the second half starts belongs to that row (a reader would drop
    // one at the start of its text).
    ExpectSplitReadsAsOne(WithRowStartingSecondHalf(good, "\xEF\xBB\xBF"), "a byte order mark at the split" + mode,
                          false, skip);
  }
  // Datetimes in the first half and seconds in the second, split where the forms change (each
  // half is of one form on its own): seconds rows are added until the middle falls in the last
  // datetime row.
  const std::string seconds = RandomPhilly(4000, 8, 's');
  std::string mixed = good;
  if (mixed.back() != '\n') mixed += '\n';
  const size_t forms_change = mixed.size();
  for (size_t at = seconds.find('\n') + 1; mixed.find('\n', mixed.size() / 2) + 1 != forms_change;) {
    ASSERT_LT(at, seconds.size()) << "the seconds rows ran out before the halves met";
    const size_t end = seconds.find('\n', at) + 1;
    mixed += seconds.substr(at, end - at);
    at = end;
  }
  ExpectSplitReadsAsOne(mixed, "datetimes, then seconds", false);
  ExpectSplitReadsAsOne(with_row_at(mid, "2017-10-03 00:00:00,5.0,1,5.0,\"quoted\"\n"), "a quoted field", false);

  // A row whose submit and end are of two forms, first in the second half: only a trace's first
  // good row may be so, and it is not the trace's first.
  TraceOptions generic;
  generic.columns = {{"submit", "start"}, {"end", "stop"}, {"gpus", "gpus"}};
  std::string spans = "start,stop,gpus\n";
  for (int i = 0; i < 4000; ++i) {
    char row[96];
    std::snprintf(row, sizeof(row), "2017-10-%02d 01:%02d:00,2017-10-%02d 03:%02d:00,%d\n", 1 + i % 27, i % 60,
                  1 + i % 27, i % 60, 1 + i % 4);
    spans += row;
  }
  ExpectSplitReadsAsOne(spans, "generic csv with end times", true, false, generic);
  for (bool skip : {false, true}) {
    ExpectSplitReadsAsOne(WithRowStartingSecondHalf(spans, "2017-10-02 00:00:00,1506906000,1\n"),
                          std::string("a row of two forms first in the second half") + (skip ? " (skipping)" : ""), false,
                          skip, generic);
  }
}

}  // namespace
}  // namespace gpufleet::sim
