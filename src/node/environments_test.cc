#include "node/environments.h"

#include <algorithm>
#include <cstdlib>
#include <set>

#include <gtest/gtest.h>

#include "model/gpu_catalog.h"

namespace gpufleet::node {
namespace {

const std::string kShippedTable = std::string(GPUFLEET_SOURCE_DIR) + "/data/environments.yaml";

// One CUDA row and one CPU row, small enough to read in a test.
const char* const kTwoRows = R"(environments:
  - name: pytorch-2.5-cu124
    pytorch: "2.5.1"
    cuda: "12.4"
    min_driver: "550.54.14"
    archs: ["5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "9.0"]
    python: ">=3.9, <=3.12"
    image: pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime
    pip: pip install torch==2.5.1 --index-url https://download.pytorch.org/whl/cu124
  - name: pytorch-2.5-cpu
    pytorch: "2.5.1"
    pip: pip install torch==2.5.1 --index-url https://download.pytorch.org/whl/cpu
)";

Environment Cu124() {
  Environment e;
  e.name = "pytorch-2.5-cu124";
  e.pytorch = "2.5.1";
  e.cuda = "12.4";
  e.min_driver = "550.54.14";
  e.archs = {"5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "9.0"};
  e.pip = "pip install torch==2.5.1";
  return e;
}

Environment Cpu() {
  Environment e;
  e.name = "pytorch-2.5-cpu";
  e.pytorch = "2.5.1";
  e.pip = "pip install torch==2.5.1";
  return e;
}

NodeFacts Node(std::string driver, std::vector<std::string> ccs, std::string cuda = "") {
  NodeFacts n;
  n.driver_version = std::move(driver);
  n.cuda_version = std::move(cuda);
  n.compute_capabilities = std::move(ccs);
  return n;
}

Version V(std::string_view text) {
  Result<Version> v = Version::Parse(text);
  EXPECT_TRUE(v.ok()) << text << ": " << v.status().ToString();
  return v.ok() ? *v : Version{};
}

TEST(VersionTest, ComparesNumericallyPartByPartWithMissingPartsZero) {
  // Given dotted versions, expect numeric (not text) order and missing parts read as 0.
  EXPECT_LT(V("525.60.13"), V("550.54.14"));
  EXPECT_LT(V("550.54.14"), V("550.54.15"));
  EXPECT_LT(V("12.9"), V("12.10"));
  EXPECT_GT(V("570.26"), V("560.35.05"));
  EXPECT_EQ(V("550.54"), V("550.54.0"));
  EXPECT_EQ(V(" 12.4 "), V("12.4"));
  EXPECT_EQ(V("550.054.14").ToString(), "550.54.14");
}

TEST(VersionTest, RejectsWhatIsNotDigitsAndDots) {
  // Given text that is not a dotted number, expect InvalidArgument quoting it.
  for (const char* bad : {"", "abc", "12.", ".12", "12..4", "v12.4", "12.x", "12,4", "-1", "1234567890.1"}) {
    Result<Version> v = Version::Parse(bad);
    EXPECT_FALSE(v.ok()) << "'" << bad << "' parsed";
    if (!v.ok()) {
      EXPECT_NE(v.status().message().find("is not a version"), std::string::npos);
    }
  }
}

TEST(EnvironmentCompatibilityTest, TableOfRules) {
  // Given a CUDA 12.4 build (kernels 5.0..9.0, min driver 550.54.14) and a CPU-only build, expect
  // each node's verdict: empty when it can run the build, else the sentence that names the fix.
  struct Case {
    const char* what;
    Environment env;
    NodeFacts node;
    const char* want;  // "" = runs
  };
  const Case cases[] = {
      {"driver too old", Cu124(), Node("525.60.13", {"8.0"}),
       "driver 525.60.13 too old for CUDA 12.4 (pytorch-2.5-cu124); needs >= 550.54.14"},
      {"driver one patch short", Cu124(), Node("550.54.13", {"8.0"}),
       "driver 550.54.13 too old for CUDA 12.4 (pytorch-2.5-cu124); needs >= 550.54.14"},
      {"exact minimum", Cu124(), Node("550.54.14", {"8.0"}), ""},
      {"newer driver", Cu124(), Node("570.124.06", {"9.0", "9.0"}, "12.8"), ""},
      {"newer major branch, fewer parts", Cu124(), Node("560.35", {"7.5"}), ""},
      {"no driver", Cu124(), Node("", {}),
       "no NVIDIA driver reported; pytorch-2.5-cu124 needs driver >= 550.54.14"},
      {"arch missing", Cu124(), Node("550.54.15", {"3.7"}),
       "GPU architecture 3.7 (compute capability of GPU 0) is not in pytorch-2.5-cu124's builds "
       "(5.0 6.0 7.0 7.5 8.0 8.6 9.0)"},
      {"second GPU's arch missing", Cu124(), Node("550.54.15", {"9.0", "10.0"}),
       "GPU architecture 10.0 (compute capability of GPU 1) is not in pytorch-2.5-cu124's builds "
       "(5.0 6.0 7.0 7.5 8.0 8.6 9.0)"},
      {"same major, higher minor runs older kernels (L4 on sm_86)", Cu124(), Node("550.54.15", {"8.9"}), ""},
      {"P4 6.1 runs sm_60 kernels", Cu124(), Node("550.54.15", {"6.1"}), ""},
      {"driver reports a CUDA below the build's", Cu124(), Node("550.54.15", {"8.0"}, "12.2"),
       "driver 550.54.15 reports CUDA 12.2, older than the 12.4 pytorch-2.5-cu124 needs; update the driver to >= "
       "550.54.14"},
      {"driver reports exactly the build's CUDA", Cu124(), Node("550.54.15", {"8.0"}, "12.4"), ""},
      {"garbled driver", Cu124(), Node("n/a", {"8.0"}),
       "driver version 'n/a' reported by the node is not a version; pytorch-2.5-cu124 needs driver >= 550.54.14"},
      {"garbled capability", Cu124(), Node("550.54.15", {"eight"}),
       "GPU 0 reports compute capability 'eight', not a version like 8.0"},
      {"CPU env, no driver", Cpu(), Node("", {}), ""},
      {"CPU env, old driver and a K80", Cpu(), Node("470.82.01", {"3.7"}), ""},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(EnvironmentTable::WhyNot(c.env, c.node), c.want) << c.what;
  }
}

TEST(EnvironmentTableTest, ParsesRowsAndSupportedKeepsTableOrder) {
  // Given a two-row table, expect both rows read as written, and Supported to name what each node
  // can run in table order.
  Result<EnvironmentTable> t = EnvironmentTable::Parse(kTwoRows, "two.yaml");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->all().size(), 2u);
  const Environment* cu = t->Find("pytorch-2.5-cu124");
  ASSERT_NE(cu, nullptr);
  EXPECT_EQ(cu->min_driver, "550.54.14");
  EXPECT_EQ(cu->archs.size(), 7u);
  EXPECT_EQ(cu->image, "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime");
  EXPECT_TRUE(t->Find("pytorch-2.5-cpu")->cpu_only());
  EXPECT_EQ(t->Find("pytorch-2.5-cu12"), nullptr);

  EXPECT_EQ(t->Supported(Node("550.54.15", {"8.0"})),
            (std::vector<std::string>{"pytorch-2.5-cu124", "pytorch-2.5-cpu"}));
  EXPECT_EQ(t->Supported(Node("535.104.05", {"8.0"})), (std::vector<std::string>{"pytorch-2.5-cpu"}));
  EXPECT_EQ(t->Supported(Node("", {})), (std::vector<std::string>{"pytorch-2.5-cpu"}));
}

TEST(EnvironmentTableTest, ResolveSuggestsTheClosestName) {
  // Given a name one character short of a real one, expect NotFound listing the known names and
  // suggesting the closest; an unrelated word gets the list without a suggestion.
  Result<EnvironmentTable> t = EnvironmentTable::Parse(kTwoRows, "two.yaml");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  Result<const Environment*> found = t->Resolve("pytorch-2.5-cu124");
  ASSERT_TRUE(found.ok());
  EXPECT_EQ((*found)->name, "pytorch-2.5-cu124");

  Result<const Environment*> typo = t->Resolve("pytorch-2.5-cu12");
  ASSERT_FALSE(typo.ok());
  EXPECT_EQ(typo.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(typo.status().message(),
            "unknown environment 'pytorch-2.5-cu12'; known: pytorch-2.5-cu124, pytorch-2.5-cpu "
            "(closest: pytorch-2.5-cu124)");
  Result<const Environment*> unrelated = t->Resolve("tensorflow");
  ASSERT_FALSE(unrelated.ok());
  EXPECT_EQ(unrelated.status().message().find("closest"), std::string::npos) << unrelated.status().message();
}

TEST(EnvironmentTableTest, BadTablesAreErrorsWithLineColumnAndField) {
  // Given each kind of broken table, expect InvalidArgument naming source:line:col and the fault.
  const std::string head = "environments:\n  - name: a\n    pytorch: \"2.5.1\"\n    pip: pip install torch\n";
  struct Case {
    std::string yaml;
    std::string want;
  };
  const Case cases[] = {
      {head + "    cuda: \"12.4\"\n    min_driver: abc\n    archs: [\"8.0\"]\n",
       "t.yaml:6:17: min_driver 'abc' is not a version"},
      {head + "    cuda: \"12.4\"\n    min_driver: \"550.54.14\"\n    archs: [\"8.0\", \"sm_90\"]\n",
       "t.yaml:7:20: archs[1] 'sm_90' is not a compute capability like 8.0"},
      {head + "    cuda: \"12.4\"\n    min_driver: \"550.54.14\"\n    archs: [\"8\"]\n",
       "t.yaml:7:13: archs[0] '8' is not a compute capability like 8.0"},
      {head + "    cuda: \"12.4\"\n    archs: [\"8.0\"]\n", "t.yaml:2:5: min_driver is missing (a)"},
      {head + "    cuda: \"12.4\"\n    min_driver: \"550.54.14\"\n", "t.yaml:2:5: archs is missing or empty (a)"},
      {head + "    min_driver: \"550.54.14\"\n", "t.yaml:5:17: min_driver is set but cuda is empty (a)"},
      {head + "    driver: \"550\"\n",
       "t.yaml:5:5: unknown key 'driver' in an environment; known keys: name, pytorch, cuda, min_driver, archs, "
       "python, image, pip, notes"},
      {head + "  - name: a\n    pytorch: \"2.6.0\"\n    pip: pip install torch\n",
       "t.yaml:5:11: name 'a' is given twice (first on line 2)"},
      {"environments:\n  - pytorch: \"2.5.1\"\n    pip: x\n", "t.yaml:2:5: name is missing"},
      {"environments:\n  - name: a\n    pip: x\n", "t.yaml:2:5: pytorch is missing (a)"},
      {"environments:\n  - name: a\n    pytorch: \"2.5.1\"\n", "t.yaml:2:5: pip is missing (a)"},
      {"environments:\n  - name: a\n    pytorch: two\n    pip: x\n", "t.yaml:3:14: pytorch 'two' is not a version"},
      {"environments:\n  - name: a b\n    pytorch: \"2.5.1\"\n    pip: x\n", "t.yaml:2:11: name 'a b' must be"},
      {"envs: []\n", "t.yaml:1:1: unknown key 'envs' in the top level; known keys: environments"},
      {"environments: {}\n", "t.yaml:1:15: environments must be a list"},
      {"environments:\n  - name: [a\n", "t.yaml:3:1: not valid YAML"},
      {"", "t.yaml:1:1: empty"},
  };
  for (const Case& c : cases) {
    Result<EnvironmentTable> t = EnvironmentTable::Parse(c.yaml, "t.yaml");
    ASSERT_FALSE(t.ok()) << c.yaml;
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(t.status().message().rfind(c.want, 0), 0u) << "got:  " << t.status().message() << "\nwant: " << c.want;
  }
}

TEST(EnvironmentTableTest, MissingFileIsNotFound) {
  // Given a path with no file, expect NotFound naming it.
  Result<EnvironmentTable> t = EnvironmentTable::Load("/nonexistent/environments.yaml");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kNotFound);
  EXPECT_NE(t.status().message().find("/nonexistent/environments.yaml"), std::string::npos);
}

TEST(EnvironmentTableTest, DefaultPathPrefersTheEnvironmentVariable) {
  // Given $GPUFLEET_ENVIRONMENTS, expect DefaultPath to be it; without it, expect LoadDefault to
  // find the shipped table (./data, or the source tree's data/ the binary was built from).
  ::setenv("GPUFLEET_ENVIRONMENTS", "/tmp/my-envs.yaml", 1);
  EXPECT_EQ(EnvironmentTable::DefaultPath(), "/tmp/my-envs.yaml");
  ::unsetenv("GPUFLEET_ENVIRONMENTS");
  EXPECT_NE(EnvironmentTable::DefaultPath(), "/tmp/my-envs.yaml");
  Result<EnvironmentTable> shipped = EnvironmentTable::LoadDefault();
  ASSERT_TRUE(shipped.ok()) << shipped.status().ToString();
  EXPECT_NE(shipped->Find("pytorch-2.5-cu124"), nullptr);
}

class ShippedEnvironmentsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<EnvironmentTable> loaded = EnvironmentTable::Load(kShippedTable);
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    table_ = std::move(loaded).value();
  }
  EnvironmentTable table_;
};

