#include "sim/result.h"

#include "common/radix_sort.h"
#include "common/strings.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>
#include <utility>

#include "common/check.h"
#include "model/types.h"

namespace gpufleet::sim {
namespace {

constexpr double kMsPerHour = 3.6e6;
constexpr size_t kMaxTeamRows = 15;

// ---------------------------------------------------------------------------------------------
// Number formatting. Everything goes through snprintf in the "C" locale (gpufleet never calls
// setlocale), so output is the same on every machine.

std::string Printf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string Printf(const char* fmt, ...) {
  char buf[256];
  va_list args;
  va_start(args, fmt);
  int n = std::vsnprintf(buf, sizeof buf, fmt, args);
  va_end(args);
  if (n < 0) return {};
  if (static_cast<size_t>(n) < sizeof buf) return std::string(buf, static_cast<size_t>(n));
  std::string out(static_cast<size_t>(n) + 1, '\0');
  va_start(args, fmt);
  std::vsnprintf(out.data(), out.size(), fmt, args);
  va_end(args);
  out.resize(static_cast<size_t>(n));
  return out;
}

// "1234567" -> "1,234,567"; works on the integer part of an already formatted number.
std::string GroupThousands(const std::string& digits) {
  size_t begin = (!digits.empty() && digits[0] == '-') ? 1 : 0;
  size_t end = digits.find('.');
  if (end == std::string::npos) end = digits.size();
  std::string out = digits.substr(0, begin);
  for (size_t i = begin; i < end; ++i) {
    out += digits[i];
    size_t left = end - i - 1;
    if (left > 0 && left % 3 == 0) out += ',';
  }
  out += digits.substr(end);
  return out;
}

std::string Int(int64_t v) { return GroupThousands(Printf("%lld", static_cast<long long>(v))); }
std::string Fixed(double v, int decimals) { return GroupThousands(Printf("%.*f", decimals, v)); }
std::string Secs(double s) {
  if (!std::isfinite(s)) return "-";
  return FormatDuration(Duration::Millis(std::llround(s * 1000.0)));
}
std::string Percent(double fraction) { return Printf("%.1f %%", fraction * 100.0); }
std::string Dollars(double usd) { return "$" + Fixed(usd, 2); }

// Exact seconds with 3 decimals from integer milliseconds (no floating point on the way).
std::string MillisAsSeconds(int64_t ms) {
  std::string sign = ms < 0 ? "-" : "";
  uint64_t abs_ms = ms < 0 ? 0 - static_cast<uint64_t>(ms) : static_cast<uint64_t>(ms);
  return sign + Printf("%llu.%03llu", static_cast<unsigned long long>(abs_ms / 1000),
                       static_cast<unsigned long long>(abs_ms % 1000));
}

std::string PadRight(const std::string& s, size_t width) {
  return s.size() >= width ? s : s + std::string(width - s.size(), ' ');
}
std::string PadLeft(const std::string& s, size_t width) {
  return s.size() >= width ? s : std::string(width - s.size(), ' ') + s;
}

// ---------------------------------------------------------------------------------------------
// Summary.

// Nearest rank: pN = sorted[ceil(N * n / 100) - 1], computed in integers so that no rounding
// of N/100 can move the rank.
Percentiles ComputePercentiles(std::vector<double> values) {
  Percentiles p;
  if (values.empty()) return p;
  {
    // Radix-sorted by their bits' order (82k values three times per Philly summary).
    std::vector<uint64_t> keys;
    keys.reserve(values.size());
    for (double v : values) keys.push_back(OrderedBits(v));
    RadixSort(keys, [](uint64_t k) { return k; });
    for (size_t i = 0; i < keys.size(); ++i) values[i] = DoubleOfOrderedBits(keys[i]);
  }
  const size_t n = values.size();
  p.count = static_cast<int64_t>(n);
  auto at_rank = [&](size_t pct) {
    size_t rank = (pct * n + 99) / 100;
    return values[std::max<size_t>(rank, 1) - 1];
  };
  double sum = 0;
  for (double v : values) sum += v;  // sorted order: the same sum whatever the input order
  p.avg = sum / static_cast<double>(n);
  p.p50 = at_rank(50);
  p.p95 = at_rank(95);
  p.p99 = at_rank(99);
  p.max = values.back();
  return p;
}

// Step integral of busy / total capacity; nullopt when the series carries no capacity.
std::optional<double> SeriesUtilisation(const SimResult& r) {
  double busy = 0, total = 0;
  for (size_t i = 0; i < r.series.size(); ++i) {
    const SeriesPoint& p = r.series[i];
    Time until = i + 1 < r.series.size() ? r.series[i + 1].t : std::max(r.end, p.t);
    double width_ms = static_cast<double>((until - p.t).millis());
    if (width_ms <= 0) continue;
    busy += static_cast<double>(p.busy_gpu_milli) * width_ms;
    total += static_cast<double>(p.total_gpu_milli) * width_ms;
  }
  if (total <= 0) return std::nullopt;
  return busy / total;
}

// ---------------------------------------------------------------------------------------------
// JSON.

using Json = nlohmann::ordered_json;

// Three decimals keep the files small and stable across compilers' last-bit differences.
double Round3(double v) {
  if (!std::isfinite(v)) return 0;
  double r = std::round(v * 1000.0) / 1000.0;
  return r == 0 ? 0.0 : r;  // no "-0.0"
}

Json PercentilesJson(const Percentiles& p) {
  if (p.count == 0) return Json(nullptr);  // no value to take them over: not zeros
  Json j;
  j["avg"] = Round3(p.avg);
  j["p50"] = Round3(p.p50);
  j["p95"] = Round3(p.p95);
  j["p99"] = Round3(p.p99);
  j["max"] = Round3(p.max);
  return j;
}

Json SummaryJson(const Summary& s) {
  Json j;
  j["policy"] = s.policy;
  j["jobs"] = s.jobs;
  j["finished"] = s.finished;
  j["never_ran"] = static_cast<int64_t>(s.never_ran.size());
  Json never = Json::array();
  for (const NeverRan& n : s.never_ran) never.push_back(Json{{"id", n.id}, {"reason", n.reason}});
  j["never_ran_jobs"] = std::move(never);
  j["jct_s"] = PercentilesJson(s.jct_s);
  j["queue_s"] = PercentilesJson(s.queue_s);
  j["slowdown"] = PercentilesJson(s.slowdown);
  j["makespan_s"] = Round3(s.makespan_s);
  j["utilisation"] = Round3(s.utilisation);
  j["preemptions"] = s.preemptions;
  j["failures"] = s.failures;
  j["reclaims"] = s.reclaims;
  j["gpu_hours_used"] = Round3(s.gpu_hours_used);
  j["gpu_hours_lost"] = Round3(s.gpu_hours_lost);
  j["gpu_hours_overhead"] = Round3(s.gpu_hours_overhead);
  j["cost_usd"] = Round3(s.cost_usd);
  j["job_cost_usd"] = Round3(s.job_cost_usd);
  j["idle_cost_usd"] = Round3(s.cost_usd - s.job_cost_usd);
  j["cost_per_used_gpu_hour"] = Round3(s.cost_per_used_gpu_hour);
  j["spot_interruptions"] = s.spot_interruptions;
  j["nodes_rented"] = s.nodes_rented;
  j["nodes_released"] = s.nodes_released;
  j["boot_timeouts"] = s.boot_timeouts;
  j["budget_releases"] = s.budget_releases;
  j["capacity_misses"] = s.capacity_misses;
  Json budgets = Json::object();
  for (const auto& [team, b] : s.budgets) {
    Json bj;
    bj["spent_usd"] = Round3(static_cast<double>(b.spent_micros) / 1e6);
    bj["rented_idle_usd"] = Round3(static_cast<double>(b.rented_idle_micros) / 1e6);
    if (b.soft_micros > 0) bj["soft_budget_usd"] = Round3(static_cast<double>(b.soft_micros) / 1e6);
    if (b.hard_micros > 0) bj["hard_budget_usd"] = Round3(static_cast<double>(b.hard_micros) / 1e6);
    bj["soft_reached"] = b.soft_reached ? Json(FormatIso8601(*b.soft_reached)) : Json(nullptr);
    bj["hard_stopped"] = b.hard_stopped ? Json(FormatIso8601(*b.hard_stopped)) : Json(nullptr);
    bj["held_jobs"] = b.held_jobs;
    budgets[team] = std::move(bj);
  }
  j["budgets"] = std::move(budgets);
  Json markets = Json::object();
  for (const auto& [m, usd] : s.cost_by_market_usd) markets[m] = Round3(usd);
  j["cost_by_market_usd"] = std::move(markets);
  Json teams = Json::object();
  for (const auto& [name, t] : s.teams) {
    Json tj;
    tj["jobs"] = t.jobs;
    tj["gpu_hours"] = Round3(t.gpu_hours);
    tj["share"] = Round3(t.share);
    tj["avg_jct_s"] = t.finished > 0 ? Json(Round3(t.avg_jct_s)) : Json(nullptr);
    tj["cost_usd"] = Round3(t.cost_usd);
    teams[name] = std::move(tj);
  }
  j["teams"] = std::move(teams);
  return j;
}

// Names come from traces and may hold invalid UTF-8; replace it rather than throw.
std::string Dump(const Json& j) { return j.dump(2, ' ', false, Json::error_handler_t::replace) + "\n"; }

// ---------------------------------------------------------------------------------------------
// CSV.

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string OptionalTime(const std::optional<Time>& t) { return t ? FormatIso8601(*t) : ""; }

Status WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return Status::Unavailable("cannot open '" + path + "' for writing: " + std::strerror(errno));
  out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  out.close();
  if (!out) return Status::Unavailable("cannot write '" + path + "'");
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// SVG.


// Tableau 10: distinct hues that survive printing in grey reasonably well.
constexpr const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

constexpr double kWidth = 900, kHeight = 520;
constexpr double kPlotLeft = 64, kPlotRight = 876;
constexpr double kUtilTop = 92, kUtilHeight = 170;
constexpr double kPendingTop = 302, kPendingHeight = 160;

struct PlotPoint {
  int64_t t_ms = 0;  // since the run's start
  double util_pct = 0;
  double pending = 0;
};

double UtilPct(const SeriesPoint& p) {
  if (p.total_gpu_milli <= 0) return 0;
  return std::clamp(100.0 * static_cast<double>(p.busy_gpu_milli) / static_cast<double>(p.total_gpu_milli),
                    0.0, 100.0);
}

// Consecutive buckets of (nearly) equal point counts; each becomes one point at the middle of
// its time range with the mean utilisation (what the GPUs did on average) and the maximum queue
// (so that short spikes stay visible).
std::vector<PlotPoint> Downsample(const SimResult& r, size_t max_points) {
  const std::vector<SeriesPoint>& s = r.series;
  std::vector<PlotPoint> out;
  if (s.size() <= max_points) {
    out.reserve(s.size());
    for (const SeriesPoint& p : s) {
      out.push_back({(p.t - r.start).millis(), UtilPct(p), static_cast<double>(p.pending_jobs)});
    }
    return out;
  }
  out.reserve(max_points);
  const size_t n = s.size();
  for (size_t b = 0; b < max_points; ++b) {
    size_t lo = b * n / max_points, hi = (b + 1) * n / max_points;
    double util_sum = 0;
    int64_t pending_max = 0;
    for (size_t i = lo; i < hi; ++i) {
      util_sum += UtilPct(s[i]);
      pending_max = std::max(pending_max, s[i].pending_jobs);
    }
    Time mid = s[lo].t + (s[hi - 1].t - s[lo].t) / 2;
    out.push_back({(mid - r.start).millis(), util_sum / static_cast<double>(hi - lo),
                   static_cast<double>(pending_max)});
  }
  return out;
}

// The smallest of {1, 2, 5} x 10^k that is >= raw.
double NiceStep(double raw) {
  if (!(raw > 0)) return 1;
  double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * mag >= raw * (1 - 1e-9)) return m * mag;
  }
  return 10 * mag;
}

