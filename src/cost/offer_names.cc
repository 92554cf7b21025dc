#include "cost/offer_names.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/strings.h"

namespace gpufleet::cost {

namespace {

constexpr size_t kMaxListed = 12;  // known values listed in full up to this many

bool HasWildcard(std::string_view pattern) { return pattern.find_first_of("*?") != std::string_view::npos; }

std::string Quoted(const std::vector<std::string>& names) {
  std::vector<std::string> q;
  for (const auto& n : names) q.push_back("'" + n + "'");
  if (q.size() <= 1) return Join(q, "");
  const std::string last = q.back();
  q.pop_back();
  return Join(q, ", ") + " or " + last;
}

// " (did you mean 'aws'?)", or "" when nothing is near.
std::string DidYouMean(const std::vector<std::string>& near) {
  return near.empty() ? "" : " (did you mean " + Quoted(near) + "?)";
}

// "geo is one of asia, eu, us", or "offers have 227 region values, such as a, b, c" when many.
std::string Listing(const std::string& label, const std::vector<std::string>& known) {
  if (known.size() <= kMaxListed) return label + " is one of " + Join(known, ", ");
  return "offers have " + std::to_string(known.size()) + " " + label + " values, such as " +
         Join(std::vector<std::string>(known.begin(), known.begin() + 3), ", ");
}

std::vector<std::string> Sorted(const std::set<std::string>& s) { return {s.begin(), s.end()}; }

// Near matches for a pattern: a plain name against the names; a glob by its literal head
// ('eurpoe-*' -> 'europe-*'), each suggestion kept only where it matches something.
std::vector<std::string> NearPatterns(std::string_view pattern, const std::vector<std::string>& names) {
  if (!HasWildcard(pattern)) return NearMatches(pattern, names);
  const std::string_view head = pattern.substr(0, pattern.find_first_of("*?"));
  const std::string_view tail = pattern.substr(head.size());
  if (head.empty()) return {};
  std::vector<std::string> heads;
  for (const auto& n : names) {
    if (n.size() < head.size()) continue;
    std::string h = n.substr(0, head.size());
    if (std::find(heads.begin(), heads.end(), h) == heads.end()) heads.push_back(std::move(h));
  }
  std::vector<std::string> out;
  for (const auto& h : NearMatches(head, heads)) {
    std::string p = h + std::string(tail);
    if (std::any_of(names.begin(), names.end(), [&](const std::string& n) { return GlobMatch(p, n); })) {
      out.push_back(std::move(p));
    }
  }
  return out;
}

// Each cloud's region with the most offers (ties: the first by name), to show how the clouds
// name theirs: "aws 'us-east-1', azure 'eastus', ...".
std::string RegionStyles(const OfferTable& table) {
  std::map<std::string, std::map<std::string, int>> counts;  // cloud -> region -> offers
  for (const Offer& o : table.offers) ++counts[o.cloud][o.region];
  std::vector<std::string> parts;
  for (const auto& [cloud, regions] : counts) {
    auto most = std::max_element(regions.begin(), regions.end(),
                                 [](const auto& a, const auto& b) { return a.second < b.second; });
    parts.push_back(cloud + " '" + most->first + "'");
  }
  return Join(parts, ", ");
}

}  // namespace

Status CheckCloud(const OfferTable& table, std::string_view cloud) {
  std::set<std::string> clouds;
  for (const Offer& o : table.offers) clouds.insert(o.cloud);
  if (clouds.contains(std::string(cloud))) return Status::Ok();
  const std::vector<std::string> known = Sorted(clouds);
  return Status::InvalidArgument("the catalog has no cloud '" + std::string(cloud) + "'" +
                                 DidYouMean(NearMatches(cloud, known)) + "; it has " +
                                 (known.empty() ? "no offers" : Join(known, ", ")));
}

Status CheckRegionPattern(const OfferTable& table, std::string_view pattern) {
  std::set<std::string> names;
  for (const Offer& o : table.offers) {
    if (GlobMatch(pattern, o.region) || (!o.zone.empty() && GlobMatch(pattern, o.zone))) return Status::Ok();
    names.insert(o.region);
    if (!o.zone.empty()) names.insert(o.zone);
  }
  const std::string p(pattern);
  const std::string what = HasWildcard(pattern) ? "the pattern '" + p + "' matches no region or zone of the catalog"
                                                : "the catalog has no region or zone '" + p + "'";
  const std::vector<std::string> near = NearPatterns(pattern, Sorted(names));
  if (!near.empty()) return Status::InvalidArgument(what + DidYouMean(near));
  return Status::InvalidArgument(what + "; its clouds name regions like " + RegionStyles(table) +
                                 " (globs such as 'europe-*' match regions and zones)");
}

Status CheckRegion(const OfferTable& table, std::string_view region) {
  std::set<std::string> regions;
  std::string zone_of;
  for (const Offer& o : table.offers) {
    if (o.region == region) return Status::Ok();
    regions.insert(o.region);
    if (o.zone == region) zone_of = o.region;
  }
  const std::string r(region);
  if (!zone_of.empty()) {
    return Status::InvalidArgument("'" + r + "' is a zone of " + zone_of + "; give its region, '" + zone_of + "'");
  }
  const std::vector<std::string> near = NearMatches(region, Sorted(regions));
  return Status::InvalidArgument("the catalog has no region '" + r + "'" + DidYouMean(near) +
                                 (near.empty() ? "; its clouds name regions like " + RegionStyles(table) : ""));
}

Status CheckLabel(const OfferTable& table, std::string_view key, std::string_view pattern) {
  std::map<std::string, std::set<std::string>> values;  // label -> values the offers have
  for (const Offer& o : table.offers) {
    for (const auto& [k, v] : o.labels()) values[k].insert(v);
  }
  const std::string k(key);
  auto it = values.find(k);
  if (it == values.end()) {
    std::vector<std::string> keys;
    for (const auto& [name, vs] : values) keys.push_back(name);
    return Status::InvalidArgument("no offer has the label '" + k + "'" + DidYouMean(NearMatches(key, keys)) +
                                   "; offers have " + (keys.empty() ? "none" : Join(keys, ", ")));
  }
  const std::vector<std::string> known = Sorted(it->second);
  if (std::any_of(known.begin(), known.end(), [&](const std::string& v) { return GlobMatch(pattern, v); })) {
    return Status::Ok();
  }
  const std::string p(pattern);
  return Status::InvalidArgument((HasWildcard(pattern) ? "the pattern '" + p + "' matches no offer's " + k
                                                       : "no offer has " + k + " '" + p + "'") +
                                 DidYouMean(NearPatterns(pattern, known)) + "; " + Listing(k, known));
}

}  // namespace gpufleet::cost
