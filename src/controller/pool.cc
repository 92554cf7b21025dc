#include "controller/pool.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <yaml-cpp/yaml.h>

#include "common/nesting.h"
#include "common/source_location.h"
#include "common/strings.h"
#include "cost/offer.h"
#include "model/gpu_speeds.h"

namespace gpufleet::controller {
namespace {

constexpr const char* kMetaKey = "pool.instances";

const std::vector<std::string> kPoolKeys = {
    "provider", "offers", "min_nodes", "max_nodes", "max_gpus", "idle_duration", "idle_gpu_util_below",
    "boot_timeout", "max_rents_per_minute", "max_releases_per_minute", "spot_fallback_after_preemptions",
    "spot_fallback_after_wait", "reconcile_interval", "name_prefix", "failed_offer_backoff", "burn_in"};
const std::vector<std::string> kOfferKeys = {"name", "gpu", "gpus", "market", "price_per_hour", "boot_estimate",
                                             "zone", "interruptions_per_hour", "labels", "catalog"};
const std::vector<std::string> kCatalogKeys = {"cloud", "region", "zone", "instance_type", "gpu", "gpus", "market"};

// Reads one pool file; every error names the source, line, column and field.
class Parser {
 public:
  Parser(const std::string& source, const model::GpuCatalog& catalog, const cost::OfferTable* offers)
      : source_(source), catalog_(catalog), offers_(offers) {}

  // "pool.yaml:LINE:COL: field: what", at the node that is wrong: a bad value's own position, an
  // unknown key's key, the enclosing mapping for a missing key.
  Status Error(const YAML::Node& at, const std::string& field, const std::string& what) const {
    return Status::InvalidArgument(SourcePrefixAt(source_, at.Mark()) + field + ": " + what);
  }

  Status CheckKeys(const YAML::Node& map, const std::string& path, const std::vector<std::string>& keys) const {
    if (!map.IsMap()) return Error(map, path.empty() ? "pool" : path, "must be a mapping");
    for (auto it = map.begin(); it != map.end(); ++it) {
      const std::string key = it->first.as<std::string>();
      if (std::find(keys.begin(), keys.end(), key) != keys.end()) continue;
      std::string hint;
      size_t best = 3;
      for (const std::string& k : keys) {
        size_t d = EditDistance(key, k);
        if (d < best) {
          best = d;
          hint = "; did you mean '" + k + "'?";
        }
      }
      return Error(it->first, (path.empty() ? "" : path + ".") + key, "unknown key" + hint + " Valid keys: " + Join(keys, ", "));
    }
    return Status::Ok();
  }

  Result<int64_t> Int(const YAML::Node& n, const std::string& field, int64_t lo, int64_t hi) const {
    std::optional<int64_t> v;
    if (n.IsScalar()) v = ParseInt(n.Scalar());
    if (!v || *v < lo || *v > hi) {
      return Error(n, field, "must be an integer from " + std::to_string(lo) + " to " + std::to_string(hi) + ", got '" +
                                 (n.IsScalar() ? n.Scalar() : std::string("a non-scalar")) + "'");
    }
    return *v;
  }

  Result<double> Number(const YAML::Node& n, const std::string& field, double lo, double hi) const {
    std::optional<double> v;
    if (n.IsScalar()) v = ParseDouble(n.Scalar());
    if (!v || !std::isfinite(*v) || *v < lo || *v > hi) {
      return Error(n, field, "must be a number from " + FormatNumber(lo) + " to " + FormatNumber(hi) + ", got '" +
                                 (n.IsScalar() ? n.Scalar() : std::string("a non-scalar")) + "'");
    }
    return *v;
  }

  Result<Duration> Dur(const YAML::Node& n, const std::string& field) const {
    std::optional<Duration> d;
    if (n.IsScalar()) d = ParseDuration(n.Scalar());
    if (!d) return Error(n, field, "must be a duration such as 30s, 10m or 1h30m");
    return *d;
  }

  Result<std::string> Str(const YAML::Node& n, const std::string& field) const {
    if (!n.IsScalar() || n.Scalar().empty()) return Error(n, field, "must be a non-empty string");
    return n.Scalar();
  }

