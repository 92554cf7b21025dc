#include "agent/node_check.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "node/burn_in.h"

namespace gpufleet::agent {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

std::unique_ptr<FakeGpuProbe> Fake(const std::string& faults, const std::string& spec = "2xH100") {
  FakeGpuOptions o;
  o.spec = spec;
  o.faults = faults;
  auto p = FakeGpuProbe::Create(o, model::GpuCatalog::BuiltIn());
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? std::move(*p) : nullptr;
}

// A stand-in suite (a shell script printing a fixed document) so that this unit test runs the
// check's plumbing without PyTorch; tests/node_check_test.sh runs the real suite.
std::string FakeSuite(const std::string& dir, const std::string& json, int exit_code = 0) {
  fs::create_directories(dir);
  const std::string path = dir + "/suite.sh";
  std::ofstream(path) << "#!/bin/sh\n"
                      << "echo \"$@\" > " << dir << "/args\n"
                      << "cat <<'JSON'\n" << json << "\nJSON\n"
                      << "exit " << exit_code << "\n";
  fs::permissions(path, fs::perms::owner_all);
  return path;
}

class NodeCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / ("node_check_test_" + std::to_string(::getpid()))).string();
  }
  void TearDown() override { fs::remove_all(dir_); }
  NodeCheckOptions Options(const std::string& suite) {
    NodeCheckOptions o;
    o.python = "/bin/sh";
    o.suite = suite;
    o.time_limit = Duration::Seconds(20);
    o.sample_every = Duration::Millis(50);
    return o;
  }
  std::string Args() {
    std::ifstream in(dir_ + "/args");
    std::string s;
    std::getline(in, s);
    return s;
  }
  std::string dir_;
};

const char* kCpuDoc = R"({"suite": 1, "path": "cpu", "torch": "1.13.1", "backend": "gloo",
  "tests": [{"name": "matmul_fp32", "gpu": 0, "value": 0.01, "unit": "TFLOPS"}]})";

TEST_F(NodeCheckTest, HealthyFakeNodeGivesAReportWithItsHealthAndTheSuitesFigures) {
  auto probe = Fake("");
  auto r = RunNodeCheck(*probe, Options(FakeSuite(dir_, kCpuDoc)));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->path, "cpu");
  EXPECT_EQ(r->gpus, 2);
  ASSERT_EQ(r->health.size(), 2u);
  EXPECT_EQ(r->health[1].ecc_uncorrected, 0);
  EXPECT_EQ(r->health[0].nvlink_active, 18);
  EXPECT_THAT(Args(), HasSubstr("suite --device auto --time-limit 20 --gpus 0,1"));
  node::JudgeOptions jo;
  jo.gpu = model::GpuCatalog::BuiltIn().Find("H100");
  node::Judge(*r, jo);
  EXPECT_TRUE(r->passed) << node::Summary(*r);
}

TEST_F(NodeCheckTest, DeclaredFaultsReachTheReportAndFailTheJudge) {
  auto probe = Fake("gpu=1 ecc=3 throttle=hw_thermal temp=93; gpu=0 xid=79; slow=10");
  auto r = RunNodeCheck(*probe, Options(FakeSuite(dir_, kCpuDoc)));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_THAT(Args(), HasSubstr("--slowdown 10"));
  EXPECT_EQ(r->health[1].ecc_uncorrected, 3);
  EXPECT_EQ(r->health[1].max_temperature_c, 93);
  EXPECT_EQ(r->health[0].xid_errors, std::vector<int>{79});
  node::Judge(*r, {});
  EXPECT_FALSE(r->passed);
  EXPECT_THAT(node::Summary(*r), HasSubstr("GPU 1: 3 uncorrected ECC errors"));
  EXPECT_THAT(node::Summary(*r), HasSubstr("GPU 0: XID error 79"));
  EXPECT_THAT(node::Summary(*r), HasSubstr("throttled under load (hw_thermal), up to 93 C"));
}