std::string Num(double v) { return Printf("%.1f", v); }

constexpr size_t kMaxNeverRanReasons = 10;
constexpr size_t kMaxIdsPerReason = 5;

// Jobs that never started, one line per reason (most jobs first; ties in order of first
// appearance), with the first few ids.
std::string FormatNeverRan(const std::vector<NeverRan>& never) {
  std::vector<std::pair<std::string, std::vector<std::string>>> by_reason;
  std::map<std::string, size_t> index;
  for (const NeverRan& n : never) {
    auto [it, inserted] = index.emplace(n.reason, by_reason.size());
    if (inserted) by_reason.push_back({Printable(n.reason), {}});
    by_reason[it->second].second.push_back(Printable(n.id));
  }
  std::stable_sort(by_reason.begin(), by_reason.end(),
                   [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
  std::string out = "never ran         " + Int(static_cast<int64_t>(never.size())) +
                    " job(s), left out of the averages:\n";
  for (size_t r = 0; r < by_reason.size() && r < kMaxNeverRanReasons; ++r) {
    const auto& [reason, ids] = by_reason[r];
    std::vector<std::string> shown(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(std::min(ids.size(), kMaxIdsPerReason)));
    std::string list = Join(shown, ", ");
    if (ids.size() > shown.size()) list += ", ... (" + Int(static_cast<int64_t>(ids.size() - shown.size())) + " more)";
    out += "  " + Int(static_cast<int64_t>(ids.size())) + " x " + reason + ": " + list + "\n";
  }
  if (by_reason.size() > kMaxNeverRanReasons) {
    out += "  (+" + Int(static_cast<int64_t>(by_reason.size() - kMaxNeverRanReasons)) +
           " more reasons; --jobs-out lists every job with its reason)\n";
  }
  return out;
}

}  // namespace

JobTally::JobTally(size_t jobs) : queued_ms(jobs, kNone), jct_ms(jobs, kNone), team(jobs, 0) {}

void JobTally::Add(size_t index, const JobRecord& j) {
  auto [it, fresh] = team_index_.try_emplace(j.team, static_cast<uint32_t>(team_names.size()));
  if (fresh) {
    team_names.push_back(j.team);
    team_sums.emplace_back();
  }
  const uint32_t t = it->second;
  team[index] = t;
  team_sums[t].run_gpu_ms += j.run_gpu_ms;
  team_sums[t].cost_micros += j.cost_micros;
  ++added;
  run_gpu_ms += j.run_gpu_ms;
  lost_gpu_ms += j.lost_gpu_ms;
  overhead_gpu_ms += j.overhead_gpu_ms;
  cost_micros += j.cost_micros;
  preemptions += j.preemptions;
  failures += j.failures;
  reclaims += j.reclaims;
  if (!j.first_start) {
    never_ran.push_back({index, {j.id, j.never_ran.empty() ? std::string("never started") : j.never_ran}});
    return;
  }
  queued_ms[index] = j.queued.millis();
  if (!j.finish) return;
  const Duration jct = *j.finish - j.submit;
  jct_ms[index] = jct.millis();
  slowdown.push_back(jct.seconds_f() / std::max(j.work, Duration::Seconds(1)).seconds_f());
}

Summary Summarize(const SimResult& r) {
  // Kept records are tallied here, in trace order, as the simulator tallies jobs as they end.
  JobTally kept;
  const JobTally* tally = &r.tally;
  if (r.tally.added == 0) {
    kept = JobTally(r.jobs.size());
    for (size_t i = 0; i < r.jobs.size(); ++i) kept.Add(i, r.jobs[i]);
    tally = &kept;
  }
  const JobTally& t = *tally;
  const size_t n = t.queued_ms.size();
  CHECK(t.added == static_cast<int64_t>(n)) << "a run's tally misses jobs: " << t.added << " of " << n;
  Summary s;
  s.policy = r.policy;
  s.jobs = static_cast<int64_t>(n);
  // Percentiles sort their values, so these need no particular order; the teams' JCT sums are
  // floating point and are added in trace order.
  std::vector<double> jct, queue;
  std::vector<double> slowdown = t.slowdown;
  jct.reserve(slowdown.size());
  queue.reserve(n);
  struct TeamAcc {
    int64_t jobs = 0, finished = 0;
    double jct_sum_s = 0;
  };
  std::vector<TeamAcc> team_acc(t.team_names.size());
  for (size_t i = 0; i < n; ++i) {
    TeamAcc& a = team_acc[t.team[i]];
    ++a.jobs;
    if (t.queued_ms[i] != JobTally::kNone) queue.push_back(Duration::Millis(t.queued_ms[i]).seconds_f());
    if (t.jct_ms[i] == JobTally::kNone) continue;
    const double jct_s = Duration::Millis(t.jct_ms[i]).seconds_f();
    jct.push_back(jct_s);
    ++a.finished;
    a.jct_sum_s += jct_s;
  }
  s.finished = static_cast<int64_t>(jct.size());
  std::vector<std::pair<size_t, NeverRan>> never = t.never_ran;
  std::stable_sort(never.begin(), never.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [index, why] : never) s.never_ran.push_back(std::move(why));
  const int64_t run_gpu_ms = t.run_gpu_ms, lost_gpu_ms = t.lost_gpu_ms, overhead_gpu_ms = t.overhead_gpu_ms;
  const int64_t job_cost_micros = t.cost_micros;
  s.preemptions = t.preemptions;
  s.failures = t.failures;
  s.reclaims = t.reclaims;
  s.jct_s = ComputePercentiles(std::move(jct));
  s.spot_interruptions = r.spot_interruptions;
  s.nodes_rented = r.nodes_rented;
  s.nodes_released = r.nodes_released;
  s.boot_timeouts = r.boot_timeouts;
  s.budget_releases = r.budget_releases;
  s.capacity_misses = r.capacity_misses;
  s.budgets = r.budgets;
  s.queue_s = ComputePercentiles(std::move(queue));
  s.slowdown = ComputePercentiles(std::move(slowdown));
  s.makespan_s = (r.end - r.start).seconds_f();
  s.gpu_hours_used = static_cast<double>(run_gpu_ms) / kMsPerHour;
  s.gpu_hours_lost = static_cast<double>(lost_gpu_ms) / kMsPerHour;
  s.gpu_hours_overhead = static_cast<double>(overhead_gpu_ms) / kMsPerHour;
  if (r.online_gpu_ms > 0) {
    s.utilisation = static_cast<double>(r.busy_gpu_ms) / static_cast<double>(r.online_gpu_ms);
  } else if (std::optional<double> u = SeriesUtilisation(r)) {
    s.utilisation = *u;
  } else {
    double capacity_ms = static_cast<double>(r.cluster_gpus) * static_cast<double>((r.end - r.start).millis());
    s.utilisation = capacity_ms > 0 ? static_cast<double>(run_gpu_ms) / capacity_ms : 0;
  }
  {
    const int reserved = static_cast<int>(model::Market::kReserved);
    if (r.paid_gpu_ms_by_market[reserved] > 0) {
      s.reserved_utilisation = static_cast<double>(r.busy_gpu_ms_by_market[reserved]) /
                               static_cast<double>(r.paid_gpu_ms_by_market[reserved]);
    }
  }
  for (size_t k = 0; k < t.team_names.size(); ++k) {
    const TeamAcc& a = team_acc[k];
    const JobTally::TeamSums& sums = t.team_sums[k];
    TeamShare& ts = s.teams[t.team_names[k]];
    ts.jobs = a.jobs;
    ts.gpu_hours = static_cast<double>(sums.run_gpu_ms) / kMsPerHour;
    ts.share = run_gpu_ms > 0 ? static_cast<double>(sums.run_gpu_ms) / static_cast<double>(run_gpu_ms) : 0;
    ts.finished = a.finished;
    ts.avg_jct_s = a.finished > 0 ? a.jct_sum_s / static_cast<double>(a.finished) : 0;
    ts.cost_usd = static_cast<double>(sums.cost_micros) / 1e6;
  }
  s.cost_usd = static_cast<double>(r.cost_micros) / 1e6;
  s.job_cost_usd = static_cast<double>(job_cost_micros) / 1e6;
  for (const auto& [m, micros] : r.cost_by_market_micros) s.cost_by_market_usd[m] = static_cast<double>(micros) / 1e6;
  s.cost_per_used_gpu_hour = s.gpu_hours_used > 0 ? s.cost_usd / s.gpu_hours_used : 0;
  return s;
}

std::string FormatSummaryText(const Summary& s) {
  constexpr size_t kLabel = 18;
  std::string out;
  auto line = [&](const std::string& label, const std::string& value) {
    out += PadRight(label, kLabel) + value + "\n";
  };
  auto durations = [](const Percentiles& p) -> std::string {
    if (p.count == 0) return "-";
    return "avg " + PadRight(Secs(p.avg), 7) + " p50 " + PadRight(Secs(p.p50), 7) + " p95 " +
           PadRight(Secs(p.p95), 7) + " p99 " + PadRight(Secs(p.p99), 7) + " max " + Secs(p.max);
  };
  if (!s.policy.empty()) line("policy", s.policy);
  line("jobs", Int(s.jobs) + " (" + Int(s.finished) + " finished" +
                   (s.never_ran.empty() ? "" : ", " + Int(static_cast<int64_t>(s.never_ran.size())) + " never ran") +
                   ")");
  line("JCT", durations(s.jct_s));
  line("queueing delay", durations(s.queue_s));
  line("slowdown", s.slowdown.count == 0
                       ? std::string("-")
                       : "avg " + PadRight(Fixed(s.slowdown.avg, 2), 7) + " p50 " +
                             PadRight(Fixed(s.slowdown.p50, 2), 7) + " p95 " + PadRight(Fixed(s.slowdown.p95, 2), 7) +
                             " p99 " + PadRight(Fixed(s.slowdown.p99, 2), 7) + " max " + Fixed(s.slowdown.max, 2));
  line("makespan", Secs(s.makespan_s));
  line("GPU utilisation", Percent(s.utilisation));
  line("preemptions", Int(s.preemptions));
  line("failures", Int(s.failures));
  line("GPU-hours", "used " + Fixed(s.gpu_hours_used, 1) + " / lost " + Fixed(s.gpu_hours_lost, 1));
  if (s.gpu_hours_overhead > 0) line("restart overhead", Fixed(s.gpu_hours_overhead, 1) + " GPU-hours");
  if (s.cost_usd > 0) {
    line("cost", Dollars(s.cost_usd) + " (jobs " + Dollars(s.job_cost_usd) + ", idle " +
                     Dollars(s.cost_usd - s.job_cost_usd) + "; " + Dollars(s.cost_per_used_gpu_hour) +
                     " per GPU-hour used)");
    std::string markets;
    for (const auto& [m, usd] : s.cost_by_market_usd) markets += (markets.empty() ? "" : ", ") + m + " " + Dollars(usd);
    line("cost by market", markets);
  }
  if (s.spot_interruptions > 0) {
    line("interruptions", Int(s.spot_interruptions) + " spot nodes taken back, " + Int(s.reclaims) +
                              " job runs stopped (not counted as preemptions)");
  }
  if (s.capacity_misses > 0) {
    line("no capacity", Int(s.capacity_misses) + " rents found their offer out of capacity; the next offer was tried");
  }
  if (s.nodes_rented > 0) {
    line("autoscaling", Int(s.nodes_rented) + " nodes rented, " + Int(s.nodes_released) + " released" +
                            (s.boot_timeouts > 0 ? " (" + Int(s.boot_timeouts) + " past the boot timeout)" : ""));
  }
  if (!s.budgets.empty()) {
    for (const auto& [team, b] : s.budgets) {
      auto usd = [](int64_t micros) { return Dollars(static_cast<double>(micros) / 1e6); };
      std::string text = "spent " + usd(b.spent_micros);
      if (b.rented_idle_micros > 0) text += " (rented nodes idle " + usd(b.rented_idle_micros) + ")";
      if (b.soft_micros > 0) {
        text += "; soft " + usd(b.soft_micros) +
                (b.soft_reached ? " reached at " + FormatIso8601(*b.soft_reached) : std::string(" not reached"));
      }
      if (b.hard_micros > 0) {
        text += "; hard " + usd(b.hard_micros) +
                (b.hard_stopped ? " stopped the team at " + FormatIso8601(*b.hard_stopped) : std::string(" not reached"));
      }
      if (b.held_jobs > 0) text += "; " + Int(b.held_jobs) + " jobs held at the end";
      line("budget " + Printable(team), text);
    }
    if (s.budget_releases > 0) line("budget releases", Int(s.budget_releases) + " rented nodes released when a hard budget was spent");
  }
  if (!s.never_ran.empty()) out += FormatNeverRan(s.never_ran);
  if (s.teams.empty()) return out;

  // Names as they may go to a terminal (a trace's team column is anyone's text).
  std::vector<std::pair<std::string, TeamShare>> teams;
  teams.reserve(s.teams.size());
  for (const auto& [name, share] : s.teams) teams.emplace_back(Printable(name), share);
  // Largest consumers first; the name breaks ties so that the order is stable.
  std::stable_sort(teams.begin(), teams.end(),
                   [](const auto& a, const auto& b) { return a.second.gpu_hours > b.second.gpu_hours; });
  size_t shown = std::min(teams.size(), kMaxTeamRows);
  size_t name_width = 4;
  for (size_t i = 0; i < shown; ++i) name_width = std::max(name_width, teams[i].first.size());
  std::vector<std::vector<std::string>> rows;
  const bool money = s.cost_usd > 0;
  rows.push_back({"jobs", "GPU-hours", "share", "avg JCT"});
  if (money) rows.back().push_back("cost");
  for (size_t i = 0; i < shown; ++i) {
    const TeamShare& t = teams[i].second;
    rows.push_back({Int(t.jobs), Fixed(t.gpu_hours, 1), Percent(t.share), t.finished > 0 ? Secs(t.avg_jct_s) : "-"});
    if (money) rows.back().push_back(Dollars(t.cost_usd));
  }
  std::vector<size_t> widths(5, 0);
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  out += "\n";
  for (size_t r = 0; r < rows.size(); ++r) {
    std::string text = PadRight(r == 0 ? "team" : teams[r - 1].first, name_width);
    for (size_t c = 0; c < rows[r].size(); ++c) text += "  " + PadLeft(rows[r][c], widths[c]);
    out += text + "\n";
  }
  if (teams.size() > shown) out += "(+" + Int(static_cast<int64_t>(teams.size() - shown)) + " more teams)\n";
  return out;
}

std::string SummaryToJson(const Summary& s) { return Dump(SummaryJson(s)); }

std::string CompareToJson(const std::vector<Summary>& s) {
  Json arr = Json::array();
  for (const Summary& one : s) arr.push_back(SummaryJson(one));
  return Dump(arr);
}

std::string FormatCompareTable(const std::vector<Summary>& s) {
  if (s.empty()) return "no runs\n";
  enum class Better { kNone, kLower, kHigher };
  struct Row {
    const char* name;
    Better better;
    std::function<double(const Summary&)> get;
    std::function<std::string(double)> format;
  };
  auto count = [](double v) { return Int(std::llround(v)); };
  auto hours = [](double v) { return Fixed(v, 1); };
  auto ratio = [](double v) { return std::isfinite(v) ? Fixed(v, 2) : std::string("-"); };
  // A run with no value for a metric (no job finished) shows "-" and is never the best.
  auto of = [](const Percentiles& p, double v) { return p.count > 0 ? v : std::nan(""); };
  const std::vector<Row> rows = {
      {"jobs finished", Better::kNone, [](const Summary& x) { return double(x.finished); }, count},
      {"JCT avg", Better::kLower, [of](const Summary& x) { return of(x.jct_s, x.jct_s.avg); }, Secs},
      {"JCT p50", Better::kLower, [of](const Summary& x) { return of(x.jct_s, x.jct_s.p50); }, Secs},
      {"JCT p95", Better::kLower, [of](const Summary& x) { return of(x.jct_s, x.jct_s.p95); }, Secs},
      {"JCT p99", Better::kLower, [of](const Summary& x) { return of(x.jct_s, x.jct_s.p99); }, Secs},
      {"queue avg", Better::kLower, [of](const Summary& x) { return of(x.queue_s, x.queue_s.avg); }, Secs},
      {"queue p95", Better::kLower, [of](const Summary& x) { return of(x.queue_s, x.queue_s.p95); }, Secs},
      {"queue p99", Better::kLower, [of](const Summary& x) { return of(x.queue_s, x.queue_s.p99); }, Secs},
      {"slowdown avg", Better::kLower, [of](const Summary& x) { return of(x.slowdown, x.slowdown.avg); }, ratio},
      {"slowdown p95", Better::kLower, [of](const Summary& x) { return of(x.slowdown, x.slowdown.p95); }, ratio},
      {"makespan", Better::kLower, [](const Summary& x) { return x.makespan_s; }, Secs},
      {"GPU utilisation", Better::kHigher, [](const Summary& x) { return x.utilisation; }, Percent},
      {"preemptions", Better::kLower, [](const Summary& x) { return double(x.preemptions); }, count},
      {"GPU-hours used", Better::kNone, [](const Summary& x) { return x.gpu_hours_used; }, hours},
      {"GPU-hours lost", Better::kLower, [](const Summary& x) { return x.gpu_hours_lost; }, hours},
      {"GPU-hours overhead", Better::kLower, [](const Summary& x) { return x.gpu_hours_overhead; }, hours},
      {"never ran", Better::kNone, [](const Summary& x) { return double(x.never_ran.size()); }, count},
      {"cost", Better::kLower, [](const Summary& x) { return x.cost_usd; }, Dollars},
      {"idle cost", Better::kLower, [](const Summary& x) { return x.cost_usd - x.job_cost_usd; }, Dollars},
  };
  const bool mark = s.size() > 1;
  // cells[r][c]: r = 0 is the header; each value cell ends in '*' (best) or ' ' so that the
  // digits stay aligned whether marked or not.
  std::vector<std::vector<std::string>> cells;
  std::vector<std::string> header = {"metric"};
  for (size_t c = 0; c < s.size(); ++c) {
    header.push_back((s[c].policy.empty() ? "#" + std::to_string(c + 1) : s[c].policy) + " ");
  }
  cells.push_back(std::move(header));
  bool priced = false, overhead = false, never = false;
  for (const Summary& one : s) {
    priced = priced || one.cost_usd > 0;
    overhead = overhead || one.gpu_hours_overhead > 0;
    never = never || !one.never_ran.empty();
  }
  for (const Row& row : rows) {
    // Money rows only when some run had prices; overhead and never-ran rows only when nonzero.
    const std::string name = row.name;
    if (!priced && (name == "cost" || name == "idle cost")) continue;
    if (!overhead && name == "GPU-hours overhead") continue;
    if (!never && name == "never ran") continue;
    std::vector<double> values;
    for (const Summary& one : s) values.push_back(row.get(one));
    double best = std::nan("");
    for (double v : values) {
      if (!std::isfinite(v)) continue;
      if (!std::isfinite(best)) best = v;
      if (row.better == Better::kLower) best = std::min(best, v);
      if (row.better == Better::kHigher) best = std::max(best, v);
    }
    std::vector<std::string> line = {row.name};
    for (double v : values) {
      bool is_best = mark && row.better != Better::kNone && v == best;
      line.push_back(row.format(v) + (is_best ? "*" : " "));
    }
    cells.push_back(std::move(line));
  }
  std::vector<size_t> widths(cells[0].size(), 0);
  for (const auto& line : cells) {
    for (size_t c = 0; c < line.size(); ++c) widths[c] = std::max(widths[c], line[c].size());
  }
  std::string out;
  for (const auto& line : cells) {
    std::string text = PadRight(line[0], widths[0]);
    for (size_t c = 1; c < line.size(); ++c) text += "  " + PadLeft(line[c], widths[c]);
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out += text + "\n";
  }
  if (mark) out += "* best of the row (lower is better, except GPU utilisation)\n";
  return out;
}

Status WriteJobsCsv(const std::string& path, const SimResult& r) {
  std::string out =
      "id,team,gpus,gpu_milli,submit,first_start,finish,work_s,queued_s,jct_s,preemptions,failures,"
      "lost_gpu_s,run_gpu_s,gpu_model,reclaims,overhead_gpu_s,never_ran\n";
  for (const JobRecord& j : r.jobs) {
    out += CsvField(j.id) + "," + CsvField(j.team) + "," + std::to_string(j.gpus) + "," +
           std::to_string(j.gpu_milli) + "," + FormatIso8601(j.submit) + "," + OptionalTime(j.first_start) + "," +
           OptionalTime(j.finish) + "," + MillisAsSeconds(j.work.millis()) + "," +
           MillisAsSeconds(j.queued.millis()) + "," + (j.finish ? MillisAsSeconds((*j.finish - j.submit).millis()) : "") +
           "," + std::to_string(j.preemptions) + "," + std::to_string(j.failures) + "," +
           MillisAsSeconds(j.lost_gpu_ms) + "," + MillisAsSeconds(j.run_gpu_ms) + "," + CsvField(j.gpu_model) + "," +
           std::to_string(j.reclaims) + "," + MillisAsSeconds(j.overhead_gpu_ms) + "," + CsvField(j.never_ran) + "\n";
  }
  return WriteFile(path, out);
}

Status WriteSeriesCsv(const std::string& path, const SimResult& r) {
  std::string out = "time,busy_gpus,total_gpus,utilisation,pending,running\n";
  for (const SeriesPoint& p : r.series) {
    double util = p.total_gpu_milli > 0
                      ? static_cast<double>(p.busy_gpu_milli) / static_cast<double>(p.total_gpu_milli)
                      : 0.0;
    out += FormatIso8601(p.t) + "," + MillisAsSeconds(p.busy_gpu_milli) + "," + MillisAsSeconds(p.total_gpu_milli) +
           "," + Printf("%.4f", util) + "," + std::to_string(p.pending_jobs) + "," +
           std::to_string(p.running_jobs) + "\n";
  }
  return WriteFile(path, out);
}

std::string RenderSvgPlot(const std::vector<const SimResult*>& runs) {
  for (const SimResult* r : runs) CHECK(r != nullptr) << "RenderSvgPlot given a null run";
  const double plot_width = kPlotRight - kPlotLeft;

  std::vector<std::vector<PlotPoint>> points;
  int64_t span_ms = 0;
  double pending_max = 0;
  for (const SimResult* r : runs) {
    points.push_back(Downsample(*r, kMaxPlotPointsPerRun));
    span_ms = std::max(span_ms, (r->end - r->start).millis());
    if (!r->series.empty()) span_ms = std::max(span_ms, (r->series.back().t - r->start).millis());
    for (const PlotPoint& p : points.back()) pending_max = std::max(pending_max, p.pending);
  }
  if (span_ms <= 0) span_ms = 3'600'000;

  // Hours up to three days, days beyond.
  const bool in_days = span_ms > 72 * 3'600'000LL;
  const double unit_ms = in_days ? 86'400'000.0 : 3'600'000.0;
  const double span_units = static_cast<double>(span_ms) / unit_ms;
  const double x_step = NiceStep(span_units / 8);
  auto x_of = [&](int64_t t_ms) {
    return kPlotLeft + plot_width * std::clamp(static_cast<double>(t_ms) / static_cast<double>(span_ms), 0.0, 1.0);
  };

  const double pending_step = std::max(1.0, NiceStep(pending_max / 5));
  const double pending_top = std::max(pending_step, std::ceil(pending_max / pending_step) * pending_step);
  auto y_util = [&](double pct) { return kUtilTop + kUtilHeight * (1 - std::clamp(pct, 0.0, 100.0) / 100); };
  auto y_pending = [&](double n) {
    return kPendingTop + kPendingHeight * (1 - std::clamp(n / pending_top, 0.0, 1.0));
  };

  std::string svg;
  svg += Printf(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n",
      kWidth, kHeight, kWidth, kHeight);
  svg += Printf("<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"#ffffff\"/>\n", kWidth, kHeight);
  std::string title = "GPU utilisation and pending jobs";
  if (!runs.empty() && !runs[0]->trace.empty()) title += " - " + runs[0]->trace;
  svg += Printf("<text x=\"%.1f\" y=\"22\" text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\">",
                kWidth / 2) +
         XmlEscape(title) + "</text>\n";

  // Legend: one swatch and name per run, wrapping onto a second row when needed.
  double lx = kPlotLeft, ly = 44;
  for (size_t i = 0; i < runs.size(); ++i) {
    std::string name = runs[i]->policy.empty() ? "run " + std::to_string(i + 1) : runs[i]->policy;
    double item_width = 22 + 7 * static_cast<double>(name.size()) + 18;
    if (lx + item_width > kPlotRight && lx > kPlotLeft) {
      lx = kPlotLeft;
      ly += 16;
    }
    const char* colour = kPalette[i % std::size(kPalette)];
    svg += Printf("<line x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\" stroke=\"%s\" stroke-width=\"3\"/>\n",
                  Num(lx).c_str(), Num(ly - 4).c_str(), Num(lx + 18).c_str(), Num(ly - 4).c_str(), colour);
    svg += Printf("<text x=\"%s\" y=\"%s\">", Num(lx + 22).c_str(), Num(ly).c_str()) + XmlEscape(name) +
           "</text>\n";
    lx += item_width;
  }

  // Panels: title, vertical grid shared by both, horizontal grid with labels.
  auto panel = [&](double top, double height, const std::string& label) {
    svg += Printf("<text x=\"%s\" y=\"%s\" font-weight=\"bold\">", Num(kPlotLeft).c_str(), Num(top - 8).c_str()) +
           XmlEscape(label) + "</text>\n";
    for (int i = 0;; ++i) {
      double v = i * x_step;
      if (v > span_units * (1 + 1e-9)) break;
      double x = kPlotLeft + plot_width * v / span_units;
      svg += Printf("<line x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\" stroke=\"#dddddd\"/>\n", Num(x).c_str(),
                    Num(top).c_str(), Num(x).c_str(), Num(top + height).c_str());
    }
  };
  panel(kUtilTop, kUtilHeight, "GPU utilisation (%)");
  for (int pct = 0; pct <= 100; pct += 25) {
    double y = y_util(pct);
    svg += Printf("<line x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\" stroke=\"#dddddd\"/>\n", Num(kPlotLeft).c_str(),
                  Num(y).c_str(), Num(kPlotRight).c_str(), Num(y).c_str());
    svg += Printf("<text x=\"%s\" y=\"%s\" text-anchor=\"end\">%d</text>\n", Num(kPlotLeft - 6).c_str(),
                  Num(y + 4).c_str(), pct);
  }
  panel(kPendingTop, kPendingHeight, "pending jobs");
  for (int i = 0;; ++i) {
    double v = i * pending_step;
    if (v > pending_top * (1 + 1e-9)) break;
    double y = y_pending(v);
    svg += Printf("<line x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\" stroke=\"#dddddd\"/>\n", Num(kPlotLeft).c_str(),
                  Num(y).c_str(), Num(kPlotRight).c_str(), Num(y).c_str());
    svg += Printf("<text x=\"%s\" y=\"%s\" text-anchor=\"end\">%s</text>\n", Num(kPlotLeft - 6).c_str(),
                  Num(y + 4).c_str(), GroupThousands(Printf("%.0f", v)).c_str());
  }
  // Time labels under the bottom panel only; the top panel shares the axis.
  const double axis_y = kPendingTop + kPendingHeight;
  for (int i = 0;; ++i) {
    double v = i * x_step;
    if (v > span_units * (1 + 1e-9)) break;
    double x = kPlotLeft + plot_width * v / span_units;
    svg += Printf("<line x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\" stroke=\"#333333\"/>\n", Num(x).c_str(),
                  Num(axis_y).c_str(), Num(x).c_str(), Num(axis_y + 4).c_str());
    svg += Printf("<text x=\"%s\" y=\"%s\" text-anchor=\"middle\">%g</text>\n", Num(x).c_str(),
                  Num(axis_y + 16).c_str(), v);
  }
  svg += Printf("<text x=\"%s\" y=\"%s\" text-anchor=\"middle\">time since start (%s)</text>\n",
                Num(kPlotLeft + plot_width / 2).c_str(), Num(axis_y + 40).c_str(), in_days ? "days" : "hours");

  // Frames after the grid so that grid lines do not paint over them.
  for (auto [top, height] : {std::pair{kUtilTop, kUtilHeight}, std::pair{kPendingTop, kPendingHeight}}) {
    svg += Printf("<rect x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\" fill=\"none\" stroke=\"#333333\"/>\n",
                  Num(kPlotLeft).c_str(), Num(top).c_str(), Num(plot_width).c_str(), Num(height).c_str());
  }
  // One polyline per run and panel.
  for (size_t i = 0; i < runs.size(); ++i) {
    const char* colour = kPalette[i % std::size(kPalette)];
    std::string util_pts, pending_pts;
    for (const PlotPoint& p : points[i]) {
      if (!util_pts.empty()) util_pts += ' ';
      if (!pending_pts.empty()) pending_pts += ' ';
      std::string x = Num(x_of(p.t_ms));
      util_pts += x + "," + Num(y_util(p.util_pct));
      pending_pts += x + "," + Num(y_pending(p.pending));
    }
    for (const std::string* pts : {&util_pts, &pending_pts}) {
      svg += Printf("<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" stroke-linejoin=\"round\" points=\"",
                    colour) +
             *pts + "\"/>\n";
    }
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace gpufleet::sim