  // An offer taken from the price catalog: the cheapest row of the cloud, region (and zone),
  // instance type or GPU model and count, for the market asked.
  Status CatalogOffer(const YAML::Node& n, const std::string& path, PoolConfig& c) const {
    const YAML::Node q = n["catalog"];
    const std::string cpath = path + ".catalog";
    GF_RETURN_IF_ERROR(CheckKeys(q, cpath, kCatalogKeys));
    for (const char* key : {"gpu", "gpus", "price_per_hour", "market", "interruptions_per_hour"}) {
      if (n[key]) return Error(n[key], path + "." + key, "comes from the catalog; drop it, or drop catalog:");
    }
    if (offers_ == nullptr) return Error(q, cpath, "the offer catalog could not be loaded");
    for (const char* key : {"cloud", "region"}) {
      if (!q[key]) return Error(q, cpath + "." + key, "is required");
    }
    if (!q["instance_type"] && !(q["gpu"] && q["gpus"])) {
      return Error(q, cpath, "needs instance_type, or gpu and gpus");
    }
    GF_ASSIGN_OR_RETURN(std::string cloud, Str(q["cloud"], cpath + ".cloud"));
    GF_ASSIGN_OR_RETURN(std::string region, Str(q["region"], cpath + ".region"));
    std::string zone, instance_type, gpu;
    int64_t gpus = 0;
    if (q["zone"]) {
      GF_ASSIGN_OR_RETURN(zone, Str(q["zone"], cpath + ".zone"));
    }
    if (q["instance_type"]) {
      GF_ASSIGN_OR_RETURN(instance_type, Str(q["instance_type"], cpath + ".instance_type"));
    }
    if (q["gpu"]) {
      GF_ASSIGN_OR_RETURN(std::string name, Str(q["gpu"], cpath + ".gpu"));
      const model::GpuModel* m = catalog_.Find(name);
      if (!m) return Error(q["gpu"], cpath + ".gpu", "unknown GPU model '" + name + "'");
      gpu = m->name;
    }
    if (q["gpus"]) {
      GF_ASSIGN_OR_RETURN(gpus, Int(q["gpus"], cpath + ".gpus", 1, 64));
    }
    model::Market market = model::Market::kOnDemand;
    if (q["market"]) {
      GF_ASSIGN_OR_RETURN(std::string text, Str(q["market"], cpath + ".market"));
      Result<model::Market> mk = model::ParseMarket(ToLower(text));
      if (!mk.ok() || *mk == model::Market::kReserved) {
        return Error(q["market"], cpath + ".market", "must be on-demand or spot, got '" + text + "'");
      }
      market = *mk;
    }
    const cost::Offer* best = nullptr;
    bool matched_without_price = false;
    for (const cost::Offer& row : offers_->offers) {
      if (row.cloud != cloud || row.region != region || (!zone.empty() && row.zone != zone)) continue;
      if (!instance_type.empty() && row.instance_type != instance_type) continue;
      if (!gpu.empty() && row.gpu != gpu) continue;
      if (gpus > 0 && row.gpus != gpus) continue;
      if (!row.price(market)) {
        matched_without_price = true;
        continue;
      }
      // A spot price flagged as an outlier (cost/offer.h: far beyond the usual discount, often a
      // zone with no capacity behind it) is taken only when nothing else matches.
      auto key = [&](const cost::Offer& o) {
        return std::make_pair(market == model::Market::kSpot && o.has(cost::kSpotOutlier), *o.price(market));
      };
      if (!best || key(row) < key(*best)) best = &row;
    }
    if (!best) {
      std::string what = cloud + " " + region + (zone.empty() ? "" : " " + zone) + " " +
                         (instance_type.empty() ? std::to_string(gpus) + " x " + gpu : instance_type);
      return Error(q, cpath,
                   matched_without_price
                       ? what + " has no " + model::MarketName(market) + " price in the catalog"
                       : "no catalog offer matches " + what + "; list them with: gpufleet offers --cloud " + cloud +
                             " --region '" + region + "'");
    }
    sched::RentableOffer o;
    o.name = best->cloud + "-" + best->instance_type + "-" + model::MarketName(market);
    for (char& ch : o.name) {
      if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-') ch = '-';
    }
    if (n["name"]) {
      GF_ASSIGN_OR_RETURN(o.name, Str(n["name"], path + ".name"));
    }
    for (const auto& other : c.offers) {
      if (other.name == o.name) return Error(n["name"] ? n["name"] : n, path + ".name", "'" + o.name + "' names another offer");
    }
    if (market == model::Market::kSpot && best->has(cost::kSpotOutlier)) {
      spdlog::warn("{}{} {} spot at ${}/h is an outlier in the catalog (far beyond the usual discount); "
                   "its capacity may not be there", SourcePrefixAt(source_, q.Mark()), best->cloud, best->instance_type,
                   static_cast<double>(*best->price(market)) / 1e6);
    }
    o.gpu_model = best->gpu;
    o.gpus_per_node = best->gpus;
    o.cpu_milli = best->cpu_milli;  // the instance's size: a job asking for more is not rented it
    o.mem_mib = best->mem_mib;
    o.market = market;
    o.price_micros_per_hour = *best->price(market);
    o.interruptions_per_hour = market == model::Market::kSpot ? best->spot_hazard_per_hour : 0;
    o.zone = !best->zone.empty() ? best->zone : best->region;
    if (n["zone"]) {
      GF_ASSIGN_OR_RETURN(o.zone, Str(n["zone"], path + ".zone"));
    }
    if (n["boot_estimate"]) {
      GF_ASSIGN_OR_RETURN(o.boot_estimate, Dur(n["boot_estimate"], path + ".boot_estimate"));
    }
    std::map<std::string, std::string> labels = best->labels();
    labels["instance_type"] = best->instance_type;
    return Add(std::move(o), std::move(labels), n, path, c);
  }

  // The offer's own `labels`, its zone, its speed; then it joins the pool's offers.
  Status Add(sched::RentableOffer o, std::map<std::string, std::string> labels, const YAML::Node& n,
             const std::string& path, PoolConfig& c) const {
    if (n["labels"]) {
      if (!n["labels"].IsMap()) return Error(n["labels"], path + ".labels", "must be a mapping of strings");
      for (auto it = n["labels"].begin(); it != n["labels"].end(); ++it) {
        labels[it->first.as<std::string>()] = it->second.IsScalar() ? it->second.Scalar() : "";
      }
    }
    if (!o.zone.empty()) labels[model::kLabelZone] = o.zone;
    // Throughput relative to the first offer's GPU (the reference cancels out in the ranking):
    // a faster GPU at a higher price can finish the work for less. The pool does not know the
    // workload, so the speed table's default class (measured MLPerf ratios, data/gpu_speeds.csv)
    // where both GPUs have rows, else the datasheet model (model::GpuSpeeds::Lookup).
    if (!c.offers.empty()) {
      const Result<model::GpuSpeeds>& shipped = model::GpuSpeeds::Shipped();
      static const bool warned = [&] {
        if (!shipped.ok()) spdlog::warn("pool offers use datasheet GPU speeds: {}", shipped.status().message());
        return true;
      }();
      (void)warned;
      static const model::GpuSpeeds kDatasheetOnly;
      model::SpeedQuery q;
      q.reference = c.offers.front().gpu_model;
      q.target = o.gpu_model;
      const double speed = (shipped.ok() ? *shipped : kDatasheetOnly).Lookup(q, catalog_).ratio;
      if (speed > 0) o.speed = speed;
    }
    c.offers.push_back(std::move(o));
    c.offer_labels.push_back(std::move(labels));
    return Status::Ok();
  }

