#include "api/codec.h"
#include "api/job_summary.h"
#include "api/node_summary.h"
#include "api/token_summary.h"

#include <csignal>
#include <string>

#include <gtest/gtest.h>

namespace gpufleet::api {
namespace {

using json = nlohmann::json;

bool Contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Samples with every field away from its default, so that a field the codec drops or mixes up
// changes the encoding.
model::JobSpec SampleSpec() {
  model::JobSpec s;
  s.name = "train-llm";
  s.team = "nlp";
  s.priority = 3;
  s.submit = Time::FromMillis(1'700'000'000'123);
  s.gpus_per_node = 8;
  s.nodes = 2;
  s.gpu_milli = 999;
  s.gpu_models = {"H100", "A100-80GB"};
  s.cpu_milli = 32'000;
  s.mem_mib = 256'000;
  s.duration_estimate = Duration::Hours(5) + Duration::Millis(7);
  s.checkpoint_interval = Duration::Minutes(30);
  s.constraints = {{"region", "eu"}, {"gdpr", "true"}};
  s.market = model::MarketPreference::kOnDemand;
  s.max_cost_micros = 250000000;
  s.environment = "pytorch-2.5-cu124";
  return s;
}

model::NodeSpec SampleNodeSpec() {
  model::NodeSpec n;
  n.name = "node-a";
  n.gpu_model = "H100";
  n.gpus = 4;
  n.nvlink_domain = {0, 0, 1, 1};
  n.cpu_milli = 96'000;
  n.mem_mib = 1'000'000;
  n.labels = {{"zone", "eu-1a"}, {"rack", "r7"}};
  n.market = model::Market::kSpot;
  n.price_micros_per_hour = 32770000;
  n.environments = {"pytorch-2.5-cu124", "pytorch-2.7-cpu"};
  n.warm_environments = {"pytorch-2.5-cu124"};
  return n;
}

model::Placement SamplePlacement() {
  model::Placement p;
  p.gpu_model = "H100";
  p.parts.push_back({NodeId(4), {0, 1, 2, 3}, 900, 16'000, 64'000});
  p.parts.push_back({NodeId(9), {4, 5, 6, 7}, 900, 16'000, 64'000});
  return p;
}

JobRequest SampleRequest() {
  JobRequest r;
  r.spec = SampleSpec();
  r.argv = {"/bin/sh", "-c", "python train.py --lr 3e-4 \"quoted\" ünïcode"};
  r.workdir = "/data/runs/7";
  r.env = {{"NCCL_DEBUG", "INFO"}, {"EMPTY", ""}};
  r.user = "alice";
  r.process_per_gpu = true;
  r.verify_network = true;
  r.checkpoint.dir = "/ckpt/7";
  r.checkpoint.signal = SIGUSR1;
  r.checkpoint.grace = Duration::Seconds(90);
  r.restart.on_preemption = false;
  r.restart.max_restarts_on_errors = 2;
  r.restart.recover_on_exit_codes = {75, 137};
  r.watchdog.stall_timeout = Duration::Minutes(15);
  r.watchdog.restart_on_stall = true;
  r.cost.profile = model::Boundness::kCompute;
  r.cost.estimate_model = "A100";
  r.cost.deadline = Duration::Hours(24);
  r.cost.max_hourly_cost_micros = 40'000'000;
  r.spec.max_cost_micros = 300'500'000;
  r.cost.regions = {"europe-*", "us-east1"};
  r.cost.workload = "training-vision";
  r.cost.step_seconds = {{"A100", 0.42}, {"H100", 0.23}};
  r.cost.clouds = {"gcp", "aws"};
  r.cost.restart_overhead = Duration::Minutes(3);
  r.array_params = {{"lr", "0.1"}, {"batch", "64"}};
  return r;
}

JobRecord SampleJob() {
  JobRecord j;
  j.id = JobId(42);
  j.request_id = "req-abc";
  j.array_index = 3;
  j.request = SampleRequest();
  j.state = JobState::kRunning;
  j.reason = "placed on node-a gpus 0-3";
  j.submitted = Time::FromMillis(1'700'000'000'123);
  j.updated = Time::FromMillis(1'700'000'100'456);
  j.attempt = 2;
  j.error_restarts = 1;
  j.placement = SamplePlacement();
  j.exit_code = 137;
  j.cost_micros = 12345678;
  j.stop_intent = "max-cost";
  return j;
}

NodeRecord SampleNode() {
  NodeRecord n;
  n.id = NodeId(7);
  n.name = "node-a";
  n.spec = SampleNodeSpec();
  n.gpus = {{0, "GPU-0000", "NVIDIA H100 80GB HBM3", 81'559, "9.0"}, {1, "GPU-1111", "NVIDIA H100 80GB HBM3", 81'559, "9.0"}};
  n.driver_version = "550.54.15";
  n.cuda_version = "12.4";
  n.environments_ready = {"pytorch-2.5-cu124"};
  n.acceptance = "quarantined";
  n.acceptance_reason = "failed: GPU 1: 3 uncorrected ECC errors";
  n.drained = true;
  model::BurnInReport b;
  b.request = 7;
  b.at = Time::FromMillis(3'000);
  b.took = Duration::Seconds(95);
  b.gpu_model = "H100";
  b.gpus = 2;
  b.path = "cuda";
  b.torch = "2.5.1";
  b.backend = "nccl";
  b.timed_out = true;
  model::BurnInMeasurement m;
  m.name = "matmul_bf16";
  m.gpu = 1;
  m.value = 612.5;
  m.unit = "TFLOPS";
  m.reference = 593.4;
  m.basis = "datasheet bf16 989 TFLOPS x 0.60";
  m.ok = false;
  model::BurnInMeasurement skipped;
  skipped.name = "allreduce_busbw";
  skipped.skipped = "one GPU";
  model::BurnInMeasurement failed;
  failed.name = "matmul_fp16";
  failed.gpu = 0;
  failed.error = "RuntimeError: CUDA error";
  b.tests = {m, skipped, failed};
  model::GpuHealth h;
  h.index = 1;
  h.ecc_uncorrected = 3;
  h.retired_pages = 2;
  h.retirement_pending = true;
  h.xid_errors = {48, 79};
  h.pcie_gen = 4;
  h.pcie_width = 8;
  h.pcie_max_gen = 5;
  h.pcie_max_width = 16;
  h.nvlink_active = 16;
  h.nvlink_total = 18;
  h.max_temperature_c = 91;
  h.max_power_w = 690;
  h.min_sm_clock_mhz = 1200;
  h.max_sm_clock_mhz = 1980;
  h.throttle_reasons = {"hw_thermal"};
  b.health = {h};
  b.passed = false;
  b.problems = {"GPU 1: 3 uncorrected ECC errors"};
  b.speed_ratio = 1.03;
  b.threshold = 0.85;
  n.burn_in = b;
  n.address = "10.0.0.7";
  n.state = NodeState::kDraining;
  n.registered = Time::FromMillis(1'000);
  n.last_heartbeat = Time::FromMillis(2'000);
  return n;
}

TokenRecord SampleToken() {
  TokenRecord t;
  t.hash = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
  t.kind = TokenKind::kAgent;
  t.subject = "node-a";
  t.role = "agent";
  t.team = "nlp";
  t.created = Time::FromMillis(5'000);
  t.revoked = true;
  t.made_by = "1a2b3c4d5e6f";
  return t;
}

// Every key of `sample` holds a value different from the default's, recursively: the sample
// exercises each field.
void ExpectEveryFieldSet(const json& sample, const json& defaults, const std::string& path = "") {
  ASSERT_TRUE(sample.is_object()) << path;
  for (const auto& [key, value] : sample.items()) {
    const std::string where = path.empty() ? key : path + "." + key;
    ASSERT_TRUE(defaults.contains(key)) << where;
    if (value.is_object() && defaults[key].is_object() && !value.empty() && !defaults[key].empty()) {
      ExpectEveryFieldSet(value, defaults[key], where);
    } else {
      EXPECT_NE(value, defaults[key]) << where << " has its default value in the sample";
    }
  }
}

class CodecTest : public ::testing::Test {
 protected:
  // Encodes, decodes and encodes again; the two encodings must agree and survive text.
  template <typename T, typename Decode>
  static void ExpectRoundTrip(const T& value, Decode decode) {
    const json once = ToJson(value);
    auto text = ParseJson(DumpJson(once));
    ASSERT_TRUE(text.ok()) << text.status().ToString();
    auto back = decode(*text);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(ToJson(*back), once);
  }
};

TEST_F(CodecTest, SamplesSetEveryField) {
  // Given the samples used below, expect each to differ from a default value in every field, so
  // the round trips below cover every field.
  ExpectEveryFieldSet(ToJson(SampleSpec()), ToJson(model::JobSpec{}));
  ExpectEveryFieldSet(ToJson(SampleNodeSpec()), ToJson(model::NodeSpec{}));
  ExpectEveryFieldSet(ToJson(SampleJob()), ToJson(JobRecord{}));
  ExpectEveryFieldSet(ToJson(SampleNode()), ToJson(NodeRecord{}));
  ExpectEveryFieldSet(ToJson(SampleToken()), ToJson(TokenRecord{}));
  ExpectEveryFieldSet(ToJson(SamplePlacement().parts[0]), ToJson(model::NodeAssignment{}));
}

TEST_F(CodecTest, StructSizesMatchTheFieldsTheCodecKnows) {
  // Given the record structs as the codec was written for them, expect their sizes unchanged: a
  // new field changes the size, and must be added to codec.cc (both directions) and to the
  // samples above before this size is updated. Sizes are those of libstdc++ on x86-64.
#if defined(__GLIBCXX__) && defined(__x86_64__)
  EXPECT_EQ(sizeof(model::JobSpec), 256u);
  EXPECT_EQ(sizeof(model::NodeSpec), 224u);
  EXPECT_EQ(sizeof(model::NodeAssignment), 56u);
  EXPECT_EQ(sizeof(model::Placement), 56u);
  EXPECT_EQ(sizeof(CheckpointPolicy), 48u);
  EXPECT_EQ(sizeof(RestartPolicy), 32u);
  EXPECT_EQ(sizeof(model::JobCostHints), 200u);
  EXPECT_EQ(sizeof(JobRequest), 744u);  // the cost hints in one struct, max_cost only in spec
  EXPECT_EQ(sizeof(JobRecord), 968u);  // + stop_intent (optional when decoding)
  EXPECT_EQ(sizeof(Transition), 48u);
  EXPECT_EQ(sizeof(GpuInfo), 112u);
  EXPECT_EQ(sizeof(NodeRecord), 768u);
  EXPECT_EQ(sizeof(TokenRecord), 216u);  // + expires, last_used, made_by (encoded, optional)
#endif
}

TEST_F(CodecTest, ModelTypesRoundTrip) {
  // Given fully populated model values, expect decode(encode(x)) to encode the same.
  ExpectRoundTrip(SampleSpec(), JobSpecFromJson);
  ExpectRoundTrip(SampleNodeSpec(), NodeSpecFromJson);
  ExpectRoundTrip(SamplePlacement(), PlacementFromJson);
  ExpectRoundTrip(SamplePlacement().parts[1], NodeAssignmentFromJson);
  ExpectRoundTrip(model::JobSpec{}, JobSpecFromJson);
  ExpectRoundTrip(model::Placement{}, PlacementFromJson);
}

TEST_F(CodecTest, RequestAndRecordsRoundTrip) {
  // Given fully populated requests and records (and default ones), expect lossless round trips.
  ExpectRoundTrip(SampleRequest().checkpoint, CheckpointPolicyFromJson);
  ExpectRoundTrip(SampleRequest().restart, RestartPolicyFromJson);
  ExpectRoundTrip(SampleRequest(), JobRequestFromJson);
  ExpectRoundTrip(SampleJob(), JobRecordFromJson);
  ExpectRoundTrip(JobRecord{}, JobRecordFromJson);
  ExpectRoundTrip(Transition{Time::FromMillis(99), JobState::kStopping, JobState::kPreempted, "priority"},
                  TransitionFromJson);
  ExpectRoundTrip(SampleNode().gpus[1], GpuInfoFromJson);
  ExpectRoundTrip(SampleNode(), NodeRecordFromJson);
  ExpectRoundTrip(NodeRecord{}, NodeRecordFromJson);
  ExpectRoundTrip(SampleToken(), TokenRecordFromJson);
}

TEST_F(CodecTest, DumpJobRecordWritesTheTextOfDumpJsonOfToJson) {
  // Given a job with every field set, a default one, and jobs whose strings need escapes (quotes,
  // backslashes, control characters, UTF-8, bytes that are not UTF-8, map keys with quotes),
  // expect DumpJobRecord to write byte for byte what DumpJson(ToJson(job)) writes.
  std::vector<JobRecord> jobs = {SampleJob(), JobRecord{}};
  JobRecord odd = SampleJob();
  odd.request.spec.name = "a\"b\\c";
  odd.request.spec.team = "tab\there\nline\x01\x7f";
  odd.reason = "caf\xc3\xa9 \xe2\x82\xac";
  constexpr char kNotUtf8[] = "bad \xff\xfe utf-8 and a NUL \0 byte";
  odd.stop_intent = std::string(kNotUtf8, sizeof kNotUtf8 - 1);
  odd.request.env = {{"K\"EY", "v\\al"}, {"\xc3\xa9", "\n"}};
  odd.request.spec.constraints = {{"zone", "\x1f"}};
  odd.request.cost.step_seconds = {{"A100", 1e-7}, {"H100", 12345.678901234567}, {"L4", 3.0}};
  odd.request.spec.duration_estimate.reset();
  odd.request.cost.deadline.reset();
  odd.placement->parts.clear();
  odd.exit_code = -1;
  odd.id = JobId(int64_t{1} << 53);
  jobs.push_back(odd);
  JobRecord array_task;
  array_task.id = JobId(7);
  array_task.array_index = 99'999;
  array_task.request.spec.name = "arr-99999";
  array_task.request.argv = {"/bin/sh", "-c", "true"};
  array_task.request.env = {{"GPUFLEET_ARRAY_I", "99999"}, {"GPUFLEET_ARRAY_INDEX", "99999"}};
  array_task.request.array_params = {{"i", "99999"}};
  jobs.push_back(array_task);
  for (const JobRecord& job : jobs) {
    EXPECT_EQ(DumpJobRecord(job), DumpJson(ToJson(job)));
  }
}

TEST_F(CodecTest, AppendJsonStringWritesWhatDumpJsonWrites) {
  // Given plain names, quotes, backslashes, control characters, UTF-8 and bytes that are not
  // UTF-8, expect each appended as DumpJson writes the string, after what the text held.
  constexpr char kNul[] = "a\0b";
  for (const std::string& s : {std::string(), std::string("arr-99999"), std::string("say \"hi\" \\ bye"),
                                std::string("line\nfeed\ttab\x01\x7f"), std::string("\xc3\xa9t\xc3\xa9"),
                                std::string("bad \xff byte"), std::string(kNul, sizeof kNul - 1)}) {
    std::string out = "[";
    AppendJsonString(out, s);
    EXPECT_EQ(out, "[" + DumpJson(nlohmann::json(s)));
  }
}

TEST_F(CodecTest, DecodedJobRecordHasTheOriginalValues) {
  // Given a sample job encoded and decoded, expect the C++ fields themselves to come back (the
  // round trips above compare encodings).
  auto back = JobRecordFromJson(ToJson(SampleJob()));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->id, JobId(42));
  EXPECT_EQ(back->array_index, 3);
  EXPECT_EQ(back->state, JobState::kRunning);
  EXPECT_EQ(back->submitted, Time::FromMillis(1'700'000'000'123));
  EXPECT_EQ(back->request.spec.duration_estimate, Duration::Hours(5) + Duration::Millis(7));
  EXPECT_EQ(back->request.spec.market, model::MarketPreference::kOnDemand);
  EXPECT_EQ(back->request.argv, SampleRequest().argv);
  EXPECT_EQ(back->request.env, SampleRequest().env);
  EXPECT_EQ(back->request.checkpoint.signal, SIGUSR1);
  EXPECT_EQ(back->request.restart.recover_on_exit_codes, (std::vector<int>{75, 137}));
  EXPECT_EQ(back->request.watchdog.stall_timeout, Duration::Minutes(15));
  EXPECT_TRUE(back->request.watchdog.restart_on_stall);
  EXPECT_EQ(back->request.cost, SampleRequest().cost);
  EXPECT_EQ(back->request.spec.max_cost_micros, 300'500'000);
  EXPECT_EQ(back->request.array_params, SampleRequest().array_params);
  ASSERT_TRUE(back->placement.has_value());
  ASSERT_EQ(back->placement->parts.size(), 2u);
  EXPECT_EQ(back->placement->parts[1].node, NodeId(9));
  EXPECT_EQ(back->placement->parts[1].gpus, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(back->exit_code, 137);
}

TEST_F(CodecTest, FieldsAreReadableSnakeCaseWithMillisAndNames) {
  // Given a sample job, expect the encoding the API documents: snake_case names, times in _ms
  // integers, enums by name, empty optionals as null.
  const json j = ToJson(SampleJob());
  EXPECT_EQ(j["id"], 42);
  EXPECT_EQ(j["state"], "running");
  EXPECT_EQ(j["submitted_ms"], 1'700'000'000'123);
  EXPECT_EQ(j["request"]["spec"]["submit_ms"], 1'700'000'000'123);
  EXPECT_EQ(j["request"]["spec"]["duration_estimate_ms"], 18'000'007);
  EXPECT_EQ(j["request"]["spec"]["market"], "on-demand");
  EXPECT_EQ(j["request"]["checkpoint"]["grace_ms"], 90'000);
  EXPECT_EQ(j["request"]["deadline_ms"], 86'400'000);
  EXPECT_EQ(j["request"]["max_hourly_cost_micros"], 40'000'000);
  EXPECT_EQ(j["placement"]["parts"][0]["node"], 4);
  EXPECT_EQ(ToJson(SampleNode())["spec"]["market"], "spot");
  EXPECT_EQ(ToJson(SampleNode())["state"], "draining");
  EXPECT_EQ(ToJson(SampleToken())["kind"], "agent");
  const json empty = ToJson(JobRecord{});
  EXPECT_TRUE(empty["placement"].is_null());
  EXPECT_TRUE(empty["exit_code"].is_null());
  EXPECT_TRUE(empty["request"]["spec"]["duration_estimate_ms"].is_null());
  EXPECT_TRUE(empty["request"]["deadline_ms"].is_null());
}

TEST_F(CodecTest, OptionalFieldsMayBeAbsent) {
  // Given a job record without placement, exit code and duration estimate keys, expect it to
  // decode with those empty.
  json j = ToJson(SampleJob());
  j.erase("placement");
  j.erase("exit_code");
  j["request"]["spec"].erase("duration_estimate_ms");
  auto back = JobRecordFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_FALSE(back->placement.has_value());
  EXPECT_FALSE(back->exit_code.has_value());
  EXPECT_FALSE(back->request.spec.duration_estimate.has_value());
}

TEST_F(CodecTest, RecordsFromBeforeTheCostHintsKeepTheirLimits) {
  // Given a record as versions before the one job schema wrote it (max_cost beside the request's
  // other fields and not in its spec; no workload, step times, clouds or restart overhead),
  // expect the job's max_cost enforced from the old field and the later hints at their defaults.
  json j = ToJson(SampleJob());
  j["request"]["spec"].erase("max_cost_micros");
  j["request"]["max_cost_micros"] = 300'500'000;
  for (const char* key : {"workload", "step_seconds", "clouds", "restart_overhead_ms"}) j["request"].erase(key);
  auto back = JobRecordFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->request.spec.max_cost_micros, 300'500'000);
  EXPECT_TRUE(back->request.cost.workload.empty());
  EXPECT_TRUE(back->request.cost.step_seconds.empty());
  EXPECT_TRUE(back->request.cost.clouds.empty());
  EXPECT_EQ(back->request.cost.restart_overhead, model::JobCostHints{}.restart_overhead);
  EXPECT_EQ(back->request.cost.regions, SampleRequest().cost.regions);
  // And a record that has both keeps the spec's.
  j["request"]["spec"]["max_cost_micros"] = 7;
  auto both = JobRecordFromJson(j);
  ASSERT_TRUE(both.ok()) << both.status().ToString();
  EXPECT_EQ(both->request.spec.max_cost_micros, 7);
}

TEST_F(CodecTest, JobSummaryRoundTripsAndKeepsSlices) {
  // Given the summary of a full record with a queue position, expect the wire shape listings
  // document and the same summary back; a GPU slice travels as a fraction and comes back in
  // milli-GPU; a summary of the wrong shape names the field.
  JobSummary s = SummaryOf(SampleJob());
  s.position = 3;
  const json j = ToJson(s);
  // The sample's spec is a slice (every field differs from its default).
  EXPECT_EQ(j["gpus"], static_cast<double>(SampleJob().request.spec.gpu_milli) / 1000.0);
  EXPECT_EQ(j["state"], "running");
  EXPECT_EQ(j["position"], 3);
  auto back = JobSummaryFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(ToJson(*back), j);
  EXPECT_EQ(back->placement->parts.size(), 2u);

  JobRecord slice = SampleJob();
  slice.request.spec.nodes = 1;
  slice.request.spec.gpus_per_node = 1;
  slice.request.spec.gpu_milli = 250;
  const json sj = ToJson(SummaryOf(slice));
  EXPECT_EQ(sj["gpus"], 0.25);
  EXPECT_FALSE(sj.contains("position"));
  auto sb = JobSummaryFromJson(sj);
  ASSERT_TRUE(sb.ok()) << sb.status().ToString();
  EXPECT_EQ(sb->gpu_milli, 250);
  EXPECT_TRUE(sb->fractional());
  // Whole GPUs on several nodes: a count, and not a slice.
  JobRecord gang = SampleJob();
  gang.request.spec.gpu_milli = model::kMilliGpuPerGpu;
  gang.request.spec.gpus_per_node = 4;
  gang.request.spec.nodes = 2;
  auto gb = JobSummaryFromJson(ToJson(SummaryOf(gang)));
  ASSERT_TRUE(gb.ok()) << gb.status().ToString();
  EXPECT_EQ(gb->gpus_per_node, 4);
  EXPECT_EQ(gb->nodes, 2);
  EXPECT_FALSE(gb->fractional());

  json bad = j;
  bad["state"] = "sleeping";
  auto b = JobSummaryFromJson(bad);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message().rfind("state: ", 0), 0u) << b.status().message();
}

TEST_F(CodecTest, UnknownFieldsAreIgnored) {
  // Given a record with a field this version does not know, expect it to decode.
  json j = ToJson(SampleToken());
  j["added_later"] = {{"x", 1}};
  EXPECT_TRUE(TokenRecordFromJson(j).ok());
}

// Expects decoding to fail with InvalidArgument and a message containing `part`.
template <typename R>
void ExpectError(const R& r, const std::string& part) {
  ASSERT_FALSE(r.ok()) << "expected an error containing: " << part;
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(r.status().message(), part)) << r.status().message() << "\n  lacks: " << part;
}

TEST_F(CodecTest, MissingFieldNamesItsPath) {
  // Given a job record whose nested spec lacks gpus_per_node, expect the full path in the error.
  json j = ToJson(SampleJob());
  j["request"]["spec"].erase("gpus_per_node");
  ExpectError(JobRecordFromJson(j), "request.spec.gpus_per_node: missing field");
  json t = ToJson(SampleToken());
  t.erase("hash");
  ExpectError(TokenRecordFromJson(t), "hash: missing field");
}

TEST_F(CodecTest, MistypedFieldsNameThePathAndWhatWasFound) {
  // Given fields of the wrong JSON type, expect errors that say where and what was found.
  json j = ToJson(SampleJob());
  j["request"]["spec"]["gpus_per_node"] = "eight";
  ExpectError(JobRecordFromJson(j), "request.spec.gpus_per_node: expected an integer, got string \"eight\"");

  j = ToJson(SampleJob());
  j["attempt"] = 1.5;
  ExpectError(JobRecordFromJson(j), "attempt: expected an integer, got number 1.5");

  j = ToJson(SampleJob());
  j["request"]["argv"][1] = 7;
  ExpectError(JobRecordFromJson(j), "request.argv[1]: expected a string, got number 7");

  j = ToJson(SampleJob());
  j["placement"]["parts"][1]["gpus"][2] = true;
  ExpectError(JobRecordFromJson(j), "placement.parts[1].gpus[2]: expected an integer");

  j = ToJson(SampleJob());
  j["request"]["env"]["NCCL_DEBUG"] = json::array();
  ExpectError(JobRecordFromJson(j), "request.env.NCCL_DEBUG: expected a string");

  j = ToJson(SampleJob());
  j["request"]["restart"]["on_preemption"] = "yes";
  ExpectError(JobRecordFromJson(j), "request.restart.on_preemption: expected true or false");

  j = ToJson(SampleJob());
  j["request"]["spec"]["gpu_models"] = "H100";
  ExpectError(JobRecordFromJson(j), "request.spec.gpu_models: expected an array, got string \"H100\"");

  j = ToJson(SampleNode());
  j["spec"] = nullptr;
  ExpectError(NodeRecordFromJson(j), "spec: must not be null");
}

TEST_F(CodecTest, IntegersOutOfRangeAreRejected) {
  // Given integers that do not fit the C++ field, expect an out-of-range error, not a wrap.
  json j = ToJson(SampleSpec());
  j["nodes"] = int64_t{10'000'000'000};
  ExpectError(JobSpecFromJson(j), "nodes: integer 10000000000 is out of range");
  j = ToJson(SampleSpec());
  j["mem_mib"] = std::numeric_limits<uint64_t>::max();
  ExpectError(JobSpecFromJson(j), "mem_mib: integer 18446744073709551615 is out of range");
  j = ToJson(SampleSpec());
  j["mem_mib"] = std::numeric_limits<int64_t>::min();
  EXPECT_TRUE(JobSpecFromJson(j).ok());  // fits; Validate() judges whether it makes sense
}

TEST_F(CodecTest, UnknownEnumNamesListTheValidOnes) {
  // Given an unknown state, node state, token kind or market, expect the error to name the field,
  // the bad value and the valid ones.
  json j = ToJson(SampleJob());
  j["state"] = "runing";
  ExpectError(JobRecordFromJson(j), "state: unknown job state 'runing'");
  ExpectError(JobRecordFromJson(j), "pending, starting, running, stopping, succeeded, failed, cancelled, preempted");
  json n = ToJson(SampleNode());
  n["state"] = "down";
  ExpectError(NodeRecordFromJson(n), "state: unknown node state 'down' (expected one of: up, draining, lost, gone)");
  json t = ToJson(SampleToken());
  t["kind"] = "root";
  ExpectError(TokenRecordFromJson(t), "kind: unknown token kind 'root' (expected one of: user, join, agent)");
  json s = ToJson(SampleNodeSpec());
  s["market"] = "cheap";
  ExpectError(NodeSpecFromJson(s), "market: unknown market 'cheap'");
  json tr = ToJson(Transition{});
  tr["to"] = 3;
  ExpectError(TransitionFromJson(tr), "to: expected a string, got number 3");
}

TEST_F(CodecTest, NonObjectsAreRejectedWithoutThrowing) {
  // Given values that are not objects where objects belong, expect errors, never exceptions.
  ExpectError(JobRecordFromJson(json("job")), "expected an object, got string \"job\"");
  ExpectError(JobRecordFromJson(json()), "expected an object, got null");
  ExpectError(NodeRecordFromJson(json::array({1, 2})), "expected an object, got array [1,2]");
  json j = ToJson(SampleJob());
  j["placement"] = 5;
  ExpectError(JobRecordFromJson(j), "placement: expected an object, got number 5");
  j = ToJson(SampleNode());
  j["gpus"][0] = "gpu0";
  ExpectError(NodeRecordFromJson(j), "gpus[0]: expected an object");
}

TEST_F(CodecTest, NodeSummaryRoundTripsWithWhatTheControllerAdds) {
  // Given the summary of a full node record plus what the controller knows live (GPUs in use,
  // telemetry, jobs, a spot notice), expect the wire shape GET /v1/nodes documents and the same
  // summary back; a node of the wrong shape names the field.
  NodeSummary n = SummaryOf(SampleNode());
  n.gpus_used = 3;
  n.telemetry = {{87, 40'000, 71, 520}, {12, 1'024, 45, 90}};
  n.jobs = {JobId(42), JobId(43)};
  n.notice = SpotNotice{"terminate", Time::FromMillis(9'000)};
  n.disks = {{"data", "/var/lib/gpufleet", 1'000, 50'000}};
  n.containment = "cgroup v2 at /sys/fs/cgroup/gpufleet: parts are contained; memory and cpu limits enforced";
  n.limits = EnforcedLimits{true, false};
  const json j = ToJson(n);
  EXPECT_EQ(j["limits"], (json{{"memory", true}, {"cpu", false}}));
  EXPECT_EQ(j["disks"][0]["free_bytes"], 1'000);
  EXPECT_EQ(j["disks"][0]["dir"], "data");
  EXPECT_EQ(j["state"], NodeStateName(SampleNode().state));
  EXPECT_EQ(j["market"], "spot");
  EXPECT_EQ(j["gpu_model"], "H100");
  EXPECT_EQ(j["gpus"], 4);
  EXPECT_EQ(j["environments_ready"], json::array({"pytorch-2.5-cu124"}));
  EXPECT_EQ(j["jobs"], json::array({42, 43}));
  EXPECT_EQ(j["telemetry"][0]["temperature_c"], 71);
  EXPECT_TRUE(j["burn_in"].is_object());
  auto back = NodeSummaryFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(ToJson(*back), j);
  EXPECT_EQ(back->burn_in->tests.size(), SampleNode().burn_in->tests.size());
  EXPECT_EQ(back->notice->action, "terminate");
  EXPECT_EQ(back->disks, n.disks);
  EXPECT_EQ(back->containment, n.containment);
  EXPECT_EQ(back->limits, (std::optional<EnforcedLimits>(EnforcedLimits{true, false})));
  EXPECT_EQ(back->market, model::Market::kSpot);
  EXPECT_TRUE(back->heard_since_start);
  // Not heard from since a controller restart: said, and kept; absent (an older controller): heard.
  n.heard_since_start = false;
  const json unheard = ToJson(n);
  EXPECT_EQ(unheard["heard_since_start"], false);
  EXPECT_FALSE(NodeSummaryFromJson(unheard)->heard_since_start);
  json older = unheard;
  older.erase("heard_since_start");
  EXPECT_TRUE(NodeSummaryFromJson(older)->heard_since_start);
  older.erase("disks");  // (an older controller: no room reported, nor whether limits hold)
  older.erase("limits");
  EXPECT_TRUE(NodeSummaryFromJson(older)->disks.empty());
  EXPECT_FALSE(NodeSummaryFromJson(older)->limits.has_value());

  // Never burnt in, no notice: "burn_in" is null and "notice" absent, and both decode as absent.
  NodeRecord plain = SampleNode();
  plain.burn_in.reset();
  const json pj = ToJson(SummaryOf(plain));
  EXPECT_TRUE(pj["burn_in"].is_null());
  EXPECT_FALSE(pj.contains("notice"));
  auto pb = NodeSummaryFromJson(pj);
  ASSERT_TRUE(pb.ok()) << pb.status().ToString();
  EXPECT_FALSE(pb->burn_in.has_value());
  EXPECT_FALSE(pb->notice.has_value());

  json bad = j;
  bad["telemetry"][1]["power_w"] = "lots";
  auto b = NodeSummaryFromJson(bad);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message().rfind("telemetry[1].power_w: ", 0), 0u) << b.status().message();
  bad = j;
  bad["jobs"] = json::array({42, "x"});
  b = NodeSummaryFromJson(bad);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message().rfind("jobs: ", 0), 0u) << b.status().message();
  bad = j;
  bad["burn_in"] = json::array();
  b = NodeSummaryFromJson(bad);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message().rfind("burn_in: ", 0), 0u) << b.status().message();
  bad = j;
  bad["disks"][0]["free_bytes"] = "lots";
  b = NodeSummaryFromJson(bad);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message().rfind("disks[0].free_bytes: ", 0), 0u) << b.status().message();
}

TEST_F(CodecTest, TokenSummaryShowsTheShortIdAndNeverTheHash) {
  // Given a token record, expect its summary to carry the 12-digit id and not the hash, to
  // round-trip, and to leave out the times it does not have.
  TokenRecord t;
  t.hash = std::string(64, 'a');
  t.kind = TokenKind::kUser;
  t.subject = "alice";
  t.role = "team-admin";
  t.team = "vision";
  t.created = Time::FromMillis(1'000);
  t.expires = Time::FromMillis(5'000);
  const json j = ToJson(SummaryOf(t));
  EXPECT_EQ(j["id"], std::string(12, 'a'));
  EXPECT_EQ(j.dump().find(std::string(13, 'a')), std::string::npos) << j.dump();
  EXPECT_EQ(j["expires_ms"], 5'000);
  EXPECT_FALSE(j.contains("last_used_ms"));
  auto back = TokenSummaryFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(ToJson(*back), j);
  EXPECT_FALSE(back->last_used.has_value());
  json bad = j;
  bad["kind"] = "magic";
  auto b = TokenSummaryFromJson(bad);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message().rfind("kind: ", 0), 0u) << b.status().message();
  // A join token is stored with the agent role but shown as a join token, as its creation says.
  TokenRecord join = t;
  join.kind = TokenKind::kJoin;
  join.role = "agent";
  EXPECT_EQ(ToJson(SummaryOf(join))["role"], "join");
}

TEST_F(CodecTest, ParseJsonReportsSyntaxErrors) {
  // Given broken JSON text, expect InvalidArgument saying where; given good text, the value.
  auto bad = ParseJson("{\"id\": 1,");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(bad.status().message(), "invalid JSON")) << bad.status().message();
  auto good = ParseJson("{\"id\": 1}");
  ASSERT_TRUE(good.ok());
  EXPECT_EQ((*good)["id"], 1);
}

TEST_F(CodecTest, ParseJsonRefusesDeepNestingBeforeParsing) {
  // Given a submit body nesting 100,000 arrays (which would overflow the stack in the parser or
  // in any dump of the result), expect InvalidArgument naming the depth and where it is crossed.
  const std::string body = "{\"job\": " + std::string(100'000, '[') + std::string(100'000, ']') + "}";
  auto deep = ParseJson(body);
  ASSERT_FALSE(deep.ok());
  EXPECT_EQ(deep.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(deep.status().message(), "invalid JSON: nesting deeper than 64 levels at line 1, column 72");
  // Given objects nested to the limit, expect them parsed.
  std::string ok;
  for (int i = 0; i < 64; ++i) ok += "{\"a\":";
  ok += "1" + std::string(64, '}');
  EXPECT_TRUE(ParseJson(ok).ok());
}

TEST_F(CodecTest, ARequestBodyWithANulByteInAnyTextIsRefusedSayingWhere) {
  // Given request bodies with a NUL byte in a nested string, a list element, a key and the body
  // itself, expect InvalidArgument naming where; given the same bodies without one, the value.
  auto where = [](const std::string& body) {
    auto r = ParseRequestJson(body);
    EXPECT_FALSE(r.ok()) << body;
    return r.ok() ? std::string() : r.status().message();
  };
  EXPECT_EQ(where(R"j({"events": [{"seq": 1}, {"seq": 2, "message": "exited (a\u0000b)"}]})j"),
            "events[1].message: a NUL byte (\\u0000) is not accepted in any text");
  EXPECT_EQ(where(R"({"name": "n", "environments_ready": ["a", "b\u0000"]})"),
            "environments_ready[1]: a NUL byte (\\u0000) is not accepted in any text");
  EXPECT_EQ(where(R"({"job": {"env": {"A\u0000": "1"}}})"),
            "job.env (a key): a NUL byte (\\u0000) is not accepted in any text");
  EXPECT_EQ(where(R"("\u0000")"), "the body: a NUL byte (\\u0000) is not accepted in any text");
  EXPECT_EQ(where(R"({"ok": 1, "a\u0000": 1})"), "a key of the body: a NUL byte (\\u0000) is not accepted in any text");
  EXPECT_EQ(where("{\"a\": "), ParseJson("{\"a\": ").status().message());  // syntax first
  auto good = ParseRequestJson(R"j({"events": [{"message": "exited (a\\u0000b)"}], "n": [1, null, true]})j");
  ASSERT_TRUE(good.ok()) << good.status().message();
  EXPECT_EQ((*good)["events"][0]["message"], "exited (a\\u0000b)");  // a backslash, then "u0000"
}

TEST_F(CodecTest, ARequestBodyGivingAKeyTwiceInOneObjectIsRefusedSayingWhere) {
  // Given a key twice at the top, in a nested object and in an object inside a list, expect
  // InvalidArgument naming it; the same key in two objects, and a NUL byte when NUL bytes are
  // let through, are fine.
  auto where = [](const std::string& body) {
    auto r = ParseRequestJson(body);
    EXPECT_FALSE(r.ok()) << body;
    return r.ok() ? std::string() : r.status().message();
  };
  EXPECT_EQ(where(R"({"ids": [1], "ids": [2]})"), "ids: given twice; give each key once (only the last would count)");
  EXPECT_EQ(where(R"({"job": {"run": "x", "name": "a", "name": "b"}})"),
            "job.name: given twice; give each key once (only the last would count)");
  EXPECT_EQ(where(R"({"events": [{"seq": 1}, {"seq": 2, "seq": 3}]})"),
            "events[].seq: given twice; give each key once (only the last would count)");
  auto fine = ParseRequestJson(R"({"a": {"k": 1}, "b": {"k": 2}, "c": [{"k": 1}, {"k": 2}]})");
  ASSERT_TRUE(fine.ok()) << fine.status().message();
  EXPECT_EQ((*fine)["c"][1]["k"], 2);
  EXPECT_TRUE(ParseRequestJson(R"({"a": "x\u0000"})", /*refuse_nul=*/false).ok());
  EXPECT_FALSE(ParseRequestJson(std::string(100'000, '[') + std::string(100'000, ']')).ok());  // depth first
}

TEST_F(CodecTest, NulBytesInAnAgentsBodyBecomeReplacementCharactersInStringsAndKeys) {
  // Given a body with NUL bytes in nested strings, a list and a key, expect each written U+FFFD,
  // the key renamed with its value, and everything else as it was.
  auto body = ParseJson(R"j({"a": "x\u0000y\u0000", "b": ["\u0000", 1], "c": {"k\u0000": "v", "n": null}})j");
  ASSERT_TRUE(body.ok());
  ReplaceNulBytes(*body);
  auto want = ParseJson(R"j({"a": "x\ufffdy\ufffd", "b": ["\ufffd", 1], "c": {"k\ufffd": "v", "n": null}})j");
  ASSERT_TRUE(want.ok());
  EXPECT_EQ(*body, *want) << body->dump();
}

TEST_F(CodecTest, NulEscapesBecomeReplacementCharactersAndNothingElseChanges) {
  // Given JSON text with NUL escapes, after one backslash and after three (an escaped backslash,
  // then the escape), and a backslash written before "u0000" (two backslashes: no escape),
  // expect each escape written \ufffd, the rest byte for byte, and the text to parse to the same
  // value with U+FFFD for each NUL.
  Transition t{Time::FromMillis(1), JobState::kRunning, JobState::kFailed,
               std::string("a\0b \\\0c \\u0000 \\\\u0000", 22)};
  const std::string text = DumpJson(ToJson(t));
  ASSERT_NE(text.find(R"(a\u0000b \\\u0000c \\u0000 \\\\u0000)"), std::string::npos) << text;
  const std::string out = WithoutNulEscapes(text);
  EXPECT_NE(out.find(R"(a\ufffdb \\\ufffdc \\u0000 \\\\u0000)"), std::string::npos) << out;
  EXPECT_EQ(out.size(), text.size());
  auto back = ParseJson(out);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ((*back)["reason"], "a\xEF\xBF\xBD" "b \\\xEF\xBF\xBD" "c \\u0000 \\\\u0000");
  EXPECT_EQ(WithoutNulEscapes(R"({"a":"\u0000"})"), R"({"a":"\ufffd"})");
  EXPECT_EQ(WithoutNulEscapes(R"({"a":"\u00001"})"), R"({"a":"\ufffd1"})");
  EXPECT_EQ(WithoutNulEscapes(R"({"a":"\u000a"})"), R"({"a":"\u000a"})");
}

TEST_F(CodecTest, DumpJsonReplacesInvalidUtf8InsteadOfThrowing) {
  // Given a reason holding bytes that are not UTF-8 (a process's raw output), expect DumpJson to
  // produce valid JSON with a replacement character rather than throw.
  Transition t{Time::FromMillis(1), JobState::kRunning, JobState::kFailed, std::string("exit \xff\xfe")};
  std::string text = DumpJson(ToJson(t));
  auto back = ParseJson(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ((*back)["reason"], "exit \xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST_F(CodecTest, ArrayTasksRoundTripTheirOwnFields) {
  // Given three tasks of one array (one with strings that need escapes and bytes that are not
  // UTF-8), expect DumpArrayTasks then ApplyArrayTask on a copy of the first task to give back
  // each task as it was, and a malformed element to be refused with its path, leaving the job as
  // it was.
  std::vector<JobRecord> tasks(3, SampleJob());
  for (int i = 0; i < 3; ++i) {
    JobRecord& t = tasks[i];
    t.array_index = i;
    t.request.spec.name = "sweep-" + std::to_string(i);
    t.request.argv = {"python", "train.py", "--lr=0." + std::to_string(i)};
    t.request.workdir = "/runs/" + std::to_string(i);
    t.request.env["GPUFLEET_ARRAY_INDEX"] = std::to_string(i);
    t.request.array_params = {{"lr", "0." + std::to_string(i)}};
  }
  tasks[2].request.argv.push_back("caf\xc3\xa9 \"quoted\" \\ \x01");
  tasks[2].request.env["ODD"] = "\xff\xfe";
  tasks[2].request.workdir.clear();
  tasks[2].request.array_params.clear();
  auto text = ParseJson(DumpArrayTasks(tasks, 0, tasks.size()));
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  ASSERT_TRUE(text->is_array());
  ASSERT_EQ(text->size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    JobRecord back = tasks[0];
    ASSERT_TRUE(ApplyArrayTask((*text)[i], "task", back).ok());
    back.id = tasks[i].id;
    // Bytes that are not UTF-8 come back as U+FFFD, as in every stored record.
    EXPECT_EQ(DumpJson(ToJson(back)), DumpJson(ToJson(tasks[i]))) << "task " << i;
  }
  auto part = ParseJson(DumpArrayTasks(tasks, 1, 2));
  ASSERT_TRUE(part.ok());
  ASSERT_EQ(part->size(), 1u);
  EXPECT_EQ((*part)[0]["name"], "sweep-1");

  JobRecord job = tasks[0];
  json bad = (*text)[1];
  bad["env"] = {{"K", 3}};
  Status s = ApplyArrayTask(bad, "job 9 task", job);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("job 9 task.env.K"), std::string::npos) << s.message();
  EXPECT_EQ(ToJson(job), ToJson(tasks[0]));
}

TEST(RecordsTest, ArrayTasksShareAllButTheirOwnFields) {
  // Given tasks that differ only in their id, index, name, command, directory, environment and
  // parameters, expect them to share the rest, and each to come back unchanged; given one that
  // also differs in its priority, or its step times, expect not.
  std::vector<JobRecord> tasks(4);
  for (int i = 0; i < 4; ++i) {
    JobRecord& t = tasks[i];
    t.id = JobId(10 + i);
    t.array_index = i;
    t.request.spec.team = "nlp";
    t.request.spec.name = "sweep-" + std::to_string(i);
    t.request.argv = {"run", std::to_string(i)};
    t.request.workdir = "/w/" + std::to_string(i);
    t.request.env = {{"I", std::to_string(i)}};
    t.request.array_params = {{"i", std::to_string(i)}};
    t.request.cost.step_seconds = {{"H100", 0.5}};
  }
  const std::vector<JobRecord> given = tasks;
  EXPECT_TRUE(ShareAllButArrayTaskFields(tasks));
  EXPECT_TRUE(tasks == given);
  tasks[3].request.spec.priority = 1;
  EXPECT_FALSE(ShareAllButArrayTaskFields(tasks));
  tasks[3].request.spec.priority = 0;
  tasks[2].request.cost.step_seconds["H100"] = 0.25;
  EXPECT_FALSE(ShareAllButArrayTaskFields(tasks));
  tasks[2] = given[2];
  EXPECT_TRUE(tasks == given);
  std::vector<JobRecord> none;
  EXPECT_TRUE(ShareAllButArrayTaskFields(none));
}

TEST(RecordsTest, EnumNamesParseBack) {
  // Given every enum value, expect its name to parse back to it; and only terminal states to be
  // terminal.
  for (JobState s : {JobState::kPending, JobState::kStarting, JobState::kRunning, JobState::kStopping,
                     JobState::kSucceeded, JobState::kFailed, JobState::kCancelled, JobState::kPreempted}) {
    auto back = ParseJobState(JobStateName(s));
    ASSERT_TRUE(back.ok()) << JobStateName(s);
    EXPECT_EQ(*back, s);
    const bool terminal = s == JobState::kSucceeded || s == JobState::kFailed || s == JobState::kCancelled;
    EXPECT_EQ(IsTerminal(s), terminal) << JobStateName(s);
  }
  for (NodeState s : {NodeState::kUp, NodeState::kDraining, NodeState::kLost, NodeState::kGone}) {
    auto back = ParseNodeState(NodeStateName(s));
    ASSERT_TRUE(back.ok()) << NodeStateName(s);
    EXPECT_EQ(*back, s);
  }
  for (TokenKind k : {TokenKind::kUser, TokenKind::kJoin, TokenKind::kAgent}) {
    auto back = ParseTokenKind(TokenKindName(k));
    ASSERT_TRUE(back.ok()) << TokenKindName(k);
    EXPECT_EQ(*back, k);
  }
  EXPECT_STREQ(JobStateName(JobState::kPreempted), "preempted");
  EXPECT_STREQ(NodeStateName(NodeState::kGone), "gone");
  EXPECT_STREQ(TokenKindName(TokenKind::kJoin), "join");
}

TEST(RecordsTest, ParseErrorsNameTheValueAndTheValidOnes) {
  // Given names that are not valid (including a different case), expect InvalidArgument listing
  // the valid names.
  auto s = ParseJobState("Running");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.status().message(),
            "unknown job state 'Running' (expected one of: pending, starting, running, stopping, succeeded, "
            "failed, cancelled, preempted)");
  EXPECT_FALSE(ParseNodeState("").ok());
  EXPECT_FALSE(ParseTokenKind("admin").ok());
}

}  // namespace
}  // namespace gpufleet::api
