#include "cost/offer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

#include "common/strings.h"
#include "model/csv.h"

namespace gpufleet::cost {

std::optional<MicroUsd> ParseUsd(std::string_view s) {
  s = Trim(s);
  if (s.empty()) return std::nullopt;
  MicroUsd whole = 0;
  size_t i = 0;
  bool any_digit = false;
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
    if (whole > (int64_t{1} << 40)) return std::nullopt;  // no price is a trillion dollars an hour
    whole = whole * 10 + (s[i] - '0');
    any_digit = true;
  }
  MicroUsd frac = 0;
  int frac_digits = 0;
  bool round_up = false;
  if (i < s.size() && s[i] == '.') {
    ++i;
    for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
      any_digit = true;
      if (frac_digits < 6) {
        frac = frac * 10 + (s[i] - '0');
        ++frac_digits;
      } else if (frac_digits == 6) {
        round_up = s[i] >= '5';
        ++frac_digits;
      }
    }
  }
  if (i != s.size() || !any_digit) return std::nullopt;
  for (int d = std::min(frac_digits, 6); d < 6; ++d) frac *= 10;
  return whole * kMicroUsdPerUsd + frac + (round_up ? 1 : 0);
}

std::string FormatUsd(MicroUsd v, int decimals) {
  CHECK(decimals >= 0 && decimals <= 6) << decimals;
  bool neg = v < 0;
  int64_t a = neg ? -v : v;
  int64_t scale = 1;
  for (int d = decimals; d < 6; ++d) scale *= 10;
  int64_t units = (a + scale / 2) / scale;  // in 10^-decimals dollars
  int64_t pow = 1;
  for (int d = 0; d < decimals; ++d) pow *= 10;
  int64_t whole = units / pow, frac = units % pow;
  std::string w = std::to_string(whole);
  std::string grouped;
  for (size_t k = 0; k < w.size(); ++k) {
    if (k > 0 && (w.size() - k) % 3 == 0) grouped += ',';
    grouped += w[k];
  }
  std::string out = (neg ? "-$" : "$") + grouped;
  if (decimals > 0) {
    char buf[32];
    std::snprintf(buf, sizeof buf, ".%0*lld", decimals, static_cast<long long>(frac));
    out += buf;
  }
  return out;
}

std::optional<double> AwsBucketHazardPerHour(int bucket) {
  // Midpoints of "<5%", "5-10%", "10-15%", "15-20%", ">20%" (the last one open-ended: 30%).
  static constexpr double kShare[] = {0.025, 0.075, 0.125, 0.175, 0.30};
  static constexpr double kExposureHours = 24.0;
  if (bucket < 0 || bucket > 4) return std::nullopt;
  return -std::log(1.0 - kShare[bucket]) / kExposureHours;
}

double DefaultSpotHazardPerHour(std::string_view cloud) {
  // No published interruption rates. 0.02/h (a 38% chance of at least one interruption in a day)
  // lies between the AWS advisor's worst bucket (0.015/h) and the 0.085/h measured for GPU spot
  // instances in us-east-1 in 2020 (data/catalog/SOURCE.md); see docs/cost.md.
  (void)cloud;
  return 0.02;
}


std::optional<int64_t> CatalogAgeDays(const std::string& prices_as_of, int64_t today) {
  auto day = ParseIsoDate(prices_as_of);
  if (!day) return std::nullopt;
  return today - *day;
}

std::string CatalogAgeLine(const std::string& prices_as_of, int64_t today) {
  auto age = CatalogAgeDays(prices_as_of, today);
  if (!age) return "prices as of: age unknown (the catalog has no '# prices_as_of:' line)";
  std::string when = "prices as of " + prices_as_of;
  if (*age < 0) return when + " (dated after today)";
  return when + " (" + std::to_string(*age) + (*age == 1 ? " day old)" : " days old)");
}