  Status Offer(const YAML::Node& n, const std::string& path, PoolConfig& c) const {
    GF_RETURN_IF_ERROR(CheckKeys(n, path, kOfferKeys));
    if (n["catalog"]) return CatalogOffer(n, path, c);
    sched::RentableOffer o;
    std::map<std::string, std::string> labels;
    for (const char* key : {"name", "gpu", "gpus", "price_per_hour"}) {
      if (!n[key]) return Error(n, path + "." + key, "is required (or take the offer from the catalog: catalog: {...})");
    }
    GF_ASSIGN_OR_RETURN(o.name, Str(n["name"], path + ".name"));
    for (const auto& other : c.offers) {
      if (other.name == o.name) return Error(n["name"], path + ".name", "'" + o.name + "' names another offer");
    }
    GF_ASSIGN_OR_RETURN(std::string gpu, Str(n["gpu"], path + ".gpu"));
    const model::GpuModel* m = catalog_.Find(gpu);
    if (!m) return Error(n["gpu"], path + ".gpu", "unknown GPU model '" + gpu + "'");
    o.gpu_model = m->name;
    GF_ASSIGN_OR_RETURN(int64_t gpus, Int(n["gpus"], path + ".gpus", 1, 64));
    o.gpus_per_node = static_cast<int>(gpus);
    if (n["market"]) {
      GF_ASSIGN_OR_RETURN(std::string text, Str(n["market"], path + ".market"));
      Result<model::Market> market = model::ParseMarket(ToLower(text));
      if (!market.ok()) return Error(n["market"], path + ".market", market.status().message());
      o.market = *market;
    }
    GF_ASSIGN_OR_RETURN(double price, Number(n["price_per_hour"], path + ".price_per_hour", 0, 1e6));
    o.price_micros_per_hour = static_cast<int64_t>(std::llround(price * 1e6));
    if (n["boot_estimate"]) {
      GF_ASSIGN_OR_RETURN(o.boot_estimate, Dur(n["boot_estimate"], path + ".boot_estimate"));
    }
    if (n["zone"]) {
      GF_ASSIGN_OR_RETURN(o.zone, Str(n["zone"], path + ".zone"));
    }
    if (n["interruptions_per_hour"]) {
      GF_ASSIGN_OR_RETURN(o.interruptions_per_hour,
                          Number(n["interruptions_per_hour"], path + ".interruptions_per_hour", 0, 1000));
    }
    return Add(std::move(o), std::move(labels), n, path, c);
  }

  Result<PoolConfig> Parse(YAML::Node root, const std::map<std::string, std::string>& subs) const {
    if (!root.IsDefined() || root.IsNull()) {
      return Status::InvalidArgument(SourcePrefix(source_, 1, 1) + "the pool file is empty");
    }
    GF_RETURN_IF_ERROR(CheckKeys(root, "", kPoolKeys));
    PoolConfig c;
    if (!root["provider"]) return Error(root, "provider", "is required, e.g. {kind: local, ...}");
    // The server's own values ({server}, {join_token_file}, {gpufleet}, {data_dir}) anywhere in
    // the provider's settings; the provider's per-instance placeholders ({name}, ...) stay. In
    // place, not in a YAML::Clone: a clone's nodes lose their positions, and the provider's errors
    // would all point at 1:1.
    YAML::Node prov = root["provider"];
    std::function<void(YAML::Node)> substitute = [&](YAML::Node n) {
      if (n.IsScalar()) {
        std::string text = n.Scalar();
        bool changed = false;
        for (const auto& [key, value] : subs) {
          const std::string pattern = "{" + key + "}";
          for (size_t at = text.find(pattern); at != std::string::npos; at = text.find(pattern, at + value.size())) {
            text.replace(at, pattern.size(), value);
            changed = true;
          }
        }
        if (changed) n = text;
      } else if (n.IsSequence()) {
        for (size_t i = 0; i < n.size(); ++i) substitute(n[i]);
      } else if (n.IsMap()) {
        for (auto it = n.begin(); it != n.end(); ++it) substitute(it->second);
      }
    };
    substitute(prov);
    GF_ASSIGN_OR_RETURN(c.provider, provider::ParseProviderConfig(prov, source_, "provider."));
    if (c.provider.kind != "static") {
      if (!root["offers"] || !root["offers"].IsSequence() || root["offers"].size() == 0) {
        return Error(root["offers"] ? root["offers"] : root, "offers",
                     "must be a non-empty list of the node types the pool may rent");
      }
    }
    if (root["offers"]) {
      if (!root["offers"].IsSequence()) return Error(root["offers"], "offers", "must be a list");
      for (size_t i = 0; i < root["offers"].size(); ++i) {
        GF_RETURN_IF_ERROR(Offer(root["offers"][i], "offers[" + std::to_string(i) + "]", c));
      }
    }
    auto int_key = [&](const char* key, int64_t lo, int64_t hi, auto set) -> Status {
      if (!root[key]) return Status::Ok();
      GF_ASSIGN_OR_RETURN(int64_t v, Int(root[key], key, lo, hi));
      set(v);
      return Status::Ok();
    };
    auto dur_key = [&](const char* key, Duration& out) -> Status {
      if (!root[key]) return Status::Ok();
      GF_ASSIGN_OR_RETURN(out, Dur(root[key], key));
      return Status::Ok();
    };
    GF_RETURN_IF_ERROR(int_key("min_nodes", 0, 100000, [&](int64_t v) { c.limits.min_nodes = static_cast<int>(v); }));
    GF_RETURN_IF_ERROR(int_key("max_nodes", 0, 100000, [&](int64_t v) { c.limits.max_nodes = static_cast<int>(v); }));
    GF_RETURN_IF_ERROR(int_key("max_gpus", 0, 6400000, [&](int64_t v) { c.limits.max_gpus = v; }));
    GF_RETURN_IF_ERROR(int_key("idle_gpu_util_below", 0, 100, [&](int64_t v) { c.idle_gpu_util_below = static_cast<int>(v); }));
    GF_RETURN_IF_ERROR(int_key("max_rents_per_minute", 0, 100000,
                               [&](int64_t v) { c.options.max_rents_per_minute = static_cast<int>(v); }));
    GF_RETURN_IF_ERROR(int_key("max_releases_per_minute", 0, 100000,
                               [&](int64_t v) { c.options.max_releases_per_minute = static_cast<int>(v); }));
    GF_RETURN_IF_ERROR(int_key("spot_fallback_after_preemptions", 0, 100000,
                               [&](int64_t v) { c.options.spot_fallback_after_preemptions = static_cast<int>(v); }));
    GF_RETURN_IF_ERROR(dur_key("idle_duration", c.options.idle_duration));
    GF_RETURN_IF_ERROR(dur_key("boot_timeout", c.options.boot_timeout));
    GF_RETURN_IF_ERROR(dur_key("failed_offer_backoff", c.options.failed_offer_backoff));
    GF_RETURN_IF_ERROR(dur_key("spot_fallback_after_wait", c.options.spot_fallback_after_wait));
    GF_RETURN_IF_ERROR(dur_key("reconcile_interval", c.reconcile_interval));
    if (const YAML::Node b = root["burn_in"]) {
      if (!b.IsScalar() || (b.Scalar() != "true" && b.Scalar() != "false")) {
        return Error(b, "burn_in", "must be true or false");
      }
      c.burn_in = b.Scalar() == "true";
    }
    if (c.limits.max_nodes > 0 && c.limits.min_nodes > c.limits.max_nodes) {
      return Error(root["min_nodes"], "min_nodes", "is larger than max_nodes");
    }
    if (root["name_prefix"]) {
      GF_ASSIGN_OR_RETURN(c.name_prefix, Str(root["name_prefix"], "name_prefix"));
      // No '-': instances are <prefix>-<offer>-<n>, and a pool owns every name starting with
      // "<prefix>-", so "gf" and "gf-eu" would delete each other's instances.
      const bool ok = std::all_of(c.name_prefix.begin(), c.name_prefix.end(),
                                  [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) != 0; });
      if (!ok) return Error(root["name_prefix"], "name_prefix", "must be letters and digits only (no '-')");
    }
    return c;
  }