TEST_F(ShippedEnvironmentsTest, EveryRowValidatesAndTheNamedOnesArePresent) {
  // Given data/environments.yaml, expect it to load (Load validates every row), to cover
  // PyTorch 2.1 to 2.7 with a CPU-only row, and each row's name to say its release and CUDA.
  EXPECT_GE(table_.all().size(), 10u);
  std::set<std::string> pytorch_minors;
  int cpu_rows = 0;
  for (const Environment& e : table_.all()) {
    const Version pt = V(e.pytorch);
    const std::string minor = std::to_string(pt.parts.at(0)) + "." + std::to_string(pt.parts.at(1));
    pytorch_minors.insert(minor);
    EXPECT_EQ(e.name.rfind("pytorch-" + minor + "-", 0), 0u) << e.name;
    EXPECT_NE(e.pip.find("torch==" + e.pytorch), std::string::npos) << e.name;
    if (e.cpu_only()) {
      ++cpu_rows;
      EXPECT_NE(e.pip.find("/whl/cpu"), std::string::npos) << e.name;
      continue;
    }
    const Version cuda = V(e.cuda);
    const std::string variant = "cu" + std::to_string(cuda.parts.at(0)) + std::to_string(cuda.parts.at(1));
    EXPECT_EQ(e.name, "pytorch-" + minor + "-" + variant);
    EXPECT_NE(e.pip.find("/whl/" + variant), std::string::npos) << e.name;
    EXPECT_NE(e.image.find(e.pytorch + "-cuda" + e.cuda + "-"), std::string::npos) << e.name;
  }
  EXPECT_EQ(cpu_rows, 1);
  for (const char* minor : {"2.1", "2.2", "2.3", "2.4", "2.5", "2.6", "2.7"}) {
    EXPECT_TRUE(pytorch_minors.count(minor)) << minor;
  }
  ASSERT_NE(table_.Find("pytorch-2.5-cu124"), nullptr);
  EXPECT_EQ(table_.Find("pytorch-2.5-cu124")->min_driver, "550.54.14");
  EXPECT_EQ(table_.Find("pytorch-2.1-cu121")->min_driver, "530.30.02");
  EXPECT_EQ(table_.Find("pytorch-2.7-cu118")->min_driver, "520.61.05");
  EXPECT_EQ(table_.Find("pytorch-2.7-cu126")->min_driver, "560.28.03");
  EXPECT_EQ(table_.Find("pytorch-2.7-cu128")->min_driver, "570.26");
}

