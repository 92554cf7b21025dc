#include "sim/cluster_spec.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "common/strings.h"

namespace gpufleet::sim {
namespace {

const std::string kSourceDir = GPUFLEET_SOURCE_DIR;

// Joins lines with '\n', so that a test's line numbers are its vector indices + 1.
std::string Lines(const std::vector<std::string>& lines) { return Join(lines, "\n") + "\n"; }

class ClusterSpecTest : public ::testing::Test {
 protected:
  Result<ClusterSpec> Parse(const std::vector<std::string>& lines) {
    return ParseClusterSpec(Lines(lines), "spec.yaml", model::GpuCatalog::BuiltIn());
  }
  // The error message of a spec that must not parse.
  std::string ErrorOf(const std::vector<std::string>& lines) {
    Result<ClusterSpec> r = Parse(lines);
    EXPECT_FALSE(r.ok()) << Lines(lines);
    return r.ok() ? "" : r.status().message();
  }
};

TEST_F(ClusterSpecTest, NodePrices) {
  Result<ClusterSpec> r = Parse({"node_types:", "  - {name: a, gpu: H100, gpus: 8, count: 2, price_per_hour: 98.32}"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->nodes[1].price_micros_per_hour, 98'320'000);
  EXPECT_NE(ErrorOf({"node_types:", "  - {name: a, gpu: H100, gpus: 8, count: 1, price_per_hour: -3}"})
                .find("spec.yaml:2:61: node_types[0].price_per_hour: must be dollars per node-hour"),
            std::string::npos);
  // Homogeneous clusters: a short last node pays for the GPUs it has.
  ClusterSpec h = HomogeneousCluster(12, "A100", 8, 8'000'000);
  EXPECT_EQ(h.nodes[0].price_micros_per_hour, 8'000'000);
  EXPECT_EQ(h.nodes[1].price_micros_per_hour, 4'000'000);
}

TEST_F(ClusterSpecTest, AutoscaleSectionNeedsNoFixedNodes) {
  Result<ClusterSpec> r = Parse({
      "autoscale:",
      "  offers:",
      "    - {name: h100-spot, gpu: h100, gpus: 8, market: spot, price_per_hour: 30,",
      "       boot_delay: 3m, interruptions_per_hour: 0.05, zone: us-east-1a,",
      "       capacity_available: 104m, capacity_outage: 74m}",
      "    - {name: h100-od, gpu: H100, gpus: 8, price_per_hour: 98.32}",
      "  max_nodes: 16",
      "  idle_duration: 5m",
      "  max_rents_per_minute: 4",
      "  spot_notice: 30s",
  });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->nodes.empty());
  ASSERT_EQ(r->autoscale.offers.size(), 2u);
  const AutoscaleOffer& spot = r->autoscale.offers[0];
  EXPECT_EQ(spot.node.gpu_model, "H100");
  EXPECT_EQ(spot.node.market, model::Market::kSpot);
  EXPECT_EQ(spot.node.price_micros_per_hour, 30'000'000);
  EXPECT_EQ(spot.node.labels.at("zone"), "us-east-1a");
  EXPECT_EQ(spot.boot_delay, Duration::Minutes(3));
  EXPECT_DOUBLE_EQ(spot.interruptions_per_hour, 0.05);
  EXPECT_EQ(spot.capacity_available, Duration::Minutes(104));
  EXPECT_EQ(spot.capacity_outage, Duration::Minutes(74));
  EXPECT_EQ(r->autoscale.offers[1].capacity_outage, Duration::Zero());  // always available
  EXPECT_EQ(r->autoscale.offers[1].boot_delay, Duration::Minutes(3));  // the default
  EXPECT_EQ(r->autoscale.limits.max_nodes, 16);
  EXPECT_EQ(r->autoscale.options.idle_duration, Duration::Minutes(5));
  EXPECT_EQ(r->autoscale.options.max_rents_per_minute, 4);
  EXPECT_EQ(r->autoscale.spot_notice, Duration::Seconds(30));
}

// Found by fuzz/cluster_spec_fuzz: the map reader kept a reference to a key that yaml-cpp's
// iterator hands out in a temporary, so every key was read after its lifetime (ASan:
// stack-use-after-scope). The errors that name a key's line are where it showed.
TEST_F(ClusterSpecTest, KeyErrorsNameTheKeysLine) {
  EXPECT_NE(ErrorOf({"node_types:", "  - name: a", "    gpu: H100", "    ? [x, y]", "    : 1"})
                .find("spec.yaml:4:7: node_types[0]: keys must be non-empty strings"),
            std::string::npos);
  EXPECT_NE(ErrorOf({"node_types:", "  - name: a", "    gpu: H100", "    gpus: 8", "    cuont: 1"})
                .find("spec.yaml:5:5: node_types[0]: unknown key 'cuont'; did you mean 'count'?"),
            std::string::npos);
  Result<ClusterSpec> r = Parse({"node_types:", "  - {name: a, gpu: H100, gpus: 8, count: 2, price_per_hour: 1}"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->nodes.size(), 2u);
}

TEST_F(ClusterSpecTest, BadAutoscaleSettingsAreErrorsNamingTheField) {
  EXPECT_NE(ErrorOf({"autoscale:", "  offers:", "    - {name: a, gpu: H100, gpus: 8, price_per_hour: 9, boot_dela: 3m}"})
                .find("spec.yaml:3:56: autoscale.offers[0]: unknown key 'boot_dela'; did you mean 'boot_delay'?"),
            std::string::npos);
  EXPECT_NE(ErrorOf({"autoscale:", "  offers:", "    - {name: a, gpu: H100, gpus: 8, price_per_hour: 9, interruptions_per_hour: 1}"})
                .find("autoscale.offers[0].interruptions_per_hour: only spot nodes are interrupted"),
            std::string::npos);
  EXPECT_NE(ErrorOf({"autoscale:", "  offers:", "    - {name: a, gpu: H100, gpus: 8, price_per_hour: 9}", "  max_gpus: 4"})
                .find("autoscale.max_gpus: is 4, fewer than the smallest offer's 8 GPUs per node"),
            std::string::npos);
  EXPECT_NE(ErrorOf({"autoscale:", "  offers:", "    - {name: a, gpu: H100, gpus: 8, price_per_hour: 9, capacity_outage: 1h}"})
                .find("autoscale.offers[0]: capacity_available and capacity_outage go together"),
            std::string::npos);
  EXPECT_NE(ErrorOf({"autoscale:", "  offers:", "    - {name: a, gpu: H100, gpus: 8, price_per_hour: 9, boot_delay: 1h}"})
                .find("autoscale.offers[0].boot_delay: is longer than autoscale.boot_timeout (15m00s)"),
            std::string::npos);
  EXPECT_NE(ErrorOf({"autoscale:", "  offers:", "    - {name: a, gpu: H100, gpus: 8}"})
                .find("autoscale.offers[0].price_per_hour: is required"),
            std::string::npos);
  EXPECT_NE(ErrorOf({"autoscale:", "  offers: []"}).find("autoscale.offers: must be a non-empty list"),
            std::string::npos);
  EXPECT_NE(ErrorOf({"autoscale:", "  offers:", "    - {name: a, gpu: H100, gpus: 8, price_per_hour: 9}",
                     "  idle_duration: soon"})
                .find("spec.yaml:4:18: autoscale.idle_duration: must be a duration such as 90s"),
            std::string::npos);
  EXPECT_NE(ErrorOf({"node_types:", "  - {name: a, gpu: H100, gpus: 8, count: 1}", "autoscale:", "  offers:",
                     "    - {name: a, gpu: H100, gpus: 8, price_per_hour: 9}"})
                .find("'a' is already the name of autoscale.offers[0]"),
            std::string::npos);
  EXPECT_NE(ErrorOf({"node_types:", "  - {name: a, gpu: H100, gpus: 8, count: 1, interruptions_per_hour: 2}"})
                .find("node_types[0].interruptions_per_hour: only spot nodes are interrupted"),
            std::string::npos);
}

TEST_F(ClusterSpecTest, ErrorsNameTheColumnOfTheValueThatIsWrong) {
  // Given an offer's boot_delay longer than the boot timeout, expect the line and column of that
  // value; given the default boot_delay too long for a short boot_timeout, the offer's.
  const std::vector<std::string> offer = {"autoscale:",           "  offers:",         "    - name: a",
                                          "      gpu: H100",      "      gpus: 8",    "      price_per_hour: 9"};
  std::vector<std::string> lines = offer;
  lines.push_back("      boot_delay: 1h");
  EXPECT_TRUE(StartsWith(ErrorOf(lines),
                         "spec.yaml:7:19: autoscale.offers[0].boot_delay: is longer than autoscale.boot_timeout"))
      << ErrorOf(lines);
  lines = offer;
  lines.push_back("  boot_timeout: 1m");
  EXPECT_TRUE(StartsWith(ErrorOf(lines),
                         "spec.yaml:3:7: autoscale.offers[0].boot_delay: is longer than autoscale.boot_timeout"))
      << ErrorOf(lines);
}

TEST_F(ClusterSpecTest, CpusAndMemoryBeyondAnyMachineAreErrorsAtTheirValue) {
  // Given 1e16 cores or GiB (which overflowed to a negative count, "must not be negative"),
  // expect the bound named at the value's line and column; the bounds themselves are accepted.
  EXPECT_TRUE(StartsWith(ErrorOf({"node_types:", "  - {name: a, gpu: V100, gpus: 8, count: 2, cpus: 1e16}"}),
                         "spec.yaml:2:51: node_types[0].cpus: must be at most 65536 (cores of one node)"))
      << ErrorOf({"node_types:", "  - {name: a, gpu: V100, gpus: 8, count: 2, cpus: 1e16}"});
  EXPECT_NE(ErrorOf({"node_types:", "  - {name: a, gpu: V100, gpus: 8, count: 2, memory_gib: 1e16}"})
                .find("node_types[0].memory_gib: must be at most 1048576"),
            std::string::npos);
  auto spec = Parse({"node_types:", "  - {name: a, gpu: V100, gpus: 8, count: 2, cpus: 65536, memory_gib: 1048576}"});
  ASSERT_TRUE(spec.ok()) << spec.status().message();
}

TEST_F(ClusterSpecTest, ABudgetOnAClusterWithoutPricesIsAnError) {
  // Given a team budget on nodes without a price (nothing would ever be spent against it), expect
  // an error at the budget naming the fix; with a price on a node type, the budget is read.
  const std::string message = ErrorOf({"node_types:", "  - {name: a, gpu: V100, gpus: 8, count: 2}", "teams:",
                                       "  nlp: {budget: 5, max_hourly_cost: 1}"});
  EXPECT_TRUE(StartsWith(message, "spec.yaml:4:17: teams.nlp.budget: no node of this cluster has a price_per_hour"))
      << message;
  EXPECT_NE(message.find("give the node types a price_per_hour"), std::string::npos) << message;
  auto priced = Parse({"node_types:", "  - {name: a, gpu: V100, gpus: 8, count: 2, price_per_hour: 20}", "teams:",
                       "  nlp: {budget: 5, max_hourly_cost: 1}"});
  ASSERT_TRUE(priced.ok()) << priced.status().message();
  EXPECT_EQ(priced->team_money.at("nlp").hard_micros, 5'000'000);
}

TEST_F(ClusterSpecTest, ParsesAFullSpec) {
  // Given two node types using every field, expect one NodeSpec per node with canonical GPU
  // names, NVLink maps, units converted, labels as text and team quotas.
  Result<ClusterSpec> r = Parse({
      "node_types:",
      "  - name: dgx",
      "    gpu: h100-sxm",
      "    gpus: 8",
      "    count: 2",
      "    cpus: 112",
      "    memory_gib: 2048",
      "    nvlink: [4, 4]",
      "    market: reserved",
      "    labels: {region: eu-west-1, zone: eu-west-1a, gdpr: true, floor: 3}",
      "  - name: small",
      "    gpu: A100 80GB",
      "    gpus: 1",
      "    count: 1",
      "    cpus: 0.5",
      "    memory_gib: 1.5",
      "    market: spot",
      "teams:",
      "  vision: {quota_gpus: 8}",
      "  nlp:",
      "    quota_gpus: 0",
  });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const ClusterSpec& spec = *r;
  ASSERT_EQ(spec.nodes.size(), 3u);
  EXPECT_EQ(spec.total_gpus(), 17);

  const model::NodeSpec& dgx = spec.nodes[1];
  EXPECT_EQ(dgx.name, "dgx-1");
  EXPECT_EQ(dgx.gpu_model, "H100");
  EXPECT_EQ(dgx.gpus, 8);
  EXPECT_EQ(dgx.nvlink_domain, (std::vector<int>{0, 0, 0, 0, 1, 1, 1, 1}));
  EXPECT_EQ(dgx.cpu_milli, 112000);
  EXPECT_EQ(dgx.mem_mib, 2048 * 1024);
  EXPECT_EQ(dgx.market, model::Market::kReserved);
  EXPECT_EQ(
      dgx.labels,
      (model::Labels{
          {"region", "eu-west-1"}, {"zone", "eu-west-1a"}, {"gdpr", "true"}, {"floor", "3"}}));

  const model::NodeSpec& small = spec.nodes[2];
  EXPECT_EQ(small.name, "small-0");
  EXPECT_EQ(small.gpu_model, "A100-80GB");
  EXPECT_EQ(small.cpu_milli, 500);
  EXPECT_EQ(small.mem_mib, 1536);
  EXPECT_EQ(small.market, model::Market::kSpot);
  EXPECT_TRUE(small.nvlink_domain.empty());
  EXPECT_TRUE(small.labels.empty());

  EXPECT_EQ(spec.team_quota_gpus, (std::map<std::string, int64_t>{{"vision", 8}, {"nlp", 0}}));
}

TEST_F(ClusterSpecTest, LeftOutCpusAndMemoryScaleWithGpus) {
  // Given a 4-GPU node type without cpus or memory_gib, expect 12 cores and 128 GiB per GPU,
  // on-demand, and no rack label.
  Result<ClusterSpec> r = Parse({"node_types:", "  - {name: n, gpu: T4, gpus: 4, count: 1}"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const model::NodeSpec& n = r->nodes[0];
  EXPECT_EQ(n.cpu_milli, 48000);
  EXPECT_EQ(n.mem_mib, 512 * 1024);
  EXPECT_EQ(n.market, model::Market::kOnDemand);
  EXPECT_EQ(n.labels.count("rack"), 0u);
}

TEST_F(ClusterSpecTest, CpuOnlyNodeTypeHasNoGpus) {
  // Given a node type without gpu (with gpus: 0 or no gpus at all), expect CPU-only nodes.
  Result<ClusterSpec> r = Parse({
      "node_types:",
      "  - {name: cpu, count: 2, cpus: 64, memory_gib: 256}",
      "  - {name: cpu0, gpus: 0, count: 1, cpus: 8, memory_gib: 32}",
  });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->nodes.size(), 3u);
  for (const model::NodeSpec& n : r->nodes) {
    EXPECT_EQ(n.gpus, 0);
    EXPECT_TRUE(n.gpu_model.empty());
  }
  EXPECT_EQ(r->total_gpus(), 0);
  EXPECT_EQ(r->nodes[0].cpu_milli, 64000);
}

TEST_F(ClusterSpecTest, RacksSplitNodesIntoContiguousBlocks) {
  // Given 10 nodes over 3 racks, expect nodes 0-3 in r0, 4-6 in r1 and 7-9 in r2.
  Result<ClusterSpec> r =
      Parse({"node_types:", "  - {name: g, gpu: L4, gpus: 1, count: 10, racks: 3}"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::vector<std::string> racks;
  for (const model::NodeSpec& n : r->nodes) racks.push_back(n.labels.at("rack"));
  EXPECT_EQ(racks, (std::vector<std::string>{"g-r0", "g-r0", "g-r0", "g-r0", "g-r1", "g-r1", "g-r1",
                                             "g-r2", "g-r2", "g-r2"}));
}

TEST_F(ClusterSpecTest, RackLabelWithoutRacksIsKept) {
  // Given a rack label and no racks field, expect every node in that rack.
  Result<ClusterSpec> r =
      Parse({"node_types:", "  - {name: g, gpu: L4, gpus: 1, count: 2, labels: {rack: a7}}"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  for (const model::NodeSpec& n : r->nodes) EXPECT_EQ(n.labels.at("rack"), "a7");
}

struct ErrorCase {
  const char* what;
  std::vector<std::string> yaml;
  std::string want;  // the start of the message, "spec.yaml:LINE:COL: ..."
};

TEST_F(ClusterSpecTest, DeeplyNestedSpecIsRefusedBeforeParsing) {
  // Given a spec nesting 100,000 block lists, or 100 mappings by indentation, expect
  // InvalidArgument naming the depth and where it is crossed, not a crash in the recursive YAML
  // parser.
  std::string dashes;
  for (int i = 0; i < 100'000; ++i) dashes += "- ";
  EXPECT_EQ(ErrorOf({"nodes:", dashes + "x"}), "spec.yaml:2:127: nesting deeper than 64 levels");
  std::vector<std::string> lines;
  for (int i = 0; i < 100; ++i) lines.push_back(std::string(i, ' ') + "nodes:");
  EXPECT_EQ(ErrorOf(lines), "spec.yaml:65:65: nesting deeper than 64 levels");
}

TEST_F(ClusterSpecTest, InvalidSpecsAreErrorsNamingLineAndField) {
  // Given each kind of mistake, expect an error naming the file, the 1-based line and column (of
  // a bad value itself, an unknown key's key, the mapping that lacks a required key), the field
  // and the fault.
  const std::vector<ErrorCase> cases = {
      {"not a number",
       {"node_types:", "  - name: a", "    gpu: H100", "    gpus: eight", "    count: 1"},
       "spec.yaml:4:11: node_types[0].gpus: must be a positive integer, got 'eight'"},
      {"too many gpus",
       {"node_types:", "  - name: a", "    gpu: H100", "    gpus: 65", "    count: 1"},
       "spec.yaml:4:11: node_types[0].gpus: must be between 1 and 64, got 65"},
      {"zero gpus with a model",
       {"node_types:", "  - name: a", "    gpu: H100", "    gpus: 0", "    count: 1"},
       "spec.yaml:4:11: node_types[0].gpus: must be between 1 and 64, got 0"},
      {"gpus without a model",
       {"node_types:", "  - name: a", "    gpus: 4", "    count: 1"},
       "spec.yaml:2:5: node_types[0].gpu: is required when gpus > 0"},
      {"gpus as a list",
       {"node_types:", "  - name: a", "    gpu: H100", "    gpus: [8]", "    count: 1"},
       "spec.yaml:4:11: node_types[0].gpus: must be a positive integer, got a list"},
      {"count zero",
       {"node_types:", "  - name: a", "    gpu: H100", "    gpus: 8", "    count: 0"},
       "spec.yaml:5:12: node_types[0].count: must be between 1 and 100000, got 0"},
      {"count missing",
       {"node_types:", "  - name: a", "    gpu: H100", "    gpus: 8"},
       "spec.yaml:2:5: node_types[0].count: is required"},
      {"name missing",
       {"node_types:", "  - gpu: H100", "    gpus: 8", "    count: 1"},
       "spec.yaml:2:5: node_types[0].name: is required"},
      {"bad name",
       {"node_types:", "  - name: my nodes", "    gpu: H100", "    gpus: 8", "    count: 1"},
       "spec.yaml:2:11: node_types[0].name: must be letters, digits"},
      {"duplicate type name",
       {"node_types:", "  - {name: a, gpu: T4, gpus: 1, count: 1}",
        "  - {name: a, gpu: T4, gpus: 1, count: 1}"},
       "spec.yaml:3:12: node_types[1].name: 'a' is already the name of node_types[0]"},
      {"unknown top-level key",
       {"node_type:", "  - {name: a, gpu: T4, gpus: 1, count: 1}"},
       "spec.yaml:1:1: unknown key 'node_type'; did you mean 'node_types'? Valid keys: node_types, "
       "teams"},
      {"unknown node key",
       {"node_types:", "  - name: a", "    gpu: T4", "    gpus: 1", "    count: 1",
        "    memory_gb: 16"},
       "spec.yaml:6:5: node_types[0]: unknown key 'memory_gb'; did you mean 'memory_gib'? Valid "
       "keys: name,"},
      {"duplicate key",
       {"node_types:", "  - name: a", "    gpu: T4", "    gpus: 1", "    count: 1", "    count: 2"},
       "spec.yaml:6:5: node_types[0].count: duplicate key"},
      {"unknown gpu",
       {"node_types:", "  - name: a", "    gpu: H1000", "    gpus: 8", "    count: 1"},
       "spec.yaml:3:10: node_types[0].gpu: unknown GPU model 'H1000'; did you mean 'H100'? Known "
       "models "
       "include T4, V100,"},
      {"nvlink does not add up",
       {"node_types:", "  - name: a", "    gpu: H100", "    gpus: 8", "    count: 1",
        "    nvlink: [4, 2]"},
       "spec.yaml:6:13: node_types[0].nvlink: domain sizes must add up to the node's 8 GPUs, got 6"},
      {"nvlink entry not a number",
       {"node_types:", "  - name: a", "    gpu: H100", "    gpus: 8", "    count: 1",
        "    nvlink: [4, x]"},
       "spec.yaml:6:17: node_types[0].nvlink[1]: must be a positive integer, got 'x'"},
      {"more racks than nodes",
       {"node_types:", "  - name: a", "    gpu: H100", "    gpus: 8", "    count: 2",
        "    racks: 3"},
       "spec.yaml:6:12: node_types[0].racks: must be between 1 and 2, got 3"},
      {"racks and a rack label",
       {"node_types:", "  - name: a", "    gpu: H100", "    gpus: 8", "    count: 2",
        "    racks: 2", "    labels: {rack: r9}"},
       "spec.yaml:6:12: node_types[0].racks: conflicts with labels.rack"},
      {"unknown market",
       {"node_types:", "  - name: a", "    gpu: T4", "    gpus: 1", "    count: 1",
        "    market: cheap"},
       "spec.yaml:6:13: node_types[0].market: unknown market 'cheap'"},
      {"unknown key without a near miss",
       {"node_types:", "  - {name: a, gpu: T4, gpus: 1, count: 1, colour: red}"},
       "spec.yaml:2:43: node_types[0]: unknown key 'colour'. Valid keys: name, gpu, gpus, count, "
       "cpus, "
       "memory_gib, nvlink, racks, market, labels"},
      {"unknown gpu without a near miss",
       {"node_types:", "  - {name: a, gpu: Gaudi3, gpus: 8, count: 1}"},
       "spec.yaml:2:20: node_types[0].gpu: unknown GPU model 'Gaudi3'. Known models include T4, "
       "V100,"},
      {"label that is a mapping",
       {"node_types:", "  - name: a", "    gpu: T4", "    gpus: 1", "    count: 1",
        "    labels:", "      region: {name: x}"},
       "spec.yaml:7:15: node_types[0].labels.region: must be a string, got a mapping"},
      {"labels that are a list",
       {"node_types:", "  - name: a", "    gpu: T4", "    gpus: 1", "    count: 1",
        "    labels: [a, b]"},
       "spec.yaml:6:13: node_types[0].labels: must be a mapping, got a list"},
      {"fractional memory that is not positive",
       {"node_types:", "  - name: a", "    gpu: T4", "    gpus: 1", "    count: 1",
        "    memory_gib: -1"},
       "spec.yaml:6:17: node_types[0].memory_gib: must be a positive number, got '-1'"},
      {"cpu-only without cpus",
       {"node_types:", "  - name: a", "    count: 1", "    memory_gib: 64"},
       "spec.yaml:2:5: node_types[0].cpus: is required for a CPU-only node type"},
      {"empty node list",
       {"node_types: []"},
       "spec.yaml:1:13: node_types: must be a non-empty list of node types, got a list"},
      {"node_types missing",
       {"teams: {a: {quota_gpus: 1}}"},
       "spec.yaml:1:1: node_types is required"},
      {"empty document", {"# nothing here"}, "spec.yaml:1:1: the cluster spec is empty"},
      {"not a mapping",
       {"- a", "- b"},
       "spec.yaml:1:1: the cluster spec must be a mapping with node_types, got a list"},
      {"team with unknown key",
       {"node_types:", "  - {name: a, gpu: T4, gpus: 4, count: 1}",
        "teams:", "  vision:", "    quota: 4"},
       "spec.yaml:5:5: teams.vision: unknown key 'quota'; did you mean 'quota_gpus'?"},
      {"negative team quota",
       {"node_types:", "  - {name: a, gpu: T4, gpus: 4, count: 1}",
        "teams:", "  vision: {quota_gpus: -1}"},
       "spec.yaml:4:24: teams.vision.quota_gpus: must be between 0 and 1000000, got -1"},
      {"quotas above the cluster",
       {"node_types:", "  - {name: a, gpu: T4, gpus: 4, count: 1}",
        "teams:", "  vision: {quota_gpus: 3}", "  nlp: {quota_gpus: 2}"},
       "spec.yaml:4:3: teams: quotas add up to 5 GPUs but the cluster has only 4"},
      {"yaml syntax error",
       {"node_types:", "  - name: a", "    gpu: [T4", "    gpus: 1"},
       "spec.yaml:4:9: invalid YAML: end of sequence flow not found"},
  };
  for (const ErrorCase& c : cases) {
    const std::string message = ErrorOf(c.yaml);
    EXPECT_TRUE(StartsWith(message, c.want))
        << c.what << "\n  got:  " << message << "\n  want: " << c.want;
  }
}

TEST(LoadClusterSpecTest, MissingFileIsNotFound) {
  // Given a path with no file, expect NotFound naming it.
  Result<ClusterSpec> r =
      LoadClusterSpec(kSourceDir + "/examples/clusters/nope.yaml", model::GpuCatalog::BuiltIn());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("nope.yaml"), std::string::npos);
}

TEST(LoadClusterSpecTest, ErrorsNameTheFilePath) {
  // Given a file with a mistake, expect its path in the message.
  const std::string path = ::testing::TempDir() + "/bad-cluster.yaml";
  {
    std::ofstream out(path);
    out << "node_types:\n  - {name: a, gpu: T4, gpus: eight, count: 1}\n";
  }
  Result<ClusterSpec> r = LoadClusterSpec(path, model::GpuCatalog::BuiltIn());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(path + ":2:30: node_types[0].gpus: must be a positive integer"),
            std::string::npos)
      << r.status().message();
  std::filesystem::remove(path);
}

TEST(ExampleClustersTest, EveryExampleLoads) {
  // Given the shipped examples/clusters/*.yaml, expect each to load against the built-in catalog.
  int loaded = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kSourceDir + "/examples/clusters")) {
    if (entry.path().extension() != ".yaml") continue;
    Result<ClusterSpec> r = LoadClusterSpec(entry.path().string(), model::GpuCatalog::BuiltIn());
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    ++loaded;
  }
  EXPECT_GE(loaded, 3);
}

TEST(ExampleClustersTest, ExamplesHaveTheDocumentedShape) {
  // Given the three named examples, expect the sizes their comments state.
  const model::GpuCatalog& catalog = model::GpuCatalog::BuiltIn();
  const std::string dir = kSourceDir + "/examples/clusters/";

  Result<ClusterSpec> small = LoadClusterSpec(dir + "small-h100.yaml", catalog);
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  EXPECT_EQ(small->nodes.size(), 8u);
  EXPECT_EQ(small->total_gpus(), 64);
  EXPECT_EQ(small->nodes[3].labels.at("rack"), "dgx-h100-r0");
  EXPECT_EQ(small->nodes[4].labels.at("rack"), "dgx-h100-r1");

  Result<ClusterSpec> hetero = LoadClusterSpec(dir + "hetero.yaml", catalog);
  ASSERT_TRUE(hetero.ok()) << hetero.status().ToString();
  EXPECT_EQ(hetero->total_gpus(), 136);
  std::set<std::string> models;
  int spot = 0, gdpr = 0;
  for (const model::NodeSpec& n : hetero->nodes) {
    if (!n.gpu_model.empty()) models.insert(n.gpu_model);
    spot += n.market == model::Market::kSpot;
    gdpr += n.labels.count("gdpr") && n.labels.at("gdpr") == "true";
  }
  EXPECT_EQ(models, (std::set<std::string>{"H100", "A100-80GB", "L4", "T4"}));
  EXPECT_GT(spot, 0);
  EXPECT_GT(gdpr, 0);
  EXPECT_FALSE(hetero->team_quota_gpus.empty());

  Result<ClusterSpec> philly = LoadClusterSpec(dir + "philly-like.yaml", catalog);
  ASSERT_TRUE(philly.ok()) << philly.status().ToString();
  EXPECT_EQ(philly->nodes.size(), 552u);
  EXPECT_EQ(philly->total_gpus(), 2490);
}

TEST(HomogeneousClusterTest, LastNodeTakesTheRemainder) {
  // Given 20 GPUs at 8 per node, expect 3 nodes with 8, 8 and 4 GPUs, CPUs and memory scaled.
  ClusterSpec spec = HomogeneousCluster(20, "A100", 8);
  ASSERT_EQ(spec.nodes.size(), 3u);
  EXPECT_EQ(spec.nodes[0].name, "node-0");
  EXPECT_EQ(spec.nodes[2].name, "node-2");
  EXPECT_EQ(spec.nodes[0].gpus, 8);
  EXPECT_EQ(spec.nodes[1].gpus, 8);
  EXPECT_EQ(spec.nodes[2].gpus, 4);
  EXPECT_EQ(spec.total_gpus(), 20);
  EXPECT_EQ(spec.nodes[0].cpu_milli, 96000);
  EXPECT_EQ(spec.nodes[0].mem_mib, 1024 * 1024);
  EXPECT_EQ(spec.nodes[2].cpu_milli, 48000);
  EXPECT_EQ(spec.nodes[2].mem_mib, 512 * 1024);
  for (const model::NodeSpec& n : spec.nodes) {
    EXPECT_EQ(n.gpu_model, "A100");
    EXPECT_TRUE(n.Validate().ok()) << n.Validate().ToString();
  }
  EXPECT_TRUE(spec.team_quota_gpus.empty());
}

TEST(HomogeneousClusterTest, RacksHoldSixteenNodes) {
  // Given 40 nodes, expect racks r0 (nodes 0-15), r1 (16-31) and r2 (32-39).
  ClusterSpec spec = HomogeneousCluster(320, "H100");
  ASSERT_EQ(spec.nodes.size(), 40u);
  EXPECT_EQ(spec.nodes[15].labels.at("rack"), "r0");
  EXPECT_EQ(spec.nodes[16].labels.at("rack"), "r1");
  EXPECT_EQ(spec.nodes[39].labels.at("rack"), "r2");
}

TEST(HomogeneousClusterTest, NoGpusMeansNoNodes) {
  // Given zero GPUs, expect an empty cluster rather than a node with none.
  EXPECT_TRUE(HomogeneousCluster(0, "A100").nodes.empty());
}

}  // namespace
}  // namespace gpufleet::sim
