// Prometheus text exposition (format 0.0.4) and the two instruments gpufleet keeps between
// scrapes: a histogram and a labelled counter.
//
// Most series are not kept at all: the controller and the agent build them at scrape time from
// the state they already hold (a gauge of running jobs is a count over the jobs), which keeps
// them exact and costs nothing between scrapes. Only what happens between scrapes (a scheduling
// pass took 3 ms; a request was answered 404) is recorded, in a Histogram or a CounterVec.
//
//   Exposition e;
//   e.Family("gpufleet_queue_length", "gauge", "Jobs waiting to start.");
//   e.Sample({}, 12);
//   e.Family("gpufleet_jobs", "gauge", "Unfinished jobs by state and team.");
//   e.Sample({{"state", "running"}, {"team", "vision"}}, 3);
//   std::string text = e.Text();
//
// Names follow Prometheus' rules ([a-zA-Z_:][a-zA-Z0-9_:]*); label values are escaped (\\, \",
// \n). A family is written once with its HELP and TYPE, then its samples; Sample before any
// Family, or a second Family of a name already written, is a programming error (CHECK).
//
// Thread-safety: Exposition is a plain value for one thread; Histogram and CounterVec may be
// recorded from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/mutex.h"

namespace gpufleet::obs {

using Labels = std::vector<std::pair<std::string, std::string>>;

class Exposition {
 public:
  // type: "gauge", "counter", "histogram" or "untyped".
  void Family(std::string_view name, std::string_view type, std::string_view help);
  // A sample of the current family; `suffix` for histogram parts ("_bucket", "_sum", "_count").
  // Labels with an empty value are left out, as Prometheus treats them as absent.
  void Sample(const Labels& labels, double value, std::string_view suffix = {});
  // The same with the labels rendered once by RenderLabels ("{a=\"1\"}" or ""), for series
  // that several families share.
  void SampleRendered(std::string_view rendered_labels, double value);
  static std::string RenderLabels(const Labels& labels);
  const std::string& Text() const { return out_; }

  static bool ValidName(std::string_view name);
  static bool ValidLabelName(std::string_view name);
  static std::string EscapeLabelValue(std::string_view v);
  static std::string FormatValue(double v);

 private:
  std::string out_;
  std::string family_;
  std::set<std::string, std::less<>> written_;
};

// A histogram of non-negative values (seconds, for the latency histograms) with fixed upper
// bounds. Record is O(log buckets) under a mutex; Write emits _bucket (cumulative, with +Inf),
// _sum and _count as one family.
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  // 0.5 ms .. 10 s: the latency buckets of the controller's histograms.
  static std::vector<double> LatencyBuckets();
  void Record(double value);
  void Write(Exposition& e, std::string_view name, std::string_view help) const;

  struct Snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> counts;  // per bucket, not cumulative; one more than bounds (+Inf)
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot Read() const;

 private:
  mutable Mutex mu_;
  std::vector<double> bounds_;  // set in the constructor and not changed after: read without mu_
  std::vector<uint64_t> counts_ GF_GUARDED_BY(mu_);
  double sum_ GF_GUARDED_BY(mu_) = 0;
  uint64_t count_ GF_GUARDED_BY(mu_) = 0;
};

// Counters keyed by the values of fixed label names ({route, method, code} -> n).
class CounterVec {
 public:
  explicit CounterVec(std::vector<std::string> label_names);
  // `values` in the order of the label names.
  void Add(const std::vector<std::string>& values, double n = 1);
  double Value(const std::vector<std::string>& values) const;
  void Write(Exposition& e, std::string_view name, std::string_view help) const;

 private:
  mutable Mutex mu_;
  std::vector<std::string> names_;  // set in the constructor and not changed after: read without mu_
  std::map<std::vector<std::string>, double> values_ GF_GUARDED_BY(mu_);
};

}  // namespace gpufleet::obs