TEST_F(ShippedEnvironmentsTest, EveryCatalogGpuIsServedByTheRightBuilds) {
  // Given the GPU catalog's compute capabilities, expect every NVIDIA model to have at least one
  // shipped environment, Blackwell only the cu128 build, Kepler only the cu118 builds, and a
  // current node (H100, R550 driver) to get the newest build its driver allows first.
  const model::GpuCatalog& gpus = model::GpuCatalog::BuiltIn();
  for (const model::GpuModel& m : gpus.models()) {
    if (m.compute_capability.empty()) continue;
    EXPECT_FALSE(table_.Supported(Node("580.65.06", {m.compute_capability})).empty()) << m.name;
  }
  auto gpu_only = [&](const char* gpu) {
    std::vector<std::string> out;
    for (const std::string& name : table_.Supported(Node("580.65.06", {gpus.Find(gpu)->compute_capability}))) {
      if (!table_.Find(name)->cpu_only()) out.push_back(name);
    }
    return out;
  };
  EXPECT_EQ(gpu_only("B200"), (std::vector<std::string>{"pytorch-2.7-cu128"}));
  EXPECT_EQ(gpu_only("B300"), (std::vector<std::string>{"pytorch-2.7-cu128"}));
  EXPECT_EQ(gpu_only("K80"), (std::vector<std::string>{"pytorch-2.7-cu118", "pytorch-2.1-cu118"}));
  const std::vector<std::string> v100 = gpu_only("V100");
  EXPECT_EQ(std::count(v100.begin(), v100.end(), "pytorch-2.7-cu128"), 0);
  EXPECT_EQ(v100.front(), "pytorch-2.7-cu126");

  const std::vector<std::string> h100_r550 = table_.Supported(Node("550.54.15", {"9.0"}, "12.4"));
  ASSERT_FALSE(h100_r550.empty());
  EXPECT_EQ(h100_r550.front(), "pytorch-2.7-cu118");  // 2.7's cu126/cu128 need R560/R570
  EXPECT_EQ(std::count(h100_r550.begin(), h100_r550.end(), "pytorch-2.6-cu124"), 1);
  EXPECT_EQ(h100_r550.back(), "pytorch-2.7-cpu");
}

}  // namespace
}  // namespace gpufleet::node
