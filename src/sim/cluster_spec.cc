#include "sim/cluster_spec.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "common/nesting.h"
#include "common/source_location.h"
#include "common/strings.h"
#include "common/time.h"

namespace gpufleet::sim {
namespace {

// Sizing used where a spec leaves cpus or memory out: a DGX-class node has 96 cores and 1 TiB for
// 8 GPUs, so 12 cores and 128 GiB per GPU.
constexpr int64_t kDefaultCpuMilliPerGpu = 12 * 1000;
constexpr int64_t kDefaultMemMibPerGpu = 128 * 1024;
constexpr int kMaxGpusPerNode = 64;
constexpr int64_t kMaxNodesPerType = 100000;
constexpr int64_t kMaxCpusPerNode = 65536;        // cores of one node
constexpr int64_t kMaxMemGibPerNode = 1048576;     // GiB of one node (1 PiB)
constexpr int kRackNodes = 16;  // HomogeneousCluster's rack size

const std::vector<std::string> kTopKeys = {"node_types", "teams", "autoscale"};
const std::vector<std::string> kNodeTypeKeys = {
    "name", "gpu", "gpus", "count", "cpus", "memory_gib", "nvlink", "racks", "market", "labels", "price_per_hour",
    "interruptions_per_hour"};
const std::vector<std::string> kAutoscaleKeys = {
    "offers", "min_nodes", "max_nodes", "max_gpus", "idle_duration", "boot_timeout", "max_rents_per_minute",
    "max_releases_per_minute", "spot_fallback_after_preemptions", "spot_fallback_after_wait", "spot_notice"};
const std::vector<std::string> kOfferKeys = {
    "name", "gpu", "gpus", "cpus", "memory_gib", "nvlink", "market", "labels", "price_per_hour", "boot_delay",
    "interruptions_per_hour", "zone", "capacity_available", "capacity_outage"};
const std::vector<std::string> kTeamKeys = {"quota_gpus", "budget", "soft_budget", "max_hourly_cost"};

// The candidate closest to `word` (case-insensitively) if it is a plausible typo or a shortened
// form of it: "memory_gb" -> "memory_gib", "quota" -> "quota_gpus".
std::optional<std::string> ClosestMatch(const std::string& word,
                                        const std::vector<std::string>& candidates) {
  const std::string w = ToLower(word);
  std::optional<std::string> best;
  size_t best_distance = std::max<size_t>(2, w.size() / 3) + 1;
  for (const std::string& c : candidates) {
    const std::string lc = ToLower(c);
    size_t d = EditDistance(w, lc);
    if (w.size() >= 3 && (StartsWith(lc, w) || StartsWith(w, lc))) d = std::min<size_t>(d, 2);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best;
}

std::string Describe(const YAML::Node& n) {
  if (n.IsScalar()) return "'" + n.Scalar() + "'";
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a mapping";
  return "nothing";
}

// A node name prefix: it ends up in node names, labels and reports.
bool IsValidName(const std::string& s) {
  if (s.empty() || !std::isalnum(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
}

struct Entry {
  YAML::Node key;
  YAML::Node value;
};

// A YAML mapping checked against the keys it may hold.
class Fields {
 public:
  const Entry* Get(const std::string& key) const {
    auto it = entries_.find(key);
    return it == entries_.end() ? nullptr : &it->second;
  }
  std::vector<std::pair<std::string, Entry>> InOrder() const { return order_; }
  void Put(std::string key, Entry e) {
    entries_.emplace(key, e);
    order_.emplace_back(std::move(key), std::move(e));
  }

 private:
  std::map<std::string, Entry> entries_;
  std::vector<std::pair<std::string, Entry>> order_;
};

// Reads one spec; every error carries the source name, the 1-based line and column and the field path.
class SpecParser {
 public:
  SpecParser(const std::string& source, const model::GpuCatalog& catalog)
      : source_(source), catalog_(catalog) {}

  Result<ClusterSpec> Parse(const YAML::Node& root) {
    if (!root.IsDefined() || root.IsNull()) {
      return Status::InvalidArgument(SourcePrefix(source_, 1, 1) +
                                     "the cluster spec is empty; expected a mapping with node_types");
    }
    if (!root.IsMap()) {
      return Error(root, "",
                   "the cluster spec must be a mapping with node_types, got " + Describe(root));
    }
    GF_ASSIGN_OR_RETURN(Fields top, ReadMap(root, "", kTopKeys));
    ClusterSpec spec;
    const Entry* node_types = top.Get("node_types");
    const Entry* autoscale = top.Get("autoscale");
    std::map<std::string, size_t> type_names;
    std::set<std::string> node_names;
    if (autoscale != nullptr) {
      GF_RETURN_IF_ERROR(ReadAutoscale(autoscale->value, type_names, spec));
    }
    if (node_types == nullptr && spec.autoscale.offers.empty()) {
      return Error(root, "", "node_types is required (or autoscale.offers)");
    }
    if (node_types != nullptr) {
      const bool may_be_empty = !spec.autoscale.offers.empty();
      if (!(node_types->value.IsSequence() || (may_be_empty && node_types->value.IsNull())) ||
          (!may_be_empty && node_types->value.size() == 0)) {
        return Error(node_types->value, "node_types",
                     "must be a non-empty list of node types, got " + Describe(node_types->value));
      }
      size_t index = 0;
      for (const YAML::Node& type : node_types->value) {
        const std::string path = "node_types[" + std::to_string(index) + "]";
        GF_RETURN_IF_ERROR(ReadNodeType(type, path, index, type_names, node_names, spec.nodes,
                                        spec.interruptions_per_hour));
        ++index;
      }
    }
    if (const Entry* teams = top.Get("teams")) {
      GF_RETURN_IF_ERROR(ReadTeams(teams->value, spec));
    }
    return spec;
  }

 private:
  // "spec.yaml:LINE:COL: path: msg", at the node that is wrong: a bad value's own position, an
  // unknown key's key, the enclosing mapping for a missing key.
  Status Error(const YAML::Node& at, const std::string& path, const std::string& msg) const {
    return Status::InvalidArgument(SourcePrefixAt(source_, at.Mark()) + (path.empty() ? "" : path + ": ") + msg);
  }

  static std::string Sub(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }

  Result<Fields> ReadMap(const YAML::Node& node, const std::string& path,
                         const std::vector<std::string>& valid_keys) const {
    if (!node.IsMap()) {
      return Error(node, path, "must be a mapping, got " + Describe(node));
    }
    Fields fields;
    for (auto it = node.begin(); it != node.end(); ++it) {
      // By value: `it->first` lives in a proxy that dies with this statement (yaml-cpp's
      // iterator dereferences to a temporary pair).
      const YAML::Node key = it->first;
      if (!key.IsScalar() || key.Scalar().empty()) {
        return Error(key, path, "keys must be non-empty strings, got " + Describe(key));
      }
      const std::string& name = key.Scalar();
      if (!valid_keys.empty() &&
          std::find(valid_keys.begin(), valid_keys.end(), name) == valid_keys.end()) {
        std::string msg = "unknown key '" + name + "'";
        if (auto close = ClosestMatch(name, valid_keys)) {
          msg += "; did you mean '" + *close + "'?";
        } else {
          msg += ".";
        }
        msg += " Valid keys: " + Join(valid_keys, ", ");
        return Error(key, path, msg);
      }
      if (fields.Get(name) != nullptr) return Error(key, Sub(path, name), "duplicate key");
      fields.Put(name, Entry{key, it->second});
    }
    return fields;
  }

  // An integer in [lo, hi].
  Result<int64_t> ReadInt(const Entry& e, const std::string& path, int64_t lo, int64_t hi) const {
    const char* kind = lo >= 1 ? "a positive integer" : "a non-negative integer";
    std::optional<int64_t> v;
    if (e.value.IsScalar()) v = ParseInt(e.value.Scalar());
    if (!v) {
      return Error(e.value, path, std::string("must be ") + kind + ", got " + Describe(e.value));
    }
    if (*v < lo || *v > hi) {
      return Error(e.value, path,
                   "must be between " + std::to_string(lo) + " and " + std::to_string(hi) +
                       ", got " + std::to_string(*v));
    }
    return *v;
  }

  // A finite number > 0 (cores, GiB): fractions allowed.
  Result<double> ReadPositiveNumber(const Entry& e, const std::string& path) const {
    std::optional<double> v;
    if (e.value.IsScalar()) v = ParseDouble(e.value.Scalar());
    if (!v || *v <= 0) {
      return Error(e.value, path, "must be a positive number, got " + Describe(e.value));
    }
    return *v;
  }

  Result<std::string> ReadString(const Entry& e, const std::string& path) const {
    if (!e.value.IsScalar() || e.value.Scalar().empty()) {
      return Error(e.value, path, "must be a non-empty string, got " + Describe(e.value));
    }
    return e.value.Scalar();
  }

  Result<std::string> ResolveGpu(const Entry& e, const std::string& path) const {
    GF_ASSIGN_OR_RETURN(std::string name, ReadString(e, path));
    if (const model::GpuModel* m = catalog_.Find(name)) return m->name;
    std::vector<std::string> known;
    for (const model::GpuModel& m : catalog_.models()) {
      known.push_back(m.name);
      for (const std::string& a : m.aliases) known.push_back(a);
    }
    std::string msg = "unknown GPU model '" + name + "'";
    if (auto close = ClosestMatch(name, known)) {
      msg += "; did you mean '" + *close + "'?";
    } else {
      msg += ".";
    }
    std::vector<std::string> listed;
    for (const model::GpuModel& m : catalog_.models()) {
      if (listed.size() == 12) break;
      listed.push_back(m.name);
    }
    if (listed.empty()) return Error(e.value, path, msg + " (the GPU catalog is empty)");
    msg += " Known models include " + Join(listed, ", ");
    if (catalog_.models().size() > listed.size()) msg += ", ...";
    return Error(e.value, path, msg);
  }

  // A spot interruption rate: interruptions per node-hour, for spot nodes only.
  Result<double> ReadHazard(const Entry& e, const std::string& path, model::Market market) const {
    std::optional<double> v;
    if (e.value.IsScalar()) v = ParseDouble(e.value.Scalar());
    if (!v || !std::isfinite(*v) || *v < 0 || *v > 1000) {
      return Error(e.value, path, "must be interruptions per node-hour from 0 to 1000, got " + Describe(e.value));
    }
    if (*v > 0 && market != model::Market::kSpot) {
      return Error(e.value, path, "only spot nodes are interrupted; add `market: spot` or drop this key");
    }
    return *v;
  }

  Result<Duration> ReadDurationField(const Entry& e, const std::string& path, bool allow_zero) const {
    std::optional<Duration> d;
    if (e.value.IsScalar()) d = ParseDuration(e.value.Scalar());
    if (!d || (!allow_zero && *d <= Duration::Zero())) {
      return Error(e.value, path,
                   std::string("must be a ") + (allow_zero ? "" : "positive ") +
                       "duration such as 90s, 15m or 1h30m, got " + Describe(e.value));
    }
    return *d;
  }

  Status ReadAutoscale(const YAML::Node& node, std::map<std::string, size_t>& type_names,
                       ClusterSpec& spec) const {
    const std::string path = "autoscale";
    GF_ASSIGN_OR_RETURN(Fields f, ReadMap(node, path, kAutoscaleKeys));
    AutoscaleSpec& a = spec.autoscale;
    const Entry* offers = f.Get("offers");
    if (offers == nullptr) return Error(node, Sub(path, "offers"), "is required: the node types the pool may rent");
    if (!offers->value.IsSequence() || offers->value.size() == 0) {
      return Error(offers->value, Sub(path, "offers"), "must be a non-empty list of offers, got " + Describe(offers->value));
    }
    size_t index = 0;
    for (const YAML::Node& o : offers->value) {
      const std::string p = "autoscale.offers[" + std::to_string(index) + "]";
      GF_RETURN_IF_ERROR(ReadOffer(o, p, index, type_names, a.offers));
      ++index;
    }
    auto int_field = [&](const char* key, int64_t lo, int64_t hi) -> Result<std::optional<int64_t>> {
      const Entry* e = f.Get(key);
      if (e == nullptr) return std::optional<int64_t>();
      GF_ASSIGN_OR_RETURN(int64_t v, ReadInt(*e, Sub(path, key), lo, hi));
      return std::optional<int64_t>(v);
    };
    auto duration_field = [&](const char* key, bool allow_zero) -> Result<std::optional<Duration>> {
      const Entry* e = f.Get(key);
      if (e == nullptr) return std::optional<Duration>();
      GF_ASSIGN_OR_RETURN(Duration d, ReadDurationField(*e, Sub(path, key), allow_zero));
      return std::optional<Duration>(d);
    };
    GF_ASSIGN_OR_RETURN(auto min_nodes, int_field("min_nodes", 0, kMaxNodesPerType));
    GF_ASSIGN_OR_RETURN(auto max_nodes, int_field("max_nodes", 0, kMaxNodesPerType));
    GF_ASSIGN_OR_RETURN(auto max_gpus, int_field("max_gpus", 0, kMaxNodesPerType * kMaxGpusPerNode));
    GF_ASSIGN_OR_RETURN(auto rents, int_field("max_rents_per_minute", 0, 1000000));
    GF_ASSIGN_OR_RETURN(auto releases, int_field("max_releases_per_minute", 0, 1000000));
    GF_ASSIGN_OR_RETURN(auto fallback_n, int_field("spot_fallback_after_preemptions", 0, 1000000));
    if (min_nodes) a.limits.min_nodes = static_cast<int>(*min_nodes);
    if (max_nodes) a.limits.max_nodes = static_cast<int>(*max_nodes);
    if (max_gpus) a.limits.max_gpus = *max_gpus;
    if (rents) a.options.max_rents_per_minute = static_cast<int>(*rents);
    if (releases) a.options.max_releases_per_minute = static_cast<int>(*releases);
    if (fallback_n) a.options.spot_fallback_after_preemptions = static_cast<int>(*fallback_n);
    if (a.limits.max_nodes > 0 && a.limits.min_nodes > a.limits.max_nodes) {
      return Error(f.Get("min_nodes")->value, Sub(path, "min_nodes"),
                   "is larger than max_nodes (" + std::to_string(a.limits.max_nodes) + ")");
    }
    if (a.limits.max_gpus > 0 && !a.offers.empty()) {
      // Each rent is a whole node: a pool capped below the smallest offer never rents one.
      int smallest = a.offers.front().node.gpus;
      for (const AutoscaleOffer& o : a.offers) smallest = std::min(smallest, o.node.gpus);
      if (a.limits.max_gpus < smallest) {
        return Error(f.Get("max_gpus")->value, Sub(path, "max_gpus"),
                     "is " + std::to_string(a.limits.max_gpus) + ", fewer than the smallest offer's " +
                         std::to_string(smallest) + " GPUs per node: the pool could never rent a node");
      }
    }
    GF_ASSIGN_OR_RETURN(auto idle, duration_field("idle_duration", true));
    GF_ASSIGN_OR_RETURN(auto boot_timeout, duration_field("boot_timeout", false));
    GF_ASSIGN_OR_RETURN(auto fallback_wait, duration_field("spot_fallback_after_wait", true));
    GF_ASSIGN_OR_RETURN(auto notice, duration_field("spot_notice", true));
    if (idle) a.options.idle_duration = *idle;
    if (boot_timeout) a.options.boot_timeout = *boot_timeout;
    if (fallback_wait) a.options.spot_fallback_after_wait = *fallback_wait;
    if (notice) a.spot_notice = *notice;
    for (size_t i = 0; i < a.offers.size(); ++i) {
      if (a.offers[i].boot_delay > a.options.boot_timeout) {
        const YAML::Node offer = offers->value[i];
        const YAML::Node delay = offer["boot_delay"];  // absent: the default is too long
        return Error(delay.IsDefined() ? delay : offer, "autoscale.offers[" + std::to_string(i) + "].boot_delay",
                     "is longer than autoscale.boot_timeout (" + FormatDuration(a.options.boot_timeout) +
                         "): every rent of it would time out");
      }
    }
    return Status::Ok();
  }

  Status ReadOffer(const YAML::Node& node, const std::string& path, size_t index,
                   std::map<std::string, size_t>& type_names, std::vector<AutoscaleOffer>& out) const {
    GF_ASSIGN_OR_RETURN(Fields f, ReadMap(node, path, kOfferKeys));
    auto required = [&](const char* key) -> Result<const Entry*> {
      const Entry* e = f.Get(key);
      if (e == nullptr) return Error(node, Sub(path, key), "is required");
      return e;
    };
    AutoscaleOffer offer;
    GF_ASSIGN_OR_RETURN(const Entry* name_entry, required("name"));
    GF_ASSIGN_OR_RETURN(offer.name, ReadString(*name_entry, Sub(path, "name")));
    if (!IsValidName(offer.name)) {
      return Error(name_entry->value, Sub(path, "name"),
                   "must be letters, digits, '-', '_' or '.', starting with a letter or digit, got '" + offer.name + "'");
    }
    if (auto [it, inserted] = type_names.emplace(offer.name, 1000000 + index); !inserted) {
      return Error(name_entry->value, Sub(path, "name"), "'" + offer.name + "' names another node type or offer");
    }
    model::NodeSpec& n = offer.node;
    GF_ASSIGN_OR_RETURN(const Entry* gpu, required("gpu"));
    GF_ASSIGN_OR_RETURN(n.gpu_model, ResolveGpu(*gpu, Sub(path, "gpu")));
    GF_ASSIGN_OR_RETURN(const Entry* gpus, required("gpus"));
    GF_ASSIGN_OR_RETURN(int64_t g, ReadInt(*gpus, Sub(path, "gpus"), 1, kMaxGpusPerNode));
    n.gpus = static_cast<int>(g);
    n.cpu_milli = kDefaultCpuMilliPerGpu * n.gpus;
    n.mem_mib = kDefaultMemMibPerGpu * n.gpus;
    if (const Entry* cpus = f.Get("cpus")) {
      GF_ASSIGN_OR_RETURN(double cores, ReadPositiveNumber(*cpus, Sub(path, "cpus")));
      n.cpu_milli = std::max<int64_t>(1, std::llround(cores * 1000));
    }
    if (const Entry* mem = f.Get("memory_gib")) {
      GF_ASSIGN_OR_RETURN(double gib, ReadPositiveNumber(*mem, Sub(path, "memory_gib")));
      n.mem_mib = std::max<int64_t>(1, std::llround(gib * 1024));
    }
    if (const Entry* nvlink = f.Get("nvlink")) GF_RETURN_IF_ERROR(ReadNvlink(*nvlink, Sub(path, "nvlink"), n));
    if (const Entry* market = f.Get("market")) {
      GF_ASSIGN_OR_RETURN(std::string text, ReadString(*market, Sub(path, "market")));
      Result<model::Market> m = model::ParseMarket(ToLower(text));
      if (!m.ok()) return Error(market->value, Sub(path, "market"), m.status().message());
      n.market = *m;
    }
    GF_ASSIGN_OR_RETURN(const Entry* price, required("price_per_hour"));
    GF_ASSIGN_OR_RETURN(n.price_micros_per_hour, ReadPrice(*price, Sub(path, "price_per_hour")));
    if (const Entry* labels = f.Get("labels")) GF_RETURN_IF_ERROR(ReadLabels(*labels, Sub(path, "labels"), n.labels));
    if (const Entry* zone = f.Get("zone")) {
      GF_ASSIGN_OR_RETURN(n.labels[model::kLabelZone], ReadString(*zone, Sub(path, "zone")));
    }
    if (const Entry* boot = f.Get("boot_delay")) {
      GF_ASSIGN_OR_RETURN(offer.boot_delay, ReadDurationField(*boot, Sub(path, "boot_delay"), true));
    }
    if (const Entry* hazard = f.Get("interruptions_per_hour")) {
      GF_ASSIGN_OR_RETURN(offer.interruptions_per_hour,
                          ReadHazard(*hazard, Sub(path, "interruptions_per_hour"), n.market));
    }
    const Entry* available = f.Get("capacity_available");
    const Entry* outage = f.Get("capacity_outage");
    if ((available == nullptr) != (outage == nullptr)) {
      return Error(node, path, "capacity_available and capacity_outage go together (mean periods with and without "
                               "capacity, e.g. 104m and 74m)");
    }
    if (available) {
      GF_ASSIGN_OR_RETURN(offer.capacity_available,
                          ReadDurationField(*available, Sub(path, "capacity_available"), false));
      GF_ASSIGN_OR_RETURN(offer.capacity_outage, ReadDurationField(*outage, Sub(path, "capacity_outage"), false));
    }
    n.name = offer.name + "-0";
    if (Status s = n.Validate(); !s.ok()) return Error(node, path, s.message());
    out.push_back(std::move(offer));
    return Status::Ok();
  }

  Result<int64_t> ReadPrice(const Entry& price, const std::string& path) const {
    std::optional<double> v;
    if (price.value.IsScalar()) v = ParseDouble(price.value.Scalar());
    if (!v || !std::isfinite(*v) || *v < 0 || *v > 1e6) {
      return Error(price.value, path, "must be dollars per node-hour from 0 to 1000000, got " + Describe(price.value));
    }
    return static_cast<int64_t>(std::llround(*v * 1e6));
  }

  Status ReadNodeType(const YAML::Node& type, const std::string& path, size_t index,
                      std::map<std::string, size_t>& type_names, std::set<std::string>& node_names,
                      std::vector<model::NodeSpec>& nodes, std::vector<double>& hazards) const {
    GF_ASSIGN_OR_RETURN(Fields f, ReadMap(type, path, kNodeTypeKeys));
    auto required = [&](const char* key) -> Result<const Entry*> {
      const Entry* e = f.Get(key);
      if (e == nullptr) return Error(type, Sub(path, key), "is required");
      return e;
    };

    GF_ASSIGN_OR_RETURN(const Entry* name_entry, required("name"));
    GF_ASSIGN_OR_RETURN(std::string name, ReadString(*name_entry, Sub(path, "name")));
    if (!IsValidName(name)) {
      return Error(
          name_entry->value, Sub(path, "name"),
          "must be letters, digits, '-', '_' or '.', starting with a letter or digit, got '" +
              name + "'");
    }
    if (auto [it, inserted] = type_names.emplace(name, index); !inserted) {
      const std::string other = it->second >= 1000000
                                    ? "autoscale.offers[" + std::to_string(it->second - 1000000) + "]"
                                    : "node_types[" + std::to_string(it->second) + "]";
      return Error(name_entry->value, Sub(path, "name"), "'" + name + "' is already the name of " + other);
    }

    model::NodeSpec node;
    if (const Entry* gpu = f.Get("gpu")) {
      GF_ASSIGN_OR_RETURN(node.gpu_model, ResolveGpu(*gpu, Sub(path, "gpu")));
      GF_ASSIGN_OR_RETURN(const Entry* gpus, required("gpus"));
      GF_ASSIGN_OR_RETURN(int64_t n, ReadInt(*gpus, Sub(path, "gpus"), 1, kMaxGpusPerNode));
      node.gpus = static_cast<int>(n);
    } else if (const Entry* gpus = f.Get("gpus")) {
      // Without a GPU model only a CPU-only node makes sense.
      GF_ASSIGN_OR_RETURN(int64_t n, ReadInt(*gpus, Sub(path, "gpus"), 0, kMaxGpusPerNode));
      if (n > 0) return Error(type, Sub(path, "gpu"), "is required when gpus > 0");
    }

    GF_ASSIGN_OR_RETURN(const Entry* count_entry, required("count"));
    GF_ASSIGN_OR_RETURN(int64_t count,
                        ReadInt(*count_entry, Sub(path, "count"), 1, kMaxNodesPerType));

    if (const Entry* cpus = f.Get("cpus")) {
      GF_ASSIGN_OR_RETURN(double cores, ReadPositiveNumber(*cpus, Sub(path, "cpus")));
      // (A bound before the milli-cores are counted: 1e16 cores overflowed to a negative count.)
      if (cores > kMaxCpusPerNode) {
        return Error(cpus->value, Sub(path, "cpus"), "must be at most " + std::to_string(kMaxCpusPerNode) + " (cores of one node)");
      }
      node.cpu_milli = std::llround(cores * 1000);
      if (node.cpu_milli == 0) {
        return Error(cpus->value, Sub(path, "cpus"), "must be at least 0.001");
      }
    } else if (node.gpus == 0) {
      return Error(type, Sub(path, "cpus"), "is required for a CPU-only node type");
    } else {
      node.cpu_milli = kDefaultCpuMilliPerGpu * node.gpus;
    }
    if (const Entry* mem = f.Get("memory_gib")) {
      GF_ASSIGN_OR_RETURN(double gib, ReadPositiveNumber(*mem, Sub(path, "memory_gib")));
      if (gib > kMaxMemGibPerNode) {
        return Error(mem->value, Sub(path, "memory_gib"),
                     "must be at most " + std::to_string(kMaxMemGibPerNode) + " (GiB of one node: 1 PiB)");
      }
      node.mem_mib = std::llround(gib * 1024);
      if (node.mem_mib == 0) {
        return Error(mem->value, Sub(path, "memory_gib"), "must be at least 1 MiB");
      }
    } else if (node.gpus == 0) {
      return Error(type, Sub(path, "memory_gib"), "is required for a CPU-only node type");
    } else {
      node.mem_mib = kDefaultMemMibPerGpu * node.gpus;
    }

    if (const Entry* nvlink = f.Get("nvlink")) {
      GF_RETURN_IF_ERROR(ReadNvlink(*nvlink, Sub(path, "nvlink"), node));
    }

    if (const Entry* market = f.Get("market")) {
      GF_ASSIGN_OR_RETURN(std::string text, ReadString(*market, Sub(path, "market")));
      Result<model::Market> m = model::ParseMarket(ToLower(text));
      if (!m.ok()) return Error(market->value, Sub(path, "market"), m.status().message());
      node.market = *m;
    }

    if (const Entry* price = f.Get("price_per_hour")) {
      GF_ASSIGN_OR_RETURN(node.price_micros_per_hour, ReadPrice(*price, Sub(path, "price_per_hour")));
    }
    double hazard = 0;
    if (const Entry* h = f.Get("interruptions_per_hour")) {
      GF_ASSIGN_OR_RETURN(hazard, ReadHazard(*h, Sub(path, "interruptions_per_hour"), node.market));
    }

    if (const Entry* labels = f.Get("labels")) {
      GF_RETURN_IF_ERROR(ReadLabels(*labels, Sub(path, "labels"), node.labels));
    }

    int64_t racks = 0;  // 0: no rack label from us
    if (const Entry* racks_entry = f.Get("racks")) {
      GF_ASSIGN_OR_RETURN(racks, ReadInt(*racks_entry, Sub(path, "racks"), 1, count));
      if (node.labels.count(model::kLabelRack)) {
        return Error(
            racks_entry->value, Sub(path, "racks"),
            "conflicts with labels.rack; give either racks (to spread the nodes) or a rack "
            "label (to put them all in one rack)");
      }
    }

    for (int64_t i = 0; i < count; ++i) {
      model::NodeSpec n = node;
      n.name = name + "-" + std::to_string(i);
      // Contiguous blocks: with 8 nodes in 2 racks, nodes 0-3 share r0 and 4-7 share r1.
      if (racks > 0) n.labels[model::kLabelRack] = name + "-r" + std::to_string(i * racks / count);
      if (!node_names.insert(n.name).second) {
        return Error(name_entry->value, Sub(path, "name"),
                     "node name '" + n.name + "' is used twice");
      }
      if (Status s = n.Validate(); !s.ok()) return Error(type, path, s.message());
      nodes.push_back(std::move(n));
      hazards.resize(nodes.size(), 0.0);
      hazards.back() = hazard;
    }
    return Status::Ok();
  }

  Status ReadNvlink(const Entry& e, const std::string& path, model::NodeSpec& node) const {
    if (!e.value.IsSequence()) {
      return Error(e.value, path,
                   "must be a list of NVLink domain sizes, got " + Describe(e.value));
    }
    int64_t sum = 0;
    int domain = 0;
    std::vector<int> map;
    for (const YAML::Node& size_node : e.value) {
      const std::string item = path + "[" + std::to_string(domain) + "]";
      GF_ASSIGN_OR_RETURN(int64_t size,
                          ReadInt(Entry{size_node, size_node}, item, 1, kMaxGpusPerNode));
      sum += size;
      if (sum > kMaxGpusPerNode) break;
      map.insert(map.end(), static_cast<size_t>(size), domain);
      ++domain;
    }
    if (sum != node.gpus) {
      return Error(e.value, path,
                   "domain sizes must add up to the node's " + std::to_string(node.gpus) +
                       " GPUs, got " + std::to_string(sum));
    }
    node.nvlink_domain = std::move(map);
    return Status::Ok();
  }

  Status ReadLabels(const Entry& e, const std::string& path, model::Labels& labels) const {
    GF_ASSIGN_OR_RETURN(Fields f, ReadMap(e.value, path, {}));
    for (const auto& [key, entry] : f.InOrder()) {
      // Numbers and booleans keep the text written: `gdpr: true` is the label "true".
      if (!entry.value.IsScalar()) {
        return Error(entry.value, Sub(path, key), "must be a string, got " + Describe(entry.value));
      }
      labels[key] = entry.value.Scalar();
    }
    return Status::Ok();
  }

  Status ReadTeams(const YAML::Node& teams, ClusterSpec& spec) const {
    if (teams.IsNull()) return Status::Ok();  // `teams:` with nothing under it
    GF_ASSIGN_OR_RETURN(Fields f, ReadMap(teams, "teams", {}));
    int64_t quota_sum = 0;
    bool priced = !spec.autoscale.offers.empty();  // (an offer always has a price)
    for (const model::NodeSpec& n : spec.nodes) priced = priced || n.price_micros_per_hour > 0;
    for (const auto& [team, entry] : f.InOrder()) {
      const std::string path = "teams." + team;
      GF_ASSIGN_OR_RETURN(Fields team_fields, ReadMap(entry.value, path, kTeamKeys));
      const Entry* quota = team_fields.Get("quota_gpus");
      bool money = false;
      TeamMoneyLimits limits;
      for (const char* key : {"budget", "soft_budget", "max_hourly_cost"}) {
        const Entry* e = team_fields.Get(key);
        if (e == nullptr) continue;
        std::optional<double> v;
        if (e->value.IsScalar()) v = ParseDouble(e->value.Scalar());
        if (!v || !std::isfinite(*v) || *v <= 0 || *v > 1e12) {
          return Error(e->value, path + "." + key, "must be a positive amount of dollars, got " + Describe(e->value));
        }
        if (!priced) {
          // Spend comes from node prices only: on a cluster without any, the limit would never
          // be reached and the replay would say so at its end, as if it had held.
          return Error(e->value, path + "." + key,
                       "no node of this cluster has a price_per_hour, so nothing is ever spent against it; give "
                       "the node types a price_per_hour (dollars per node-hour), or leave the budget out");
        }
        int64_t micros = static_cast<int64_t>(std::llround(*v * 1e6));
        (std::string(key) == "budget" ? limits.hard_micros
         : std::string(key) == "soft_budget" ? limits.soft_micros
                                              : limits.max_hourly_micros) = micros;
        money = true;
      }
      if (money) spec.team_money[team] = limits;
      if (quota == nullptr) {
        if (money) continue;
        return Error(entry.value, path + ".quota_gpus", "is required (or a budget)");
      }
      GF_ASSIGN_OR_RETURN(int64_t gpus, ReadInt(*quota, path + ".quota_gpus", 0, 1000000));
      spec.team_quota_gpus[team] = gpus;
      quota_sum += gpus;
    }
    // Quotas are guarantees; promising more GPUs than exist is a configuration mistake.
    if (spec.autoscale.offers.empty() && quota_sum > spec.total_gpus()) {
      return Error(teams, "teams",
                   "quotas add up to " + std::to_string(quota_sum) +
                       " GPUs but the cluster has only " + std::to_string(spec.total_gpus()));
    }
    return Status::Ok();
  }

  const std::string& source_;
  const model::GpuCatalog& catalog_;
};

}  // namespace

int64_t ClusterSpec::total_gpus() const {
  int64_t total = 0;
  for (const model::NodeSpec& n : nodes) total += n.gpus;
  return total;
}

Result<ClusterSpec> ParseClusterSpec(const std::string& yaml, const std::string& source_name,
                                     const model::GpuCatalog& catalog) {
  // yaml-cpp parses recursively: bound the depth before it does.
  Status depth = CheckNestingDepth(yaml, NestingSyntax::kYaml);
  if (!depth.ok()) return InSource(source_name, depth);
  try {
    YAML::Node root = YAML::Load(yaml);
    return SpecParser(source_name, catalog).Parse(root);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(SourcePrefixAt(source_name, e.mark) + "invalid YAML: " + e.msg);
  } catch (const std::exception& e) {
    // Not a parse error (yaml-cpp's own failures carry a position and are caught above): the
    // file's start is the best place to point at.
    return Status::InvalidArgument(SourcePrefix(source_name, 1, 1) + "cannot read the cluster spec: " + e.what());
  }
}

Result<ClusterSpec> LoadClusterSpec(const std::string& path, const model::GpuCatalog& catalog) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(path + ": cannot open the cluster spec");
  std::stringstream buf;
  buf << in.rdbuf();
  if (in.bad()) return Status::Unavailable(path + ": read error");
  return ParseClusterSpec(buf.str(), path, catalog);
}

ClusterSpec HomogeneousCluster(int64_t total_gpus, const std::string& gpu_model,
                               int gpus_per_node, int64_t price_micros_per_hour) {
  CHECK(gpus_per_node >= 1 && gpus_per_node <= kMaxGpusPerNode)
      << "gpus_per_node " << gpus_per_node;
  ClusterSpec spec;
  if (total_gpus <= 0) return spec;
  const int64_t node_count = (total_gpus + gpus_per_node - 1) / gpus_per_node;
  spec.nodes.reserve(static_cast<size_t>(node_count));
  for (int64_t i = 0; i < node_count; ++i) {
    model::NodeSpec n;
    n.name = "node-" + std::to_string(i);
    n.gpu_model = gpu_model;
    n.gpus = static_cast<int>(std::min<int64_t>(gpus_per_node, total_gpus - i * gpus_per_node));
    n.cpu_milli = kDefaultCpuMilliPerGpu * n.gpus;
    n.mem_mib = kDefaultMemMibPerGpu * n.gpus;
    n.labels[model::kLabelRack] = "r" + std::to_string(i / kRackNodes);
    n.price_micros_per_hour = price_micros_per_hour * n.gpus / gpus_per_node;  // a short last node costs less
    spec.nodes.push_back(std::move(n));
  }
  return spec;
}

}  // namespace gpufleet::sim