 private:
  static std::string FormatNumber(double v) {
    std::ostringstream out;
    out << v;
    return out.str();
  }

  const std::string& source_;
  const model::GpuCatalog& catalog_;
  const cost::OfferTable* offers_;
};

nlohmann::json EntryJson(const PoolInstance& i) {
  nlohmann::json j;
  j["name"] = i.name;
  j["provider_id"] = i.provider_id;
  j["offer"] = i.offer;
  j["state"] = i.state;
  j["created_ms"] = i.created.millis();
  std::vector<int64_t> jobs;
  for (JobId id : i.for_jobs) jobs.push_back(id.value());
  j["for_jobs"] = jobs;
  if (!i.team.empty()) j["team"] = i.team;
  if (i.price_micros_per_hour > 0) j["price_micros_per_hour"] = i.price_micros_per_hour;
  return j;
}

std::string DollarsText(int64_t micros) {
  const int64_t cents = (micros + 5'000) / 10'000;  // to the nearest cent, as `gpufleet pool` shows it
  std::ostringstream out;
  out << cents / 100 << "." << (cents % 100) / 10 << cents % 10;
  return out.str();
}

}  // namespace

Result<PoolConfig> ParsePoolConfig(const std::string& yaml, const std::string& source,
                                   const model::GpuCatalog& catalog,
                                   const std::map<std::string, std::string>& substitutions,
                                   const cost::OfferTable* offers) {
  // yaml-cpp parses recursively: bound the depth before it does.
  Status depth = CheckNestingDepth(yaml, NestingSyntax::kYaml);
  if (!depth.ok()) return InSource(source, depth);
  try {
    return Parser(source, catalog, offers).Parse(YAML::Load(yaml), substitutions);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(SourcePrefixAt(source, e.mark) + "invalid YAML: " + e.msg);
  }
}

Result<PoolConfig> LoadPoolConfig(const std::string& path, const model::GpuCatalog& catalog,
                                  const std::map<std::string, std::string>& substitutions,
                                  const cost::OfferTable* offers) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(path + ": cannot open the pool file");
  std::stringstream buf;
  buf << in.rdbuf();
  return ParsePoolConfig(buf.str(), path, catalog, substitutions, offers);
}

Pool::Pool(PoolConfig config, std::unique_ptr<provider::Provider> provider, Engine& engine,
           store::StateStore& store, const sched::Clock& clock)
    : config_(std::move(config)),
      provider_(std::move(provider)),
      engine_(engine),
      store_(store),
      clock_(clock),
      scaler_(config_.options) {}

Pool::~Pool() { Stop(); }

namespace {

// The audit record of an autoscaling decision: the controller acts, no token.
api::AuditRecord PoolAudit(Time now, const std::string& verb, const std::string& instance, const std::string& offer,
                           const std::string& reason) {
  api::AuditRecord a;
  a.at = now;
  a.subject = "autoscaler";
  a.role = "controller";
  a.source = "controller";
  a.verb = verb;
  a.object = "instance " + instance + " (" + offer + ")";
  a.outcome = "allowed";
  a.reason = reason;
  return a;
}

}  // namespace

Status Pool::Save() {
  nlohmann::json all = nlohmann::json::array();
  {
    MutexLock lock(mu_);
    for (const auto& [name, e] : entries_) all.push_back(EntryJson(e.info));
  }
  nlohmann::json doc;
  doc["next_serial"] = next_serial_;
  doc["instances"] = std::move(all);
  return store_.SetMeta(kMetaKey, doc.dump());
}

Status Pool::Start() {
  const Time now = clock_.Now();
  started_ = now;
  GF_ASSIGN_OR_RETURN(std::optional<std::string> saved, store_.GetMeta(kMetaKey));
  if (saved) {
    nlohmann::json doc = nlohmann::json::parse(*saved, nullptr, false);
    if (doc.is_discarded() || !doc.is_object()) return Status::Internal("pool: the stored instance table is not JSON");
    next_serial_ = doc.value("next_serial", int64_t{0});
    MutexLock lock(mu_);
    for (const auto& j : doc.value("instances", nlohmann::json::array())) {
      Entry e;
      e.info.name = j.value("name", "");
      e.info.provider_id = j.value("provider_id", "");
      e.info.offer = j.value("offer", "");
      e.info.state = j.value("state", "booting");
      e.info.created = Time::FromMillis(j.value("created_ms", int64_t{0}));
      for (int64_t id : j.value("for_jobs", std::vector<int64_t>{})) e.info.for_jobs.push_back(JobId(id));
      e.info.team = j.value("team", "");
      e.info.price_micros_per_hour = j.value("price_micros_per_hour", int64_t{0});
      for (size_t o = 0; o < config_.offers.size(); ++o) {
        if (config_.offers[o].name == e.info.offer) e.offer = static_cast<int>(o);
      }
      if (e.offer < 0 && !e.info.name.empty()) {
        spdlog::warn("pool: instance {} was rented from offer {}, which the pool file no longer has; it is kept "
                     "(billed at its recorded price) until it is idle and released",
                     e.info.name, e.info.offer);
      }
      if (e.info.name.empty()) continue;
      if (config_.burn_in) engine_.RequireBurnIn(e.info.name);  // one that has not registered yet still owes it
      entries_[e.info.name] = std::move(e);
    }
  }
  size_t on_record = 0;
  {
    MutexLock lock(mu_);
    on_record = entries_.size();
  }
  spdlog::info("pool: provider {}, {} offers, {} instances on record", provider_->Kind(), config_.offers.size(),
               on_record);
  Status st = Reconcile(now);
  SyncCharges();
  return st;
}

