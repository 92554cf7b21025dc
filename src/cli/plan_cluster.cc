#include "cli/plan_cluster.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "cli/client_common.h"
#include "cli/cluster_history.h"
#include "cli/exit_codes.h"
#include "cli/trace_flags.h"
#include "common/read_file.h"
#include "common/strings.h"
#include "controller/pool.h"
#include "model/gpu_catalog.h"

namespace gpufleet::cli {
namespace {

constexpr int64_t kMsPerHour = 3'600'000;

int Fail(int code, const std::string& msg) {
  std::fprintf(stderr, "gpufleet plan: %s\n", msg.c_str());
  return code;
}

// "4w", "30d", "72h": weeks as well as what ParseDuration reads.
std::optional<Duration> ParseSince(const std::string& s) {
  std::string t(Trim(s));
  if (t.size() >= 2 && (t.back() == 'w' || t.back() == 'W')) {
    auto weeks = ParseInt(t.substr(0, t.size() - 1));
    if (!weeks || *weeks <= 0 || *weeks > 520) return std::nullopt;
    return Duration::Hours(*weeks * 7 * 24);
  }
  auto d = ParseDuration(t);
  if (!d || *d <= Duration::Zero()) return std::nullopt;
  return d;
}

// "12.5" for 12.5 dollars: exact, from micro-dollars (the pool file rounds back to the same).
std::string DollarsText(int64_t micros) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%lld.%06lld", static_cast<long long>(micros / 1'000'000),
                static_cast<long long>(micros % 1'000'000));
  std::string s = buf;
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s;
}

// A YAML scalar in single quotes: nothing in it is read as YAML syntax.
std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

// Offer names become node names (<prefix>-<offer>-<n>): lower-case letters, digits and '-'.
std::string OfferName(const std::string& s) {
  std::string out;
  for (char c : s) {
    out += std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::tolower(static_cast<unsigned char>(c))) : '-';
  }
  return out;
}

// "aws us-east-1 p3.16xlarge" or "aws us-east-1/use1-az4 p3.16xlarge" (plan/prices.h's offer
// description): the cloud, region, zone and instance type, where it reads so.
struct OfferPlace {
  std::string cloud, region, zone, instance_type;
};
std::optional<OfferPlace> ParseOfferPlace(const std::string& described) {
  std::vector<std::string> parts;
  for (const auto& p : Split(described, ' ')) {
    if (!Trim(p).empty()) parts.emplace_back(Trim(p));
  }
  if (parts.size() != 3) return std::nullopt;
  OfferPlace o;
  o.cloud = parts[0];
  o.instance_type = parts[2];
  const size_t slash = parts[1].find('/');
  o.region = parts[1].substr(0, slash);
  if (slash != std::string::npos) o.zone = parts[1].substr(slash + 1);
  return o;
}

// The provider: mapping of the pool file, indented under `provider:`.
const char* kLocalProvider = R"(provider:
  # Fake-GPU agents on this machine, to try the plan (docs/providers.md); to rent real machines,
  # plan again with --pool-provider FILE, FILE a pool file whose provider runs your cloud's
  # scripts (examples/providers/).
  kind: local
  state_dir: '{data_dir}/cloud'
  agent_command: ['{gpufleet}', agent, --server, '{server}', --join-token-file, '{join_token_file}',
                  --name, '{name}', --data-dir, '{state_dir}/agents/{name}',
                  --fake-gpus, '{gpus}x{gpu_model}', --market, '{market}',
                  --price-per-hour, '{price_per_hour}', --label, 'zone={zone}',
                  --spot-notice-url, '{notice_url}', --max-disconnected, 60s]
  boot_delay: 3s
)";

