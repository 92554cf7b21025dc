#include "api/job_yaml.h"

#include <gtest/gtest.h>

#include <map>

namespace gpufleet::api {
namespace {

Result<std::vector<JobRequest>> Parse(const std::string& text) {
  return ParseJobs(text, {.source = "job.yaml"});
}

std::string ErrorOf(const std::string& text) {
  auto r = Parse(text);
  EXPECT_FALSE(r.ok()) << text;
  return r.ok() ? "" : r.status().message();
}

TEST(JobYamlTest, FullJob) {
  auto r = Parse(R"(
name: resnet50
team: vision
priority: 10
resources:
  gpus: 4
  gpu_type: [h100, A100-80GB]
  nodes: 2
  cpus: 16
  memory: 64Gi
run: python3 train.py --epochs 3
workdir: /data/runs
env: {BATCH: "256"}
market: on-demand
estimate: 10h on A100
profile: compute
deadline: 1d
max_hourly_cost: 40
max_cost: $300.50
regions: ["europe-*"]
constraints: {gdpr: "true"}
checkpoint: {dir: /ckpt, signal: SIGUSR1, grace: 60s, interval: 30m}
restart: {on_preemption: false, max_restarts_on_errors: 2, recover_on_exit_codes: [75]}
)");
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 1u);
  const JobRequest& j = (*r)[0];
  EXPECT_EQ(j.spec.name, "resnet50");
  EXPECT_EQ(j.spec.team, "vision");
  EXPECT_EQ(j.spec.priority, 10);
  EXPECT_EQ(j.spec.gpus_per_node, 4);
  EXPECT_EQ(j.spec.nodes, 2);
  EXPECT_EQ(j.spec.gpu_models, (std::vector<std::string>{"H100", "A100-80GB"}));
  EXPECT_EQ(j.spec.cpu_milli, 16000);
  EXPECT_EQ(j.spec.mem_mib, 65536);
  EXPECT_EQ(j.argv, (std::vector<std::string>{"/bin/sh", "-c", "python3 train.py --epochs 3"}));
  EXPECT_EQ(j.workdir, "/data/runs");
  EXPECT_EQ(j.env.at("BATCH"), "256");
  EXPECT_EQ(j.spec.market, model::MarketPreference::kOnDemand);
  EXPECT_EQ(j.spec.duration_estimate, Duration::Hours(10));
  EXPECT_EQ(j.cost.estimate_model, "A100");
  EXPECT_EQ(j.cost.profile, model::Boundness::kCompute);
  EXPECT_EQ(j.cost.deadline, Duration::Hours(24));
  EXPECT_EQ(j.cost.max_hourly_cost_micros, 40'000'000);
  EXPECT_EQ(j.spec.max_cost_micros, 300'500'000);
  EXPECT_EQ(j.cost.regions, (std::vector<std::string>{"europe-*"}));
  EXPECT_EQ(j.spec.constraints.at("gdpr"), "true");
  EXPECT_EQ(j.checkpoint.dir, "/ckpt");
  EXPECT_EQ(j.checkpoint.signal, SIGUSR1);
  EXPECT_EQ(j.checkpoint.grace, Duration::Seconds(60));
  EXPECT_EQ(j.spec.checkpoint_interval, Duration::Minutes(30));
  EXPECT_FALSE(j.restart.on_preemption);
  EXPECT_EQ(j.restart.max_restarts_on_errors, 2);
  EXPECT_EQ(j.restart.recover_on_exit_codes, (std::vector<int>{75}));
}

TEST(JobYamlTest, WatchdogSettingsAndTheirErrors) {
  auto r = Parse("run: x\nwatchdog: {stall_timeout: 15m, on_stall: restart}\n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ((*r)[0].watchdog.stall_timeout, Duration::Minutes(15));
  EXPECT_TRUE((*r)[0].watchdog.restart_on_stall);
  // Written back and read again: the same.
  auto again = Parse(ToJobJson((*r)[0]).dump());
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ((*again)[0].watchdog.stall_timeout, Duration::Minutes(15));
  EXPECT_TRUE((*again)[0].watchdog.restart_on_stall);
  r = Parse("run: x\nwatchdog: {stall_timeout: 1h}\n");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE((*r)[0].watchdog.restart_on_stall) << "on_stall defaults to alert";
  EXPECT_EQ(Parse("run: x\n")->front().watchdog.stall_timeout, Duration::Zero()) << "not watched by default";
  EXPECT_NE(ErrorOf("run: x\nwatchdog: {stall_timeout: 5s}\n").find("job.yaml:2:27: watchdog.stall_timeout: must be at least 10s"),
            std::string::npos)
      << ErrorOf("run: x\nwatchdog: {stall_timeout: 5s}\n");
  EXPECT_NE(ErrorOf("run: x\nwatchdog: {stall_timeout: 1h, on_stall: kill}\n").find("must be alert or restart, got 'kill'"),
            std::string::npos);
  EXPECT_NE(ErrorOf("run: x\nwatchdog: {on_stall: restart}\n").find("on_stall: restart needs a stall_timeout"),
            std::string::npos);
  EXPECT_NE(ErrorOf("run: x\nwatchdog: {timeout: 1h}\n").find("timeout"), std::string::npos);
}

TEST(JobYamlTest, ATabInTheIndentationIsNamedWhereItIs) {
  // Given a file indented with a tab (yaml-cpp says "illegal map value" at the colon after it),
  // expect the tab's line and column and what to do; a tab inside a value is no indentation.
  EXPECT_EQ(ErrorOf("name: a\nresources:\n\tgpus: 1\nrun: x\n"),
            "job.yaml:3:1: a tab in the indentation; YAML indents with spaces only");
  EXPECT_EQ(ErrorOf("run: x\nresources:\n  \tgpus: 1\n"), "job.yaml:3:3: a tab in the indentation; YAML indents with spaces only");
  EXPECT_TRUE(Parse("run: \"a\tb\"\nresources: {gpus: 1}\n").ok());
  // A tab inside a block scalar, before an error elsewhere, is not blamed: the error is.
  const std::string later = ErrorOf("name: a\nrun: |\n  for i in 1; do\n  \techo $i\n  done\nresources: {gpus: 1\n");
  EXPECT_EQ(later.find("a tab in the indentation"), std::string::npos) << later;
  EXPECT_NE(later.find("not valid YAML or JSON"), std::string::npos) << later;
}

TEST(JobYamlTest, ACheckpointIntervalOfZeroIsRefusedSayingHowToAskForNone) {
  // Given checkpoint.interval 0 (read as "never" here and as "continuously" by plan before), expect
  // an error that says to leave the interval out for a job that never checkpoints; and no interval
  // at all parsed as zero, the job that never checkpoints.
  EXPECT_EQ(ErrorOf("run: x\ncheckpoint: {interval: 0}\n"),
            "job.yaml:2:24: checkpoint.interval: must be positive, got '0'; for a job that never checkpoints, leave "
            "interval out (an interruption then loses all the work done)");
  EXPECT_NE(ErrorOf("run: x\ncheckpoint: {interval: 0s}\n").find("leave interval out"), std::string::npos);
  auto none = Parse("run: x\ncheckpoint: {grace: 30s}\n");
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ(none->front().spec.checkpoint_interval, Duration::Zero());
}

TEST(JobYamlTest, AnEstimateWithoutAUnitIsRefused) {
  // Given "10 on A100" (a bare number, which would be read as ten seconds), expect an error that
  // suggests a unit; and "10h on A100" read as ten hours.
  EXPECT_EQ(ErrorOf("run: x\nestimate: 10 on A100\n"),
            "job.yaml:2:11: estimate: '10' has no unit; say which, e.g. '10h on A100' (s, m, h, d or w)");
  EXPECT_NE(ErrorOf("run: x\nestimate: 2.5\n").find("e.g. '2.5h' (s, m, h, d or w)"), std::string::npos);
  auto ok = Parse("run: x\nestimate: 10h on A100\n");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->front().spec.duration_estimate, Duration::Hours(10));
}

TEST(JobYamlTest, AMaxHourlyCostOfZeroOrLessIsRefused) {
  // Given max_hourly_cost 0 (which turned the cap off) or a negative amount, expect an error; the
  // one for 0 says to leave the field out for no cap. A positive amount is read in micro-dollars.
  EXPECT_EQ(ErrorOf("run: x\nmax_hourly_cost: 0\n"),
            "job.yaml:2:18: max_hourly_cost: must be more than 0 (USD per hour for the whole job), got '0'; leave "
            "max_hourly_cost out for no cap");
  EXPECT_NE(ErrorOf("run: x\nmax_hourly_cost: $0.00\n").find("leave max_hourly_cost out"), std::string::npos);
  EXPECT_NE(ErrorOf("run: x\nmax_hourly_cost: -5\n").find("max_hourly_cost: must be an amount"), std::string::npos);
  auto ok = Parse("run: x\nmax_hourly_cost: 40\n");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->front().cost.max_hourly_cost_micros, 40'000'000);
}

