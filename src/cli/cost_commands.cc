#include "cli/cost_commands.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "cli/exit_codes.h"
#include "common/read_file.h"
#include "common/strings.h"
#include "api/job_yaml.h"
#include "cost/cost_job.h"
#include "cost/offer.h"
#include "cost/offer_names.h"
#include "cost/select.h"
#include "model/gpu_speeds.h"

#ifndef GPUFLEET_DATA_DIR
#define GPUFLEET_DATA_DIR "data"
#endif

namespace gpufleet::cli {

namespace {

using cost::Candidate;
using cost::MicroUsd;
using cost::Offer;
using json = nlohmann::ordered_json;

constexpr const char* kCatalogHelp =
    "Offer catalog CSV (default: $GPUFLEET_CATALOG, else ./data/catalog/offers.csv, else the one "
    "in the source tree this binary was built from)";

// --catalog, then $GPUFLEET_CATALOG, then the working directory's data/, then the source tree's.
std::string CatalogPath(const std::string& flag) {
  if (!flag.empty()) return flag;
  if (const char* env = std::getenv("GPUFLEET_CATALOG"); env != nullptr && *env != '\0') return env;
  const std::string local = "data/catalog/offers.csv";
  std::error_code ec;
  if (std::filesystem::exists(local, ec)) return local;
  return std::string(GPUFLEET_DATA_DIR) + "/catalog/offers.csv";
}

// Today as days since 1970-01-01 (UTC): $GPUFLEET_TODAY (YYYY-MM-DD) when set, so that tests and
// reproducible reports can fix the date, else the system clock.
Result<int64_t> Today() {
  if (const char* env = std::getenv("GPUFLEET_TODAY"); env != nullptr && *env != '\0') {
    auto day = ParseIsoDate(env);
    if (!day) return Status::InvalidArgument(std::string("GPUFLEET_TODAY must be a date YYYY-MM-DD, got '") + env + "'");
    return *day;
  }
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  return static_cast<int64_t>(std::chrono::duration_cast<std::chrono::seconds>(now).count() / 86'400);
}

// The catalog's date and age for -o json: prices_as_of (null when unknown), catalog_age_days
// (null when unknown) and the line the table prints.
void AddAgeJson(json& out, const cost::OfferTable& t, int64_t today) {
  auto age = cost::CatalogAgeDays(t.prices_as_of, today);
  out["prices_as_of"] = t.prices_as_of.empty() ? json(nullptr) : json(t.prices_as_of);
  out["catalog_age_days"] = age ? json(*age) : json(nullptr);
  out["catalog_age"] = cost::CatalogAgeLine(t.prices_as_of, today);
}

constexpr const char* kOutlierLegend =
    "spot-outlier: a spot discount far beyond the usual for that GPU on that cloud (under half the median "
    "spot/on-demand share, or 85% off or more); no capacity signal, so check before relying on it "
    "(docs/cost.md)";

double Usd(MicroUsd v) { return static_cast<double>(v) / static_cast<double>(cost::kMicroUsdPerUsd); }

std::string Fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string FlagCodes(const Offer& o, model::Market m) {
  std::vector<std::string> f;
  if (m == model::Market::kSpot && o.has(cost::kSpotEstimated)) f.push_back("spot-estimated");
  if (m == model::Market::kSpot && o.has(cost::kHazardDefault)) f.push_back("hazard-default");
  if (m == model::Market::kSpot && o.has(cost::kSpotOutlier)) f.push_back("spot-outlier");
  if (m == model::Market::kOnDemand && o.has(cost::kSuspectPrice)) f.push_back("suspect-price");
  if (m == model::Market::kOnDemand && o.has(cost::kSpotAtOrAboveOnDemand)) f.push_back("spot-dropped");
  return Join(f, ",");
}

json OfferJson(const Offer& o) {
  json j = {{"cloud", o.cloud},
            {"region", o.region},
            {"zone", o.zone},
            {"instance_type", o.instance_type},
            {"gpu", o.gpu},
            {"gpus", o.gpus},
            {"gpu_mem_mib", o.gpu_mem_mib},
            {"vcpus", static_cast<double>(o.cpu_milli) / 1000.0},
            {"mem_mib", o.mem_mib}};
  j["on_demand_usd_per_hour"] = o.on_demand_per_hour ? json(Usd(*o.on_demand_per_hour)) : json(nullptr);
  j["spot_usd_per_hour"] = o.spot_per_hour ? json(Usd(*o.spot_per_hour)) : json(nullptr);
  j["spot_interruptions_per_hour"] = o.spot_per_hour ? json(o.spot_hazard_per_hour) : json(nullptr);
  j["hazard_source"] = o.hazard_source;
  json flags = json::array();
  if (o.has(cost::kSpotEstimated)) flags.push_back("spot-estimated");
  if (o.has(cost::kSuspectPrice)) flags.push_back("suspect-price");
  if (o.has(cost::kSpotAtOrAboveOnDemand)) flags.push_back("spot-dropped");
  if (o.has(cost::kHazardDefault)) flags.push_back("hazard-default");
  if (o.has(cost::kGpuMemFromSpecs)) flags.push_back("gpu-mem-from-specs");
  if (o.has(cost::kSpotOutlier)) flags.push_back("spot-outlier");
  j["flags"] = flags;
  j["spot_outlier"] = o.has(cost::kSpotOutlier);
  return j;
}

json WarningsJson(const cost::OfferTable& t) {
  json arr = json::array();
  for (const auto& w : t.warnings) arr.push_back({{"kind", w.kind}, {"count", w.count}, {"example", w.example}});
  return arr;
}

// "catalog: data/catalog/offers.csv, 3040 rows, 2870 offers; kept out: unknown GPU model 120, ..."
std::string WarningSummary(const std::string& path, const cost::OfferTable& t) {
  std::string s = "catalog " + path + ": " + std::to_string(t.rows_read) + " rows, " +
                  std::to_string(t.offers.size()) + " offers";
  std::vector<std::string> parts;
  for (const auto& w : t.warnings) parts.push_back(w.kind + " " + std::to_string(w.count));
  if (!parts.empty()) s += "; " + Join(parts, "; ");
  return s;
}

Result<cost::OfferTable> LoadCatalog(const std::string& flag, std::string& path) {
  path = CatalogPath(flag);
  return cost::LoadOffersCsv(path, model::GpuCatalog::BuiltIn());
}

}  // namespace

Result<cost::OfferTable> LoadOfferCatalog(const std::string& flag, std::string& path) {
  return LoadCatalog(flag, path);
}

namespace {

// ---------------------------------------------------------------- offers

struct OffersArgs {
  std::string gpu;
  int count = 0;
  std::vector<std::string> regions;
  std::vector<std::string> clouds;
  std::string market = "any";
  std::string sort = "price";
  int limit = 20;
  std::string output = "table";
  std::string catalog;
  bool include_suspect = false;
  bool quiet = false;
};

struct Row {
  const Offer* offer;
  model::Market market;
  MicroUsd price;
  MicroUsd per_gpu;
};

int OffersFail(const std::string& msg) {
  std::fprintf(stderr, "gpufleet offers: %s\n", msg.c_str());
  return kExitUsage;
}

int RunOffers(const OffersArgs& a) {
  auto pref = model::ParseMarketPreference(a.market);
  if (!pref.ok() || a.market.empty()) return OffersFail("--market must be spot, on-demand or any, got '" + a.market + "'");
  if (a.sort != "price" && a.sort != "price-per-gpu") {
    return OffersFail("--sort must be price or price-per-gpu, got '" + a.sort + "'");
  }
  if (a.output != "table" && a.output != "json") return OffersFail("-o must be table or json, got '" + a.output + "'");
  if (a.count < 0 || a.limit < 0) return OffersFail("--count and --limit must not be negative");
  std::string gpu;
  if (!a.gpu.empty()) {
    const model::GpuModel* m = model::GpuCatalog::BuiltIn().Find(a.gpu);
    if (m == nullptr) return OffersFail("unknown GPU model '" + a.gpu + "'");
    gpu = m->name;
  }
  auto today = Today();
  if (!today.ok()) return OffersFail(today.status().message());
  std::string path;
  auto table = LoadCatalog(a.catalog, path);
  if (!table.ok()) {
    std::fprintf(stderr, "gpufleet offers: %s\n", table.status().message().c_str());
    return ExitCodeFor(table.status());
  }

  // --cloud and --region are repeatable and take comma lists, as plan's do. A region's own name
  // may hold commas (Vast's "Czechia, CZ, EU"): a value that matches a region or zone as a whole
  // is one pattern, not a list.
  std::vector<std::string> clouds;
  for (const std::string& c : a.clouds) {
    for (const std::string& part : Split(c, ',')) {
      if (!Trim(part).empty()) clouds.emplace_back(Trim(part));
    }
  }
  std::vector<std::string> regions;
  for (const std::string& r : a.regions) {
    if (cost::CheckRegionPattern(*table, r).ok()) {
      regions.push_back(r);
      continue;
    }
    for (const std::string& part : Split(r, ',')) {
      if (!Trim(part).empty()) regions.emplace_back(Trim(part));
    }
  }
  // A cloud or region the catalog does not know is a typo, not a filter that matches nothing.
  for (const std::string& c : clouds) {
    if (Status st = cost::CheckCloud(*table, c); !st.ok()) return OffersFail("--cloud: " + st.message());
  }
  for (const std::string& r : regions) {
    if (Status st = cost::CheckRegionPattern(*table, r); !st.ok()) return OffersFail("--region: " + st.message());
  }

  std::vector<Row> rows;
  int64_t suspect_hidden = 0;
  for (const Offer& o : table->offers) {
    if (!gpu.empty() && o.gpu != gpu) continue;
    if (a.count > 0 && o.gpus != a.count) continue;
    if (!clouds.empty() && std::find(clouds.begin(), clouds.end(), o.cloud) == clouds.end()) continue;
    if (!regions.empty() && std::none_of(regions.begin(), regions.end(), [&](const std::string& g) {
          return GlobMatch(g, o.region) || (!o.zone.empty() && GlobMatch(g, o.zone));
        })) {
      continue;
    }
    for (model::Market m : {model::Market::kOnDemand, model::Market::kSpot}) {
      if (*pref == model::MarketPreference::kOnDemand && m == model::Market::kSpot) continue;
      if (*pref == model::MarketPreference::kSpot && m == model::Market::kOnDemand) continue;
      auto p = o.price(m);
      if (!p) continue;
      if (m == model::Market::kOnDemand && o.has(cost::kSuspectPrice) && !a.include_suspect) {
        ++suspect_hidden;
        continue;
      }
      rows.push_back({&o, m, *p, *p / o.gpus});
    }
  }
  const bool per_gpu = a.sort == "price-per-gpu";
  std::sort(rows.begin(), rows.end(), [&](const Row& x, const Row& y) {
    auto key = [&](const Row& r) {
      return std::make_tuple(per_gpu ? r.per_gpu : r.price, per_gpu ? r.price : r.per_gpu, std::cref(r.offer->cloud),
                             std::cref(r.offer->region), std::cref(r.offer->zone), std::cref(r.offer->instance_type),
                             static_cast<int>(r.market));
    };
    return key(x) < key(y);
  });
  const size_t total = rows.size();
  if (a.limit > 0 && rows.size() > static_cast<size_t>(a.limit)) rows.resize(a.limit);

  if (a.output == "json") {
    json out = {{"catalog", path}};
    AddAgeJson(out, *table, *today);
    out["matching"] = total;
    out["shown"] = rows.size();
    out["suspect_hidden"] = suspect_hidden;
    json arr = json::array();
    for (const Row& r : rows) {
      json j = OfferJson(*r.offer);
      j["market"] = model::MarketName(r.market);
      j["usd_per_hour"] = Usd(r.price);
      j["usd_per_gpu_hour"] = Usd(r.per_gpu);
      arr.push_back(std::move(j));
    }
    out["offers"] = arr;
    out["warnings"] = WarningsJson(*table);
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  if (!a.quiet) std::fprintf(stderr, "%s\n", WarningSummary(path, *table).c_str());
  std::printf("%s\n", cost::CatalogAgeLine(table->prices_as_of, *today).c_str());
  if (rows.empty()) {
    std::printf("no offers match%s\n", suspect_hidden > 0 ? " (suspect prices hidden; --include-suspect shows them)" : "");
    return 0;
  }
  // The names are what a user copies into --region, a job file or a cloud console: each column is
  // as wide as its longest value shown, never cut.
  auto where_of = [](const Offer& o) { return o.zone.empty() ? o.region : o.zone; };
  auto gpu_of = [](const Offer& o) { return std::to_string(o.gpus) + "x" + o.gpu; };
  int cloud_w = 5, where_w = 11, type_w = 8, gpu_w = 3;  // the headers' lengths
  for (const Row& r : rows) {
    cloud_w = std::max(cloud_w, static_cast<int>(r.offer->cloud.size()));
    where_w = std::max(where_w, static_cast<int>(where_of(*r.offer).size()));
    type_w = std::max(type_w, static_cast<int>(r.offer->instance_type.size()));
    gpu_w = std::max(gpu_w, static_cast<int>(gpu_of(*r.offer).size()));
  }
  std::printf("%-*s %-*s %-*s %-*s %6s %5s %6s %-9s %10s %10s %8s  %s\n", cloud_w, "CLOUD", where_w, "REGION/ZONE",
              type_w, "INSTANCE", gpu_w, "GPU", "GPU_GB", "VCPU", "RAM_GB", "MARKET", "$/H", "$/GPU-H", "INT/H", "FLAGS");
  for (const Row& r : rows) {
    const Offer& o = *r.offer;
    std::string hazard = r.market == model::Market::kSpot ? Fixed(o.spot_hazard_per_hour, 4) : "-";
    std::printf("%-*s %-*s %-*s %-*s %6lld %5lld %6lld %-9s %10s %10s %8s  %s\n", cloud_w, o.cloud.c_str(), where_w,
                where_of(o).c_str(), type_w, o.instance_type.c_str(), gpu_w, gpu_of(o).c_str(),
                static_cast<long long>(o.gpu_mem_mib / 1024), static_cast<long long>(o.cpu_milli / 1000),
                static_cast<long long>(o.mem_mib / 1024), model::MarketName(r.market),
                Fixed(Usd(r.price), 3).c_str(), Fixed(Usd(r.per_gpu), 3).c_str(), hazard.c_str(),
                FlagCodes(o, r.market).c_str());
  }
  std::printf("%zu of %zu matching offers%s\n", rows.size(), total,
              suspect_hidden > 0 ? (", " + std::to_string(suspect_hidden) +
                                    " with suspect fallback prices hidden (--include-suspect)")
                                       .c_str()
                                 : "");
  if (std::any_of(rows.begin(), rows.end(),
                  [](const Row& r) { return r.market == model::Market::kSpot && r.offer->has(cost::kSpotOutlier); })) {
    std::printf("%s\n", kOutlierLegend);
  }
  return 0;
}

// ---------------------------------------------------------------- select

struct SelectArgs {
  std::string job;
  std::string output = "text";
  std::string catalog;
  std::string speeds;                   // --speeds: the GPU speed table
  std::vector<std::string> step_times;  // --step-time MODEL=DURATION, repeatable
  int limit = 5;
  bool include_suspect = false;
  bool trust_spot_outliers = false;
  bool quiet = false;
};

// --step-time values ("H100=0.23s") into the job's step times; they replace the job file's for
// the same model.
Status AddStepTimes(const std::vector<std::string>& flags, cost::CostJob& job) {
  for (const std::string& f : flags) {
    const size_t eq = f.find('=');
    const std::string want = "--step-time must read MODEL=DURATION such as H100=0.23s, got '" + f + "'";
    if (eq == std::string::npos) return Status::InvalidArgument(want);
    const std::string name(Trim(std::string_view(f).substr(0, eq)));
    const model::GpuModel* m = model::GpuCatalog::BuiltIn().Find(name);
    if (m == nullptr) return Status::InvalidArgument("--step-time: unknown GPU model '" + name + "'");
    auto seconds = model::ParseStepSeconds(std::string_view(f).substr(eq + 1));
    if (!seconds) return Status::InvalidArgument(want);
    job.speed_overrides.step_seconds[m->name] = *seconds;
  }
  return Status::Ok();
}

// "1.90x mlperf:default"
std::string SpeedWithSource(const Candidate& c) { return Fixed(c.speed, 2) + "x " + c.speed_source; }

json CandidateJson(const Candidate& c) {
  json j = OfferJson(c.offer);
  j["market"] = model::MarketName(c.market);
  j["instances"] = c.offer.price(c.market) ? c.price_per_hour / *c.offer.price(c.market) : 0;
  j["usd_per_hour"] = Usd(c.price_per_hour);
  j["speed_vs_reference"] = std::round(c.speed * 1000) / 1000;
  j["speed_source"] = c.speed_source;
  j["speed_confidence"] = c.speed_confidence.empty() ? json(nullptr) : json(c.speed_confidence);
  j["runtime_hours"] = std::round(c.runtime.hours_f() * 1000) / 1000;
  j["expected_wall_hours"] = std::round(c.expected_wall.hours_f() * 1000) / 1000;
  j["expected_interruptions"] = std::round(c.expected_interruptions * 1000) / 1000;
  j["compute_usd"] = Usd(c.compute_cost);
  j["rework_usd"] = Usd(c.rework_cost);
  j["restart_usd"] = Usd(c.restart_cost);
  j["expected_cost_usd"] = Usd(c.expected_cost);
  j["idle_gpus_per_node"] = c.idle_gpus_per_node;
  j["meets_deadline"] = c.meets_deadline;
  j["ranked_last_as_spot_outlier"] = c.untrusted_outlier;
  return j;
}

// The job file read by the one job schema (api/job_yaml.h), as `submit` reads it, except that a
// command may be missing and an estimate may not; then its cost view.
Result<cost::CostJob> ReadCostJob(const std::string& file, const model::GpuSpeeds& speeds) {
  GF_ASSIGN_OR_RETURN(const std::string text, ReadFileText(file));
  api::JobParseOptions opts;
  opts.source = file;
  opts.require_run = false;
  opts.require_estimate = true;
  opts.speeds = &speeds;
  auto jobs = api::ParseJobs(text, opts);
  if (!jobs.ok()) return jobs.status();
  if (jobs->size() != 1) {
    return Status::InvalidArgument(file + ": holds " + std::to_string(jobs->size()) +
                                   " jobs; select prices one (keep one document, without array:)");
  }
  const api::JobRequest& j = jobs->front();
  auto job = cost::CostJobFor(j.spec, j.cost, model::GpuCatalog::BuiltIn());
  if (!job.ok()) return Status::InvalidArgument(file + ": " + job.status().message());
  return job;
}

// What limits the offers besides the job's shape, each named even when absent, so that a reader
// sees that a cap was (or was not) applied: "caps: max_hourly_cost $40.00/h, deadline 24h00m00s,
// regions europe-*, clouds any, constraints geo=eu".
std::string CapsLine(const cost::CostJob& job) {
  std::vector<std::string> constraints;
  for (const auto& [k, v] : job.constraints) constraints.push_back(k + "=" + v);
  return "caps: max_hourly_cost " + (job.max_hourly_cost ? cost::FormatUsd(*job.max_hourly_cost) + "/h" : "no cap") +
         ", deadline " + (job.deadline ? FormatDuration(*job.deadline) : "none") + ", regions " +
         (job.regions.empty() ? "any" : Join(job.regions, ", ")) + ", clouds " +
         (job.clouds.empty() ? "any" : Join(job.clouds, ", ")) + ", constraints " +
         (constraints.empty() ? "none" : Join(constraints, ", "));
}

int SelectFail(const std::string& msg, int code) {
  std::fprintf(stderr, "gpufleet select: %s\n", msg.c_str());
  return code;
}

int RunSelect(const SelectArgs& a) {
  if (a.output != "text" && a.output != "json") return SelectFail("-o must be text or json, got '" + a.output + "'", 2);
  if (a.limit < 0) return SelectFail("--limit must not be negative (0 = all)", 2);
  const std::string speeds_path = a.speeds.empty() ? model::GpuSpeeds::DefaultPath() : a.speeds;
  auto speeds = model::GpuSpeeds::LoadCsv(speeds_path, model::GpuCatalog::BuiltIn());
  if (!speeds.ok()) return SelectFail(speeds.status().message(), ExitCodeFor(speeds.status()));
  auto job = ReadCostJob(a.job, *speeds);
  if (!job.ok()) return SelectFail(job.status().message(), ExitCodeFor(job.status()));
  if (Status s = AddStepTimes(a.step_times, *job); !s.ok()) return SelectFail(s.message(), 2);
  job->allow_suspect_prices = a.include_suspect;
  job->trust_spot_outliers = a.trust_spot_outliers;
  auto today = Today();
  if (!today.ok()) return SelectFail(today.status().message(), 2);
  std::string path;
  auto table = LoadCatalog(a.catalog, path);
  if (!table.ok()) return SelectFail(table.status().message(), ExitCodeFor(table.status()));
  auto sel = cost::SelectOffers(*table, *job, model::GpuCatalog::BuiltIn(), *speeds);
  if (!sel.ok()) return SelectFail(a.job + ": " + sel.status().message(), ExitCodeFor(sel.status()));

  const char* profile = job->profile == model::Boundness::kCompute  ? "compute"
                        : job->profile == model::Boundness::kMemory ? "memory"
                                                                     : "balanced";
  size_t shown = a.limit == 0 ? sel->ranked.size() : std::min(sel->ranked.size(), static_cast<size_t>(a.limit));
  if (a.output == "json") {
    json out;
    out["job"] = {{"file", a.job},
                  {"gpus_per_node", job->gpus_per_node},
                  {"nodes", job->nodes},
                  {"reference_gpu", job->reference_gpu},
                  {"reference_runtime_hours", job->reference_runtime.hours_f()},
                  {"profile", profile},
                  {"workload", job->workload_class},
                  {"step_time_seconds", job->speed_overrides.step_seconds},
                  {"checkpoint_interval_hours", job->checkpoint_interval.hours_f()},
                  {"market", model::MarketPreferenceName(job->market)},
                  {"max_hourly_cost_usd", job->max_hourly_cost ? json(Usd(*job->max_hourly_cost)) : json(nullptr)},
                  {"deadline_hours", job->deadline ? json(job->deadline->hours_f()) : json(nullptr)},
                  {"regions", job->regions},
                  {"clouds", job->clouds},
                  {"constraints", job->constraints}};
    out["catalog"] = path;
    out["speeds"] = speeds_path;
    AddAgeJson(out, *table, *today);
    out["feasible"] = sel->ranked.size();
    json ranked = json::array();
    for (size_t i = 0; i < shown; ++i) ranked.push_back(CandidateJson(sel->ranked[i]));
    out["ranked"] = ranked;
    out["cheapest_hourly"] = sel->cheapest_hourly ? CandidateJson(*sel->cheapest_hourly) : json(nullptr);
    out["saving_vs_cheapest_hourly_usd"] = Usd(sel->saving_vs_cheapest_hourly);
    out["reason"] = sel->reason;
    json rejected = json::object();
    for (const auto& [why, n] : sel->rejected) rejected[why] = n;
    out["rejected"] = rejected;
    out["warnings"] = WarningsJson(*table);
    std::printf("%s\n", out.dump(2).c_str());
    return sel->ranked.empty() ? 3 : 0;
  }

  if (!a.quiet) {
    std::fprintf(stderr, "%s\n", WarningSummary(path, *table).c_str());
    std::fprintf(stderr, "speeds %s: %zu rows\n", speeds_path.c_str(), speeds->rows().size());
  }
  std::vector<std::string> steps;
  for (const auto& [gpu, seconds] : job->speed_overrides.step_seconds) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", seconds);
    steps.push_back(gpu + " " + buf + "s");
  }
  std::printf("job %s: %d node(s) x %d GPU(s), %s on %s, workload %s, %s profile, %s, market %s\n", a.job.c_str(),
              job->nodes, job->gpus_per_node, FormatDuration(job->reference_runtime).c_str(),
              job->reference_gpu.c_str(), job->workload_class.c_str(), profile,
              job->checkpoint_interval > Duration::Zero()
                  ? ("checkpoint every " + FormatDuration(job->checkpoint_interval)).c_str()
                  : "no checkpoints",
              model::MarketPreferenceName(job->market));
  std::printf("%s\n", CapsLine(*job).c_str());
  if (!steps.empty()) std::printf("measured step times: %s\n", Join(steps, ", ").c_str());
  std::printf("%s\n", cost::CatalogAgeLine(table->prices_as_of, *today).c_str());
  bool outlier_shown = false;
  if (!sel->ranked.empty()) {
    // OFFER holds the instance type and region or zone a user copies: as wide as the longest shown,
    // never cut (asia-northeast-1 and -2 must not read the same).
    int offer_w = 5, speed_w = 5;  // the headers' lengths
    for (size_t i = 0; i < shown; ++i) {
      offer_w = std::max(offer_w, static_cast<int>(sel->ranked[i].Describe().size()));
      speed_w = std::max(speed_w, static_cast<int>(SpeedWithSource(sel->ranked[i]).size()));
    }
    std::printf("\n%-4s %-*s %-*s %8s %10s %10s %9s %11s\n", "RANK", offer_w, "OFFER", speed_w, "SPEED", "WALL", "$/H",
                "COMPUTE", "REWORK", "EXPECTED");
    for (size_t i = 0; i < shown; ++i) {
      const Candidate& c = sel->ranked[i];
      const bool outlier = c.market == model::Market::kSpot && c.offer.has(cost::kSpotOutlier);
      outlier_shown = outlier_shown || outlier;
      std::string rank = std::to_string(i + 1) + (outlier ? "!" : "");
      std::printf("%-4s %-*s %-*s %8s %10s %10s %9s %11s\n", rank.c_str(), offer_w, c.Describe().c_str(), speed_w,
                  SpeedWithSource(c).c_str(),
                  FormatDuration(c.expected_wall).c_str(), cost::FormatUsd(c.price_per_hour).c_str(),
                  cost::FormatUsd(c.compute_cost).c_str(), cost::FormatUsd(c.rework_cost + c.restart_cost).c_str(),
                  cost::FormatUsd(c.expected_cost).c_str());
    }
    std::printf("(%zu of %zu feasible offers)\n", shown, sel->ranked.size());
    if (outlier_shown) {
      std::printf("! %s; ranked after every other offer%s\n", kOutlierLegend,
                  a.trust_spot_outliers ? " unless --trust-spot-outliers (given: ranked by cost)"
                                        : " (--trust-spot-outliers ranks them by cost)");
    }
  }
  std::printf("\n%s\n", sel->reason.c_str());
  if (!sel->rejected.empty()) {
    std::vector<std::string> parts;
    for (const auto& [why, n] : sel->rejected) parts.push_back(why + " " + std::to_string(n));
    std::printf("rejected: %s\n", Join(parts, "; ").c_str());
  }
  return sel->ranked.empty() ? 3 : 0;
}

}  // namespace

std::function<int()> SetupOffersCommand(CLI::App& app) {
  auto args = std::make_shared<OffersArgs>();
  CLI::App* sub = app.add_subcommand("offers", "List cloud GPU offers from the price catalog, cheapest first");
  sub->add_option("--gpu", args->gpu, "GPU model (catalog name or alias: H100, a100-80gb, ...)");
  sub->add_option("--count", args->count, "GPUs per instance (exactly); 0 = any")->capture_default_str();
  sub->add_option("--region", args->regions,
                  "Region or zone glob, repeatable or comma-separated ('europe-*', 'us-east-1,us-west-2'; a region "
                  "whose name holds commas, such as 'Czechia, CZ, EU', is taken whole); one that matches no region "
                  "or zone of the catalog is an error naming the nearest");
  sub->add_option("--cloud", args->clouds,
                  "Cloud, repeatable or comma-separated: aws, gcp, azure, lambda, nebius, oci, vast");
  sub->add_option("--market", args->market, "spot, on-demand or any")->capture_default_str();
  sub->add_option("--sort", args->sort, "price (per instance-hour) or price-per-gpu")->capture_default_str();
  sub->add_option("--limit", args->limit, "Rows to show; 0 = all")->capture_default_str();
  sub->add_option("-o,--output", args->output, "table or json")->transform(CLI::Transformer(std::map<std::string, std::string>{{"text", "table"}}))->capture_default_str();
  sub->add_option("--catalog", args->catalog, kCatalogHelp);
  sub->add_flag("--include-suspect", args->include_suspect,
                "Show on-demand prices flagged as likely fallback values (hidden by default)");
  sub->add_flag("-q,--quiet", args->quiet, "Do not print the catalog summary on stderr");
  sub->footer(R"(Prices are USD per instance-hour from data/catalog/offers.csv (docs/cost.md). Columns are as
wide as their longest value shown: names are never cut. INT/H is the expected spot
interruptions per hour. FLAGS: spot-estimated (AWS spot = on-demand x advisor
savings), hazard-default (no interruption data for that cloud), suspect-price, spot-outlier (a
spot discount far beyond the usual for that GPU and cloud: under half the median spot/on-demand
share, or 85% off or more; no capacity signal; `select` ranks it last). The first line gives the
catalog's date and age, e.g. prices as of 2026-05-20 (198 days old), from its '# prices_as_of:'
line; set GPUFLEET_TODAY=YYYY-MM-DD to fix the current date for reproducible output.

Examples:
  gpufleet offers --gpu H100 --count 8
  gpufleet offers --gpu H100 --count 8 --region 'europe-*' --market spot
  gpufleet offers --gpu A100-80GB --cloud aws --cloud gcp --sort price-per-gpu --limit 5
  gpufleet offers --gpu H100 --count 8 --cloud aws,gcp --region 'us-east-1,us-west-2,us-central1*'
  gpufleet offers --gpu L4 -o json)");
  return [args]() { return RunOffers(*args); };
}

std::function<int()> SetupSelectCommand(CLI::App& app) {
  auto args = std::make_shared<SelectArgs>();
  CLI::App* sub = app.add_subcommand("select", "Rank offers for a job by expected cost to complete");
  sub->add_option("job", args->job, "Job YAML (resources, estimate, profile, checkpoint, market, ...)")->required();
  sub->add_option("-o,--output", args->output, "text or json")->transform(CLI::Transformer(std::map<std::string, std::string>{{"table", "text"}}))->capture_default_str();
  sub->add_option("--limit", args->limit, "Candidates to show; 0 = all")->capture_default_str();
  sub->add_option("--catalog", args->catalog, kCatalogHelp);
  sub->add_option("--speeds", args->speeds,
                  "GPU speed table CSV (default: $GPUFLEET_SPEEDS, else ./data/gpu_speeds.csv, else the one in the "
                  "source tree this binary was built from)");
  sub->add_option("--step-time", args->step_times,
                  "Measured time per step of this job on a GPU model, MODEL=DURATION (H100=0.23s, A100=420ms); "
                  "repeatable; overrides the job file's step_time for that model");
  sub->add_flag("--include-suspect", args->include_suspect, "Also consider prices flagged as likely fallback values");
  sub->add_flag("--trust-spot-outliers", args->trust_spot_outliers,
                "Rank spot prices flagged spot-outlier (a discount far beyond the usual for that GPU and cloud, "
                "no capacity signal) by expected cost like any other; by default they rank after every other "
                "offer");
  sub->add_flag("-q,--quiet", args->quiet, "Do not print the catalog summary on stderr");
  sub->footer(R"(The job file (a job file as `gpufleet submit` takes; a key it does not know is an error). What select reads:
  resources: {gpus: 8, nodes: 1, gpu_type: [H100, A100-80GB]}  # gpus per node
  estimate: "10h on A100"          # runtime on a reference GPU, with a unit (s, m, h, d, w)
  profile: compute                 # compute | memory | balanced (datasheet speeds only)
  workload: training-vision        # speed table class; default: default
  step_time: {A100: 0.42s, H100: 0.23s}   # measured time per step on each GPU model
  checkpoint: {interval: 30m, restart_overhead: 5m}  # no interval: never checkpoints (0 is refused)
  market: any                      # spot | on-demand | any
  deadline: 24h
  max_hourly_cost: 40              # USD per hour, whole job; > 0 (leave it out for no cap)
  regions: ["europe-*"]            # globs on region or zone
  constraints: {geo: eu}           # offer labels: cloud, region, zone, geo
Expected cost = $/h x (runtime on that GPU + expected spot rework and restarts); see docs/cost.md.
SPEED is the offer's GPU over the reference GPU and where that came from: measured (the job's
step times on both), measured+<table> (step times on the offer's GPU and others, the reference's
estimated through the table), mlperf:<class> (data/gpu_speeds.csv, MLPerf ratios; a GPU without
the class uses its default row), datasheet (TFLOPS and bandwidth ratios with the profile, for
GPUs the table lacks).
Spot prices flagged spot-outlier (see `gpufleet offers --help`) rank after every other offer and
are marked '!' unless --trust-spot-outliers. A cloud, region or constraint value no offer of the
catalog has is an error naming it and the nearest names (clouds: [awz] -> did you mean 'aws'?).
Exit status 3 when no offer fits (the reasons follow under "rejected:"), 2 when the job file or a
flag is wrong.

Examples:
  gpufleet select job.yaml
  gpufleet select job.yaml -o json --limit 10
  gpufleet select job.yaml --step-time A100=0.42s --step-time H100=0.23s)");
  return [args]() { return RunSelect(*args); };
}

}  // namespace gpufleet::cli