Result<std::string> ProviderText(const std::string& pool_provider) {
  if (pool_provider.empty()) return std::string(kLocalProvider);
  YAML::Node root;
  try {
    root = YAML::LoadFile(pool_provider);
  } catch (const YAML::BadFile&) {
    return Status::InvalidArgument("--pool-provider " + pool_provider + ": cannot read the file");
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument("--pool-provider " + pool_provider + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  if (!root.IsMap() || !root["provider"] || !root["provider"].IsMap()) {
    return Status::InvalidArgument("--pool-provider " + pool_provider +
                                   ": no provider: mapping in it (a pool file such as examples/pools/exec-local.yaml)");
  }
  YAML::Emitter out;
  out << root["provider"];
  if (!out.good()) return Status::InvalidArgument("--pool-provider " + pool_provider + ": " + out.GetLastError());
  std::string text = "provider:\n  # from " + pool_provider + "\n";
  std::istringstream lines(out.c_str());
  for (std::string line; std::getline(lines, line);) text += "  " + line + "\n";
  return text;
}

// The server's own placeholders, as it fills them in (cluster_commands.cc), for checking a file
// before it is written.
std::map<std::string, std::string> CheckSubstitutions() {
  return {{"server", "http://127.0.0.1:8470"},
          {"join_token_file", "join.token"},
          {"gpufleet", "gpufleet"},
          {"data_dir", "."},
          {"ca_cert_file", ""}};
}

}  // namespace

void AddPlanClusterFlags(CLI::App* sub, PlanClusterArgs& a) {
  sub->add_flag("--from-cluster", a.from_cluster,
                "Plan from the controller's own history (the finished jobs `gpufleet history -o jsonl` exports), "
                "counted up to now, instead of --trace");
  sub->add_option("--server", a.server,
                  "With --from-cluster: the controller URL (default: GPUFLEET_SERVER, else the config file "
                  "'gpufleet dev' writes)");
  sub->add_option("--token", a.token, "With --from-cluster: the bearer token (default: GPUFLEET_TOKEN, else the config file)")
      ->check(client::NonEmptyToken);
  sub->add_option("--since", a.since,
                  "With --from-cluster: only jobs submitted this long before now (4w, 30d, 72h); the hours before "
                  "the first job count as hours without demand (default: from the first job)");
  sub->add_option("--team", a.team, "With --from-cluster: only this team's jobs");
  sub->add_option("--apply", a.apply,
                  "Write the recommended plan as a pool file for `gpufleet server --pool FILE`: reserved nodes as "
                  "min_nodes, the on-demand and spot node types as offers, limits from the history's peak")
      ->check(NotEmpty);
  sub->add_flag("--force", a.force, "With --apply: replace an existing file");
  sub->add_option("--pool-provider", a.pool_provider,
                  "With --apply: take the provider: of this pool file (your cloud's exec scripts) instead of the "
                  "local provider's fake-GPU agents");
}

int CheckPlanClusterFlags(const PlanClusterArgs& a, bool has_trace,
                          const std::vector<std::pair<std::string, std::string>>& inputs) {
  if (has_trace == a.from_cluster) {
    return Fail(kExitUsage, has_trace ? "--trace and --from-cluster: give one of them, not both"
                                      : "where is the history? give --trace FILE (a trace `gpufleet sim` reads) or "
                                        "--from-cluster (the controller's own jobs)");
  }
  if (!a.from_cluster) {
    for (const auto& [flag, value] : {std::pair<const char*, const std::string*>{"--server", &a.server},
                                      {"--token", &a.token}, {"--since", &a.since}, {"--team", &a.team}}) {
      if (!value->empty()) return Fail(kExitUsage, std::string(flag) + " needs --from-cluster (it picks the controller's history)");
    }
  }
  if (!a.since.empty() && !ParseSince(a.since)) {
    return Fail(kExitUsage, "--since: expected a span such as 4w, 30d or 72h, got '" + a.since + "'");
  }
  if (a.apply.empty()) {
    if (a.force) return Fail(kExitUsage, "--force needs --apply FILE");
    if (!a.pool_provider.empty()) return Fail(kExitUsage, "--pool-provider needs --apply FILE");
    return 0;
  }
  std::error_code ec;
  const std::filesystem::path path(a.apply);
  if (std::filesystem::is_directory(path, ec)) return Fail(kExitUsage, "--apply " + a.apply + ": is a folder; name the pool file to write");
  for (const auto& [flag, input] : inputs) {
    if (SameFile(a.apply, input)) {
      return Fail(kExitUsage, "--apply " + a.apply + ": is the " + flag + " file, which the plan reads; name another file for the pool");
    }
  }
  if (!a.pool_provider.empty() && SameFile(a.apply, a.pool_provider)) {
    return Fail(kExitUsage, "--apply " + a.apply + ": is the --pool-provider file, which the plan reads; name another file for the pool");
  }
  if (std::filesystem::exists(path, ec) && !a.force) {
    return Fail(kExitUsage, "--apply " + a.apply + ": the file exists; add --force to replace it, or name another");
  }
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  if (!std::filesystem::is_directory(dir, ec)) {
    return Fail(kExitUsage, "--apply " + a.apply + ": the folder " + dir.string() + " does not exist");
  }
  if (!a.pool_provider.empty()) {
    if (auto p = ProviderText(a.pool_provider); !p.ok()) return Fail(kExitUsage, p.status().message());
  }
  return 0;
}

ClusterHistory ReadClusterHistory(const PlanClusterArgs& a, bool window_from_flags) {
  ClusterHistory out;
  auto client = client::Connect("plan", client::Connection{a.server, a.token});
  if (!client) {
    out.exit_code = kExitUsage;
    return out;
  }
  const std::string where = "the controller at " + client->server();
  const Time now = Time::FromMillis(client::NowMs());
  client::JobListQuery query;
  query.team = a.team;
  std::optional<Duration> since;
  if (!a.since.empty()) since = ParseSince(a.since);
  if (since && !window_from_flags) {
    // From the hour: the planner counts demand by the hour (and refuses a --from off it).
    constexpr int64_t kHour = 3600 * 1000;
    const int64_t from = (now - *since).millis();
    out.from = Time::FromMillis(from - (((from % kHour) + kHour) % kHour));
    query.submitted_since = out.from;
  }
  out.to = now;
  auto fetched = client::FetchClusterTrace(*client, query, now.millis());
  if (!fetched.ok()) {
    const std::string alternative =
        fetched.error.exit_code == kExitUnreachable
            ? " (or plan from an exported history: gpufleet history -o jsonl > jobs.jsonl on a machine that reaches "
              "it, then gpufleet plan --trace jobs.jsonl)"
            : "";
    out.exit_code = Fail(fetched.error.exit_code, "--from-cluster: " + fetched.error.error + alternative);
    return out;
  }
  out.trace = std::move(fetched.value.trace);
  std::string scope = (a.team.empty() ? "" : " of team " + a.team) +
                      (out.from ? " submitted since " + FormatIso8601(*out.from) : "");
  if (out.trace.jobs.empty()) {
    out.exit_code = Fail(kExitUsage, "--from-cluster: " + where + " has no finished job that ran" + scope + " (" +
                                         std::to_string(fetched.value.listed) +
                                         " jobs listed); run jobs there first, or plan from a trace with --trace FILE");
    return out;
  }
  const Time first = out.trace.jobs.front().spec.submit;
  const Time start = out.from ? *out.from : first;
  const int64_t hours = (now - start).millis() / kMsPerHour;
  if (!window_from_flags && hours < 168) {
    out.exit_code = Fail(kExitUsage, "--from-cluster: " + where + " has " + std::to_string(out.trace.jobs.size()) +
                                         " finished jobs" + scope + " over " + std::to_string(hours) +
                                         " h; the forecast needs a week. --since 1w plans from the last week "
                                         "(the hours before the first job, " + FormatIso8601(first) +
                                         ", count as hours without demand)");
    return out;
  }
  out.source = "the cluster at " + client->server();
  std::fprintf(stderr, "gpufleet plan: %zu finished jobs%s from %s\n", out.trace.jobs.size(), scope.c_str(),
               where.c_str());
  return out;
}

Result<std::string> PoolFileText(const plan::PlannerReport& r, const plan::PlannerOptions& o, const PoolFileOptions& f) {
  // The cluster to run: the recommended replay, else (not verified) the optimiser's plan.
  const plan::Scenario* chosen = nullptr;
  if (r.recommended) {
    chosen = &r.verification.at(*r.recommended);
  } else if (!r.verification.empty()) {
    return Status::FailedPrecondition(
        "none of the replayed clusters meets the SLO, so there is no plan to apply; loosen the SLO or the "
        "--spot-share cap, or apply the optimiser's plan unchecked with --no-verify");
  }
  const sim::ClusterSpec cluster =
      chosen ? chosen->cluster : plan::PlannedCluster(r.models, r.gpus_per_node, o.verify, r.spot_share > 0);
  const std::string plan_name = chosen ? chosen->name : "the optimiser's plan (not replayed: --no-verify)";
  GF_ASSIGN_OR_RETURN(std::string provider, ProviderText(f.pool_provider));

  auto model_of = [&](const std::string& gpu) -> const plan::ModelReport* {
    for (const auto& m : r.models) {
      if (m.gpu_model == gpu) return &m;
    }
    return nullptr;
  };
  // Reserved nodes per model (the fixed part of the replayed cluster).
  std::map<std::string, int64_t> reserved;
  int64_t reserved_nodes = 0;
  for (const auto& n : cluster.nodes) {
    if (n.market != model::Market::kReserved) continue;
    ++reserved[n.gpu_model];
    ++reserved_nodes;
  }
  // The rented part: the replay's offers, and for a model with reserved nodes but no on-demand
  // offer (all reserved) its on-demand node type, which the reservation bills.
  struct PoolOffer {
    std::string name, gpu;
    int gpus = 0;
    model::Market market = model::Market::kOnDemand;
    int64_t price_micros = 0;
    double interruptions_per_hour = 0;
    Duration boot;
    std::optional<OfferPlace> place;
  };
  std::vector<PoolOffer> offers;
  auto place_of = [&](const std::string& gpu, int gpus, model::Market market) -> std::optional<OfferPlace> {
    const plan::ModelReport* m = model_of(gpu);
    if (m == nullptr) return std::nullopt;
    const plan::GpuPrices& p = gpus == r.gpus_per_node || !m->single_gpu_prices ? m->prices : *m->single_gpu_prices;
    return ParseOfferPlace(market == model::Market::kSpot ? p.spot_offer : p.on_demand_offer);
  };
  for (const auto& so : cluster.autoscale.offers) {
    PoolOffer po;
    po.name = OfferName(so.name);
    po.gpu = so.node.gpu_model;
    po.gpus = so.node.gpus;
    po.market = so.node.market;
    po.price_micros = so.node.price_micros_per_hour;
    po.interruptions_per_hour = so.interruptions_per_hour;
    po.boot = so.boot_delay;
    po.place = place_of(po.gpu, po.gpus, po.market);
    offers.push_back(std::move(po));
  }
  for (const auto& entry : reserved) {
    // Not a structured binding: clang before 16 cannot capture one in the lambda below.
    const std::string& gpu = entry.first;
    const bool has_od = std::any_of(offers.begin(), offers.end(), [&](const PoolOffer& p) {
      return p.gpu == gpu && p.market == model::Market::kOnDemand && p.gpus == r.gpus_per_node;
    });
    const plan::ModelReport* m = model_of(gpu);
    if (has_od || m == nullptr || !m->prices.on_demand) continue;
    PoolOffer po;
    po.name = OfferName(gpu + "-" + std::to_string(r.gpus_per_node) + "gpu-on-demand");
    po.gpu = gpu;
    po.gpus = r.gpus_per_node;
    po.price_micros = *m->prices.on_demand * r.gpus_per_node;
    po.boot = o.verify.boot_delay;
    po.place = place_of(gpu, po.gpus, po.market);
    offers.push_back(std::move(po));
  }
  if (offers.empty()) return Status::FailedPrecondition("the plan rents nothing and reserves nothing: no pool to write");

  // Limits: the busiest hour of the history (or of the forecast) plus a quarter for bursts inside
  // the hour, in whole nodes, never below the reserved nodes; a fixed cluster (no rented part in
  // the replay) stays at its reserved nodes.
  int64_t max_nodes = 0;
  for (const auto& m : r.models) {
    double peak = std::max<double>(m.peak_gpu_hours_per_hour, m.max_job_gpus);
    for (double v : m.planned_demand) peak = std::max(peak, v);
    const int64_t gpus = static_cast<int64_t>(std::ceil(peak * 1.25 - 1e-9));
    int64_t nodes = std::max<int64_t>(1, (gpus + r.gpus_per_node - 1) / r.gpus_per_node);
    const auto it = reserved.find(m.gpu_model);
    const int64_t fixed = it == reserved.end() ? 0 : it->second;
    max_nodes += cluster.autoscale.offers.empty() ? std::max<int64_t>(fixed, 1) : std::max(nodes, fixed);
  }
  const int64_t max_gpus = max_nodes * r.gpus_per_node;
  const Duration idle = cluster.autoscale.options.idle_duration > Duration::Zero() ? cluster.autoscale.options.idle_duration
                                                                                   : o.verify.idle_duration;
  const Duration boot_timeout = std::max(Duration::Minutes(15), o.verify.boot_delay * 2);

  const auto& place = r.locations.at(r.location);
  std::string t;
  auto line = [&](const std::string& s) { t += s + "\n"; };
  line("# The pool `gpufleet plan --apply` wrote on " + FormatIso8601(f.now) + " from " + f.source + ":");
  char cost[160] = "";
  if (chosen) {
    std::snprintf(cost, sizeof cost, ": $%.2f over the replayed history, %s wait at the SLO quantile",
                  chosen->summary.cost_usd,
                  FormatDuration(Duration::Millis(std::llround(chosen->slo_wait_s * 1000))).c_str());
  }
  line("# The recommendation '" + plan_name + "', priced in " + place.cloud + " " + place.region + cost + ".");
  for (const auto& [gpu, count] : reserved) {
    const plan::ModelReport* m = model_of(gpu);
    const std::string od = m ? m->prices.on_demand_offer : gpu;
    const int64_t node_price = m ? m->prices.reserved * r.gpus_per_node : 0;
    line("# Reserved: " + std::to_string(count) + " node" + (count == 1 ? "" : "s") + " of " +
         std::to_string(r.gpus_per_node) + " x " + gpu + " (" + od + ", $" + DollarsText(node_price) +
         "/h each for the term).");
    line("#   Buy the reservation; min_nodes keeps that many of the pool's nodes once rented, and the");
    line("#   reservation bills matching instances at its rate.");
  }
  if (reserved.empty()) line("# Reserved: none; every node is rented when jobs wait and released when idle.");
  if (chosen && chosen->spot_job_share > 0 &&
      std::any_of(offers.begin(), offers.end(), [](const PoolOffer& p) { return p.market == model::Market::kSpot; })) {
    char share[32];
    std::snprintf(share, sizeof share, "%.0f %%", chosen->spot_job_share * 100);
    line("# Spot: the plan runs " + std::string(share) + " of the jobs on spot. The pool rents spot for jobs that allow it");
    line("#   (market: any or spot) when it is cheapest; submit the others with market: on-demand.");
  }
  line("# Run it:  gpufleet server --pool " + f.written_to + "    (a dev cluster: gpufleet dev --agents 0 --pool " +
       f.written_to + ")");
  t += provider;
  line("offers:");
  for (const auto& p : offers) {
    line("  - name: " + p.name);
    line("    gpu: " + Quote(p.gpu));
    line("    gpus: " + std::to_string(p.gpus));
    line("    market: " + std::string(model::MarketName(p.market)));
    line("    price_per_hour: " + DollarsText(p.price_micros));
    line("    boot_estimate: " + FormatDuration(p.boot));
    if (p.market == model::Market::kSpot && p.interruptions_per_hour > 0) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.6g", p.interruptions_per_hour);
      line("    interruptions_per_hour: " + std::string(buf));
    }
    if (p.place) {
      line("    zone: " + Quote(p.place->zone.empty() ? p.place->region : p.place->zone));
      line("    labels: {cloud: " + Quote(p.place->cloud) + ", region: " + Quote(p.place->region) +
           ", instance_type: " + Quote(p.place->instance_type) + "}");
    }
  }
  line("min_nodes: " + std::to_string(reserved_nodes));
  line("max_nodes: " + std::to_string(std::max(max_nodes, reserved_nodes)));
  line("max_gpus: " + std::to_string(std::max(max_gpus, reserved_nodes * r.gpus_per_node)));
  line("idle_duration: " + FormatDuration(idle));
  line("boot_timeout: " + FormatDuration(boot_timeout));
  return t;
}

