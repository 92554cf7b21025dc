#include "model/gpu_catalog.h"

#include <cmath>
#include <fstream>
#include <set>

#include <gtest/gtest.h>

namespace gpufleet::model {
namespace {

const std::string kSourceDir = GPUFLEET_SOURCE_DIR;
const std::string kShippedCsv = kSourceDir + "/data/gpu_specs.csv";
const std::string kFixtures = kSourceDir + "/tests/data/catalog/";

class GpuCatalogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<GpuCatalog> loaded = GpuCatalog::LoadCsv(kShippedCsv);
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    catalog_ = std::move(loaded).value();
  }

  GpuCatalog catalog_;
};

TEST_F(GpuCatalogTest, ShippedTableHasOneModelPerGpuName) {
  // Given the shipped spec table, whose V100 and A100-80GB have two rows each, expect every
  // canonical name once and the common models present.
  std::set<std::string> names;
  for (const GpuModel& m : catalog_.models()) {
    EXPECT_TRUE(names.insert(m.name).second) << "duplicate " << m.name;
  }
  for (const char* name : {"T4", "V100", "A100", "A100-80GB", "L4", "H100", "H100-PCIe", "H100-NVL", "H200",
                           "MI300X"}) {
    EXPECT_TRUE(names.count(name)) << name;
  }
}

TEST_F(GpuCatalogTest, FirstRowOfANameIsCanonical) {
  // Given V100 SXM2 listed before V100 PCIe (and likewise for A100-80GB), expect the
  // first row's figures.
  const GpuModel* h100 = catalog_.Find("H100");
  ASSERT_NE(h100, nullptr);
  EXPECT_EQ(h100->variant, "SXM5 80GB");
  EXPECT_DOUBLE_EQ(h100->mem_bw_gbs, 3350);
  ASSERT_NE(catalog_.Find("V100"), nullptr);
  EXPECT_EQ(catalog_.Find("V100")->variant, "SXM2 16GB");
  ASSERT_NE(catalog_.Find("A100-80GB"), nullptr);
  EXPECT_EQ(catalog_.Find("A100-80GB")->variant, "SXM4 80GB");
}

TEST_F(GpuCatalogTest, H100PcieAndNvlAreModelsOfTheirOwn) {
  // Given the PCIe and NVL H100 cards, which are slower than the SXM5 part "H100" names, expect
  // each under its own name with its datasheet figures, and the SXM aliases still finding H100.
  const GpuModel* pcie = catalog_.Find("h100_pcie");
  ASSERT_NE(pcie, nullptr);
  EXPECT_EQ(pcie->name, "H100-PCIe");
  EXPECT_DOUBLE_EQ(pcie->mem_bw_gbs, 2000);
  EXPECT_DOUBLE_EQ(pcie->fp16_tflops, 756.5);
  const GpuModel* nvl = catalog_.Find("H100 NVL");
  ASSERT_NE(nvl, nullptr);
  EXPECT_EQ(nvl->name, "H100-NVL");
  EXPECT_EQ(nvl->mem_mib, 94 * 1024);
  for (const char* alias : {"H100", "H100-SXM", "H100-MEGA"}) {
    ASSERT_NE(catalog_.Find(alias), nullptr) << alias;
    EXPECT_EQ(catalog_.Find(alias)->name, "H100") << alias;
  }
  EXPECT_EQ(GpuCatalog::BuiltIn().Find("H100-PCIe")->fp16_tflops, 756.5);
}

