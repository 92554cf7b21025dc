#include "sim/compact_trace.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace gpufleet::sim