Status WritePoolFile(const std::string& path, const std::string& text, bool force) {
  // What the server will read, checked before anything is written.
  GF_RETURN_IF_ERROR(controller::ParsePoolConfig(text, path, model::GpuCatalog::BuiltIn(), CheckSubstitutions())
                         .status()
                         .WithContext("the pool file to write does not load"));
  const std::filesystem::path target(path);
  const std::filesystem::path dir = target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
  std::string tmp = (dir / ("." + target.filename().string() + ".tmp-XXXXXX")).string();
  const int fd = mkstemp(tmp.data());
  if (fd < 0) return Status::Unavailable("cannot write in " + dir.string() + ": " + std::strerror(errno));
  auto fail = [&](const std::string& what) {
    const int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    return Status::Unavailable(what + ": " + std::strerror(err));
  };
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail("cannot write " + tmp);
    done += static_cast<size_t>(n);
  }
  if (::fchmod(fd, 0644) != 0) return fail("cannot set the mode of " + tmp);
  if (::fsync(fd) != 0) return fail("cannot write " + tmp);
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return Status::Unavailable("cannot write " + tmp + ": " + std::strerror(err));
  }
  if (force) {
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
      const int err = errno;
      ::unlink(tmp.c_str());
      return Status::Unavailable("cannot replace " + path + ": " + std::strerror(err));
    }
    return Status::Ok();
  }
  // link() fails where a file appeared since the flags were checked: it is never replaced.
  if (::link(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    if (err == EEXIST) return Status::InvalidArgument(path + ": the file exists; add --force to replace it");
    return Status::Unavailable("cannot write " + path + ": " + std::strerror(err));
  }
  ::unlink(tmp.c_str());
  return Status::Ok();
}

