#include "node/burn_in.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpufleet::node {
namespace {

using model::BurnInMeasurement;
using model::BurnInReport;
using model::GpuHealth;
using ::testing::HasSubstr;

const model::GpuModel& H100() {
  const model::GpuModel* m = model::GpuCatalog::BuiltIn().Find("H100");
  EXPECT_NE(m, nullptr);
  return *m;
}

BurnInMeasurement M(const std::string& name, int gpu, double value, const std::string& unit = "TFLOPS") {
  BurnInMeasurement m;
  m.name = name;
  m.gpu = gpu;
  m.value = value;
  m.unit = unit;
  return m;
}

// A healthy 2-GPU H100 node on the CUDA path: every figure a little over its reference.
BurnInReport HealthyH100() {
  BurnInReport r;
  r.path = "cuda";
  r.gpu_model = "H100";
  r.gpus = 2;
  for (int g = 0; g < 2; ++g) {
    r.tests.push_back(M("matmul_bf16", g, 700));
    r.tests.push_back(M("matmul_fp16", g, 710));
    r.tests.push_back(M("memory_bandwidth", g, 2900, "GB/s"));
    r.tests.push_back(M("h2d_bandwidth", g, 50, "GB/s"));
    GpuHealth h;
    h.index = g;
    h.ecc_uncorrected = 0;
    h.pcie_gen = h.pcie_max_gen = 5;
    h.pcie_width = h.pcie_max_width = 16;
    h.throttle_reasons = {"sw_power_cap"};
    r.health.push_back(h);
  }
  r.tests.push_back(M("allreduce_busbw", -1, 330, "GB/s"));
  return r;
}

TEST(BurnInJudgeTest, AHealthyNodePassesAgainstTheDatasheet) {
  BurnInReport r = HealthyH100();
  JudgeOptions o;
  o.gpu = &H100();
  Judge(r, o);
  EXPECT_TRUE(r.passed) << Summary(r);
  EXPECT_TRUE(r.problems.empty());
  for (const auto& m : r.tests) {
    EXPECT_GT(m.reference, 0) << m.name;
    EXPECT_THAT(m.basis, HasSubstr("datasheet")) << m.name;
  }
  // bf16 700 over 989 x 0.6: the node's speed against its reference.
  EXPECT_NEAR(r.speed_ratio, 700 / (H100().bf16_tflops * 0.6), 1e-9);
  EXPECT_THAT(Summary(r), HasSubstr("passed"));
}

// Table-driven: each fault alone fails an otherwise healthy node, with a problem naming it.
TEST(BurnInJudgeTest, EachFaultQuarantinesWithAReasonThatNamesIt) {
  struct Case {
    const char* what;
    void (*spoil)(BurnInReport&);
    const char* expect;
  };
  const Case cases[] = {
      {"slow matmul", [](BurnInReport& r) { r.tests[0].value = 300; }, "matmul_bf16 on GPU 0 at 300 TFLOPS, 51% of"},
      {"slow memory", [](BurnInReport& r) { r.tests[2].value = 1500; }, "memory_bandwidth on GPU 0"},
      {"ECC", [](BurnInReport& r) { r.health[1].ecc_uncorrected = 3; }, "GPU 1: 3 uncorrected ECC errors"},
      {"retirement", [](BurnInReport& r) { r.health[0].retirement_pending = true; }, "row remap is pending"},
      {"XID", [](BurnInReport& r) { r.health[0].xid_errors = {79}; }, "GPU 0: XID error 79"},
      {"PCIe width", [](BurnInReport& r) { r.health[1].pcie_width = 8; }, "PCIe link trained at x8 of x16"},
      {"NVLink", [](BurnInReport& r) { r.health[0].nvlink_active = 16, r.health[0].nvlink_total = 18; }, "2 of 18 NVLinks down"},
      {"thermal", [](BurnInReport& r) { r.health[0].throttle_reasons = {"hw_thermal"}, r.health[0].max_temperature_c = 93; },
       "throttled under load (hw_thermal), up to 93 C"},
      {"error", [](BurnInReport& r) { r.tests[1].error = "RuntimeError: CUDA error"; }, "failed to run: RuntimeError"},
  };
  for (const auto& c : cases) {
    BurnInReport r = HealthyH100();
    c.spoil(r);
    JudgeOptions o;
    o.gpu = &H100();
    Judge(r, o);
    EXPECT_FALSE(r.passed) << c.what;
    ASSERT_EQ(r.problems.size(), 1u) << c.what << ": " << Summary(r);
    EXPECT_THAT(r.problems[0], HasSubstr(c.expect)) << c.what;
  }
}

TEST(BurnInJudgeTest, PowerCapThrottlingAtFullLoadIsNormal) {
  BurnInReport r = HealthyH100();
  r.health[0].throttle_reasons = {"sw_power_cap"};
  JudgeOptions o;
  o.gpu = &H100();
  Judge(r, o);
  EXPECT_TRUE(r.passed) << Summary(r);
}

TEST(BurnInJudgeTest, TheThresholdIsTheShareOfTheReference) {
  BurnInReport r = HealthyH100();
  const double ref = H100().bf16_tflops * 0.6;
  r.tests[0].value = ref * 0.86;
  JudgeOptions o;
  o.gpu = &H100();
  Judge(r, o);
  EXPECT_TRUE(r.passed) << Summary(r);
  r.tests[0].value = ref * 0.84;
  Judge(r, o);
  EXPECT_FALSE(r.passed);
  o.threshold = 0.80;
  Judge(r, o);
  EXPECT_TRUE(r.passed) << "a lower threshold lets it through: " << Summary(r);
}

// The CPU path has no datasheet: the first node sets the fleet's mark, a later one far below the
// fleet's median is quarantined, one near it passes.
TEST(BurnInJudgeTest, TheCpuPathIsJudgedAgainstTheFleet) {
  auto cpu_node = [](double matmul, double mem) {
    BurnInReport r;
    r.path = "cpu";
    r.gpu_model = "T4";
    r.tests = {M("matmul_fp32", 0, matmul), M("matmul_fp32", 1, matmul), M("memory_bandwidth", 0, mem, "GB/s"),
               M("allreduce_busbw", -1, 1.0, "GB/s")};
    BurnInMeasurement skipped;
    skipped.name = "h2d_bandwidth";
    skipped.skipped = "no CUDA device";
    r.tests.push_back(skipped);
    return r;
  };
  JudgeOptions o;
  o.gpu = model::GpuCatalog::BuiltIn().Find("T4");
  BurnInReport first = cpu_node(0.2, 5);
  Judge(first, o);
  EXPECT_TRUE(first.passed) << "nothing to compare with: " << Summary(first);
  for (const auto& m : first.tests) EXPECT_EQ(m.reference, 0) << m.name << ": no datasheet on the CPU path";

  o.fleet = FleetMedians({&first});
  EXPECT_EQ(o.fleet.nodes, 1);
  EXPECT_DOUBLE_EQ(o.fleet.by_test["matmul_fp32"], 0.2);
  BurnInReport slow = cpu_node(0.02, 0.5);
  Judge(slow, o);
  EXPECT_FALSE(slow.passed);
  EXPECT_THAT(Summary(slow), HasSubstr("matmul_fp32 on GPU 0 at 0.020 TFLOPS, 10% of the 0.20 TFLOPS reference "
                                       "(fleet median (1 node)); needs 85%"));
  BurnInReport fine = cpu_node(0.19, 4.8);
  Judge(fine, o);
  EXPECT_TRUE(fine.passed) << Summary(fine);
  // A figure below 0.1 keeps two significant digits (not "0.00 TFLOPS", nor an exponent).
  BurnInReport tiny = cpu_node(0.0004, 0.5);
  Judge(tiny, o);
  EXPECT_THAT(Summary(tiny), HasSubstr("matmul_fp32 on GPU 0 at 0.00040 TFLOPS, 0% of the 0.20 TFLOPS reference"));
  BurnInReport tinier = cpu_node(0.00005, 0.5);
  Judge(tinier, o);
  EXPECT_THAT(Summary(tinier), HasSubstr("matmul_fp32 on GPU 0 at 0.000050 TFLOPS"));
}

TEST(BurnInJudgeTest, FleetMediansTakeEachNodesOwnMedianFirst) {
  BurnInReport a, b, c;
  a.tests = {M("matmul_fp32", 0, 1), M("matmul_fp32", 1, 3)};  // node median 2
  b.tests = {M("matmul_fp32", 0, 10)};
  c.tests = {M("matmul_fp32", 0, 4)};
  FleetReference f = FleetMedians({&a, &b, &c});
  EXPECT_EQ(f.nodes, 3);
  EXPECT_DOUBLE_EQ(f.by_test["matmul_fp32"], 4);
}

TEST(BurnInJudgeTest, HostLinkReferenceFollowsTheSlot) {
  const model::GpuModel& h100 = H100();
  Reference gen5 = DatasheetReference(h100, "h2d_bandwidth", 5, 16);
  Reference gen4 = DatasheetReference(h100, "h2d_bandwidth", 4, 16);
  EXPECT_NEAR(gen5.value, 3.938 * 16 * 0.75, 1e-9);
  EXPECT_NEAR(gen4.value * 2, gen5.value, 0.2);
  EXPECT_THAT(gen4.basis, HasSubstr("PCIe gen4 x16"));
  EXPECT_EQ(DatasheetReference(h100, "h2d_bandwidth").value, 0) << "an unknown slot has no reference";
  const model::GpuModel* t4 = model::GpuCatalog::BuiltIn().Find("T4");
  ASSERT_NE(t4, nullptr);
  EXPECT_EQ(DatasheetReference(*t4, "allreduce_busbw").value, 0) << "PCIe-only cards: judged by the fleet";
  EXPECT_EQ(DatasheetReference(*t4, "matmul_bf16").value, 0) << "T4 has no bf16";
}

TEST(BurnInParseTest, ReadsTheSuitesDocument) {
  auto r = ParseSuiteOutput(R"({"suite": 1, "path": "cpu", "torch": "2.1.2", "backend": "gloo", "timed_out": false,
    "tests": [{"name": "matmul_fp32", "gpu": 0, "value": 0.12, "unit": "TFLOPS", "seconds": 1.0},
              {"name": "h2d_bandwidth", "gpu": null, "skipped": "no CUDA device"},
              {"name": "matmul_bf16", "gpu": 0, "error": "RuntimeError: x"}]})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->path, "cpu");
  EXPECT_EQ(r->torch, "2.1.2");
  ASSERT_EQ(r->tests.size(), 3u);
  EXPECT_DOUBLE_EQ(r->tests[0].value, 0.12);
  EXPECT_EQ(r->tests[1].gpu, -1);
  EXPECT_EQ(r->tests[1].skipped, "no CUDA device");
  EXPECT_EQ(r->tests[2].error, "RuntimeError: x");
}

TEST(BurnInParseTest, BadOutputSaysWhatIsWrong) {
  struct Case {
    const char* text;
    const char* expect;
  };
  const Case cases[] = {
      {"Traceback (most recent call last):", "not a JSON object (the suite printed: Traceback"},
      {R"({"path": "tpu", "tests": []})", "path must be \"cuda\" or \"cpu\", got 'tpu'"},
      {R"({"path": "cpu"})", "tests must be a list"},
      {R"({"path": "cpu", "tests": [{"gpu": 0}]})", "tests[0].name is missing"},
      {R"({"path": "cpu", "tests": [{"name": "x", "value": "fast"}]})", "tests[0].value is not a number"},
      {R"({"path": "cpu", "tests": [{"name": "x", "value": -1}]})", "tests[0].value must be a finite number >= 0"},
  };
  for (const auto& c : cases) {
    auto r = ParseSuiteOutput(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_THAT(r.status().message(), HasSubstr(c.expect)) << c.text;
  }
}

}  // namespace
}  // namespace gpufleet::node