TEST_F(GpuCatalogTest, FindsByAliasIgnoringCaseSpacesAndUnderscores) {
  // Given names as users and provider catalogs spell them, expect the canonical model.
  const std::pair<const char*, const char*> cases[] = {
      {"h100", "H100"},           {"H100-SXM", "H100"},
      {"h100-mega", "H100"},      {"A100 80GB", "A100-80GB"},
      {"a100_80gb", "A100-80GB"}, {"a100-80GB", "A100-80GB"},
      {"RTXA6000", "A6000"},      {"h200-sxm", "H200"},
      {"trn1", "Trainium"},       {" T4 ", "T4"},
  };
  for (const auto& [query, want] : cases) {
    const GpuModel* m = catalog_.Find(query);
    ASSERT_NE(m, nullptr) << query;
    EXPECT_EQ(m->name, want) << query;
  }
  EXPECT_EQ(catalog_.Find("H1000"), nullptr);
  EXPECT_EQ(catalog_.Find(""), nullptr);
}

TEST_F(GpuCatalogTest, FindsAlibabaTraceNames) {
  // Given the GPU names of Alibaba's traces, expect V100M16/V100M32 resolved and the anonymised
  // G1-G3 models unknown.
  ASSERT_NE(catalog_.Find("V100M16"), nullptr);
  EXPECT_EQ(catalog_.Find("V100M16")->name, "V100");
  ASSERT_NE(catalog_.Find("v100m32"), nullptr);
  EXPECT_EQ(catalog_.Find("v100m32")->name, "V100-32GB");
  for (const char* anonymous : {"G1", "G2", "G3"}) EXPECT_EQ(catalog_.Find(anonymous), nullptr);
}

TEST_F(GpuCatalogTest, ConvertsUnitsAndFillsMissingFigures) {
  // Given rows with GB memory and blank cells, expect MiB, fp16 falling back to fp32, bf16 0 and
  // interconnect "none" where the table has none.
  const GpuModel* h100 = catalog_.Find("H100");
  ASSERT_NE(h100, nullptr);
  EXPECT_EQ(h100->mem_mib, 80 * 1024);
  EXPECT_DOUBLE_EQ(h100->fp32_tflops, 67);
  EXPECT_DOUBLE_EQ(h100->fp16_tflops, 989.5);
  EXPECT_DOUBLE_EQ(h100->bf16_tflops, 989.5);
  EXPECT_EQ(h100->interconnect, "NVLink4");
  EXPECT_DOUBLE_EQ(h100->interconnect_bw_gbs, 900);

  const GpuModel* t4 = catalog_.Find("T4");
  ASSERT_NE(t4, nullptr);
  EXPECT_EQ(t4->mem_mib, 16 * 1024);
  EXPECT_DOUBLE_EQ(t4->fp16_tflops, 65);
  EXPECT_DOUBLE_EQ(t4->bf16_tflops, 0);
  EXPECT_EQ(t4->interconnect, "none");
  EXPECT_DOUBLE_EQ(t4->interconnect_bw_gbs, 0);

  const GpuModel* p4 = catalog_.Find("P4");  // no tensor cores
  ASSERT_NE(p4, nullptr);
  EXPECT_DOUBLE_EQ(p4->fp16_tflops, p4->fp32_tflops);
  EXPECT_EQ(catalog_.Find("H200")->mem_mib, 141 * 1024);
}

TEST_F(GpuCatalogTest, NewerGpusAreFasterUnderEveryBoundness) {
  // Given T4 < A100 < H100 in both tensor TFLOPS and memory bandwidth, expect each step to speed
  // a job up whatever it is bound by, and the reverse move to slow it down by the same factor.
  for (Boundness b : {Boundness::kCompute, Boundness::kMemory, Boundness::kBalanced}) {
    const double t4_to_a100 = catalog_.RelativeSpeed("T4", "A100", b);
    const double a100_to_h100 = catalog_.RelativeSpeed("A100", "H100", b);
    EXPECT_GT(t4_to_a100, 1.0);
    EXPECT_GT(a100_to_h100, 1.0);
    EXPECT_NEAR(catalog_.RelativeSpeed("T4", "H100", b), t4_to_a100 * a100_to_h100, 1e-9);
    EXPECT_NEAR(catalog_.RelativeSpeed("H100", "A100", b), 1.0 / a100_to_h100, 1e-9);
    EXPECT_DOUBLE_EQ(catalog_.RelativeSpeed("H100", "h100-sxm", b), 1.0);
  }
}