void Pool::SyncCharges() {
  std::vector<std::tuple<std::string, std::string, int64_t, Time>> add;
  std::vector<std::string> end;
  {
    MutexLock lock(mu_);
    for (const auto& [name, e] : entries_) {
      if (e.info.team.empty() || charged_.count(name)) continue;
      // Its price as rented (an offer renamed or removed since still bills its instances).
      const int64_t price = e.info.price_micros_per_hour > 0 ? e.info.price_micros_per_hour
                            : e.offer >= 0 ? config_.offers[static_cast<size_t>(e.offer)].price_micros_per_hour
                                           : 0;
      if (price <= 0) continue;
      add.emplace_back(name, e.info.team, price, std::max(e.info.created, started_));
    }
    for (const std::string& name : charged_) {
      if (!entries_.count(name)) end.push_back(name);
    }
  }
  for (auto& [name, team, price, since] : add) {
    engine_.ChargeNode(name, team, price, since);
    charged_.insert(name);
  }
  for (const std::string& name : end) {
    engine_.EndNodeCharge(name);
    charged_.erase(name);
  }
}

// The provider's List is the truth: adopt what we know, delete what we do not, forget what is gone.
Status Pool::Reconcile(Time now) {
  last_reconcile_ = now;
  GF_ASSIGN_OR_RETURN(std::vector<provider::Instance> listed, provider_->List());
  const std::string prefix = config_.name_prefix + "-";
  std::set<std::string> seen;
  std::vector<std::string> gone;
  bool changed = false;
  for (const provider::Instance& inst : listed) {
    if (inst.name.rfind(prefix, 0) != 0) continue;  // not ours: another pool's or hand-made
    MutexLock lock(mu_);
    auto it = entries_.find(inst.name);
    if (it == entries_.end()) {
      lock.Unlock();
      // Rented by us (the prefix says so) but not on record: a create whose answer was lost, or
      // an instance of an older table. Nothing can use it: delete it.
      spdlog::warn("pool: instance {} ({}) is not on record; deleting it", inst.name, inst.id);
      Status st = provider_->Delete(inst.id, now);
      if (!st.ok()) spdlog::error("pool: delete {}: {}", inst.id, st.message());
      continue;
    }
    if (inst.state == provider::kTerminated) {
      lock.Unlock();
      gone.push_back(inst.name);
      // Ended while we were away (interrupted, died): acknowledge it to the provider.
      (void)provider_->Delete(inst.id, now);
      continue;
    }
    seen.insert(inst.name);
    if (it->second.info.provider_id != inst.id) {
      it->second.info.provider_id = inst.id;
      changed = true;
    }
  }
  {
    MutexLock lock(mu_);
    for (const auto& [name, e] : entries_) {
      if (seen.count(name)) continue;
      // A create never answered (no id) that is not listed either: the provider has nothing.
      if (std::find(gone.begin(), gone.end(), name) == gone.end()) gone.push_back(name);
    }
  }
  for (const std::string& name : gone) {
    ReleaseNode(name, "the provider no longer has its instance", now);
    MutexLock lock(mu_);
    entries_.erase(name);
    changed = true;
  }
  if (changed) return Save();
  return Status::Ok();
}

void Pool::ReleaseNode(const std::string& name, const std::string& reason, Time now) {
  (void)now;
  Status st = engine_.Release(name, /*only_if_idle=*/false, reason).get();
  if (!st.ok() && st.code() != StatusCode::kNotFound) spdlog::warn("pool: release node {}: {}", name, st.message());
  idle_since_.erase(name);
}

void Pool::HandleProviderEvents(Time now) {
  for (const provider::ProviderEvent& e : provider_->Poll(now)) {
    switch (e.kind) {
      case provider::ProviderEventKind::kStarted:
      case provider::ProviderEventKind::kSpotNotice: {
        // A notice reaches the scheduler through the node's agent, which polls the notice URL.
        MutexLock lock(mu_);
        auto it = entries_.find(e.name);
        if (it != entries_.end()) it->second.info.note = provider::ProviderEventKindName(e.kind);
        break;
      }
      case provider::ProviderEventKind::kInterrupted:
      case provider::ProviderEventKind::kDied:
      case provider::ProviderEventKind::kTerminated: {
        spdlog::info("pool: instance {} {}{}", e.name, provider::ProviderEventKindName(e.kind),
                     e.detail.empty() ? "" : ": " + e.detail);
        ReleaseNode(e.name, std::string("instance ") + provider::ProviderEventKindName(e.kind), now);
        if (e.kind != provider::ProviderEventKind::kTerminated) (void)provider_->Delete(e.instance_id, now);
        bool erased = false;
        {
          MutexLock lock(mu_);
          auto it = entries_.find(e.name);
          if (it != entries_.end()) {
            // An instance that died before its node ever came up (an agent that cannot start: a
            // bad image, a bad agent_command) is a failed rent: its offer is avoided for
            // failed_offer_backoff, as for a failed create, instead of being rented again at once
            // and for ever.
            const std::string& state = it->second.info.state;
            if (e.kind == provider::ProviderEventKind::kDied && (state == "creating" || state == "booting")) {
              spdlog::warn("pool: instance {} died before its node came up; avoiding offer {} for {}", e.name,
                           it->second.info.offer, FormatDuration(config_.options.failed_offer_backoff));
              scaler_.ReportRentFailed(it->second.info.offer, now);
            }
            scaler_.ReportNodeGone(it->second.info.for_jobs);
            entries_.erase(it);
            erased = true;
          }
        }
        if (erased) {
          Status st = Save();
          if (!st.ok()) spdlog::error("pool: save: {}", st.message());
        }
        break;
      }
    }
  }
}