namespace {

std::string Geo(const std::string& cloud, const std::string& region) {
  std::string r = ToLower(region);
  if (cloud == "vast") {  // "Denmark, DK, EU", "Georgia, US, NA"
    auto parts = Split(r, ',');
    std::string country = parts.size() >= 2 ? std::string(Trim(parts[parts.size() - 2])) : "";
    std::string continent = parts.empty() ? "" : std::string(Trim(parts.back()));
    if (continent == "eu") return "eu";
    if (country == "us") return "us";
    if (country == "ca") return "ca";
    if (continent == "as") return "asia";
    return continent;
  }
  auto has = [&](const char* s) { return r.find(s) != std::string::npos; };
  if (StartsWith(r, "eu-") || StartsWith(r, "eu") || has("europe") || StartsWith(r, "uk") ||
      has("france") || has("germany") || has("sweden") || has("norway") || has("switzerland") ||
      has("poland") || has("italy") || has("spain")) {
    return "eu";
  }
  if (StartsWith(r, "us-") || StartsWith(r, "us") || r == "eastus" || r == "eastus2" || r == "westus" ||
      r == "westus2" || r == "westus3" || r == "centralus" || r == "northcentralus" ||
      r == "southcentralus" || r == "westcentralus") {
    return "us";
  }
  if (StartsWith(r, "ca-") || has("canada") || StartsWith(r, "northamerica-")) return "ca";
  if (StartsWith(r, "ap-") || StartsWith(r, "asia") || has("japan") || has("korea") || has("india") ||
      StartsWith(r, "southeastasia") || StartsWith(r, "eastasia") || has("singapore") || has("tokyo")) {
    return "asia";
  }
  if (has("australia")) return "au";
  if (StartsWith(r, "sa-") || has("southamerica") || has("brazil")) return "sa";
  if (StartsWith(r, "me-") || has("uae") || has("qatar") || has("israel")) return "me";
  if (StartsWith(r, "af-") || has("africa")) return "af";
  return "";
}

class Warnings {
 public:
  void Add(const std::string& kind, const std::string& example) {
    auto it = index_.find(kind);
    if (it == index_.end()) {
      index_[kind] = list_.size();
      list_.push_back({kind, 1, example});
    } else {
      ++list_[it->second].count;
    }
  }
  std::vector<LoadWarning> Take() { return std::move(list_); }

 private:
  std::map<std::string, size_t> index_;
  std::vector<LoadWarning> list_;
};

}  // namespace

model::Labels Offer::labels() const {
  model::Labels l{{"cloud", cloud}, {model::kLabelRegion, region}};
  if (!zone.empty()) l[model::kLabelZone] = zone;
  std::string geo = Geo(cloud, region);
  if (!geo.empty()) l["geo"] = geo;
  return l;
}

namespace {

// A comment line of the catalog; "# prices_as_of: YYYY-MM-DD" dates it.
Status ReadCatalogComment(std::string_view comment, const std::string& where, OfferTable& table) {
  comment = Trim(comment);
  constexpr std::string_view kAsOf = "prices_as_of:";
  if (!StartsWith(comment, kAsOf)) return Status::Ok();
  std::string date(Trim(comment.substr(kAsOf.size())));
  if (!ParseIsoDate(date)) {
    return Status::InvalidArgument(where + ": prices_as_of: expected a date YYYY-MM-DD, got '" + date + "'");
  }
  table.prices_as_of = date;
  return Status::Ok();
}

}  // namespace

