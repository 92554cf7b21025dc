#include "cli/sim_command.h"

#include "cli/trace_flags.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <atomic>
#include <mutex>
#include <thread>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <unistd.h>

#include "cli/exit_codes.h"
#include "cli/progress.h"
#include "common/read_file.h"
#include "common/strings.h"
#include "sched/policy/registry.h"
#include "sim/cluster_spec.h"
#include "sim/simulator.h"
#include "sim/trace.h"

namespace gpufleet::cli {

namespace {

// As a cluster file allows (sim/cluster_spec.cc): nodes of at most 64 GPUs, 100,000 of a kind.
constexpr int64_t kMaxClusterNodes = 100000;
constexpr int64_t kMaxClusterGpus = kMaxClusterNodes * 64;

struct SimArgs {
  std::string trace;
  std::string format = "auto";
  std::string columns;
  std::string gavel_throughputs;
  std::string gavel_worker = "v100";
  bool skip_bad_rows = false;
  size_t max_jobs = 0;
  std::string cluster;
  int64_t cluster_gpus = 0;
  std::string gpu = sim::kDefaultGpuModel;
  int gpus_per_node = sim::kDefaultGpusPerNode;
  double gpu_hour_price = 0;  // dollars per GPU-hour for --cluster-gpus
  std::string policy = "fifo";
  std::vector<std::string> policy_opts;
  std::string compare;
  bool policy_given = false, compare_given = false;  // set from the command line's options
  std::string estimates = "trace";
  std::string checkpoint_interval = "30m";
  bool no_checkpoint_on_preempt = false;
  std::string restart_overhead = "0";
  std::string reference_gpu;
  std::string speed_model = "balanced";
  double load_factor = 1.0;
  double node_mtbf_hours = 0;
  std::string repair_time = "1h";
  uint64_t seed = 1;
  std::string output = "text";
  std::string jobs_out;
  std::string series_out;
  std::string plot;
  std::string gpu_specs;
  bool progress = false;
  bool no_progress = false;
};

// Bad input (the command line, the trace, the cluster file): exit 2, nothing written.
int Fail(const std::string& msg) {
  std::fprintf(stderr, "gpufleet sim: %s\n", Printable(msg).c_str());  // (a field's bytes, NULs too)
  return kExitUsage;
}
// A failure with its status: 2 when the input was wrong, 1 when writing or running failed.
int Fail(const Status& status, const std::string& prefix = "") {
  std::fprintf(stderr, "gpufleet sim: %s%s\n", prefix.c_str(), Printable(status.message()).c_str());
  return ExitCodeFor(status);
}

Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  if (!out) return Status::Unavailable("cannot write " + path);
  out << text;
  out.close();
  if (!out) return Status::Unavailable("cannot write " + path);
  return Status::Ok();
}

// Whether `path` could be written: its folder exists and takes files, and the file, if there, may
// be written. (Checked before the replay; the write after it still reports its own errors.)
Status CheckWritable(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path p(path);
  const std::filesystem::path dir = p.has_parent_path() ? p.parent_path() : std::filesystem::path(".");
  if (!std::filesystem::is_directory(dir, ec)) {
    return Status::InvalidArgument("cannot write " + path + ": the folder " + dir.string() + " does not exist");
  }
  if (std::filesystem::is_directory(p, ec)) return Status::InvalidArgument("cannot write " + path + ": it is a folder");
  const bool exists = std::filesystem::exists(p, ec);
  if (::access(exists ? path.c_str() : dir.c_str(), W_OK) != 0) {
    return Status::InvalidArgument("cannot write " + path + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

// "jobs.csv" + "las" -> "jobs.las.csv" for --compare outputs.
std::string PerPolicyPath(const std::string& path, const std::string& policy) {
  size_t dot = path.find_last_of('.');
  size_t slash = path.find_last_of('/');
  const size_t base = slash == std::string::npos ? 0 : slash + 1;
  // No extension: none at all, or only the leading dot of a hidden file (".jobs" -> ".jobs.las").
  if (dot == std::string::npos || dot <= base) return path + "." + policy;
  return path.substr(0, dot) + "." + policy + path.substr(dot);
}

int Run(const SimArgs& a) {
  // Inputs, each checked before any work starts.
  auto trace_options = TraceOptionsFromFlags(a.format, a.columns, a.skip_bad_rows, a.max_jobs);
  if (!trace_options.ok()) return Fail(trace_options.status());
  if (Status g = ApplyGavelFlags(a.gavel_throughputs, a.gavel_worker, *trace_options); !g.ok()) return Fail(g);
  const sim::TraceOptions& topts = *trace_options;

  std::unique_ptr<model::GpuCatalog> loaded;
  auto loaded_catalog = GpuCatalogFromFlag(a.gpu_specs, loaded);
  if (!loaded_catalog.ok()) return Fail(loaded_catalog.status());
  const model::GpuCatalog* catalog = *loaded_catalog;

  sim::ClusterSpec cluster;
  if (!a.cluster.empty() && a.cluster_gpus > 0) return Fail("give either --cluster or --cluster-gpus, not both");
  if (a.cluster.empty() && a.cluster_gpus != 0 && (a.cluster_gpus < 1 || a.cluster_gpus > kMaxClusterGpus)) {
    return Fail("--cluster-gpus must be 1.." + std::to_string(kMaxClusterGpus) + ", got " + std::to_string(a.cluster_gpus));
  }
  if (!a.cluster.empty()) {
    auto c = sim::LoadClusterSpec(a.cluster, *catalog);
    if (!c.ok()) return Fail(c.status());
    cluster = std::move(*c);
  } else if (a.cluster_gpus > 0) {
    const model::GpuModel* m = catalog->Find(a.gpu);
    if (!m) return Fail("unknown GPU model '" + a.gpu + "' for --gpu (try H100, A100, A100-80GB, L4, T4, V100)");
    if (a.gpus_per_node < 1 || a.gpus_per_node > 64) return Fail("--gpus-per-node must be 1..64");
    if (a.cluster_gpus / a.gpus_per_node > kMaxClusterNodes) {
      return Fail("--cluster-gpus " + std::to_string(a.cluster_gpus) + " in nodes of " + std::to_string(a.gpus_per_node) +
                  " GPUs is more than " + std::to_string(kMaxClusterNodes) + " nodes (a cluster file's limit too)");
    }
    if (!(a.gpu_hour_price >= 0 && a.gpu_hour_price <= 10000)) return Fail("--gpu-hour-price must be 0..10000 dollars");
    int64_t node_price = std::llround(a.gpu_hour_price * 1e6) * a.gpus_per_node;
    cluster = sim::HomogeneousCluster(a.cluster_gpus, m->name, a.gpus_per_node, node_price);
  } else {
    return Fail("say which cluster to simulate: --cluster FILE.yaml or --cluster-gpus N (N >= 1)");
  }

  sim::SimOptions base;
  auto popts = sched::ParsePolicyOptions(a.policy_opts);
  if (!popts.ok()) return Fail("--policy-opt: " + popts.status().message());
  base.policy_options = *popts;
  if (a.estimates == "oracle") {
    base.estimates = sim::Estimates::kOracle;
  } else if (a.estimates != "trace") {
    return Fail("--estimates must be trace or oracle, got '" + a.estimates + "'");
  }
  auto ci = ParseDuration(a.checkpoint_interval);
  if (!ci) return Fail("--checkpoint-interval: expected a duration such as 30m, got '" + a.checkpoint_interval + "'");
  base.checkpoint_interval = *ci;
  base.checkpoint_on_preempt = !a.no_checkpoint_on_preempt;
  auto ro = ParseDuration(a.restart_overhead);
  if (!ro) return Fail("--restart-overhead: expected a duration such as 30s, got '" + a.restart_overhead + "'");
  base.restart_overhead = *ro;
  auto rt = ParseDuration(a.repair_time);
  if (!rt) return Fail("--repair-time: expected a duration such as 1h, got '" + a.repair_time + "'");
  base.repair_time = *rt;
  auto bound = model::ParseBoundness(a.speed_model);
  if (!bound.ok()) return Fail("--speed-model: " + bound.status().message());
  base.boundness = *bound;
  if (!a.reference_gpu.empty()) {
    const model::GpuModel* m = catalog->Find(a.reference_gpu);
    if (!m) return Fail("unknown GPU model '" + a.reference_gpu + "' for --reference-gpu");
    base.reference_gpu = m->name;
  }
  if (!(a.load_factor >= 0.001 && a.load_factor <= 1000)) {
    return Fail("--load-factor must be from 0.001 to 1000 (2 = twice the arrivals), got " + std::to_string(a.load_factor));
  }
  base.load_factor = a.load_factor;
  if (!(a.node_mtbf_hours >= 0 && a.node_mtbf_hours <= 1e9)) return Fail("--node-mtbf must be 0 (no failures) or a number of hours");
  base.node_mtbf_hours = a.node_mtbf_hours;
  base.seed = a.seed;
  if (a.output != "text" && a.output != "json") return Fail("-o must be text or json, got '" + a.output + "'");

  std::vector<std::string> policies;
  if (a.compare_given) {
    // --policy and --compare both given: which run was meant is not clear.
    if (a.policy_given) return Fail("give --policy NAME for one run or --compare A,B,... for several, not both");
    for (const auto& p : Split(a.compare, ',')) {
      std::string name(Trim(p));
      if (name.empty()) {
        return Fail("--compare: an empty policy name in '" + a.compare + "'; list names like fifo,backfill,las");
      }
      policies.push_back(name);
    }
  } else {
    policies.push_back(a.policy);
  }
  // Reject bad policy names and options before reading a large trace.
  for (size_t i = 0; i < policies.size(); ++i) {
    auto cfg = sched::MakePolicies(policies[i], base.policy_options);
    if (!cfg.ok()) return Fail(cfg.status());
    if (std::find(policies.begin(), policies.begin() + static_cast<long>(i), policies[i]) != policies.begin() + static_cast<long>(i)) {
      return Fail("--compare names " + policies[i] + " twice (its outputs would overwrite each other)");
    }
  }
  // And outputs that could not be written, before a replay that may take minutes.
  {
    std::vector<std::string> outputs;
    for (const std::string& p : policies) {
      if (!a.jobs_out.empty()) outputs.push_back(policies.size() > 1 ? PerPolicyPath(a.jobs_out, p) : a.jobs_out);
      if (!a.series_out.empty()) outputs.push_back(policies.size() > 1 ? PerPolicyPath(a.series_out, p) : a.series_out);
    }
    if (!a.plot.empty()) outputs.push_back(a.plot);
    // Two outputs on one file would leave only the last; an output on an input would replace it
    // (a hard link to it too).
    const std::pair<const char*, const std::string*> inputs[] = {{"--trace", &a.trace},
                                                                 {"--cluster", &a.cluster},
                                                                 {"--gavel-throughputs", &a.gavel_throughputs},
                                                                 {"--gpu-specs", &a.gpu_specs}};
    for (size_t i = 0; i < outputs.size(); ++i) {
      for (const auto& [flag, in] : inputs) {
        if (!in->empty() && SameFile(outputs[i], *in)) {
          return Fail("the output " + outputs[i] + " is the " + flag + " file; write the results elsewhere");
        }
      }
      for (size_t k = 0; k < i; ++k) {
        if (SameFile(outputs[i], outputs[k])) {
          return Fail("two outputs would be written to " + outputs[i] +
                      " (--jobs-out, --series-out and --plot each need a file of their own)");
        }
      }
    }
    for (const std::string& out : outputs) {
      if (Status st = CheckWritable(out); !st.ok()) return Fail(st);
    }
  }

  // Held compactly: a trace of millions of jobs would otherwise cost more than the replay itself.
  auto trace = sim::ReadCompactTrace(a.trace, topts);
  if (!trace.ok()) return Fail(trace.status());
  if (trace->info.bad_rows_skipped > 0) {
    std::fprintf(stderr, "gpufleet sim: skipped %lld bad row(s)\n",
                 static_cast<long long>(trace->info.bad_rows_skipped));
  }
  for (const auto& w : trace->info.warnings) std::fprintf(stderr, "gpufleet sim: %s\n", w.c_str());
  if (!a.gavel_throughputs.empty() && trace->info.format != sim::TraceFormat::kGavel) {
    std::fprintf(stderr, "gpufleet sim: --gavel-throughputs is not used: %s is read as a %s trace, not gavel "
                 "(--format gavel reads Gavel's job traces)\n", a.trace.c_str(),
                 sim::TraceFormatName(trace->info.format));
  }
  if (trace->jobs.empty()) return Fail(a.trace + ": no jobs to simulate");

  // Runs, in parallel when comparing (each run is independent and deterministic).
  bool show = !a.no_progress && (a.progress || StderrIsTerminal());
  std::vector<Result<sim::SimResult>> results(policies.size(), Status::Internal("not run"));
  {
    ProgressBar bar("simulating " + std::to_string(policies.size()) + " polic" + (policies.size() > 1 ? "ies" : "y"), show);
    std::vector<int64_t> done(policies.size(), 0);
    std::mutex mu;
    int64_t total = static_cast<int64_t>(trace->jobs.size()) * static_cast<int64_t>(policies.size());
    auto run_one = [&](size_t i) {
      sim::SimOptions o = base;
      o.policy = policies[i];
      // Per-job records only for the per-job CSV; the summary is the same without them.
      o.keep_jobs = !a.jobs_out.empty();
      o.progress = [&, i](int64_t d, int64_t) {
        std::lock_guard<std::mutex> lock(mu);
        done[i] = d;
        int64_t sum = 0;
        for (int64_t x : done) sum += x;
        bar.Update(sum, total);
      };
      results[i] = sim::Simulate(trace->jobs, cluster, o, *catalog);
    };
    size_t workers = std::max<size_t>(1, std::min<size_t>(policies.size(), std::thread::hardware_concurrency()));
    std::vector<std::thread> pool;
    std::atomic<size_t> next{0};
    for (size_t w = 0; w < workers; ++w) {
      pool.emplace_back([&]() {
        for (size_t i = next++; i < policies.size(); i = next++) run_one(i);
      });
    }
    for (auto& t : pool) t.join();
  }
  std::vector<sim::Summary> summaries;
  std::vector<const sim::SimResult*> runs;
  for (size_t i = 0; i < results.size(); ++i) {
    if (!results[i].ok()) return Fail(results[i].status(), policies[i] + ": ");
    results[i]->trace = a.trace;
    summaries.push_back(sim::Summarize(*results[i]));
    runs.push_back(&*results[i]);
    // Jobs that never ran are listed in the report; say so where a script looks for trouble.
    if (!summaries.back().never_ran.empty()) {
      std::fprintf(stderr, "gpufleet sim: %s%zu job(s) never ran (listed in the report)\n",
                   policies.size() > 1 ? (policies[i] + ": ").c_str() : "", summaries.back().never_ran.size());
    }
    // Jobs that started but had not finished: their work is missing from every figure.
    const int64_t cut = summaries.back().jobs - summaries.back().finished -
                        static_cast<int64_t>(summaries.back().never_ran.size());
    if (cut > 0) {
      std::fprintf(stderr,
                   "gpufleet sim: %s%lld job(s) started but never finished (nothing left in the run could let "
                   "them go on; their rows in --jobs-out have no finish)\n",
                   policies.size() > 1 ? (policies[i] + ": ").c_str() : "", static_cast<long long>(cut));
    }
  }

  // Files.
  for (size_t i = 0; i < runs.size(); ++i) {
    bool many = runs.size() > 1;
    if (!a.jobs_out.empty()) {
      std::string p = many ? PerPolicyPath(a.jobs_out, policies[i]) : a.jobs_out;
      Status s = sim::WriteJobsCsv(p, *runs[i]);
      if (!s.ok()) return Fail(s);
      std::fprintf(stderr, "wrote %s\n", p.c_str());
    }
    if (!a.series_out.empty()) {
      std::string p = many ? PerPolicyPath(a.series_out, policies[i]) : a.series_out;
      Status s = sim::WriteSeriesCsv(p, *runs[i]);
      if (!s.ok()) return Fail(s);
      std::fprintf(stderr, "wrote %s\n", p.c_str());
    }
  }
  if (!a.plot.empty()) {
    Status s = WriteFile(a.plot, sim::RenderSvgPlot(runs));
    if (!s.ok()) return Fail(s);
    std::fprintf(stderr, "wrote %s\n", a.plot.c_str());
  }

  // Report.
  std::string out;
  if (a.output == "json") {
    out = runs.size() > 1 ? sim::CompareToJson(summaries) : sim::SummaryToJson(summaries[0]);
  } else {
    out = runs.size() > 1 ? sim::FormatCompareTable(summaries) : sim::FormatSummaryText(summaries[0]);
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  if (out.empty() || out.back() != '\n') std::fputc('\n', stdout);
  return 0;
}

}  // namespace

std::function<int()> SetupSimCommand(CLI::App& app) {
  auto args = std::make_shared<SimArgs>();
  CLI::App* sub = app.add_subcommand("sim", "Replay a job trace through the scheduler and report JCT, waits, utilisation");
  sub->footer(R"(Examples:
  # Philly trace on 2,000 A100 GPUs, FIFO vs. Tiresias LAS, side by side, with a plot
  gpufleet sim --trace data/traces/philly/philly.csv --cluster-gpus 2000 --compare fifo,backfill,las --plot philly.svg

  # Your own CSV: say which column is which
  gpufleet sim --trace jobs.csv --columns id=job,submit=submitted_at,duration=runtime_s,gpus=gpu_count \
               --cluster examples/clusters/hetero.yaml --policy fair-share -o json

  # Double the arrival rate, oracle estimates for EASY backfill, per-job CSV
  gpufleet sim --trace data/traces/philly/philly.csv --cluster-gpus 2000 --policy backfill \
               --estimates oracle --load-factor 2 --jobs-out jobs.csv

  # Replay Tiresias' 2D-LAS as its simulator runs it (see docs/policies.md, parity)
  gpufleet sim --trace data/traces/tiresias/60_job.csv --cluster-gpus 64 --policy las \
               --policy-opt victims=worst-rank,fit=first,order=entry

Policies: fifo, backfill, priority, fair-share, las, sjf, srtf (gpufleet policies lists their options).)");
  sub->add_option("--trace", args->trace, "Job trace file (Philly CSV, Alibaba 2023 pod list, Tiresias CSV, Gavel trace, CSV with --columns, or JSON Lines)")
      ->required()
      ->check(NotEmpty);
  AddTraceFlags(sub, args->format, args->columns, args->skip_bad_rows, args->max_jobs);
  AddGavelFlags(sub, args->gavel_throughputs, args->gavel_worker);
  sub->add_option("--cluster", args->cluster, "Cluster spec YAML (see examples/clusters/)")
      ->check(NotEmpty);
  sub->add_option("--cluster-gpus", args->cluster_gpus, "Homogeneous cluster of this many GPUs in 8-GPU nodes");
  CLI::Option* gpu = sub->add_option("--gpu", args->gpu, "GPU model for --cluster-gpus")->capture_default_str();
  CLI::Option* per_node =
      sub->add_option("--gpus-per-node", args->gpus_per_node, "GPUs per node for --cluster-gpus")->capture_default_str();
  CLI::Option* price = sub->add_option("--gpu-hour-price", args->gpu_hour_price,
                  "Dollars per GPU-hour for --cluster-gpus nodes: the report then shows what the run cost "
                  "(cluster YAML: price_per_hour per node type)");
  CLI::Option* policy_opt = sub->add_option("--policy", args->policy, "Queue policy")->capture_default_str();
  sub->add_option("--policy-opt", args->policy_opts, "Policy option k=v (repeatable), e.g. backfill=easy, aging=1h, thresholds=3250,7200");
  CLI::Option* compare_opt =
      sub->add_option("--compare", args->compare, "Run several policies side by side: fifo,backfill,las (not with --policy)");
  sub->add_option("--estimates", args->estimates, "Duration estimates the scheduler sees: trace (as given) or oracle (true durations)")
      ->capture_default_str();
  sub->add_option("--checkpoint-interval", args->checkpoint_interval, "Checkpoint period for jobs that give none (0 = never)")
      ->capture_default_str();
  sub->add_flag("--no-checkpoint-on-preempt", args->no_checkpoint_on_preempt,
                "Preempted jobs ignore the checkpoint signal and lose the work since their last periodic checkpoint");
  sub->add_option("--restart-overhead", args->restart_overhead, "Extra run time each restart costs")->capture_default_str();
  sub->add_option("--reference-gpu", args->reference_gpu, "GPU model the trace's runtimes were measured on (default: the cluster's first)");
  sub->add_option("--speed-model", args->speed_model, "How runtimes scale across GPU models: balanced, compute, memory")->capture_default_str();
  sub->add_option("--load-factor", args->load_factor, "Compress arrivals by this factor (2 = twice the load)")->capture_default_str();
  sub->add_option("--node-mtbf", args->node_mtbf_hours, "Mean hours between failures per node (0 = none)")->capture_default_str();
  sub->add_option("--repair-time", args->repair_time, "How long a failed node stays down")->capture_default_str();
  sub->add_option("--seed", args->seed, "Seed for failures")
      ->check(CLI::Validator(
          [](std::string& v) { return v.find('-') == std::string::npos ? std::string() : "must be 0 or more, got " + v; },
          "SEED"))
      ->capture_default_str();
  sub->add_option("-o,--output", args->output, "Report format: text or json")->transform(CLI::Transformer(std::map<std::string, std::string>{{"table", "text"}}))->capture_default_str();
  sub->add_option("--jobs-out", args->jobs_out, "Write per-job CSV here (with --compare: one file per policy)")
      ->check(NotEmpty);
  sub->add_option("--series-out", args->series_out, "Write the utilisation/queue time series CSV here")
      ->check(NotEmpty);
  sub->add_option("--plot", args->plot, "Write an SVG plot of utilisation and queue length over time")
      ->check(NotEmpty);
  sub->add_option("--gpu-specs", args->gpu_specs, "GPU spec CSV to use instead of the built-in table (data/gpu_specs.csv format)")
      ->check(NotEmpty);
  sub->add_flag("--progress", args->progress, "Always draw the progress bar (default: only on a terminal)");
  sub->add_flag("--no-progress", args->no_progress, "Never draw the progress bar");
  return [args, gpu, per_node, price, policy_opt, compare_opt]() {
    args->policy_given = policy_opt->count() > 0;
    args->compare_given = compare_opt->count() > 0;
    // They shape --cluster-gpus' nodes only: with a cluster file they would be ignored unseen.
    if (!args->cluster.empty()) {
      for (const CLI::Option* o : {gpu, per_node, price}) {
        if (o->count() > 0) {
          return Fail(o->get_name() + " applies to --cluster-gpus only; a cluster file gives its nodes' model, size and "
                                      "price_per_hour");
        }
      }
    }
    return Run(*args);
  };
}

}  // namespace gpufleet::cli