void Pool::Rent(const sched::Rent& rent, const std::string& team, Time now) {
  const sched::RentableOffer& offer = config_.offers[static_cast<size_t>(rent.offer)];
  std::vector<std::pair<std::string, std::string>> made;  // (name, provider id) of this rent
  // A gang is all or nothing: when one member cannot be created, the others are deleted.
  auto undo = [&] {
    for (const auto& [name, id] : made) {
      Status st = provider_->Delete(id, now);
      if (!st.ok()) {
        spdlog::error("pool: delete {} ({}) of a failed gang rent: {}; reconciliation retries", name, id, st.message());
        continue;
      }
      MutexLock lock(mu_);
      entries_.erase(name);
    }
    (void)Save();
  };
  for (int k = 0; k < rent.count; ++k) {
    Entry e;
    e.offer = rent.offer;
    e.info.name = config_.name_prefix + "-" + offer.name + "-" + std::to_string(next_serial_++);
    e.info.offer = offer.name;
    e.info.state = "creating";
    e.info.created = now;
    e.info.for_jobs = rent.for_jobs;
    e.info.team = team;
    e.info.price_micros_per_hour = offer.price_micros_per_hour;
    e.info.note = rent.reason;
    {
      MutexLock lock(mu_);
      entries_[e.info.name] = e;
    }
    // On record before the provider hears of it: a crash from here on cannot leak it. The
    // audit record commits with it.
    store_.AttachAudit({PoolAudit(now, "pool.rent", e.info.name, offer.name, rent.reason)});
    Status st = Save();
    if (!st.ok()) {
      spdlog::error("pool: cannot record instance {} ({}); not renting", e.info.name, st.message());
      {
        MutexLock lock(mu_);
        entries_.erase(e.info.name);
      }
      undo();
      return;
    }
    provider::InstanceRequest req;
    req.name = e.info.name;
    req.offer = offer.name;
    req.gpu_model = offer.gpu_model;
    req.gpus = offer.gpus_per_node;
    req.market = model::MarketName(offer.market);
    req.price_micros_per_hour = offer.price_micros_per_hour;
    req.zone = offer.zone;
    req.labels = config_.offer_labels[static_cast<size_t>(rent.offer)];
    if (config_.burn_in) engine_.RequireBurnIn(e.info.name);
    Result<provider::Instance> inst = provider_->Create(req, now);
    if (!inst.ok()) {
      spdlog::warn("pool: create {} ({}): {}", e.info.name, offer.name, inst.status().message());
      scaler_.ReportRentFailed(offer.name, now);
      {
        MutexLock lock(mu_);
        entries_.erase(e.info.name);
      }
      undo();
      return;
    }
    made.emplace_back(e.info.name, inst->id);
    spdlog::info("pool: rented {} ({}, ${}/h) for {} job(s): {}", e.info.name, offer.name,
                 DollarsText(offer.price_micros_per_hour), rent.for_jobs.size(), rent.reason);
    {
      MutexLock lock(mu_);
      auto it = entries_.find(e.info.name);
      if (it != entries_.end()) {
        it->second.info.provider_id = inst->id;
        it->second.info.state = "booting";
      }
    }
    (void)Save();
  }
}