int ApplyPlan(const PlanClusterArgs& a, const plan::PlannerReport& report, const plan::PlannerOptions& options,
              const std::string& source) {
  PoolFileOptions f;
  f.source = source;
  f.pool_provider = a.pool_provider;
  f.written_to = a.apply;
  f.now = Time::FromMillis(client::NowMs());
  auto text = PoolFileText(report, options, f);
  if (!text.ok()) return Fail(text.status().code() == StatusCode::kInvalidArgument ? kExitUsage : kExitFailed,
                              "--apply: " + text.status().message() + "; nothing written");
  Status s = WritePoolFile(a.apply, *text, a.force);
  if (!s.ok()) {
    return Fail(s.code() == StatusCode::kInvalidArgument ? kExitUsage : kExitFailed,
                "--apply: " + s.message() + "; nothing written");
  }
  auto config = controller::ParsePoolConfig(*text, a.apply, model::GpuCatalog::BuiltIn(), CheckSubstitutions());
  std::string offers;
  for (const auto& o : config->offers) {
    if (!offers.empty()) offers += ", ";
    offers += o.name + " $" + DollarsText(o.price_micros_per_hour) + "/h";
  }
  std::fprintf(stderr,
               "gpufleet plan: wrote %s: offers %s; min_nodes %d (the reserved nodes), max_nodes %d, max_gpus %lld\n"
               "Run it:  gpufleet server --pool %s\n",
               a.apply.c_str(), offers.c_str(), config->limits.min_nodes, config->limits.max_nodes,
               static_cast<long long>(config->limits.max_gpus), a.apply.c_str());
  return kExitOk;
}

}  // namespace gpufleet::cli
