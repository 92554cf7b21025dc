#include "plan/demand.h"

#include <gtest/gtest.h>

#include <numeric>

namespace gpufleet::plan {
namespace {

// 2024-01-01T00:00:00Z was a Monday.
constexpr int64_t kMonday = 1704067200;

sim::TraceJob Job(const std::string& id, int64_t submit_s, int gpus, Duration work,
                  std::vector<std::string> models = {}) {
  sim::TraceJob j;
  j.id = id;
  j.spec.submit = Time::FromSeconds(submit_s);
  j.spec.gpus_per_node = gpus;
  j.spec.gpu_models = std::move(models);
  j.work = work;
  return j;
}

TEST(HourOfWeekTest, MondayMidnightUtcIsZeroAndSundayLastHourIs167) {
  // Given known weekdays, expect Monday 00:00 = 0, the epoch (a Thursday) = 72, Sunday 23:xx = 167.
  EXPECT_EQ(HourOfWeek(Time::FromSeconds(kMonday)), 0);
  EXPECT_EQ(HourOfWeek(Time::Epoch()), 72);
  EXPECT_EQ(HourOfWeek(Time::FromSeconds(kMonday - 1)), 167);
  EXPECT_EQ(HourOfWeek(Time::FromSeconds(kMonday + 25 * 3600 + 59)), 25);
  // Before 1970 too: 1969-12-29 was a Monday.
  EXPECT_EQ(HourOfWeek(Time::FromSeconds(-3 * 86400)), 0);
  EXPECT_EQ(FloorToHour(Time::FromSeconds(-1)), Time::FromSeconds(-3600));
}

TEST(DemandTest, JobSpreadsItsGpuHoursOverTheHoursItWouldRun) {
  // Given a 4-GPU job submitted at 00:30 running 2 h on A100, expect 2, 4, 2 GPU-hours in the
  // hours 00, 01, 02.
  DemandOptions o;
  auto d = BuildDemand({Job("a", kMonday + 1800, 4, Duration::Hours(2), {"A100"})}, o);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->start, Time::FromSeconds(kMonday));
  EXPECT_EQ(d->hours, 3);
  ASSERT_EQ(d->gpu_hours.count("A100"), 1u);
  EXPECT_EQ(d->gpu_hours.at("A100"), (std::vector<double>{2, 4, 2}));
}

TEST(DemandTest, JobsWithoutModelGetTheDefaultAndModelsStaySeparate) {
  // Given one job naming V100 and one naming none, with default "H100", expect two series of
  // equal length, and each job's GPU-hours in its own.
  DemandOptions o;
  o.default_gpu_model = "H100";
  auto d = BuildDemand({Job("a", kMonday, 1, Duration::Hours(1), {"V100", "A100"}),
                        Job("b", kMonday + 3600, 8, Duration::Minutes(30))},
                       o);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ASSERT_EQ(d->gpu_hours.size(), 2u);
  EXPECT_EQ(d->gpu_hours.at("V100"), (std::vector<double>{1, 0}));
  EXPECT_EQ(d->gpu_hours.at("H100"), (std::vector<double>{0, 4}));
}

TEST(DemandTest, FractionalGpusCountTheirShare) {
  // Given a half-GPU job for one hour, expect 0.5 GPU-hours.
  sim::TraceJob j = Job("a", kMonday, 1, Duration::Hours(1), {"T4"});
  j.spec.gpu_milli = 500;
  auto d = BuildDemand({j}, {});
  ASSERT_TRUE(d.ok());
  EXPECT_DOUBLE_EQ(d->gpu_hours.at("T4")[0], 0.5);
}

TEST(DemandTest, WorkOnTheReferenceGpuIsScaledToTheJobsModel) {
  // Given a catalog where "fast" has twice the TFLOPS and bandwidth of "ref", a job of 2 h of
  // reference work on "fast" needs 1 h.
  model::GpuCatalog catalog;
  model::GpuModel ref;
  ref.name = "ref";
  ref.fp16_tflops = 100;
  ref.mem_bw_gbs = 1000;
  model::GpuModel fast = ref;
  fast.name = "fast";
  fast.fp16_tflops = 200;
  fast.mem_bw_gbs = 2000;
  catalog.Add(ref);
  catalog.Add(fast);
  DemandOptions o;
  o.catalog = &catalog;
  o.reference_gpu_model = "ref";
  auto d = BuildDemand({Job("a", kMonday, 1, Duration::Hours(2), {"FAST"})}, o);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->gpu_hours.at("fast"), (std::vector<double>{1}));
}

TEST(DemandTest, WindowClipsJobsAndTotalsAreConserved) {
  // Given a window of hours 1..3 and a job running hours 0..4, expect only the window's hours.
  DemandOptions o;
  o.start = Time::FromSeconds(kMonday + 3600);
  o.end = Time::FromSeconds(kMonday + 3 * 3600);
  auto d = BuildDemand({Job("a", kMonday, 2, Duration::Hours(4), {"A100"})}, o);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->hours, 2);
  const auto& v = d->gpu_hours.at("A100");
  EXPECT_DOUBLE_EQ(std::accumulate(v.begin(), v.end(), 0.0), 4.0);
}

TEST(DemandTest, BadInputsAreClearErrors) {
  // Given no jobs, a job without model and no default, or a too-long window, expect
  // InvalidArgument with a message that says which.
  auto empty = BuildDemand({}, {});
  EXPECT_EQ(empty.status().code(), StatusCode::kInvalidArgument);
  auto no_model = BuildDemand({Job("j7", kMonday, 1, Duration::Hours(1))}, {});
  ASSERT_FALSE(no_model.ok());
  EXPECT_NE(no_model.status().message().find("j7"), std::string::npos);
  DemandOptions o;
  o.max_hours = 10;
  auto longer = BuildDemand({Job("a", kMonday, 1, Duration::Hours(100), {"A100"})}, o);
  EXPECT_EQ(longer.status().code(), StatusCode::kInvalidArgument);
  // The message says the window and how to plan a part of it.
  EXPECT_NE(longer.status().message().find("spans 100 hours (" + FormatIso8601(Time::FromSeconds(kMonday))), std::string::npos)
      << longer.status().message();
  EXPECT_NE(longer.status().message().find("give --from and --to to plan a window of it"), std::string::npos)
      << longer.status().message();
}

}  // namespace
}  // namespace gpufleet::plan