TEST(JobYamlTest, NetworkVerifiedAsksForTheGangCheckAndSurvivesTheRoundTrip) {
  auto r = Parse("run: x\nnetwork: verified\nresources: {gpus: 1, nodes: 2}\n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE((*r)[0].verify_network);
  EXPECT_EQ(ToJobJson((*r)[0]).at("network"), "verified");
  auto again = Parse(ToJobJson((*r)[0]).dump());
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_TRUE((*again)[0].verify_network);
  auto any = Parse("run: x\nnetwork: any\n");
  ASSERT_TRUE(any.ok());
  EXPECT_FALSE((*any)[0].verify_network);
  EXPECT_NE(ErrorOf("run: x\nnetwork: fast\n").find("job.yaml:2:10: network: must be verified"), std::string::npos)
      << ErrorOf("run: x\nnetwork: fast\n");
}

TEST(JobYamlTest, EnvironmentNamesAPresetAndSurvivesTheRoundTrip) {
  // Given `environment: pytorch-2.5-cu124`, expect it in spec.environment and in the JSON the CLI
  // sends (and the server compares for a repeated request id); given none, expect it empty.
  auto r = Parse("run: x\nenvironment: pytorch-2.5-cu124\n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ((*r)[0].spec.environment, "pytorch-2.5-cu124");
  EXPECT_EQ(ToJobJson((*r)[0]).at("environment"), "pytorch-2.5-cu124");
  auto again = Parse(ToJobJson((*r)[0]).dump());
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ((*again)[0].spec.environment, "pytorch-2.5-cu124");
  auto none = Parse("run: x\n");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ((*none)[0].spec.environment, "");
  EXPECT_FALSE(ToJobJson((*none)[0]).contains("environment"));
  // Every element of an array gets it.
  auto sweep = Parse("run: x\nenvironment: pytorch-2.7-cu128\narray: {seed: [1, 2]}\n");
  ASSERT_TRUE(sweep.ok()) << sweep.status().message();
  EXPECT_EQ((*sweep)[1].spec.environment, "pytorch-2.7-cu128");
  // Given anything but a name, expect file:line:column and the field.
  EXPECT_EQ(ErrorOf("run: x\nenvironment: [pytorch-2.5-cu124]\n"),
            "job.yaml:2:14: environment: must be a single value, not a list or mapping");
  EXPECT_EQ(ErrorOf("run: x\nenvironment: {name: pytorch-2.5-cu124}\n"),
            "job.yaml:2:14: environment: must be a single value, not a list or mapping");
  EXPECT_NE(ErrorOf("run: x\nenvironment: 'pytorch 2.5'\n")
                .find("job.yaml:2:14: environment: must name an environment preset such as pytorch-2.5-cu124"),
            std::string::npos);
  EXPECT_NE(ErrorOf("run: x\nenvironment: ''\n").find("job.yaml:2:14: environment: must name"), std::string::npos);
  EXPECT_EQ(ErrorOf("run: x\nenviroment: pytorch-2.5-cu124\n"),
            "job.yaml:2:1: enviroment: unknown field (did you mean 'environment'?)");
}

TEST(JobYamlTest, DefaultsAndArgvList) {
  auto r = Parse("run: [python3, -c, 'print(1)']\n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const JobRequest& j = (*r)[0];
  EXPECT_EQ(j.spec.name, "job");
  EXPECT_EQ(j.spec.team, "default");
  EXPECT_EQ(j.spec.gpus_per_node, 1);
  EXPECT_EQ(j.spec.nodes, 1);
  EXPECT_EQ(j.argv, (std::vector<std::string>{"python3", "-c", "print(1)"}));
  EXPECT_EQ(j.checkpoint.signal, SIGTERM);
  EXPECT_TRUE(j.restart.on_preemption);
}

TEST(JobYamlTest, GpuSliceAndCpuOnly) {
  auto r = Parse("resources: {gpus: 0.25}\nrun: x\n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ((*r)[0].spec.gpu_milli, 250);
  EXPECT_TRUE((*r)[0].spec.fractional());
  auto c = Parse("resources: {gpus: 0}\nrun: x\n");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ((*c)[0].spec.gpus_per_node, 0);
}

TEST(JobYamlTest, JsonIsAccepted) {
  auto r = Parse(R"({"name": "j", "resources": {"gpus": 2, "gpu_type": "T4"}, "run": "echo hi"})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ((*r)[0].spec.gpus_per_node, 2);
  EXPECT_EQ((*r)[0].spec.gpu_models, (std::vector<std::string>{"T4"}));
}

TEST(JobYamlTest, JsonObjectsReadAsTheSameJobsAsTheirYamlFileForm) {
  // Given JSON objects of unusual layout (tabs and newlines between tokens, escapes, nesting, an
  // array) read directly, and the same text as the first document of a two-document file (the
  // path that counts documents before it builds any), expect the same jobs from both.
  const std::vector<std::string> objects = {
      "{\t\"name\":\t\"t\",\n\"run\" :\r\n \"echo \\\"a b\\\" \\u00e9\"}",
      R"({"name": "n", "resources": {"gpus": 1, "gpu_type": ["A100", "H100"]}, "env": {"K": "{x: [y]}"}, "run": "true"})",
      R"({"name": "s-{{i}}", "run": "echo {{i}}", "array": {"i": [1, 2, 3]}, "constraints": {}})",
  };
  for (const std::string& obj : objects) {
    auto direct = Parse(obj);
    ASSERT_TRUE(direct.ok()) << obj << ": " << direct.status().message();
    auto file = Parse(obj + "\n---\nname: other\nrun: x\n");
    ASSERT_TRUE(file.ok()) << obj << ": " << file.status().message();
    ASSERT_EQ(file->size(), direct->size() + 1) << obj;
    for (size_t k = 0; k < direct->size(); ++k) {
      EXPECT_EQ((*direct)[k].spec.name, (*file)[k].spec.name) << obj;
      EXPECT_EQ((*direct)[k].argv, (*file)[k].argv) << obj;
      EXPECT_EQ((*direct)[k].env, (*file)[k].env) << obj;
      EXPECT_EQ((*direct)[k].spec.gpu_models, (*file)[k].spec.gpu_models) << obj;
    }
  }
}

TEST(JobYamlTest, ErrorsNameLineColumnAndField) {
  EXPECT_EQ(ErrorOf("run: x\nresources:\n  gpus: -4\n"),
            "job.yaml:3:9: resources.gpus: must be from 0 to 1024 per node, got -4");
  EXPECT_EQ(ErrorOf("run: x\nresourcse: {gpus: 1}\n"),
            "job.yaml:2:1: resourcse: unknown field (did you mean 'resources'?)");
  EXPECT_EQ(ErrorOf("run: x\nresources: {gpus: 1.5}\n"),
            "job.yaml:2:19: resources.gpus: must be a whole number of GPUs, or a fraction below 1 for a slice; got 1.5");
  EXPECT_NE(ErrorOf("name: x\n").find("job.yaml:1:1: run: missing"), std::string::npos);
  EXPECT_NE(ErrorOf("run: x\nresources: {gpu_type: Z999}\n").find("unknown GPU model 'Z999'; known models: "),
            std::string::npos);
  EXPECT_NE(ErrorOf("run: x\nresources: {nodes: 100000}\n").find("resources.nodes: must be from 1 to 4096"),
            std::string::npos);
  EXPECT_NE(ErrorOf("run: x\nresources: {memory: 12 potatoes}\n").find("resources.memory: must be an amount"),
            std::string::npos);
  EXPECT_NE(ErrorOf("run: x\ncheckpoint: {signal: KILL}\n").find("checkpoint.signal: must be one of"),
            std::string::npos);
  EXPECT_NE(ErrorOf("run: x\nenv: {GPUFLEET_JOB_ID: 3}\n").find("set by gpufleet"), std::string::npos);
  EXPECT_NE(ErrorOf("run: x\nenv: {1BAD: 3}\n").find("not a valid environment variable name"), std::string::npos);
  EXPECT_NE(ErrorOf("run: x\nname: 'a b'\n").find("job.yaml:2:7: name: use 1-128 letters"), std::string::npos);
  EXPECT_NE(ErrorOf("run: x\nworkdir: relative/dir\n").find("must be an absolute path"), std::string::npos);
  // An array's value that makes a workdir relative, and "{{x}}" without an array, are refused too.
  EXPECT_NE(ErrorOf("run: x\nworkdir: '{{d}}'\narray: {d: [/data, ../../etc]}\n")
                .find("job.yaml:2:10: workdir: element 1 runs in '../../etc': must be an absolute path"),
            std::string::npos);
  EXPECT_NE(ErrorOf("run: x\nworkdir: '{{d}}/x'\n").find("workdir: must be an absolute path"), std::string::npos);
  EXPECT_NE(ErrorOf("run: x\nname: '{{x}}/../a b'\n").find("job.yaml:2:7: name: use 1-128 letters"), std::string::npos);
  const std::string long_name = ErrorOf("run: x\nname: '{{x}}" + std::string(200, 'a') + "'\n");
  EXPECT_NE(long_name.find("name: use 1-128 letters"), std::string::npos) << long_name;
  EXPECT_NE(long_name.find("... (205 bytes)"), std::string::npos) << long_name;
  EXPECT_NE(ErrorOf("run: x\nname: \"a\\e[31m\"\n").find("got 'a?[31m'"), std::string::npos);
  EXPECT_NE(ErrorOf("run: x\nresources: {gpus: 0.5, nodes: 2}\n").find("GPU slice"), std::string::npos);
  EXPECT_NE(ErrorOf("run: x\nrestart: {max_restarts_on_errors: -1}\n").find("restart.max_restarts_on_errors"),
            std::string::npos);
  EXPECT_NE(ErrorOf("run: x\nestimate: soon\n").find("estimate: must be a positive duration"), std::string::npos);
  EXPECT_NE(ErrorOf("run: [echo, 1, null]\n").find("run[2]: is empty (null)"), std::string::npos);
  EXPECT_NE(ErrorOf("run: x\nmax_cost: lots\n").find("max_cost: must be an amount of dollars"), std::string::npos);
  EXPECT_NE(ErrorOf("run: [x\n").find("job.yaml:"), std::string::npos);
  EXPECT_NE(ErrorOf("run: x\nrun: y\n").find("given twice"), std::string::npos);
  EXPECT_NE(ErrorOf("- a\n- b\n").find("must be a mapping"), std::string::npos);
  EXPECT_NE(ErrorOf("").find("holds no job"), std::string::npos);
}

TEST(JobYamlTest, DeeplyNestedJobIsRefusedBeforeParsing) {
  // Given job files nesting 100,000 levels (flow lists, compact "- " lists, JSON), expect
  // InvalidArgument naming the depth and the place, not a crash in the recursive YAML parser.
  const std::string flow = "run: x\nenv: " + std::string(100'000, '[') + "\n";
  EXPECT_EQ(ErrorOf(flow), "job.yaml:2:69: nesting deeper than 64 levels");
  std::string dashes = "run: x\nenv:\n";
  for (int i = 0; i < 100'000; ++i) dashes += "- ";
  EXPECT_EQ(ErrorOf(dashes + "x\n"), "job.yaml:3:127: nesting deeper than 64 levels");
  const std::string json = R"({"run": "x", "env": )" + std::string(100'000, '{') + std::string(100'000, '}') + "}";
  EXPECT_EQ(ErrorOf(json), "job.yaml:1:84: nesting deeper than 64 levels");
}

TEST(JobYamlTest, TextYamlCppWouldReadForeverIsRefused) {
  // Given text on which yaml-cpp's LoadAll adds empty documents forever (a stray ',' where a
  // document starts; a scalar, another, then "? x"), expect an error, soon, not a controller
  // thread spinning until memory runs out.
  for (const char* text : {",", "run: x\n---\n, y\n", "\"a\" b\n? x\n: y\n", R"({"run": "x"},)"}) {
    EXPECT_NE(ErrorOf(text).find("job.yaml: holds more than " + std::to_string(kMaxArrayJobs) +
                                 " YAML documents, or text that yaml-cpp reads as endless"),
              std::string::npos)
        << text;
  }
}

TEST(JobYamlTest, NulBytesAreRefusedNamingTheField) {
  // Given a NUL byte (YAML "\0", JSON "\u0000") in argv, the environment, the name,
  // team, user or workdir, expect the field named: exec would cut the value at the NUL.
  EXPECT_NE(ErrorOf(R"(run: [python3, "a\0b"])").find("job.yaml:1:16: run[1]: must not contain a NUL byte"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"(run: "echo \0")").find("run: must not contain a NUL byte"), std::string::npos);
  EXPECT_NE(ErrorOf("run: x\nenv: {A: \"1\\0\"}\n").find("job.yaml:2:10: env.A: must not contain a NUL byte"),
            std::string::npos);
  EXPECT_NE(ErrorOf("run: x\nenv: {\"A\\0B\": 1}\n").find("job.yaml:2:7: env: a key contains a NUL byte"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"run": "x", "name": "a\u0000b"})").find("name: must not contain a NUL byte"),
            std::string::npos);
  EXPECT_NE(ErrorOf("run: x\nteam: \"a\\0b\"\n").find("job.yaml:2:7: team: must not contain a NUL byte"),
            std::string::npos);
  // A raw NUL byte is refused with the text (yaml-cpp would garble what follows it).
  EXPECT_EQ(ErrorOf(std::string("run: x\nteam: a\0b\n", 17)),
            "job.yaml:2:8: a NUL byte (YAML text cannot hold one)");
  EXPECT_NE(ErrorOf("run: x\nuser: \"root\\0\"\n").find("user: must not contain a NUL byte"), std::string::npos);
  EXPECT_NE(ErrorOf("run: x\nworkdir: \"/tmp\\0/x\"\n").find("workdir: must not contain a NUL byte"),
            std::string::npos);
}

TEST(JobYamlTest, EnvCannotOverrideWhatGpufleetSets) {
  // Given an env key that gpufleet sets for every part, expect it refused at its line and column.
  for (const char* key : {"CUDA_VISIBLE_DEVICES", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK",
                          "NODE_RANK", "NNODES", "NPROC_PER_NODE", "GPUFLEET_JOB_ID", "GPUFLEET_ANYTHING"}) {
    EXPECT_EQ(ErrorOf("name: j\nrun: x\nenv:\n  BATCH: '1'\n  " + std::string(key) + ": '0'\n"),
              "job.yaml:5:3: env." + std::string(key) + ": is set by gpufleet for each part and cannot be overridden");
  }
  // Given keys that are empty or hold '=', expect them refused too.
  EXPECT_NE(ErrorOf("run: x\nenv: {\"\": 1}\n").find("env: keys must be non-empty names"), std::string::npos);
  EXPECT_NE(ErrorOf("run: x\nenv: {\"A=B\": 1}\n").find("env.A=B: must not contain '='"), std::string::npos);
  // Given names that merely resemble reserved ones, expect them kept.
  auto ok = Parse("run: x\nenv: {RANKING: '1', MY_RANK: '2', NCCL_DEBUG: INFO, CUDA_LAUNCH_BLOCKING: '1'}\n");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ((*ok)[0].env.at("MY_RANK"), "2");
}

TEST(JobYamlTest, ArrayExpandsCartesianProduct) {
  auto r = Parse(R"(
name: sweep-lr{{lr}}-b{{batch}}
run: python3 train.py --lr {{lr}} --batch {{batch}}
env: {TAG: "run-{{lr}}"}
array:
  lr: [0.1, 0.01]
  batch: [32, 64, 128]
)");
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 6u);
  EXPECT_EQ((*r)[0].spec.name, "sweep-lr0.1-b32");
  EXPECT_EQ((*r)[1].spec.name, "sweep-lr0.1-b64");
  EXPECT_EQ((*r)[5].spec.name, "sweep-lr0.01-b128");
  EXPECT_EQ((*r)[4].argv[2], "python3 train.py --lr 0.01 --batch 64");
  EXPECT_EQ((*r)[4].env.at("TAG"), "run-0.01");
  EXPECT_EQ((*r)[4].env.at("GPUFLEET_ARRAY_INDEX"), "4");
  EXPECT_EQ((*r)[4].env.at("GPUFLEET_PARAM_BATCH"), "64");
  EXPECT_EQ((*r)[4].array_params.at("lr"), "0.01");
  // Without a placeholder in the name, elements are numbered.
  auto n = Parse("name: s\nrun: x\narray: {seed: [1, 2]}\n");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ((*n)[1].spec.name, "s-1");
}

TEST(JobYamlTest, ArrayLimits) {
  EXPECT_NE(ErrorOf("run: x\narray: {a: []}\n").find("needs at least one value"), std::string::npos);
  // 400 x 300 = 120,000 jobs: more than the limit of 100,000.
  std::string big = "run: x\narray:\n  a: [" ;
  for (int i = 0; i < 400; ++i) big += std::to_string(i) + (i < 399 ? "," : "]\n");
  big += "  b: [";
  for (int i = 0; i < 300; ++i) big += std::to_string(i) + (i < 299 ? "," : "]\n");
  EXPECT_NE(ErrorOf(big).find("expands to more than 100000 jobs"), std::string::npos);
}

TEST(JobYamlTest, ACpuShareTooSmallToKeepIsRefusedNotTakenAsNoLimit) {
  // Given cpus: 0.0001 (0 milli-cores after rounding, which means "no limit"), expect it refused
  // at its field; 0.001 is the smallest share kept, and 0 stays "none asked".
  EXPECT_NE(ErrorOf("run: x\nresources: {cpus: 0.0001}\n").find("resources.cpus: the smallest share is 0.001 cores"),
            std::string::npos);
  auto small = Parse("run: x\nresources: {cpus: 0.001}\n");
  ASSERT_TRUE(small.ok()) << small.status().message();
  EXPECT_EQ((*small)[0].spec.cpu_milli, 1);
  auto none = Parse("run: x\nresources: {cpus: 0}\n");
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_EQ((*none)[0].spec.cpu_milli, 0);
}

TEST(JobYamlTest, AnEmptyRunAndABadEnvNameSayWhatIsExpected) {
  EXPECT_NE(ErrorOf("name: a\nrun:\n").find("run: is empty: give a shell command (run: python3 train.py) or a list"),
            std::string::npos)
      << ErrorOf("name: a\nrun:\n");
  EXPECT_NE(ErrorOf("run: x\nenv: {1ABC: y}\n")
                .find("env.1ABC: is not a valid environment variable name (letters, digits and _, not starting with a digit)"),
            std::string::npos)
      << ErrorOf("run: x\nenv: {1ABC: y}\n");
}

TEST(JobYamlTest, AJobThatAsksToRunAsRootIsRefusedAtItsUserField) {
  // Given user: root (or uid 0), expect the file refused where it says so, before any request.
  EXPECT_NE(ErrorOf("name: a\nrun: id\nuser: root\n").find("job.yaml:3:7: user: jobs cannot run as root"),
            std::string::npos);
  EXPECT_NE(ErrorOf("name: a\nrun: id\nuser: '0'\n").find("job.yaml:3:7: user: jobs cannot run as root"),
            std::string::npos);
  auto other = Parse("name: a\nrun: id\nuser: alice\n");
  ASSERT_TRUE(other.ok()) << other.status().message();
  EXPECT_EQ((*other)[0].user, "alice");
}

TEST(JobYamlTest, AnArrayParameterGivenTwiceOrDifferingOnlyInCaseIsRefusedWhereItStands) {
  // Given a parameter named twice (the count would come from one list and the values from the
  // other), or two names that differ only in case (one GPUFLEET_PARAM_ variable for both), expect
  // the file refused at the second name's line and column.
  EXPECT_NE(ErrorOf("name: t\nrun: echo {{x}}\narray: {x: [1, 2], x: [3]}\n").find("job.yaml:3:20: array.x: given twice"),
            std::string::npos);
  const std::string cased = ErrorOf("run: echo {{x}} {{X}}\narray:\n  x: [1]\n  X: [2]\n");
  EXPECT_NE(cased.find("job.yaml:4:3: array.X: differs from the parameter x only in case; both would be GPUFLEET_PARAM_X"),
            std::string::npos)
      << cased;
  // Names that differ in more than case stay distinct.
  auto ok = Parse("run: echo {{x}} {{y}}\narray: {x: [1], y: [2, 3]}\n");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->size(), 2u);
}

TEST(JobYamlTest, AnArrayPlaceholderThatNamesNoParameterIsRefusedWithTheParameters) {
  // Given an array whose command, name, workdir or env uses {{lrr}} (a typo of lr), expect the
  // file refused at that field with the array's parameters listed; text between braces that is
  // no parameter-like name (a Go template's {{.State}}) stays as it is.
  std::string run_typo = ErrorOf("run: train --lr {{lrr}}\narray: {lr: [0.1], bs: [8]}\n");
  EXPECT_NE(run_typo.find("job.yaml:1:6: run: {{lrr}} is not one of the array's parameters (lr, bs)"), std::string::npos)
      << run_typo;
  EXPECT_NE(ErrorOf("name: s-{{seeed}}\nrun: x\narray: {seed: [1]}\n").find("name: {{seeed}} is not one of"),
            std::string::npos);
  EXPECT_NE(ErrorOf("run: x\nworkdir: /data/{{ds}}\narray: {d: [a]}\n").find("workdir: {{ds}} is not one of"),
            std::string::npos);
  EXPECT_NE(ErrorOf("run: x\nenv: {T: '{{tg}}'}\narray: {tag: [a]}\n").find("env: {{tg}} is not one of"),
            std::string::npos);
  auto go = Parse("run: docker inspect -f '{{.State}}' c{{i}}\narray: {i: [1, 2]}\n");
  ASSERT_TRUE(go.ok()) << go.status().message();
  EXPECT_EQ((*go)[1].argv[2], "docker inspect -f '{{.State}}' c2");
  // A parameter's placeholder left open ({{lr} or {{lr) is refused too; braces around other text
  // that are not closed stay the command's own.
  EXPECT_NE(ErrorOf("run: train --lr {{lr} --bs {{bs}}\narray: {lr: [0.1], bs: [8]}\n")
                .find("job.yaml:1:6: run: {{lr is not closed: write {{lr}}"),
            std::string::npos);
  EXPECT_NE(ErrorOf("run: train --lr {{ lr\narray: {lr: [0.1]}\n").find("{{lr is not closed"), std::string::npos);
  auto awk = Parse("run: echo c{{i}} '{{x'\narray: {i: [1]}\n");
  ASSERT_TRUE(awk.ok()) << awk.status().message();
  EXPECT_EQ((*awk)[0].argv[2], "echo c1 '{{x'");
  // Without an array, braces are the command's own text.
  auto plain = Parse("run: echo {{x}}\n");
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_EQ((*plain)[0].argv[2], "echo {{x}}");
}

TEST(JobYamlTest, TextThatAliasesOrArraysWouldBlowUpIsRefusedBeforeItIsCopied) {
  // Given a 60 KB value used 400 times through a YAML alias (24 MB from a small file), expect it
  // refused as the values are read; given a command of 20 such values (1.2 MB, more than exec
  // takes), expect it refused naming its size; given a 100 KB command in an array of 3,000 tasks
  // (300 MB of copies), expect the array refused before it expands. A command of 900 KB passes.
  const std::string big(60 * 1024, 'a');
  std::string aliases = "env: {X: &s " + big + "}\nrun: [*s";
  for (int i = 0; i < 400; ++i) aliases += ", *s";
  aliases += "]\n";
  std::string e = ErrorOf(aliases);
  EXPECT_NE(e.find("the file's values come to more than 16 MiB (each use of a YAML alias counts again)"),
            std::string::npos) << e.substr(0, 300);
  std::string wide = "run: [";
  for (int i = 0; i < 20; ++i) wide += (i ? ", " : "") + big;
  wide += "]\n";
  e = ErrorOf(wide);
  EXPECT_NE(e.find("run: the command and environment come to 1228820 bytes, more than 1048576"), std::string::npos)
      << e.substr(0, 300);
  std::string sweep = "run: [" + std::string(50 * 1024, 'b') + ", " + std::string(50 * 1024, 'c') + "]\narray: {i: [";
  for (int i = 0; i < 3000; ++i) sweep += (i ? "," : "") + std::to_string(i);
  sweep += "]}\n";
  e = ErrorOf(sweep);
  EXPECT_NE(e.find("array: expands to 3000 jobs of about"), std::string::npos) << e.substr(0, 300);
  EXPECT_NE(e.find("more than 256 MiB in all"), std::string::npos) << e.substr(0, 300);
  std::string fits = "run: [";
  for (int i = 0; i < 15; ++i) fits += (i ? ", " : "") + big;
  fits += "]\n";
  auto ok = Parse(fits);
  ASSERT_TRUE(ok.ok()) << ok.status().message().substr(0, 300);
  EXPECT_EQ((*ok)[0].argv.size(), 15u);
}

TEST(JobYamlTest, AGraceOverItsLimitNamesThatLimitWhateverItsSize) {
  // Given a grace of 2h or of 9000h, expect both refused naming 1h (9000h said "a year").
  for (const char* g : {"2h", "9000h"}) {
    std::string e = ErrorOf(std::string("run: x\ncheckpoint: {grace: ") + g + "}\n");
    EXPECT_NE(e.find(std::string("checkpoint.grace: must be at most 1h, got '") + g + "'"), std::string::npos) << e;
  }
}

TEST(JobYamlTest, AnEstimateOverAYearSaysSo) {
  // Given an estimate of 400 days, expect the limit named, not "must be positive".
  std::string e = ErrorOf("run: x\nestimate: 400d\n");
  EXPECT_NE(e.find("estimate: must be at most a year (366d); got '400d'"), std::string::npos) << e;
  EXPECT_EQ(e.find("positive"), std::string::npos) << e;
}

TEST(JobYamlTest, SeveralDocuments) {
  auto r = Parse("name: a\nrun: x\n---\nname: b\nrun: y\n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[1].spec.name, "b");
}

TEST(JobYamlTest, RoundTripThroughJson) {
  auto r = Parse(R"(
name: rt
team: t
priority: -3
resources: {gpus: 2, gpu_type: [L4], nodes: 3, cpus: 1.5, memory: 3Gi}
run: [python3, train.py]
env: {A: "1"}
market: spot
estimate: 90m on H100
profile: memory
deadline: 2h
max_hourly_cost: 1.25
regions: [us-*]
constraints: {zone: a}
checkpoint: {signal: USR2, grace: 5s, interval: 10m}
restart: {max_restarts_on_errors: 1, recover_on_exit_codes: [75, 76]}
)");
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto again = Parse(ToJobJson((*r)[0]).dump());
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(ToJobJson((*again)[0]), ToJobJson((*r)[0]));
  EXPECT_EQ((*again)[0].spec.duration_estimate, Duration::Minutes(90));
  EXPECT_EQ((*again)[0].spec.cpu_milli, 1500);
  EXPECT_EQ((*again)[0].cost.max_hourly_cost_micros, 1'250'000);
}

TEST(JobYamlTest, CostHintsAreReadAndSurviveTheRoundTrip) {
  // Given the fields `select` prices with (workload, step times in several units under any GPU
  // name, clouds, restart overhead), expect them in the request's cost hints under canonical
  // names, and the same hints after ToJobJson and back.
  auto r = Parse(R"(run: python3 train.py
resources: {gpus: 8}
estimate: "10h on a100"
workload: training-vision
step_time: {a100: 0.42s, H100-SXM: 230ms, L4: 2}
clouds: [gcp, aws]
checkpoint: {interval: 30m, restart_overhead: 3m}
)");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const model::JobCostHints& c = (*r)[0].cost;
  EXPECT_EQ(c.estimate_model, "A100");
  EXPECT_EQ(c.workload, "training-vision");
  EXPECT_EQ(c.step_seconds, (std::map<std::string, double>{{"A100", 0.42}, {"H100", 0.23}, {"L4", 2.0}}));
  EXPECT_EQ(c.clouds, (std::vector<std::string>{"gcp", "aws"}));
  EXPECT_EQ(c.restart_overhead, Duration::Minutes(3));
  auto again = Parse(ToJobJson((*r)[0]).dump());
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ((*again)[0].cost, c);
}

TEST(JobYamlTest, BadCostHintsSayWhere) {
  // Given the shipped speed table, an unknown class is refused with the known ones; a step time
  // on an unknown GPU or not a time names its line and column.
  auto speeds = model::GpuSpeeds::LoadCsv(std::string(GPUFLEET_SOURCE_DIR) + "/data/gpu_speeds.csv",
                                          model::GpuCatalog::BuiltIn());
  ASSERT_TRUE(speeds.ok()) << speeds.status().ToString();
  JobParseOptions opts;
  opts.speeds = &*speeds;
  const std::string head = "run: x\nestimate: 1h on A100\n";
  auto cls = ParseJobs(head + "workload: training-nlp\n", opts);
  ASSERT_FALSE(cls.ok());
  EXPECT_EQ(cls.status().message(),
            "job.yaml:3:11: workload: unknown workload class 'training-nlp'; known: default, inference-vision, "
            "training-recsys, training-vision");
  auto gpu = Parse(head + "step_time:\n  A100: 0.4s\n  Z80: 0.2s\n");
  ASSERT_FALSE(gpu.ok());
  EXPECT_EQ(gpu.status().message(), "job.yaml:5:3: step_time: unknown GPU model 'Z80'");
  auto bad = Parse(head + "step_time: {H100: fast}\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "job.yaml:3:19: step_time.H100: must be a positive time per step such as 0.42s or 420ms, got 'fast'");
  auto list = Parse(head + "step_time: [0.4s]\n");
  ASSERT_FALSE(list.ok());
  EXPECT_NE(list.status().message().find("job.yaml:3:12: step_time: must be a mapping"), std::string::npos)
      << list.status().message();
  auto overhead = Parse(head + "checkpoint: {restart_overhead: soon}\n");
  ASSERT_FALSE(overhead.ok());
  EXPECT_NE(overhead.status().message().find("checkpoint.restart_overhead: must be a duration"), std::string::npos)
      << overhead.status().message();
}

TEST(JobYamlTest, SelectsOptionsDropTheCommandAndRequireAnEstimate) {
  // Given require_run off and require_estimate on (what `select` asks), expect a job without a
  // command to parse and one without an estimate to be refused at the job's line.
  JobParseOptions opts;
  opts.require_run = false;
  opts.require_estimate = true;
  auto priced = ParseJobs("resources: {gpus: 2}\nestimate: 3h on H100\n", opts);
  ASSERT_TRUE(priced.ok()) << priced.status().message();
  EXPECT_TRUE((*priced)[0].argv.empty());
  auto no_estimate = ParseJobs("resources: {gpus: 2}\n", opts);
  ASSERT_FALSE(no_estimate.ok());
  EXPECT_EQ(no_estimate.status().message().rfind("job.yaml:1:1: estimate: missing", 0), 0u)
      << no_estimate.status().message();
  // The defaults stay as `submit` needs them.
  auto no_run = Parse("resources: {gpus: 2}\nestimate: 3h on H100\n");
  ASSERT_FALSE(no_run.ok());
  EXPECT_NE(no_run.status().message().find("run: missing"), std::string::npos);
}

TEST(JobYamlTest, Units) {
  EXPECT_EQ(*ParseMemoryMib("512Mi"), 512);
  EXPECT_EQ(*ParseMemoryMib("1.5Gi"), 1536);
  EXPECT_EQ(*ParseMemoryMib("2T"), 2 * 1024 * 1024);
  EXPECT_EQ(*ParseMemoryMib("100"), 100);
  EXPECT_FALSE(ParseMemoryMib("-1Gi").ok());
  EXPECT_FALSE(ParseMemoryMib("65Ti").ok());
  EXPECT_EQ(*ParseSignal("term"), SIGTERM);
  EXPECT_EQ(*ParseSignal("SIGUSR1"), SIGUSR1);
  EXPECT_EQ(*ParseSignal("15"), SIGTERM);
  EXPECT_FALSE(ParseSignal("9").ok());
  EXPECT_EQ(SignalName(SIGTERM), "SIGTERM");
  EXPECT_EQ(*ParseDollars("$3.20"), 3'200'000);
  EXPECT_FALSE(ParseDollars("-1").ok());
}

}  // namespace
}  // namespace gpufleet::api