TEST_F(GpuCatalogTest, RelativeSpeedIsTheRatioOfTheBindingFigure) {
  // Given T4 (65 TFLOPS, 320 GB/s) and A100 (312 TFLOPS, 1555 GB/s), expect the TFLOPS ratio,
  // the bandwidth ratio and their geometric mean.
  const double compute = 312.0 / 65.0;
  const double memory = 1555.0 / 320.0;
  EXPECT_DOUBLE_EQ(catalog_.RelativeSpeed("T4", "A100", Boundness::kCompute), compute);
  EXPECT_DOUBLE_EQ(catalog_.RelativeSpeed("T4", "A100", Boundness::kMemory), memory);
  EXPECT_DOUBLE_EQ(catalog_.RelativeSpeed("T4", "A100", Boundness::kBalanced),
                   std::sqrt(compute * memory));
}

TEST_F(GpuCatalogTest, UnknownModelsRunAtTheSameSpeed) {
  // Given a model the catalog lacks on either side, expect 1.0 whatever the boundness.
  for (Boundness b : {Boundness::kCompute, Boundness::kMemory, Boundness::kBalanced}) {
    EXPECT_DOUBLE_EQ(catalog_.RelativeSpeed("G2", "H100", b), 1.0);
    EXPECT_DOUBLE_EQ(catalog_.RelativeSpeed("H100", "no-such-gpu", b), 1.0);
  }
}

TEST_F(GpuCatalogTest, MissingFigureCountsAsOneAndBf16OnlyChipsUseBf16) {
  // Given B300 (compute figures blank) and tpu-v4 (bf16 only), expect the compute ratio 1 for
  // B300, the memory ratio still used, and tpu-v4 compared by its bf16 figure.
  EXPECT_DOUBLE_EQ(catalog_.RelativeSpeed("H100", "B300", Boundness::kCompute), 1.0);
  EXPECT_DOUBLE_EQ(catalog_.RelativeSpeed("H100", "B300", Boundness::kMemory), 8000.0 / 3350.0);
  EXPECT_DOUBLE_EQ(catalog_.RelativeSpeed("A100", "tpu-v4", Boundness::kCompute), 275.0 / 312.0);
}

TEST(ParseBoundnessTest, AcceptsTheThreeNamesInAnyCase) {
  // Given the documented names, any case, expect the enum; given anything else, an error that
  // lists the choices.
  EXPECT_EQ(ParseBoundness("compute").value(), Boundness::kCompute);
  EXPECT_EQ(ParseBoundness("Memory").value(), Boundness::kMemory);
  EXPECT_EQ(ParseBoundness("balanced").value(), Boundness::kBalanced);
  Result<Boundness> bad = ParseBoundness("io");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("compute, memory or balanced"), std::string::npos);
}