void Pool::Tick() {
  const Time now = clock_.Now();
  HandleProviderEvents(now);
  if (now - last_reconcile_ >= config_.reconcile_interval) {
    Status st = Reconcile(now);
    if (!st.ok()) spdlog::warn("pool: reconcile: {}", st.message());
  }
  if (config_.offers.empty()) {
    SyncCharges();
    return;
  }

  // The autoscaler's view: pending jobs, and the rented nodes as booting, up or draining.
  sched::ScaleInput in;
  in.now = now;
  in.offers = config_.offers;
  for (size_t i = 0; i < in.offers.size(); ++i) in.offers[i].labels = config_.offer_labels[i];
  in.limits = config_.limits;
  Engine::ScalingView view = engine_.ScalingSnapshot();
  in.pending = std::move(view.pending);
  std::map<int64_t, std::string> team_of;
  for (const sched::PendingJob& j : in.pending) team_of[j.id.value()] = j.team;
  std::map<std::string, const NodeStatus*> by_name;
  std::vector<NodeStatus> nodes = std::move(view.nodes);
  for (const NodeStatus& n : nodes) by_name[n.record.name] = &n;
  // Measured speed: where nodes of a GPU model passed a burn-in on their GPUs, their median matmul
  // against the datasheet reference scales that model's offers (a model whose rented nodes run
  // at 0.8x of what its datasheet promises is worth 0.8x in the cost-to-finish ranking).
  {
    std::map<std::string, std::vector<double>> measured;
    for (const NodeStatus& n : nodes) {
      const auto& b = n.record.burn_in;
      if (b && b->passed && b->path == "cuda" && b->speed_ratio > 0) measured[n.record.spec.gpu_model].push_back(b->speed_ratio);
    }
    for (auto& o : in.offers) {
      auto it = measured.find(o.gpu_model);
      if (it == measured.end()) continue;
      std::vector<double> v = it->second;
      std::sort(v.begin(), v.end());
      o.speed *= v[v.size() / 2];
    }
  }
  // What the nodes of each offer run: a registered node of it lists the environments its driver
  // and GPUs allow. Remembered after the node goes, so that a job whose environment an offer's
  // nodes lack is not rented for there again and again (each node would idle and be released).
  {
    MutexLock lock(mu_);
    for (const auto& [name, e] : entries_) {
      auto node = by_name.find(name);
      if (node == by_name.end() || e.info.offer.empty()) continue;
      const api::NodeRecord& rec = node->second->record;
      if ((rec.state == api::NodeState::kUp || rec.state == api::NodeState::kDraining) && rec.spec.gpus > 0) {
        offer_environments_[e.info.offer] = rec.spec.environments;
      }
    }
  }
  for (auto& o : in.offers) {
    auto it = offer_environments_.find(o.name);
    if (it != offer_environments_.end()) o.runs_environments = it->second;
  }
  // A node that registered once and is now lost or gone is not booting: its machine is given
  // back (the engine has already requeued what ran there) without blaming its offer.
  std::vector<std::pair<std::string, std::string>> dead;  // (name, provider id)
  std::vector<std::pair<std::string, std::string>> quarantined;  // (name, why)
  std::vector<std::pair<std::string, std::string>> retired;      // (name, why): drained and idle
  {
    MutexLock lock(mu_);
    for (const auto& [name, e] : entries_) {
      auto node = by_name.find(name);
      if (node == by_name.end()) continue;
      const api::NodeState st = node->second->record.state;
      if (st == api::NodeState::kLost || st == api::NodeState::kGone) dead.emplace_back(name, e.info.provider_id);
      if ((st == api::NodeState::kUp || st == api::NodeState::kDraining) &&
          node->second->record.acceptance == "quarantined") {
        quarantined.emplace_back(name, node->second->record.acceptance_reason);
        continue;
      }
      // A drained rented node takes no work, yet bills: once it has no job left for idle_duration
      // it is given back (at once when the team it is billed to is over its hard budget), as an
      // idle up node is. (The autoscaler counts only up nodes as idle capacity.) So is one whose
      // disk has no room (its agent's storage fault): the autoscaler sees it as draining.
      // (Not while it runs a burn-in an operator asked for: drained for it, docs/nodes.md.)
      const bool no_room = st == api::NodeState::kUp && !node->second->storage_fault.empty();
      if ((st == api::NodeState::kDraining || no_room) && node->second->jobs.empty() &&
          node->second->record.acceptance != "checking") {
        const Time since = drained_idle_since_.emplace(name, now).first->second;
        const auto billed = view.charged_to.find(name);
        const std::string& team = billed != view.charged_to.end() ? billed->second : e.info.team;
        const bool spent = !team.empty() && view.hard_stopped_teams.count(team) > 0;
        if (spent) {
          retired.emplace_back(name, std::string(no_room ? "without room on its disk" : "drained") +
                                         " and idle, and the hard budget of the team it is billed to is spent");
        } else if (now - since >= config_.options.idle_duration) {
          retired.emplace_back(name, std::string(no_room ? "without room on its disk" : "drained") + " and idle for " +
                                         FormatDuration(now - since) + " (idle_duration " +
                                         FormatDuration(config_.options.idle_duration) + ")");
        }
      } else {
        drained_idle_since_.erase(name);
      }
    }
  }
  for (const auto& [name, why] : retired) {
    drained_idle_since_.erase(name);
    // Only if still idle (undrained and given a job since the snapshot: kept).
    Status st = engine_.Release(name, /*only_if_idle=*/true, why).get();
    if (!st.ok() && st.code() != StatusCode::kNotFound) {
      spdlog::info("pool: keeping {}: {}", name, st.message());
      continue;
    }
    spdlog::info("pool: releasing {}: {}", name, why);
    idle_since_.erase(name);
  }
  // A rented node that failed its burn-in is given back, and its offer avoided for a while: the
  // same offer tends to hand out the same bad hardware (a host, a rack) again soon.
  for (const auto& [name, why] : quarantined) {
    std::string offer;
    {
      MutexLock lock(mu_);
      auto it = entries_.find(name);
      if (it != entries_.end()) {
        offer = it->second.info.offer;
        it->second.info.note = "quarantined: " + why;
      }
    }
    spdlog::warn("pool: node {} failed its burn-in; releasing it and avoiding offer {} for {}: {}", name, offer,
                 FormatDuration(config_.options.failed_offer_backoff), why);
    if (!offer.empty()) scaler_.ReportRentFailed(offer, now);
    ReleaseNode(name, "quarantined by its burn-in: " + why, now);
  }
  for (const auto& [name, id] : dead) {
    spdlog::warn("pool: node {} is {}; deleting its instance", name, api::NodeStateName(by_name[name]->record.state));
    Status st = id.empty() ? Status::Ok() : provider_->Delete(id, now);
    if (!st.ok()) {
      spdlog::error("pool: delete {} ({}): {}; reconciliation retries", name, id, st.message());
      continue;
    }
    MutexLock lock(mu_);
    auto it = entries_.find(name);
    if (it != entries_.end()) {
      scaler_.ReportNodeGone(it->second.info.for_jobs);
      entries_.erase(it);
    }
  }
  if (!dead.empty()) (void)Save();
  std::map<int64_t, std::string> name_of;  // PoolNode id -> instance name
  int64_t synthetic = int64_t{1} << 40;     // ids for instances with no node yet
  bool billed_moved = false;                // an instance's charge moved to another team
  {
    MutexLock lock(mu_);
    for (auto& [name, e] : entries_) {
      sched::PoolNode p;
      p.offer = e.info.offer;
      p.for_jobs = e.info.for_jobs;
      p.booting_since = e.info.created;
      if (e.offer >= 0) {
        const sched::RentableOffer& o = config_.offers[static_cast<size_t>(e.offer)];
        p.spec.gpu_model = o.gpu_model;
        p.spec.gpus = o.gpus_per_node;
        p.spec.market = o.market;
        p.spec.price_micros_per_hour = o.price_micros_per_hour;
        p.spec.labels = config_.offer_labels[static_cast<size_t>(e.offer)];
      }
      p.spec.name = name;
      // The team billed for it now: the scheduler moves a charge off a team its hard budget
      // stopped, to a team whose job runs there. Kept on record, so that a restart bills that team.
      // (Only for an instance this pool charges: a snapshot taken before the engine applied an
      // EndNodeCharge must not bring an unbilled team back.)
      if (auto c = view.charged_to.find(name);
          c != view.charged_to.end() && c->second != e.info.team && charged_.count(name) && !e.info.team.empty()) {
        e.info.team = c->second;
        billed_moved = true;
      }
      p.budget_spent = !e.info.team.empty() && view.hard_stopped_teams.count(e.info.team) > 0;
      auto node = by_name.find(name);
      const bool registered = node != by_name.end() && (node->second->record.state == api::NodeState::kUp ||
                                                        node->second->record.state == api::NodeState::kDraining);
      if (!registered) {
        p.id = NodeId(synthetic++);
        p.state = sched::PoolNodeState::kBooting;
      } else {
        const NodeStatus& ns = *node->second;
        p.id = ns.record.id;
        p.spec = ns.record.spec;
        // (A node whose disk has no room takes no work either: not capacity.)
        const bool no_room = !ns.storage_fault.empty();
        const bool draining = ns.record.state == api::NodeState::kDraining || ns.notice.has_value() || no_room;
        p.state = draining ? sched::PoolNodeState::kDraining : sched::PoolNodeState::kUp;
        p.out_of_service = no_room;
        if (!draining && ns.record.acceptance == "checking") {
          // Still being accepted: capacity on its way, like a booting node (it may yet fail).
          p.state = sched::PoolNodeState::kBooting;
          p.for_jobs = e.info.for_jobs;
          e.info.state = "checking";
          name_of[p.id.value()] = name;
          in.nodes.push_back(std::move(p));
          continue;
        }
        bool idle = !draining && ns.jobs.empty();
        for (const auto& g : ns.telemetry) idle = idle && g.util_pct < config_.idle_gpu_util_below;
        if (idle) {
          auto [it, inserted] = idle_since_.emplace(name, now);
          p.idle_since = it->second;
        } else {
          idle_since_.erase(name);
        }
        e.info.state = no_room && ns.record.state == api::NodeState::kUp ? "no-room" : draining ? "draining" : "up";
        e.info.idle_since = p.idle_since;
        p.for_jobs.clear();  // up: no longer "coming" for anyone (the info keeps who it was for)
      }
      name_of[p.id.value()] = name;
      in.nodes.push_back(std::move(p));
    }
  }
  sched::ScalePlan plan = scaler_.Decide(in);
  bool changed = billed_moved || save_pending_;  // (a record whose save failed is saved again)
  std::vector<api::AuditRecord> released;
  for (const sched::Release& r : plan.releases) {
    auto it = name_of.find(r.node.value());
    if (it == name_of.end()) continue;
    const std::string name = it->second;
    std::string provider_id;
    {
      MutexLock lock(mu_);
      auto e = entries_.find(name);
      if (e == entries_.end()) continue;
      provider_id = e->second.info.provider_id;
    }
    if (by_name.count(name)) {
      // Out of the engine first, and only if still idle; a job may have started since.
      Status st = engine_.Release(name, /*only_if_idle=*/true, r.reason).get();
      if (!st.ok() && st.code() != StatusCode::kNotFound) {
        spdlog::info("pool: keeping {}: {}", name, st.message());
        idle_since_.erase(name);
        continue;
      }
    }
    spdlog::info("pool: releasing {}: {}", name, r.reason);
    if (!provider_id.empty()) {
      Status st = provider_->Delete(provider_id, now);
      if (!st.ok()) {
        // Keep it on record: reconciliation tries again.
        spdlog::error("pool: delete {} ({}): {}", name, provider_id, st.message());
        continue;
      }
    }
    {
      MutexLock lock(mu_);
      auto e = entries_.find(name);
      if (e != entries_.end()) released.push_back(PoolAudit(now, "pool.release", name, e->second.info.offer, r.reason));
      entries_.erase(name);
    }
    idle_since_.erase(name);
    changed = true;
  }
  // A node idle past idle_duration that the plan keeps for min_nodes alone is the pool's floor,
  // the operator's cost: it is billed to no team from now on (the team whose job first rented it
  // would pay for it for good, and could be stopped by it). Nodes kept for a waiting gang or by
  // the release rate stay billed.
  std::vector<std::string> unbilled;
  for (const NodeId& id : plan.floor_kept) {
    auto it = name_of.find(id.value());
    if (it == name_of.end()) continue;
    MutexLock lock(mu_);
    auto e = entries_.find(it->second);
    if (e == entries_.end() || e->second.info.team.empty()) continue;
    spdlog::info("pool: {} is kept idle for the pool's floor (min_nodes); team {} no longer pays for it", it->second,
                 e->second.info.team);
    e->second.info.team.clear();
    unbilled.push_back(it->second);
    changed = true;
  }
  for (const std::string& name : unbilled) {
    engine_.EndNodeCharge(name);
    charged_.erase(name);
  }
  if (changed) {
    if (!released.empty()) store_.AttachAudit(released);  // committed with the pool's new record
    Status st = Save();
    save_pending_ = !st.ok();
    if (!st.ok()) spdlog::error("pool: save: {}", st.message());
  }
  std::map<int64_t, std::string> holds;
  for (const sched::Hold& h : plan.held) {
    spdlog::debug("pool: job {} not rented for: {}", h.job.value(), h.reason);
    holds[h.job.value()] = h.reason;
  }
  engine_.NotePoolHolds(std::move(holds));
  for (const sched::Rent& r : plan.rents) {
    const std::string team = r.for_jobs.empty() ? std::string() : team_of[r.for_jobs.front().value()];
    Rent(r, team, now);
  }
  SyncCharges();
}

void Pool::Run() {
  MutexLock lock(run_mu_);
  while (!stopping_) {
    lock.Unlock();
    Tick();
    lock.Lock();
    run_cv_.WaitFor(run_mu_, std::chrono::milliseconds(config_.tick.millis()), [this] {
      run_mu_.AssertHeld();
      return stopping_;
    });
  }
}

void Pool::Stop() {
  MutexLock lock(run_mu_);
  stopping_ = true;
  run_cv_.NotifyAll();
}

std::vector<PoolInstance> Pool::Instances() const {
  // A booting instance whose node has registered since the last tick reads as up (or draining)
  // now: the listing must not call a node that already runs jobs "booting".
  std::map<std::string, api::NodeState> live;
  for (const NodeStatus& n : engine_.Nodes()) live[n.record.name] = n.record.state;
  MutexLock lock(mu_);
  std::vector<PoolInstance> out;
  for (const auto& [name, e] : entries_) {
    out.push_back(e.info);
    auto node = live.find(name);
    if (e.info.state == "booting" && node != live.end()) {
      if (node->second == api::NodeState::kUp) out.back().state = "up";
      if (node->second == api::NodeState::kDraining) out.back().state = "draining";
    }
  }
  return out;
}

}  // namespace gpufleet::controller