Result<OfferTable> ParseOffersCsv(std::string_view text, const std::string& source_name,
                                  const model::GpuCatalog& gpus, const LoadOptions& options) {
  OfferTable table;
  // Fields trimmed as hand-edited catalogs write "a, b"; '#' lines are comments, and one before
  // the header may date the catalog.
  model::CsvReader reader(text, source_name,
                          model::CsvOptions{.trim = true, .comments = model::CsvComments::kReturn});
  auto where_now = [&] { return source_name + ":" + std::to_string(reader.line()); };
  std::vector<std::string> header;
  while (header.empty()) {
    GF_ASSIGN_OR_RETURN(bool more, reader.Next());
    if (!more) return Status::InvalidArgument(source_name + ": empty file");
    if (reader.comment()) {
      GF_RETURN_IF_ERROR(ReadCatalogComment(reader.field(0), where_now(), table));
    } else {
      header = reader.Fields();
    }
  }
  std::map<std::string, size_t> col;
  for (size_t i = 0; i < header.size(); ++i) col[header[i]] = i;
  static const char* kRequired[] = {"cloud", "region", "instance_type", "accelerator", "gpu_count",
                                    "ondemand_usd_h", "spot_usd_h"};
  for (const char* c : kRequired) {
    if (!col.count(c)) return Status::InvalidArgument(where_now() + ": missing column '" + c + "'");
  }

  Warnings warn;
  // An offer's identity -> the line it was first read on: a second row for the same offer would
  // let readers mix one row's on-demand price with the other's spot price.
  std::map<std::tuple<std::string, std::string, std::string, std::string, std::string, int>, int64_t> first_line;
  std::vector<MicroUsd> gpu_part;  // on-demand minus host part, per kept offer (for the suspect rule)
  while (true) {
    GF_ASSIGN_OR_RETURN(bool more, reader.Next());
    if (!more) break;
    if (reader.comment()) continue;  // only the comments before the header date the catalog
    if (reader.size() == 1 && reader.field(0).empty()) continue;
    ++table.rows_read;
    // A row with more or fewer fields than the header has its values under the wrong columns.
    if (reader.size() != header.size()) {
      return Status::InvalidArgument(where_now() + ": expected " + std::to_string(header.size()) +
                                     " fields as in the header, got " + std::to_string(reader.size()) +
                                     " (a missing or extra comma? quote fields that hold one)");
    }
    auto get = [&](const char* name) -> std::string {
      auto it = col.find(name);
      return it == col.end() || it->second >= reader.size() ? std::string() : reader.field(it->second);
    };
    std::string where = where_now();
    auto bad = [&](const char* column, const std::string& value, const char* want) {
      return Status::InvalidArgument(where + ": " + column + ": expected " + want + ", got '" + value + "'");
    };
    Offer o;
    o.cloud = get("cloud");
    o.region = get("region");
    o.zone = get("zone");
    o.instance_type = get("instance_type");
    std::string example = where + ": " + o.cloud + " " + o.instance_type + " " + o.region;

    std::string count_s = get("gpu_count");
    auto count = ParseDouble(count_s);
    if (!count || *count < 0) return bad("gpu_count", count_s, "a GPU count");
    if (*count == 0) {
      warn.Add("no GPU (gpu_count 0: a CPU-only machine is not a GPU offer)", example + " gpu_count=" + count_s);
      continue;
    }
    if (*count != std::floor(*count) || *count < 1) {
      warn.Add("fractional GPU count (GPU partitions are not offered)", example + " gpu_count=" + count_s);
      continue;
    }
    o.gpus = static_cast<int>(*count);
    std::string acc = get("accelerator");
    const model::GpuModel* model = acc.empty() ? nullptr : gpus.Find(acc);
    if (model == nullptr) {
      warn.Add("unknown GPU model", example + " accelerator='" + acc + "'");
      continue;
    }
    o.gpu = model->name;
    // One row per offer: GCP attaches several GPU models (and counts) to one machine type in one
    // zone, so the GPU and its count are part of what is rented.
    auto [seen, fresh] = first_line.try_emplace({o.cloud, o.region, o.zone, o.instance_type, o.gpu, o.gpus},
                                                reader.line());
    if (!fresh) {
      return Status::InvalidArgument(
          where + ": duplicate offer " + o.cloud + " " + o.region + (o.zone.empty() ? "" : " zone " + o.zone) + " " +
          o.instance_type + " with " + std::to_string(o.gpus) + " x " + o.gpu + ": line " +
          std::to_string(seen->second) + " has the same cloud, region, zone, instance type and GPU (keep one row " +
          "per offer: delete one, or merge their prices into one row)");
    }

    std::string mem_s = get("gpu_mem_mib");
    if (!mem_s.empty()) {
      auto mem = ParseInt(mem_s);
      if (!mem || *mem <= 0) return bad("gpu_mem_mib", mem_s, "MiB as a positive integer");
      o.gpu_mem_mib = *mem;
    } else {
      o.gpu_mem_mib = model->mem_mib;
      o.flags |= kGpuMemFromSpecs;
    }
    std::string vcpus_s = get("vcpus");
    if (!vcpus_s.empty()) {
      auto v = ParseDouble(vcpus_s);
      if (!v || *v < 0) return bad("vcpus", vcpus_s, "a number of vCPUs");
      o.cpu_milli = std::llround(*v * 1000);
    }
    std::string ram_s = get("ram_gib");
    if (!ram_s.empty()) {
      auto v = ParseDouble(ram_s);
      if (!v || *v < 0) return bad("ram_gib", ram_s, "GiB as a number");
      o.mem_mib = std::llround(*v * 1024);
    }

    std::string od_s = get("ondemand_usd_h"), host_s = get("host_usd_h"), spot_s = get("spot_usd_h");
    if (!od_s.empty()) {
      auto v = ParseUsd(od_s);
      if (!v) return bad("ondemand_usd_h", od_s, "USD per hour");
      if (*v > 0) o.on_demand_per_hour = *v;
    }
    MicroUsd host = 0;
    if (!host_s.empty()) {
      auto v = ParseUsd(host_s);
      if (!v) return bad("host_usd_h", host_s, "USD per hour");
      host = *v;
    }
    if (!spot_s.empty()) {
      auto v = ParseUsd(spot_s);
      if (!v) return bad("spot_usd_h", spot_s, "USD per hour");
      if (*v > 0) o.spot_per_hour = *v;
    }
    // Optional: catalogs written before the column existed have none.
    std::string reserved_s = get("reserved_1y_usd_h");
    if (!reserved_s.empty()) {
      auto v = ParseUsd(reserved_s);
      if (!v) return bad("reserved_1y_usd_h", reserved_s, "USD per hour");
      if (*v > 0) o.reserved_1y_per_hour = *v;
    }
    if (o.spot_per_hour && o.on_demand_per_hour && *o.spot_per_hour >= *o.on_demand_per_hour) {
      o.spot_per_hour.reset();
      o.flags |= kSpotAtOrAboveOnDemand;
      warn.Add("spot at or above on-demand (spot dropped)", example + " spot=" + spot_s + " on-demand=" + od_s);
    }
    if (!o.on_demand_per_hour && !o.spot_per_hour) {
      warn.Add("no price (kept out)", example);
      continue;
    }
    if (o.spot_per_hour) {
      if (get("spot_kind") == "estimated") {
        o.flags |= kSpotEstimated;
        warn.Add("spot price estimated from AWS advisor savings", example);
      }
      std::string bucket_s = get("aws_interruption_bucket");
      std::optional<double> hazard;
      if (!bucket_s.empty()) {
        auto b = ParseInt(bucket_s);
        if (!b || !(hazard = AwsBucketHazardPerHour(static_cast<int>(*b)))) {
          return bad("aws_interruption_bucket", bucket_s, "an advisor range index 0..4");
        }
        static const char* kLabel[] = {"<5%", "5-10%", "10-15%", "15-20%", ">20%"};
        o.hazard_source = std::string("aws advisor ") + kLabel[*b];
      }
      if (!hazard) {
        hazard = DefaultSpotHazardPerHour(o.cloud);
        o.hazard_source = "default for " + o.cloud;
        o.flags |= kHazardDefault;
      }
      o.spot_hazard_per_hour = *hazard;
    }
    gpu_part.push_back(o.on_demand_per_hour ? *o.on_demand_per_hour - host : 0);
    table.offers.push_back(std::move(o));
  }

  // Fallback prices: a GPU price far under the same instance type's dearest region.
  std::map<std::tuple<std::string, std::string, std::string>, MicroUsd> dearest;
  for (size_t i = 0; i < table.offers.size(); ++i) {
    const Offer& o = table.offers[i];
    auto& d = dearest[{o.cloud, o.instance_type, o.gpu}];
    d = std::max(d, gpu_part[i]);
  }
  for (size_t i = 0; i < table.offers.size(); ++i) {
    Offer& o = table.offers[i];
    if (!o.on_demand_per_hour) continue;
    MicroUsd d = dearest[{o.cloud, o.instance_type, o.gpu}];
    if (static_cast<double>(gpu_part[i]) < options.suspect_price_ratio * static_cast<double>(d)) {
      o.flags |= kSuspectPrice;
      warn.Add("suspect fallback on-demand price (under " +
                   std::to_string(static_cast<int>(options.suspect_price_ratio * 100)) +
                   "% of the dearest region's)",
               o.cloud + " " + o.instance_type + " " + o.region + " " + FormatUsd(*o.on_demand_per_hour) +
                   "/h vs " + FormatUsd(d) + "/h");
    }
  }
  // Spot outliers: a share of on-demand (spot / on-demand) far under the median share of the same
  // cloud and GPU model, or a discount past the fixed bound (LoadOptions says why both).
  auto share = [](const Offer& o) {
    return static_cast<double>(*o.spot_per_hour) / static_cast<double>(*o.on_demand_per_hour);
  };
  std::map<std::pair<std::string, std::string>, std::vector<double>> shares;
  for (const Offer& o : table.offers) {
    if (o.spot_per_hour && o.on_demand_per_hour) shares[{o.cloud, o.gpu}].push_back(share(o));
  }
  std::map<std::pair<std::string, std::string>, double> median;
  for (auto& [key, v] : shares) {
    if (static_cast<int>(v.size()) < options.spot_outlier_min_group) continue;
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    median[key] = n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  }
  for (Offer& o : table.offers) {
    if (!o.spot_per_hour || !o.on_demand_per_hour) continue;
    const double s = share(o);
    auto m = median.find({o.cloud, o.gpu});
    const bool far_below_median = m != median.end() && s < options.spot_outlier_median_ratio * m->second;
    const bool past_bound = 1.0 - s >= options.spot_outlier_max_discount - 1e-9;
    if (!far_below_median && !past_bound) continue;
    o.flags |= kSpotOutlier;
    char pct[64];
    std::snprintf(pct, sizeof pct, " (%.0f%% off", (1.0 - s) * 100);
    std::string detail = pct;
    if (m != median.end()) {
      std::snprintf(pct, sizeof pct, "; median %.0f%% off", (1.0 - m->second) * 100);
      detail += pct;
    }
    warn.Add("spot price outlier (discount far beyond the usual for its GPU and cloud; ranked last by select)",
             o.cloud + " " + o.instance_type + " " + (o.zone.empty() ? o.region : o.zone) + " spot " +
                 FormatUsd(*o.spot_per_hour) + "/h vs on-demand " + FormatUsd(*o.on_demand_per_hour) + "/h" +
                 detail + ")");
  }
  table.warnings = warn.Take();
  return table;
}

Result<OfferTable> LoadOffersCsv(const std::string& path, const model::GpuCatalog& gpus,
                                 const LoadOptions& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot read offer catalog " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ParseOffersCsv(ss.str(), path, gpus, options);
}

}  // namespace gpufleet::cost