TEST_F(GpuCatalogTest, BuiltInAgreesWithTheShippedTable) {
  // Given the compiled-in catalog generated from data/gpu_specs.csv, expect the same models with
  // the same figures and aliases as loading the CSV (a stale generated file fails here: re-run
  // scripts/gen_gpu_builtin.py).
  const GpuCatalog& built_in = GpuCatalog::BuiltIn();
  ASSERT_EQ(built_in.models().size(), catalog_.models().size());
  for (const GpuModel& want : catalog_.models()) {
    const GpuModel* got = built_in.Find(want.name);
    ASSERT_NE(got, nullptr) << want.name;
    EXPECT_EQ(got->name, want.name);
    EXPECT_EQ(got->variant, want.variant) << want.name;
    EXPECT_EQ(got->aliases, want.aliases) << want.name;
    EXPECT_EQ(got->mem_mib, want.mem_mib) << want.name;
    EXPECT_DOUBLE_EQ(got->mem_bw_gbs, want.mem_bw_gbs) << want.name;
    EXPECT_DOUBLE_EQ(got->fp32_tflops, want.fp32_tflops) << want.name;
    EXPECT_DOUBLE_EQ(got->fp16_tflops, want.fp16_tflops) << want.name;
    EXPECT_DOUBLE_EQ(got->bf16_tflops, want.bf16_tflops) << want.name;
    EXPECT_EQ(got->interconnect, want.interconnect) << want.name;
    EXPECT_DOUBLE_EQ(got->interconnect_bw_gbs, want.interconnect_bw_gbs) << want.name;
    EXPECT_EQ(got->compute_capability, want.compute_capability) << want.name;
  }
  // The figures the scheduler leans on most, spelled out.
  EXPECT_DOUBLE_EQ(built_in.Find("H100")->fp16_tflops, 989.5);
  EXPECT_DOUBLE_EQ(built_in.Find("A100")->mem_bw_gbs, 1555);
  EXPECT_EQ(built_in.Find("T4")->mem_mib, 16 * 1024);
  EXPECT_EQ(built_in.Find("V100M32")->name, "V100-32GB");
}

TEST_F(GpuCatalogTest, NvidiaModelsCarryTheirComputeCapability) {
  // Given the compute_capability column (NVIDIA's CUDA GPUs page), expect each NVIDIA model's
  // capability in both the loaded and the compiled-in catalog, and none for other vendors.
  const std::pair<const char*, const char*> cases[] = {
      {"A100", "8.0"}, {"T4", "7.5"},   {"V100", "7.0"},  {"A10G", "8.6"}, {"L4", "8.9"},
      {"H100", "9.0"}, {"B200", "10.0"}, {"B300", "10.3"}, {"K80", "3.7"}, {"P4", "6.1"},
  };
  for (const auto& [gpu, cc] : cases) {
    ASSERT_NE(catalog_.Find(gpu), nullptr) << gpu;
    EXPECT_EQ(catalog_.Find(gpu)->compute_capability, cc) << gpu;
    EXPECT_EQ(GpuCatalog::BuiltIn().Find(gpu)->compute_capability, cc) << gpu;
  }
  EXPECT_EQ(catalog_.Find("MI300X")->compute_capability, "");
  EXPECT_EQ(catalog_.Find("tpu-v5p")->compute_capability, "");
}

TEST(GpuCatalogCsvTest, ReadsQuotedFieldsCrlfAndColumnsInAnyOrder) {
  // Given a table with CRLF line ends, a quoted cell holding a newline, commas and doubled quotes,
  // a blank line, an empty fp16 cell and its columns in another order, expect both rows read.
  Result<GpuCatalog> loaded = GpuCatalog::LoadCsv(kFixtures + "quirky_but_valid.csv");
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ASSERT_EQ(loaded->models().size(), 2u);
  const GpuModel* t4 = loaded->Find("tesla t4");
  ASSERT_NE(t4, nullptr);
  EXPECT_EQ(t4->name, "T4");
  EXPECT_DOUBLE_EQ(t4->mem_bw_gbs, 320);
  const GpuModel* p4 = loaded->Find("P4");
  ASSERT_NE(p4, nullptr);
  EXPECT_DOUBLE_EQ(p4->fp16_tflops, 5.5);
  EXPECT_EQ(p4->interconnect, "none");
}

// Loads a malformed fixture and returns its error message.
std::string LoadError(const std::string& fixture) {
  Result<GpuCatalog> loaded = GpuCatalog::LoadCsv(kFixtures + fixture);
  EXPECT_FALSE(loaded.ok()) << fixture << " loaded";
  return loaded.ok() ? "" : loaded.status().message();
}

