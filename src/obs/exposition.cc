#include "obs/exposition.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "common/check.h"

namespace gpufleet::obs {

bool Exposition::ValidName(std::string_view name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' || (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

bool Exposition::ValidLabelName(std::string_view name) {
  return ValidName(name) && name.find(':') == std::string_view::npos && !name.starts_with("__");
}

std::string Exposition::EscapeLabelValue(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      case '\n': out += "\\n"; break;
      default: out += c;
    }
  }
  return out;
}

std::string Exposition::FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return std::to_string(static_cast<int64_t>(v));
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  // The shortest text that reads back as the same double.
  for (int precision = 6; precision < 17; ++precision) {
    char shorter[64];
    std::snprintf(shorter, sizeof shorter, "%.*g", precision, v);
    if (std::strtod(shorter, nullptr) == v) return shorter;
  }
  return buf;
}

void Exposition::Family(std::string_view name, std::string_view type, std::string_view help) {
  CHECK(ValidName(name));
  CHECK(written_.insert(std::string(name)).second);
  family_ = name;
  out_ += "# HELP ";
  out_ += name;
  out_ += ' ';
  for (char c : help) {  // HELP escapes only \ and newline
    if (c == '\\') out_ += "\\\\";
    else if (c == '\n') out_ += "\\n";
    else out_ += c;
  }
  out_ += "\n# TYPE ";
  out_ += name;
  out_ += ' ';
  out_ += type;
  out_ += '\n';
}

std::string Exposition::RenderLabels(const Labels& labels) {
  std::string out;
  bool first = true;
  for (const auto& [k, v] : labels) {
    if (v.empty()) continue;
    CHECK(ValidLabelName(k));
    out += first ? '{' : ',';
    first = false;
    out += k;
    out += "=\"";
    out += EscapeLabelValue(v);
    out += '"';
  }
  if (!first) out += '}';
  return out;
}

void Exposition::Sample(const Labels& labels, double value, std::string_view suffix) {
  CHECK(!family_.empty());
  out_ += family_;
  out_ += suffix;
  out_ += RenderLabels(labels);
  out_ += ' ';
  out_ += FormatValue(value);
  out_ += '\n';
}

void Exposition::SampleRendered(std::string_view rendered_labels, double value) {
  CHECK(!family_.empty());
  out_ += family_;
  out_ += rendered_labels;
  out_ += ' ';
  out_ += FormatValue(value);
  out_ += '\n';
}

Histogram::Histogram(std::vector<double> upper_bounds) : bounds_(std::move(upper_bounds)) {
  CHECK(std::is_sorted(bounds_.begin(), bounds_.end()));
  counts_.assign(bounds_.size() + 1, 0);
}

std::vector<double> Histogram::LatencyBuckets() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

void Histogram::Record(double value) {
  size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  MutexLock lock(mu_);
  ++counts_[i];
  sum_ += value;
  ++count_;
}

Histogram::Snapshot Histogram::Read() const {
  MutexLock lock(mu_);
  return {bounds_, counts_, sum_, count_};
}

void Histogram::Write(Exposition& e, std::string_view name, std::string_view help) const {
  Snapshot s = Read();
  e.Family(name, "histogram", help);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < s.bounds.size(); ++i) {
    cumulative += s.counts[i];
    e.Sample({{"le", Exposition::FormatValue(s.bounds[i])}}, static_cast<double>(cumulative), "_bucket");
  }
  e.Sample({{"le", "+Inf"}}, static_cast<double>(s.count), "_bucket");
  e.Sample({}, s.sum, "_sum");
  e.Sample({}, static_cast<double>(s.count), "_count");
}

CounterVec::CounterVec(std::vector<std::string> label_names) : names_(std::move(label_names)) {}

void CounterVec::Add(const std::vector<std::string>& values, double n) {
  CHECK(values.size() == names_.size());
  MutexLock lock(mu_);
  values_[values] += n;
}

double CounterVec::Value(const std::vector<std::string>& values) const {
  MutexLock lock(mu_);
  auto it = values_.find(values);
  return it == values_.end() ? 0 : it->second;
}

void CounterVec::Write(Exposition& e, std::string_view name, std::string_view help) const {
  std::map<std::vector<std::string>, double> copy;
  {
    MutexLock lock(mu_);
    copy = values_;
  }
  e.Family(name, "counter", help);
  for (const auto& [values, n] : copy) {
    Labels labels;
    for (size_t i = 0; i < names_.size(); ++i) labels.emplace_back(names_[i], values[i]);
    e.Sample(labels, n);
  }
}

}  // namespace gpufleet::obs
