#include "cli/client_commands.h"

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "agent/gpu_probe.h"
#include "agent/node_check.h"
#include "api/agent_protocol.h"
#include "api/codec.h"
#include "api/job_yaml.h"
#include "cli/client.h"
#include "cli/client_common.h"
#include "common/strings.h"
#include "common/time.h"
#include "model/gpu_catalog.h"
#include "node/burn_in.h"

// The node commands: nodes, node (check), drain, undrain, pool.

namespace gpufleet::cli {

namespace {

std::string NodeNameError(const std::string& name) {
  return "'" + name + "' is not a node name (1-253 letters, digits, '.', '_' or '-'); 'gpufleet nodes' lists them";
}

using namespace client;  // NOLINT(build/namespaces): the shared plumbing of the client commands

void PrintBurnIn(const model::BurnInReport& b) {
  std::printf("burn-in: %s path, torch %s, %s, %s%s\n", b.path.c_str(), b.torch.empty() ? "?" : b.torch.c_str(),
              b.backend.empty() ? "-" : b.backend.c_str(), Span(b.took.millis()).c_str(),
              b.timed_out ? " (hit its time limit)" : "");
  Table t({"TEST", "GPU", "MEASURED", "REFERENCE", "SHARE", "OK", "BASIS"});
  char buf[64];
  for (const model::BurnInMeasurement& m : b.tests) {
    const std::string g = m.gpu >= 0 ? std::to_string(m.gpu) : "all";
    if (!m.skipped.empty()) {
      t.Add({m.name, g, "-", "-", "-", "-", "skipped: " + m.skipped});
      continue;
    }
    if (!m.error.empty()) {
      t.Add({m.name, g, "-", "-", "-", "no", "error: " + m.error});
      continue;
    }
    std::snprintf(buf, sizeof buf, "%.4g %s", m.value, m.unit.c_str());
    std::string measured = buf, reference = "-", share = "-";
    if (m.reference > 0) {
      std::snprintf(buf, sizeof buf, "%.4g %s", m.reference, m.unit.c_str());
      reference = buf;
      std::snprintf(buf, sizeof buf, "%.0f%%", 100 * m.value / m.reference);
      share = buf;
    }
    t.Add({m.name, g, measured, reference, share, m.ok ? "yes" : "NO",
           m.reference > 0 ? m.basis : "no reference yet: recorded"});
  }
  t.Print();
  if (!b.health.empty()) {
    std::printf("\n");
    Table h({"GPU", "ECC", "RETIRED", "PCIE", "NVLINK", "MAX TEMP", "MAX POWER", "SM CLOCK", "THROTTLE", "XID"});
    // -1: not known on this GPU or driver.
    auto num = [](int64_t v, const char* suffix = "") { return v >= 0 ? std::to_string(v) + suffix : std::string("-"); };
    for (const model::GpuHealth& x : b.health) {
      std::string pcie = "-";
      if (x.pcie_width >= 0) {
        pcie = "gen" + num(x.pcie_gen) + " x" + num(x.pcie_width) + " (max gen" + num(x.pcie_max_gen) + " x" +
               num(x.pcie_max_width) + ")";
      }
      std::string nvlink = x.nvlink_total >= 0 ? num(x.nvlink_active) + "/" + num(x.nvlink_total) : "-";
      std::vector<std::string> xid;
      for (int e : x.xid_errors) xid.push_back(std::to_string(e));
      std::string clock =
          x.min_sm_clock_mhz >= 0 ? num(x.min_sm_clock_mhz) + "-" + num(x.max_sm_clock_mhz) + " MHz" : "-";
      h.Add({std::to_string(x.index), num(x.ecc_uncorrected),
             num(x.retired_pages) + (x.retirement_pending ? " (pending)" : ""), pcie, nvlink,
             num(x.max_temperature_c, " C"), num(x.max_power_w, " W"), clock,
             x.throttle_reasons.empty() ? "-" : Join(x.throttle_reasons, ","), xid.empty() ? "-" : Join(xid, ",")});
    }
    h.Print();
  }
  std::snprintf(buf, sizeof buf, "%.0f%%", b.threshold * 100);
  int judged = 0;
  for (const model::BurnInMeasurement& m : b.tests) judged += m.reference > 0 ? 1 : 0;
  if (b.passed && judged == 0) {
    std::printf("\nPASSED: health clean; no reference for these figures yet (no datasheet on the %s path): the "
                "controller judges them against its fleet's passed nodes\n", b.path.c_str());
  } else if (b.passed) {
    std::printf("\nPASSED (each judged test reached %s of its reference)\n", buf);
  } else {
    std::printf("\nFAILED (threshold %s):\n", buf);
    for (const std::string& p : b.problems) std::printf("  - %s\n", p.c_str());
  }
}

void PrintNodeDetail(const api::NodeSummary& n) {
  std::printf("node %s (%s): %s", n.name.c_str(), n.address.c_str(), api::NodeStateName(n.state));
  if (!n.storage_fault.empty() && n.state == api::NodeState::kUp) std::printf(", no room (takes no work)");
  if (!n.acceptance.empty()) std::printf(", acceptance %s", n.acceptance.c_str());
  std::printf("\n  GPUs:         %d x %s (%d in use)\n", n.gpus, n.gpu_model.c_str(), n.gpus_used);
  std::printf("  market:       %s\n", model::MarketName(n.market));
  std::printf("  driver:       %s (CUDA %s)\n", n.driver_version.empty() ? "none reported" : n.driver_version.c_str(),
              n.cuda_version.empty() ? "-" : n.cuda_version.c_str());
  std::printf("  environments: %s\n",
              n.environments.empty() ? "none (no presets, or no driver reported)" : Join(n.environments, ", ").c_str());
  std::printf("  prepared:     %s\n",
              n.environments_ready.empty() ? "none (jobs here start cold)" : Join(n.environments_ready, ", ").c_str());
  if (!n.acceptance_reason.empty()) std::printf("  why:          %s\n", n.acceptance_reason.c_str());
  if (!n.storage_fault.empty()) {
    std::printf("  storage:      %s; it takes no work until its agent can write there again\n", n.storage_fault.c_str());
  }
  if (!n.containment.empty()) {
    const bool all = !n.limits || (n.limits->memory && n.limits->cpu);
    const char* which = all ? "" : !n.limits->memory && !n.limits->cpu ? "NOT ENFORCED (memory, cpu): "
                                  : !n.limits->memory                 ? "NOT ENFORCED (memory): "
                                                                      : "NOT ENFORCED (cpu): ";
    std::printf("  limits:       %s%s\n", which, n.containment.c_str());
  }
  for (const api::DiskReport& d : n.disks) {
    // "disk:         data directory /var/lib/gpufleet: 12.3 GiB free of 50.0 GiB (24.6 %)"
    const double pct = d.size_bytes > 0 ? 100.0 * static_cast<double>(d.free_bytes) / static_cast<double>(d.size_bytes) : 0;
    std::printf("  disk:         %s directory %s: %s free of %s (%.1f %%)\n", d.dir.c_str(), d.path.c_str(),
                FormatBytes(d.free_bytes).c_str(), FormatBytes(d.size_bytes).c_str(), pct);
  }
  if (n.burn_in) {
    std::printf("\n");
    PrintBurnIn(*n.burn_in);
  } else {
    std::printf("  burn-in:      never run ('gpufleet node check %s' runs it)\n", n.name.c_str());
  }
}

std::function<int()> SetupNodes(CLI::App& app) {
  struct Args {
    Connection conn;
    std::string output = "table";
    std::string node;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("nodes", "Show the nodes: state, GPUs in use, telemetry, jobs; one node in detail");
  sub->add_option("node", a->node, "One node in detail: its software, environments and burn-in result");
  AddOutputFlag(sub, a->output);
  AddConnectionFlags(sub, a->conn);
  SetFooter(sub, R"(  gpufleet nodes
  gpufleet nodes -o json
  gpufleet nodes gpu-node-07          # driver, environments, the burn-in's figures and verdict
UTIL%, TEMP and POWER are averages over the node's GPUs from its last heartbeat. STATE reclaiming: the
provider sent a spot interruption notice; the node drains and its jobs were requeued. STATE checking:
the node runs its acceptance burn-in and takes no work until it passes; quarantined: it failed (see
'gpufleet nodes NODE' for why; 'gpufleet node check NODE' runs it again). STATE no-room: its agent
cannot write its data directory (full or read-only); jobs it cannot start go back to the queue, and
it takes work again by itself once the agent can write there. docs/nodes.md)");
  return [a]() {
    const std::string cmd = "nodes";
    auto client = Connect(cmd, a->conn);
    if (!client) return kExitUsage;
    ApiResult r = client->Get("/v1/nodes");
    if (!r.ok()) return Report(cmd, r);
    auto nodes = DecodeNodeList(r.body);
    if (!nodes.ok()) return Fail(cmd, kExitFailed, "the controller's answer: " + nodes.status().message());
    if (!a->node.empty()) {
      for (const api::NodeSummary& n : *nodes) {
        if (n.name != a->node) continue;
        if (a->output == "json") {
          PrintJson(api::ToJson(n));
        } else {
          PrintNodeDetail(n);
        }
        return kExitOk;
      }
      std::fprintf(stderr, "gpufleet nodes: no node named '%s' (gpufleet nodes lists them)\n", a->node.c_str());
      return kExitFailed;
    }
    if (a->output == "json") {
      PrintJson(r.body);
      return kExitOk;
    }
    if (nodes->empty()) {
      std::printf("no nodes have registered; start agents with 'gpufleet agent' (or 'gpufleet dev')\n");
      return kExitOk;
    }
    Table t({"NAME", "STATE", "GPUS", "UTIL%", "TEMP", "POWER", "LAST SEEN", "JOBS"});
    for (const api::NodeSummary& n : *nodes) {
      std::string util = "-", temp = "-", power = "-";
      if (!n.telemetry.empty()) {
        int64_t u = 0, c = 0, w = 0;
        for (const api::GpuSampleReport& g : n.telemetry) {
          u += g.util_pct;
          c += g.temperature_c;
          w += g.power_w;
        }
        int64_t k = static_cast<int64_t>(n.telemetry.size());
        util = std::to_string((u + k / 2) / k);
        temp = std::to_string((c + k / 2) / k) + "C";
        power = std::to_string((w + k / 2) / k) + "W";
      }
      std::vector<std::string> jobs;
      for (JobId j : n.jobs) jobs.push_back(std::to_string(j.value()));
      // A spot interruption notice: the node drains until the provider takes it back.
      std::string state = api::NodeStateName(n.state);
      if (n.state == api::NodeState::kDraining && n.notice) state = "reclaiming";
      // Acceptance: a node running its burn-in, or one that failed it, takes no work.
      if (n.state == api::NodeState::kUp && (n.acceptance == "checking" || n.acceptance == "quarantined")) {
        state = n.acceptance;
      }
      // Its agent cannot keep its files (a full data directory): it takes no work.
      // (Quarantined or checking says more: those need the operator first.)
      if (state == "up" && !n.storage_fault.empty()) state = "no-room";
      t.Add({n.name, state,
             std::to_string(n.gpus_used) + "/" + std::to_string(n.gpus) + (n.gpu_model.empty() ? "" : " " + n.gpu_model),
             util, temp, power, (n.heard_since_start ? Ago(n.last_heartbeat.millis()) : std::string("before restart")), jobs.empty() ? "-" : Join(jobs, ",")});
    }
    t.Print();
    return kExitOk;
  };
}


// --- node check ------------------------------------------------------------------------------

std::function<int()> SetupNode(CLI::App& app) {
  struct Args {
    Connection conn;
    std::string output = "table";
    std::string node;
    std::string fake_gpus, fake_faults, fake_driver, nvml;
    std::string python, suite, time_limit = "170s", device = "auto";
    double threshold = node::kDefaultThreshold;
    bool quick = false, wait = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* node_app = app.add_subcommand("node", "Node lifecycle: acceptance burn-in (node check)");
  node_app->require_subcommand(1);
  node_app->footer("Examples:\n  gpufleet node check --fake-gpus 2xT4 --quick     # this machine, now\n"
                   "  gpufleet node check dev-1 --wait                 # a registered node, again\n\n"
                   "Run 'gpufleet node check --help' for its options.");
  CLI::App* sub = node_app->add_subcommand(
      "check", "Burn in a node: GPU health, matmul, memory and host-link bandwidth, all-reduce; pass or fail");
  sub->add_option("node", a->node,
                  "A registered node to check again through the controller (it takes no work until the new result "
                  "is judged). Without it: check this machine now and print the result");
  sub->add_option("--fake-gpus", a->fake_gpus, "Check fake GPUs (COUNTxMODEL) instead of the real ones");
  sub->add_option("--fake-faults", a->fake_faults,
                  "With --fake-gpus: faults to pretend, e.g. 'gpu=1 ecc=3; slow=10' (docs/nodes.md)");
  sub->add_option("--fake-driver", a->fake_driver, "With --fake-gpus: DRIVER/CUDA, e.g. 525.60.13/12.0");
  sub->add_option("--nvml-library", a->nvml, "Path of libnvidia-ml.so.1 if not on the loader path");
  sub->add_option("--python", a->python,
                  "Interpreter with PyTorch for the suite (default: $GPUFLEET_BURNIN_PYTHON, else python3)");
  sub->add_option("--suite", a->suite, "The suite script (default: scripts/burnin.py, or $GPUFLEET_BURNIN_SUITE)");
  sub->add_option("--time-limit", a->time_limit, "Stop starting tests after this long")->capture_default_str();
  sub->add_option("--device", a->device, "auto (CUDA when there are GPUs), cuda or cpu")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "cuda", "cpu"}));
  sub->add_flag("--quick", a->quick, "Smallest sizes: a smoke test of the suite, not a verdict on the node");
  sub->add_option("--threshold", a->threshold, "Share of its reference each test must reach")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 1.0));
  sub->add_flag("--wait", a->wait, "With NODE: wait for the result and print it");
  AddOutputFlag(sub, a->output);
  AddConnectionFlags(sub, a->conn);
  SetFooter(sub, R"(  gpufleet node check                         # this machine's GPUs, about 3 minutes
  gpufleet node check --quick -o json          # a smoke test, as JSON
  gpufleet node check --fake-gpus 2xT4 --device cpu --python /usr/bin/python3   # no GPU: the CPU/gloo path
  gpufleet node check gpu-node-07 --wait       # ask a registered node to run it again (admin)
Exit status: 0 passed, 1 failed (the reasons are printed), 2 bad usage or the suite could not run (with
NODE --wait: also the node was lost before its result came; the node is quarantined all the same).
Without a GPU datasheet reference (the CPU path) tests are recorded, not judged: the controller judges
them against the fleet's passed nodes. What is measured and the thresholds: docs/nodes.md.)");
  // Options that shape a check of this machine: a registered node's check runs on that node,
  // with the options its agent was started with.
  const std::vector<std::pair<CLI::Option*, std::string>> local_only = {
      {sub->get_option("--fake-gpus"), "--fake-gpus"},       {sub->get_option("--fake-faults"), "--fake-faults"},
      {sub->get_option("--fake-driver"), "--fake-driver"},   {sub->get_option("--nvml-library"), "--nvml-library"},
      {sub->get_option("--python"), "--python"},             {sub->get_option("--suite"), "--suite"},
      {sub->get_option("--time-limit"), "--time-limit"},     {sub->get_option("--device"), "--device"},
      {sub->get_option("--quick"), "--quick"},               {sub->get_option("--threshold"), "--threshold"}};
  return [a, local_only]() {
    const std::string cmd = "node check";
    if (a->node.empty() && a->wait) {
      return Fail(cmd, kExitUsage,
                  "--wait needs NODE: a check of this machine always waits for its result (gpufleet node check NODE "
                  "--wait asks a registered node)");
    }
    if (!a->node.empty()) {
      for (const auto& [opt, name] : local_only) {
        if (opt->count() == 0) continue;
        return Fail(cmd, kExitUsage,
                    name + " applies to a check of this machine only; node " + a->node +
                        " runs its burn-in with the options its agent was started with (see docs/nodes.md), or run "
                        "'gpufleet node check " + name + " ...' on that machine");
      }
      if (!api::ValidNodeName(a->node)) return Fail(cmd, kExitUsage, NodeNameError(a->node));
      auto client = Connect(cmd, a->conn);
      if (!client) return kExitUsage;
      // Whether a burn-in was running already: the new one replaces it (its result is dropped).
      bool was_checking = false;
      if (ApiResult before = client->Get("/v1/nodes"); before.ok()) {
        if (auto listed = DecodeNodeList(before.body); listed.ok()) {
          for (const api::NodeSummary& x : *listed) was_checking |= x.name == a->node && x.acceptance == "checking";
        }
      }
      ApiResult r = client->Post("/v1/nodes/" + a->node + "/check", json::object());
      if (!r.ok()) return Report(cmd, r);
      if (was_checking) {
        std::fprintf(stderr,
                     "gpufleet %s: node %s was running a burn-in already; this one replaces it (the earlier one's "
                     "result will be dropped)\n",
                     cmd.c_str(), a->node.c_str());
      }
      if (!a->wait) {
        if (a->output == "json") {
          PrintJson(json{{"node", a->node}, {"acceptance", "checking"}, {"replaced_a_running_check", was_checking}});
        } else {
          std::printf("node %s is running its burn-in; 'gpufleet nodes %s' shows the result when it is in\n",
                      a->node.c_str(), a->node.c_str());
        }
        return kExitOk;
      }
      for (;;) {
        ApiResult n = client->Get("/v1/nodes");
        if (!n.ok()) return Report(cmd, n);
        auto nodes = DecodeNodeList(n.body);
        if (!nodes.ok()) return Fail(cmd, kExitFailed, "the controller's answer: " + nodes.status().message());
        const api::NodeSummary* found = nullptr;
        for (const api::NodeSummary& x : *nodes) {
          if (x.name == a->node) found = &x;
        }
        // (Exit 2 when no result can come: the suite could not run, which is not a verdict on
        // the node, so a script that retires failed nodes does not retire an unreachable one.)
        if (!found) return Fail(cmd, kExitUsage, "node " + a->node + " is no longer registered; its burn-in has no result");
        if (found->acceptance != "checking") {
          if (a->output == "json") {
            PrintJson(api::ToJson(*found));
          } else {
            PrintNodeDetail(*found);
          }
          if (found->acceptance == "passed") return kExitOk;
          // A suite that could not run (no PyTorch, no suite script) quarantines the node, but it
          // is no verdict on its GPUs: exit 2, as a local check does.
          bool suite_ran = true;
          if (found->burn_in) {
            for (const auto& m : found->burn_in->tests) suite_ran = suite_ran && !(m.name == "suite" && !m.error.empty());
          }
          return suite_ran ? kExitFailed : kExitUsage;
        }
        if (found->state == api::NodeState::kLost || found->state == api::NodeState::kGone) {
          return Fail(cmd, kExitUsage,
                      "node " + a->node + " was " + api::NodeStateName(found->state) +
                          " during its burn-in, which has no result; it runs the burn-in again when its agent "
                          "registers ('gpufleet nodes " + a->node + "' shows the result then)");
        }
        std::this_thread::sleep_for(std::chrono::seconds(1));
      }
    }
    // This machine.
    agent::FakeGpuOptions fake;
    fake.spec = a->fake_gpus;
    fake.node = "local";
    fake.faults = a->fake_faults;
    fake.driver = a->fake_driver;
    auto opened = agent::OpenProbe(fake, a->nvml, model::GpuCatalog::BuiltIn());
    if (!opened.ok()) {
      std::fprintf(stderr, "gpufleet %s: %s\n", cmd.c_str(), opened.status().message().c_str());
      return kExitUsage;
    }
    std::unique_ptr<agent::GpuProbe> probe = std::move(*opened);
    agent::NodeCheckOptions o;
    const char* env_python = std::getenv("GPUFLEET_BURNIN_PYTHON");
    o.python = !a->python.empty() ? a->python : (env_python && *env_python ? env_python : "python3");
    o.suite = a->suite;
    o.quick = a->quick;
    o.device = a->device;
    auto limit = ParseDuration(a->time_limit);
    if (!limit || *limit <= Duration::Zero()) {
      std::fprintf(stderr, "gpufleet %s: --time-limit wants a duration such as 170s or 3m, got '%s'\n", cmd.c_str(),
                   a->time_limit.c_str());
      return kExitUsage;
    }
    o.time_limit = *limit;
    if (a->output != "json") std::fprintf(stderr, "running the burn-in (up to %s) ...\n", a->time_limit.c_str());
    auto report = agent::RunNodeCheck(*probe, o);
    if (!report.ok()) {
      std::fprintf(stderr, "gpufleet %s: %s\n", cmd.c_str(), report.status().message().c_str());
      return kExitUsage;
    }
    report->at = Time::FromMillis(std::chrono::duration_cast<std::chrono::milliseconds>(
                                      std::chrono::system_clock::now().time_since_epoch())
                                      .count());
    auto devices = probe->Devices();
    if (devices.ok() && !devices->empty()) {
      auto m = agent::CatalogModelForDriverName((*devices)[0].name, (*devices)[0].memory_mib, model::GpuCatalog::BuiltIn());
      if (m.ok()) report->gpu_model = *m;
    }
    node::JudgeOptions jo;
    jo.threshold = a->threshold;
    jo.gpu = model::GpuCatalog::BuiltIn().Find(report->gpu_model);
    node::Judge(*report, jo);
    if (a->output == "json") {
      PrintJson(api::ToJson(*report));
    } else {
      std::printf("%s: %d x %s\n", "node check", report->gpus, report->gpu_model.empty() ? "no GPU" : report->gpu_model.c_str());
      PrintBurnIn(*report);
    }
    return report->passed ? kExitOk : kExitFailed;
  };
}