TEST_F(NodeCheckTest, ASuiteThatCannotRunSaysWhy) {
  auto probe = Fake("");
  auto missing = RunNodeCheck(*probe, Options(dir_ + "/nope.py"));
  EXPECT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("not found"));
  auto no_torch = RunNodeCheck(*probe, Options(FakeSuite(dir_, "", 3)));
  ASSERT_FALSE(no_torch.ok());
  EXPECT_THAT(no_torch.status().message(), HasSubstr("cannot import torch"));
  // What the interpreter said, without its line break, and every way to name another one.
  const std::string says = dir_ + "/says.sh";
  std::ofstream(says) << "#!/bin/sh\necho \"ModuleNotFoundError: No module named 'torch'\" >&2\nexit 3\n";
  fs::permissions(says, fs::perms::owner_all);
  auto said = RunNodeCheck(*probe, Options(says));
  ASSERT_FALSE(said.ok());
  EXPECT_THAT(said.status().message(), HasSubstr("(ModuleNotFoundError: No module named 'torch'); install PyTorch"));
  // The suite's own line carries advice too: only its cause is kept, so the advice is given once.
  const std::string own = dir_ + "/own.sh";
  std::ofstream(own) << "#!/bin/sh\necho \"burnin: PyTorch cannot be imported by /usr/bin/python3 (No module named "
                        "'torch'). Install it for this interpreter (Debian: apt-get install python3-torch, which is "
                        "for /usr/bin/python3; or pip install torch) or run the script with a python that has it.\" "
                        ">&2\nexit 3\n";
  fs::permissions(own, fs::perms::owner_all);
  auto owned = RunNodeCheck(*probe, Options(own));
  ASSERT_FALSE(owned.ok());
  EXPECT_THAT(owned.status().message(), HasSubstr("cannot import torch (No module named 'torch'); install PyTorch"));
  EXPECT_THAT(owned.status().message(), Not(HasSubstr("Install it for this interpreter")));
  for (const char* way : {"gpufleet agent --burn-in-python PATH", "gpufleet node check --python PATH",
                          "GPUFLEET_BURNIN_PYTHON=PATH"}) {
    EXPECT_THAT(said.status().message(), HasSubstr(way));
  }
  auto garbage = RunNodeCheck(*probe, Options(FakeSuite(dir_, "Traceback (most recent call last):")));
  ASSERT_FALSE(garbage.ok());
  EXPECT_THAT(garbage.status().message(), HasSubstr("not a JSON object"));
}

TEST(FakeFaultsTest, BadFaultsSayWhatIsWrong) {
  struct Case {
    const char* text;
    const char* expect;
  };
  const Case cases[] = {
      {"gpu=9 ecc=1", "GPU 9 does not exist (the node has 2)"},
      {"ecc=1", "'ecc' needs gpu=I first"},
      {"gpu=0 ecc=lots", "ecc must be a whole number >= 0, got 'lots'"},
      {"gpu=0 fire=1", "unknown key 'fire'"},
      {"bogus=1", "unknown key 'bogus'"},
      {"slow=0.5", "slow must be a number >= 1"},
      {"gpu=0 nvlink_down=1", "GPU 0 has no NVLink"},
      {"gpu0", "expected KEY=VALUE"},
  };
  for (const auto& c : cases) {
    auto f = ParseFakeFaults(c.text, 2, /*nvlink=*/false);
    ASSERT_FALSE(f.ok()) << c.text;
    EXPECT_THAT(f.status().message(), HasSubstr(c.expect)) << c.text;
  }
}

TEST(FakeFaultsTest, FaultsWithoutFakeGpusAreRefusedBeforeNvmlIsLookedFor) {
  FakeGpuOptions o;
  o.faults = "gpu=0 ecc=3";
  auto p = OpenProbe(o, "/nonexistent/libnvidia-ml.so.1", model::GpuCatalog::BuiltIn());
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr("--fake-faults needs --fake-gpus"));
  FakeGpuOptions t;
  t.telemetry_path = "/tmp/replay.txt";
  auto q = OpenProbe(t, "/nonexistent/libnvidia-ml.so.1", model::GpuCatalog::BuiltIn());
  ASSERT_FALSE(q.ok());
  EXPECT_THAT(q.status().message(), HasSubstr("--fake-telemetry needs --fake-gpus"));
}

TEST(FakeDriverTest, FakeNodesReportADriverAndComputeCapability) {
  FakeGpuOptions o;
  o.spec = "1xA100";
  auto p = FakeGpuProbe::Create(o, model::GpuCatalog::BuiltIn());
  ASSERT_TRUE(p.ok());
  EXPECT_EQ((*p)->Driver().driver_version, "550.54.15");
  EXPECT_EQ((*p)->Driver().cuda_version, "12.4");
  EXPECT_EQ((*(*p)->Devices())[0].compute_capability, "8.0");
  o.driver = "525.60.13/12.0";
  auto old = FakeGpuProbe::Create(o, model::GpuCatalog::BuiltIn());
  ASSERT_TRUE(old.ok());
  EXPECT_EQ((*old)->Driver().driver_version, "525.60.13");
  o.driver = "525";
  EXPECT_FALSE(FakeGpuProbe::Create(o, model::GpuCatalog::BuiltIn()).ok());
}

}  // namespace
}  // namespace gpufleet::agent
