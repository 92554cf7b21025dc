#include "cli/environment_commands.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/exit_codes.h"
#include "common/strings.h"
#include "model/gpu_catalog.h"
#include "node/environments.h"

namespace gpufleet::cli {
namespace {

using ordered_json = nlohmann::ordered_json;

struct EnvironmentsArgs {
  std::string environments{};  // the table; empty: EnvironmentTable::LoadDefault()
  std::string output = "table";
  std::string driver{};  // "550.54.15" or "none"; checked only when the flag is given
  bool check = false;    // --driver given: check the node
  std::string gpu{};     // a catalog name: its compute capability is checked
  std::string cc{};      // or the compute capability itself: "8.0"
  bool runnable = false;
};

// The node the user describes: what `WhyNot` needs, and how to name it back to them.
struct NodeQuery {
  node::NodeFacts facts{};
  std::string gpu_name{};  // canonical catalog name; empty when --cc was given or no GPU
  std::string describe{};  // "driver 525.60.13, A100 (compute capability 8.0)"
};

int Fail(const std::string& msg, int code) {
  std::fprintf(stderr, "gpufleet environments: %s\n", msg.c_str());
  return code;
}

std::string KnownNvidiaGpus() {
  std::vector<std::string> names;
  for (const model::GpuModel& m : model::GpuCatalog::BuiltIn().models()) {
    if (!m.compute_capability.empty()) names.push_back(m.name);
  }
  return Join(names, ", ");
}

// The node from the flags, or a message for exit status 2.
Result<NodeQuery> ReadNode(const EnvironmentsArgs& a) {
  NodeQuery q;
  if (a.driver != "none") {
    if (!node::Version::Parse(a.driver).ok()) {
      return Status::InvalidArgument("--driver must be an NVIDIA driver version like 550.54.15 (nvidia-smi's "
                                     "'Driver Version'), or none for a node without one; got '" + a.driver + "'");
    }
    q.facts.driver_version = std::string(Trim(a.driver));
    q.describe = "driver " + q.facts.driver_version;
  } else {
    q.describe = "no NVIDIA driver";
  }
  std::string cc;
  if (!a.gpu.empty()) {
    const model::GpuModel* m = model::GpuCatalog::BuiltIn().Find(a.gpu);
    if (m == nullptr) {
      return Status::InvalidArgument("unknown GPU model '" + a.gpu + "' (known NVIDIA models: " + KnownNvidiaGpus() +
                                     "); or give the compute capability, e.g. --cc 8.0");
    }
    if (m->compute_capability.empty()) {
      return Status::InvalidArgument("GPU model '" + m->name +
                                     "' is not an NVIDIA GPU (it has no compute capability), so no CUDA "
                                     "environment can use it; only CPU-only ones run on such a node");
    }
    q.gpu_name = m->name;
    cc = m->compute_capability;
    q.describe += ", " + m->name + " (compute capability " + cc + ")";
  } else if (!a.cc.empty()) {
    auto v = node::Version::Parse(a.cc);
    if (!v.ok() || v->parts.size() != 2) {
      return Status::InvalidArgument("--cc must be a compute capability like 8.0 or 9.0 (nvidia-smi "
                                     "--query-gpu=compute_cap), got '" + a.cc + "'");
    }
    cc = std::string(Trim(a.cc));
    q.describe += ", compute capability " + cc;
  } else if (!q.facts.driver_version.empty()) {
    q.describe += ", GPUs not given (architectures not checked)";
  }
  if (!cc.empty()) q.facts.compute_capabilities = {cc};
  return q;
}

std::string OrDash(const std::string& s) { return s.empty() ? "-" : s; }

int RunEnvironments(const EnvironmentsArgs& a) {
  if (a.output != "table" && a.output != "json") return Fail("-o must be table or json, got '" + a.output + "'", 2);
  const bool check = a.check;
  if (!check && (!a.gpu.empty() || !a.cc.empty())) {
    return Fail("--gpu and --cc need --driver too: the node's NVIDIA driver version (nvidia-smi "
                "--query-gpu=driver_version --format=csv,noheader), or --driver none",
                2);
  }
  if (!check && a.runnable) return Fail("--runnable needs the node: give --driver (and --gpu or --cc)", 2);
  NodeQuery query;
  if (check) {
    auto q = ReadNode(a);
    if (!q.ok()) return Fail(q.status().message(), 2);
    query = std::move(*q);
  }

  const std::string source = a.environments.empty() ? node::EnvironmentTable::DefaultPath() : a.environments;
  auto table = a.environments.empty() ? node::EnvironmentTable::LoadDefault() : node::EnvironmentTable::Load(source);
  if (!table.ok()) return Fail(table.status().message(), ExitCodeFor(table.status()));

  struct Row {
    const node::Environment* env;
    std::string why_not;  // empty: runs (or not checked)
  };
  std::vector<Row> rows;
  int runs = 0;
  for (const node::Environment& e : table->all()) {
    std::string why = check ? node::EnvironmentTable::WhyNot(e, query.facts) : "";
    if (check && why.empty()) ++runs;
    if (a.runnable && !why.empty()) continue;
    rows.push_back({&e, std::move(why)});
  }

  if (a.output == "json") {
    ordered_json out = {{"source", source}};
    if (check) {
      auto or_null = [](const std::string& s) { return s.empty() ? ordered_json(nullptr) : ordered_json(s); };
      out["node"] = {{"driver", or_null(query.facts.driver_version)},
                     {"gpu", or_null(query.gpu_name)},
                     {"compute_capability", query.facts.compute_capabilities.empty()
                                                ? ordered_json(nullptr)
                                                : ordered_json(query.facts.compute_capabilities[0])},
                     {"runs", runs},
                     {"of", table->all().size()}};
    }
    ordered_json list = ordered_json::array();
    for (const Row& r : rows) {
      const node::Environment& e = *r.env;
      ordered_json j = {{"name", e.name},       {"pytorch", e.pytorch}, {"cuda", e.cuda},
                        {"min_driver", e.min_driver}, {"archs", e.archs}, {"python", e.python},
                        {"image", e.image},     {"pip", e.pip},         {"notes", e.notes}};
      if (check) {
        j["runs"] = r.why_not.empty();
        j["why_not"] = r.why_not.empty() ? ordered_json(nullptr) : ordered_json(r.why_not);
      }
      list.push_back(std::move(j));
    }
    out["environments"] = std::move(list);
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }

  if (check) {
    std::printf("node: %s: runs %d of %zu environments in %s\n", query.describe.c_str(), runs, table->all().size(),
                source.c_str());
  }
  if (rows.empty()) {
    std::printf("%s\n", a.runnable ? "no environment in the table runs on this node" : "the table holds no environment");
    return 0;
  }
  std::vector<std::vector<std::string>> cells = {{"NAME", "PYTORCH", "CUDA", "MIN DRIVER", "ARCHS", "IMAGE"}};
  if (check) cells[0].push_back("RUNS");
  for (const Row& r : rows) {
    const node::Environment& e = *r.env;
    cells.push_back({e.name, e.pytorch, OrDash(e.cuda), OrDash(e.min_driver), OrDash(Join(e.archs, ",")),
                     OrDash(e.image)});
    if (check) cells.back().push_back(r.why_not.empty() ? "yes" : r.why_not);
  }
  std::vector<size_t> width(cells[0].size(), 0);
  for (const auto& line : cells) {
    for (size_t i = 0; i < line.size(); ++i) width[i] = std::max(width[i], line[i].size());
  }
  for (const auto& line : cells) {
    std::string text;
    for (size_t i = 0; i < line.size(); ++i) {
      text += line[i];
      if (i + 1 < line.size()) text += std::string(width[i] - line[i].size() + 2, ' ');
    }
    std::printf("%s\n", text.c_str());
  }
  return 0;
}

}  // namespace

std::function<int()> SetupEnvironmentsCommand(CLI::App& app) {
  auto args = std::make_shared<EnvironmentsArgs>();
  CLI::App* sub = app.add_subcommand(
      "environments", "List the PyTorch environment presets a job can name, and which a node can run");
  sub->add_option("--environments", args->environments,
                  "The presets table (default: $GPUFLEET_ENVIRONMENTS, else ./data/environments.yaml, else the "
                  "one in the source tree this binary was built from)");
  sub->add_option("-o,--output", args->output, "table or json")->transform(CLI::Transformer(std::map<std::string, std::string>{{"text", "table"}}))->capture_default_str();
  CLI::Option* driver = sub->add_option(
      "--driver", args->driver, "Check a node: its NVIDIA driver version (550.54.15), or none; adds the RUNS column");
  CLI::Option* gpu = sub->add_option("--gpu", args->gpu,
                                     "The node's GPU model (catalog name: A100, H100, L4, ...); its compute "
                                     "capability is checked against each build's kernels");
  CLI::Option* cc = sub->add_option("--cc", args->cc, "Or the GPU's compute capability itself (8.0, 9.0)");
  gpu->excludes(cc);
  sub->add_flag("--runnable", args->runnable, "List only the environments the node (--driver, --gpu/--cc) can run");
  sub->footer(R"(A job names an environment with `environment: pytorch-2.5-cu124` in its file; the scheduler
places it only on nodes that can run it, by this rule (src/node/environments.h):
  - the node's driver is at least the build's CUDA toolkit minimum (MIN DRIVER; CUDA's minor-
    version and forward compatibility are not assumed: they fail at run time on some kernels);
  - every GPU's compute capability has kernels in the build (ARCHS): kernels for X.y serve X.z
    when z >= y, never across majors, so 8.0 kernels run on an 8.9 L4. CPU-only builds run anywhere.
RUNS says "yes" or the first reason not, naming the fix. The table is newest first, so the first
runnable row is the newest PyTorch the node can take. A node's figures:
  nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv
Exit status 2 for bad input: a bad flag (an unknown GPU, a version that is not one) or a table
that is missing or malformed.

Examples:
  gpufleet environments
  gpufleet environments -o json
  gpufleet environments --driver 535.104.05 --gpu A100              # RUNS: yes, or why not
  gpufleet environments --driver 525.60.13 --gpu A100 --runnable    # only what it can run
  gpufleet environments --driver 570.86.15 --cc 10.0 --runnable     # a B200, by compute capability
  gpufleet environments --driver none --runnable                    # a node without NVIDIA driver
  gpufleet environments --environments data/environments.yaml -o json)");
  return [args, driver]() {
    args->check = driver->count() > 0;
    return RunEnvironments(*args);
  };
}

}  // namespace gpufleet::cli
