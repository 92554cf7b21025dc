#include "cli/plan_cluster.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "controller/pool.h"
#include "cost/offer.h"
#include "model/gpu_catalog.h"
#include "plan/planner.h"

namespace gpufleet::cli {
namespace {

namespace fs = std::filesystem;

// Two weeks from Monday 2024-01-01: two 8-GPU jobs of an hour every hour, and two more on
// weekday mornings; the planner reserves the steady base and rents the bursts.
std::vector<sim::TraceJob> History() {
  std::vector<sim::TraceJob> jobs;
  const int64_t monday_s = 1704067200;
  for (int64_t h = 0; h < 2 * 168; ++h) {
    int n = 2;
    if ((h / 24) % 7 < 5 && h % 24 >= 10 && h % 24 < 14) n += 2;
    for (int k = 0; k < n; ++k) {
      sim::TraceJob j;
      j.id = std::to_string(h) + "-" + std::to_string(k);
      j.spec.submit = Time::FromMillis((monday_s + h * 3600) * 1000);
      j.spec.gpus_per_node = 8;
      j.work = Duration::Hours(1);
      jobs.push_back(std::move(j));
    }
  }
  return jobs;
}

constexpr const char* kOffersCsv =
    "cloud,region,zone,instance_type,accelerator,gpu_count,gpu_mem_mib,vcpus,ram_gib,ondemand_usd_h,host_usd_h,"
    "spot_usd_h,spot_kind,aws_interruption_bucket\n"
    "aws,us-east-1,,p3.16xlarge,V100,8,,64,488,24.48,,4.1616,estimated,4\n";

std::map<std::string, std::string> Substitutions() {
  return {{"server", "http://127.0.0.1:8470"}, {"join_token_file", "join.token"}, {"gpufleet", "gpufleet"},
          {"data_dir", "."}, {"ca_cert_file", ""}};
}

class PlanClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto offers = cost::ParseOffersCsv(kOffersCsv, "offers.csv", model::GpuCatalog::BuiltIn());
    ASSERT_TRUE(offers.ok()) << offers.status().message();
    options_ = std::make_unique<plan::PlannerOptions>();
    options_->default_gpu_model = "V100";
    options_->regions = {"us-east-1"};
    options_->plan.spot_max_share = 0.5;
    options_->plan.time_limit_s = 20;
    options_->verify.threads = 1;
    auto report = plan::RunPlanner(History(), *offers, model::GpuCatalog::BuiltIn(), *options_);
    ASSERT_TRUE(report.ok()) << report.status().message();
    report_ = std::make_unique<plan::PlannerReport>(std::move(*report));
  }
  static void TearDownTestSuite() {
    report_.reset();
    options_.reset();
  }

  void SetUp() override {
    ASSERT_NE(report_, nullptr);
    dir_ = fs::temp_directory_path() /
           ("plan_cluster_test_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  PoolFileOptions File(const std::string& path) const {
    PoolFileOptions f;
    f.source = "jobs.jsonl";
    f.written_to = path;
    f.now = Time::FromMillis(1704067200000 + 14 * 24 * 3600000LL);
    return f;
  }

  static std::string Read(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  static std::unique_ptr<plan::PlannerOptions> options_;
  static std::unique_ptr<plan::PlannerReport> report_;
  fs::path dir_;
};

std::unique_ptr<plan::PlannerOptions> PlanClusterTest::options_;
std::unique_ptr<plan::PlannerReport> PlanClusterTest::report_;

TEST_F(PlanClusterTest, AppliedPlanLoadsAsThePoolOfTheRecommendation) {
  // Given a plan of two weeks of steady and bursty V100 work on AWS, expect --apply's file to load
  // with the server's own loader: the recommendation's reserved nodes as min_nodes, the
  // p3.16xlarge node type at the plan's node price on demand (and on spot where the plan uses
  // spot), and limits that leave room for the history's peak.
  ASSERT_TRUE(report_->recommended.has_value());
  const plan::Scenario& rec = report_->verification[*report_->recommended];
  const std::string path = (dir_ / "pool.yaml").string();
  auto text = PoolFileText(*report_, *options_, File(path));
  ASSERT_TRUE(text.ok()) << text.status().message();
  ASSERT_TRUE(WritePoolFile(path, *text, /*force=*/false).ok());

  auto config = controller::LoadPoolConfig(path, model::GpuCatalog::BuiltIn(), Substitutions());
  ASSERT_TRUE(config.ok()) << config.status().message() << "\n" << *text;
  EXPECT_EQ(config->provider.kind, "local");
  EXPECT_EQ(config->limits.min_nodes, rec.reserved_nodes);
  EXPECT_GE(config->limits.max_nodes, config->limits.min_nodes);
  // The busiest hour holds four 8-GPU jobs.
  EXPECT_GE(config->limits.max_gpus, 32);
  EXPECT_EQ(config->limits.max_gpus, config->limits.max_nodes * 8);
  EXPECT_EQ(config->options.idle_duration, options_->verify.idle_duration);

  const plan::ModelReport& v100 = report_->models.front();
  bool on_demand = false, spot = false;
  for (size_t i = 0; i < config->offers.size(); ++i) {
    const auto& o = config->offers[i];
    EXPECT_EQ(o.gpu_model, "V100");
    EXPECT_EQ(o.gpus_per_node, 8);
    EXPECT_EQ(config->offer_labels[i].at("instance_type"), "p3.16xlarge");
    EXPECT_EQ(config->offer_labels[i].at("region"), "us-east-1");
    if (o.market == model::Market::kOnDemand) {
      on_demand = true;
      EXPECT_EQ(o.price_micros_per_hour, *v100.prices.on_demand * 8);
    } else if (o.market == model::Market::kSpot) {
      spot = true;
      EXPECT_EQ(o.price_micros_per_hour, *v100.prices.spot * 8);
      EXPECT_NEAR(o.interruptions_per_hour, v100.prices.spot_interruptions_per_hour, 1e-6);  // six digits in the file
    }
  }
  EXPECT_TRUE(on_demand);
  bool rec_rents_spot = false;
  for (const auto& o : rec.cluster.autoscale.offers) rec_rents_spot |= o.node.market == model::Market::kSpot;
  EXPECT_EQ(spot, rec_rents_spot);
}

TEST_F(PlanClusterTest, AnExistingFileIsReplacedOnlyWithForce) {
  // Given a file where the pool is to be written, expect the write to be refused and the file
  // unchanged, no temporary file left behind; with force, the file replaced by the pool.
  const fs::path path = dir_ / "pool.yaml";
  { std::ofstream(path) << "mine\n"; }
  auto text = PoolFileText(*report_, *options_, File(path.string()));
  ASSERT_TRUE(text.ok());
  Status refused = WritePoolFile(path.string(), *text, /*force=*/false);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("--force"), std::string::npos) << refused.message();
  EXPECT_EQ(Read(path), "mine\n");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);