TEST(GpuCatalogCsvTest, MalformedTablesAreErrorsNamingFileAndLine) {
  // Given each kind of broken table, expect an error that names the file, the line and the fault.
  struct Case {
    const char* fixture;
    const char* where;
    const char* what;
  };
  const Case cases[] = {
      {"bad_number.csv",
       "bad_number.csv:3: ", "memory_gb must be a non-negative number, got 'forty'"},
      {"bad_field_count.csv",
       "bad_field_count.csv:3: ", "expected 7 fields as in the header, got 8"},
      {"unterminated_quote.csv", "unterminated_quote.csv:4: ", "unterminated quoted field"},
      {"missing_column.csv", "missing_column.csv:1: ", "lacks the column 'memory_bw_gbs'"},
      {"empty_name.csv", "empty_name.csv:3: ", "gpu must not be empty"},
  };
  for (const Case& c : cases) {
    const std::string message = LoadError(c.fixture);
    EXPECT_NE(message.find(c.where), std::string::npos) << message;
    EXPECT_NE(message.find(c.what), std::string::npos) << message;
  }
}

TEST(GpuCatalogCsvTest, MissingFileIsNotFound) {
  // Given a path with no file, expect NotFound naming the path.
  Result<GpuCatalog> loaded = GpuCatalog::LoadCsv(kFixtures + "no_such.csv");
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kNotFound);
  EXPECT_NE(loaded.status().message().find("no_such.csv"), std::string::npos);
}

TEST(GpuCatalogCsvTest, AFolderOrAHeaderAloneIsNamedAsSuch) {
  // Given a folder (it was "empty file") and a table with a header and no rows (it was "unknown
  // GPU model" later, at the first use), expect each said as it is.
  Result<GpuCatalog> folder = GpuCatalog::LoadCsv(kFixtures);
  ASSERT_FALSE(folder.ok());
  EXPECT_NE(folder.status().message().find("is a directory, not a file"), std::string::npos) << folder.status().message();
  const std::string header_only = ::testing::TempDir() + "/header_only_specs.csv";
  {
    std::ofstream out(header_only);
    out << "gpu,memory_gb,memory_bw_gbs,fp32_tflops,fp16_tensor_tflops_dense\n";
  }
  Result<GpuCatalog> empty = GpuCatalog::LoadCsv(header_only);
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("a header and no GPU rows"), std::string::npos) << empty.status().message();
}

GpuModel Named(std::string name, std::vector<std::string> aliases = {}) {
  GpuModel m;
  m.name = std::move(name);
  m.aliases = std::move(aliases);
  return m;
}

TEST(GpuCatalogAddTest, FirstModelKeepsAContestedAliasButNamesAlwaysWin) {
  // Given two models claiming one alias, and a third whose name an earlier model used as alias,
  // expect the alias to stay with the first and the name to find its own model.
  GpuCatalog catalog;
  catalog.Add(Named("X1", {"fast", "x2"}));
  catalog.Add(Named("Y1", {"fast"}));
  catalog.Add(Named("X2"));
  EXPECT_EQ(catalog.Find("fast")->name, "X1");
  EXPECT_EQ(catalog.Find("x2")->name, "X2");
  EXPECT_EQ(catalog.Find("X1")->aliases, std::vector<std::string>{"fast"});
  EXPECT_TRUE(catalog.Find("Y1")->aliases.empty());
}

TEST(GpuCatalogAddTest, AddAliasNeedsAKnownTargetAndAFreeName) {
  // Given an alias to an unknown model, or one already naming another model, expect errors; an
  // alias repeated for the same model is fine.
  GpuCatalog catalog;
  catalog.Add(Named("X1"));
  catalog.Add(Named("Y1"));
  EXPECT_EQ(catalog.AddAlias("z", "Z1").code(), StatusCode::kNotFound);
  EXPECT_TRUE(catalog.AddAlias("ex", "X1").ok());
  EXPECT_TRUE(catalog.AddAlias("EX", "x1").ok());
  EXPECT_EQ(catalog.AddAlias("ex", "Y1").code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(catalog.Find("ex")->name, "X1");
}

}  // namespace
}  // namespace gpufleet::model