// --- history --------------------------------------------------------------------------------

// Time spent running, over every attempt, from the transitions.
std::function<int()> SetupPool(CLI::App& app) {
  struct Args {
    Connection conn;
    std::string output = "table";
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("pool", "Show the autoscaling pool: its provider, offers and rented instances");
  AddOutputFlag(sub, a->output);
  AddConnectionFlags(sub, a->conn);
  SetFooter(sub, R"(  gpufleet pool
  gpufleet pool -o json
The controller rents instances when it runs with --pool FILE (docs/providers.md). STATE: creating
(the provider call is under way), booting (its agent has not registered), up, draining. FOR JOBS:
the jobs the instance was rented for. BILLED TO: the team of the first of them, which pays what jobs
on the instance do not (see gpufleet cost). IDLE FOR: how long an up node has had no job; it is released
after the pool's idle_duration. A controller without a pool answers 'no pool' (exit code 1).)");
  return [a]() {
    const std::string cmd = "pool";
    auto client = Connect(cmd, a->conn);
    if (!client) return kExitUsage;
    ApiResult r = client->Get("/v1/pool");
    if (!r.ok()) return Report(cmd, r);
    if (a->output == "json") {
      PrintJson(r.body);
      return kExitOk;
    }
    const json& offers = r.body.value("offers", json::array());
    const json& instances = r.body.value("instances", json::array());
    std::printf("provider: %s\n\n", StrField(r.body, "provider").c_str());
    if (offers.empty()) {
      std::printf("no offers: the pool rents nothing\n");
    } else {
      Table t({"OFFER", "GPU", "GPUS", "MARKET", "$/H", "ZONE"});
      for (const auto& o : offers) {
        std::string zone = StrField(o, "zone");
        t.Add({StrField(o, "name"), StrField(o, "gpu"), std::to_string(IntField(o, "gpus")), StrField(o, "market"),
               Usd(IntField(o, "price_micros_per_hour")), zone.empty() ? "-" : zone});
      }
      t.Print();
    }
    std::printf("\n");
    if (instances.empty()) {
      std::printf("no instances rented\n");
      return kExitOk;
    }
    const int64_t now = NowMs();
    Table t({"NAME", "STATE", "OFFER", "AGE", "IDLE FOR", "FOR JOBS", "BILLED TO", "NOTE"});
    for (const auto& i : instances) {
      std::vector<std::string> jobs;
      for (const auto& j : i.value("for_jobs", json::array())) {
        if (j.is_number()) jobs.push_back(std::to_string(j.get<int64_t>()));
      }
      const int64_t created = IntField(i, "created_ms");
      const int64_t idle_since = IntField(i, "idle_since_ms");
      std::string note = StrField(i, "note");
      t.Add({StrField(i, "name"), StrField(i, "state"), StrField(i, "offer"), created > 0 ? Span(now - created) : "-",
             idle_since > 0 ? Span(now - idle_since) : "-", jobs.empty() ? "-" : Join(jobs, ","),
             StrField(i, "team").empty() ? "-" : StrField(i, "team"), note.empty() ? "-" : note});
    }
    t.Print();
    return kExitOk;
  };
}

// --- token, drain, undrain ------------------------------------------------------------------

std::function<int()> SetupDrainLike(CLI::App& app, bool drain) {
  struct Args {
    Connection conn;
    std::string node;
  };
  auto a = std::make_shared<Args>();
  const std::string name = drain ? "drain" : "undrain";
  CLI::App* sub = app.add_subcommand(
      name, drain ? "Stop placing new jobs on a node; running jobs finish (admin)" : "Let a drained node take jobs again (admin)");
  sub->add_option("node", a->node, "Node name, as 'gpufleet nodes' shows it")->required();
  AddConnectionFlags(sub, a->conn);
  SetFooter(sub, "  gpufleet " + name + " gpu-node-07");
  return [a, name]() {
    if (!api::ValidNodeName(a->node)) return Fail(name, kExitUsage, NodeNameError(a->node));
    auto client = Connect(name, a->conn);
    if (!client) return kExitUsage;
    ApiResult r = client->Post("/v1/nodes/" + a->node + "/" + name, json::object());
    if (!r.ok()) return Report(name, r);
    std::printf("node %s is %s\n", a->node.c_str(), StrField(r.body, "state").c_str());
    return kExitOk;
  };
}

}  // namespace

std::function<int()> SetupNodesCommand(CLI::App& app) { return SetupNodes(app); }
std::function<int()> SetupNodeCommand(CLI::App& app) { return SetupNode(app); }
// `gpufleet controllers`: asks each controller given (--server URL1,URL2,...) who it is and who
// leads, through GET /v1/leader, which standbys answer too.
std::function<int()> SetupControllers(CLI::App& app) {
  struct Args {
    Connection conn;
    std::string output = "table";
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("controllers", "Show each controller given: leader or standby, since when, the "
                                                    "fencing token, and the store's health");
  AddOutputFlag(sub, a->output);
  AddConnectionFlags(sub, a->conn);
  SetFooter(sub, R"(  gpufleet controllers --server http://c1:8470,http://c2:8470
  GPUFLEET_SERVER=http://c1:8470,http://c2:8470 gpufleet controllers -o json
Each controller on the list is asked (GET /v1/leader, no token needed) and answers for itself:
ROLE leader or standby (unreachable when it does not answer), TOKEN the fencing token of the lease
as it last read it, STORE whether its store answers (ok, with the schema version, or down), SINCE
when it took its role, LEADER who holds the lease (docs/operations.md). Why a controller or its
store did not answer is printed below the table. Exit code 3 when none answers.)");
  return [a]() {
    const std::string cmd = "controllers";
    auto client = Connect(cmd, a->conn, /*needs_token=*/false);  // (GET /v1/leader takes none)
    if (!client) return kExitUsage;
    auto config = LoadClientConfig(a->conn.server, a->conn.token, /*needs_token=*/false);
    json out = json::array();
    int answered = 0;
    for (const std::string& url : client->servers()) {
      ClientConfig one = *config;
      one.server = url;
      ApiClient ask(one);
      ApiResult r = ask.Get("/v1/leader");
      json entry = r.ok() && r.body.is_object() ? r.body : json::object();
      entry["asked"] = url;
      entry["reachable"] = r.ok();
      if (!r.ok()) entry["error"] = r.error;
      if (r.ok()) ++answered;
      out.push_back(std::move(entry));
    }
    if (a->output == "json") {
      PrintJson(json{{"controllers", out}});
    } else {
      Table t({"CONTROLLER", "ROLE", "TOKEN", "STORE", "SINCE", "LEADER"});
      std::vector<std::string> notes;  // why a controller or its store did not answer
      for (const auto& c : out) {
        if (!c.value("reachable", false)) {
          t.Add({StrField(c, "asked"), "unreachable", "-", "-", "-", "-"});
          notes.push_back(StrField(c, "asked") + ": " + StrField(c, "error"));
          continue;
        }
        const json& leader = c.value("leader", json::object());
        const json& store = c.value("store", json::object());
        std::string health = "down";
        if (store.value("reachable", false)) {
          health = "ok, v" + std::to_string(store.value("schema_version", int64_t{0}));
        } else {
          notes.push_back(StrField(c, "asked") + ": its store: " + StrField(store, "error"));
        }
        t.Add({StrField(c, "asked"), StrField(c, "role"), std::to_string(IntField(leader, "token")), health,
               StrField(c, "since"), StrField(leader, "url")});
      }
      t.Print();
      for (const auto& n : notes) std::printf("%s\n", n.c_str());
    }
    if (answered == 0) {
      std::fprintf(stderr, "gpufleet %s: no controller answered\n", cmd.c_str());
      return kExitUnreachable;
    }
    return kExitOk;
  };
}

std::function<int()> SetupPoolCommand(CLI::App& app) { return SetupPool(app); }
std::function<int()> SetupControllersCommand(CLI::App& app) { return SetupControllers(app); }
std::function<int()> SetupDrainCommand(CLI::App& app) { return SetupDrainLike(app, true); }
std::function<int()> SetupUndrainCommand(CLI::App& app) { return SetupDrainLike(app, false); }

}  // namespace gpufleet::cli