  ASSERT_TRUE(WritePoolFile(path.string(), *text, /*force=*/true).ok());
  EXPECT_EQ(Read(path), *text);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(PlanClusterTest, AFileTheServerCouldNotLoadIsNeverWritten) {
  // Given text that is not a pool file, expect an error that says where, and no file.
  const fs::path path = dir_ / "pool.yaml";
  Status s = WritePoolFile(path.string(), "provider: {kind: local}\noffers: []\n", false);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("pool.yaml"), std::string::npos) << s.message();
  EXPECT_FALSE(fs::exists(path));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 0);
}

TEST_F(PlanClusterTest, AnUnverifiedPlanAppliesTheOptimisersReservation) {
  // Given a report without replays (--no-verify), expect the optimiser's reserved nodes as
  // min_nodes.
  plan::PlannerReport unverified = *report_;
  unverified.verification.clear();
  unverified.recommended.reset();
  const std::string path = (dir_ / "pool.yaml").string();
  auto text = PoolFileText(unverified, *options_, File(path));
  ASSERT_TRUE(text.ok()) << text.status().message();
  auto config = controller::ParsePoolConfig(*text, path, model::GpuCatalog::BuiltIn(), Substitutions());
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->limits.min_nodes, report_->models.front().reserved_nodes);
}

TEST_F(PlanClusterTest, NothingToApplyWhenNoReplayMeetsTheSlo) {
  // Given replays of which none met the SLO, expect FailedPrecondition that says how to go on.
  plan::PlannerReport missed = *report_;
  missed.recommended.reset();
  auto text = PoolFileText(missed, *options_, File("pool.yaml"));
  EXPECT_EQ(text.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(text.status().message().find("--no-verify"), std::string::npos);
}

TEST_F(PlanClusterTest, TheProviderOfAnotherPoolFileIsKept) {
  // Given --pool-provider naming a pool file with the exec provider, expect the written pool to
  // rent through those scripts.
  const fs::path other = dir_ / "mine.yaml";
  {
    std::ofstream(other) << "provider:\n  kind: exec\n  create: [./create.sh]\n  delete: [./delete.sh]\n"
                            "  list: [./list.sh]\n  env: {EXEC_LOCAL_DIR: '{data_dir}/x'}\n"
                            "offers:\n  - {name: a, gpu: H100, gpus: 8, price_per_hour: 1}\n";
  }
  PoolFileOptions f = File((dir_ / "pool.yaml").string());
  f.pool_provider = other.string();
  auto text = PoolFileText(*report_, *options_, f);
  ASSERT_TRUE(text.ok()) << text.status().message();
  auto config = controller::ParsePoolConfig(*text, f.written_to, model::GpuCatalog::BuiltIn(), Substitutions());
  ASSERT_TRUE(config.ok()) << config.status().message() << "\n" << *text;
  EXPECT_EQ(config->provider.kind, "exec");
  for (const auto& o : config->offers) EXPECT_EQ(o.gpu_model, "V100");
}

}  // namespace
}  // namespace gpufleet::cli
