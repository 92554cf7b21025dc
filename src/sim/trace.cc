#include "sim/trace.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <string_view>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <utility>

#include <nlohmann/json.hpp>

#include "common/iso_time.h"
#include "common/nesting.h"
#include "common/strings.h"
#include "model/csv.h"

// Design notes.
// - Every CSV-shaped format (Philly, Tiresias, generic CSV) goes through one column-mapped reader;
//   Philly and Tiresias are presets of its column map. Alibaba 2023 has its own row rules (CPU-only
//   pods, never-scheduled pods, QoS classes) and its own converter.
// - Parsing is by hand (no regex, no locale, no timegm): the full Philly trace has 82k rows and
//   must load in a few tens of milliseconds.
// - A bad row is reported as "FILE:LINE: field: what is wrong, got 'value'" where LINE is the
//   physical line on which the row starts (the header is line 1).

namespace gpufleet::sim {
namespace {

constexpr size_t kMaxRowWarnings = 5;
constexpr int64_t kMaxGpus = 4096;
// Seconds beyond this (about 31,700 years) are rejected so that milliseconds never overflow.
constexpr int64_t kMaxAbsSeconds = 1'000'000'000'000;

// ---------------------------------------------------------------------------------------------
// Numbers and times.

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Seconds as written in a trace ("66", "66.0", "-3.25", "1.5e3") -> milliseconds. Digits below
// a millisecond are dropped. Plain decimals are converted exactly, without going through double.
std::optional<int64_t> ParseSecondsToMillis(std::string_view s) {
  s = Trim(s);
  if (s.empty()) return std::nullopt;
  if (s.find_first_of("eE") != std::string_view::npos) {
    double v = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || ptr != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
    if (std::fabs(v) > static_cast<double>(kMaxAbsSeconds)) return std::nullopt;
    return static_cast<int64_t>(std::trunc(v * 1000.0));
  }
  size_t i = 0;
  bool negative = false;
  if (s[i] == '+' || s[i] == '-') {
    negative = s[i] == '-';
    ++i;
  }
  int64_t whole = 0;
  size_t whole_digits = 0;
  while (i < s.size() && IsDigit(s[i])) {
    whole = whole * 10 + (s[i] - '0');
    if (whole > kMaxAbsSeconds) return std::nullopt;
    ++i;
    ++whole_digits;
  }
  int64_t frac_ms = 0;
  size_t frac_digits = 0;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && IsDigit(s[i])) {
      if (frac_digits < 3) frac_ms = frac_ms * 10 + (s[i] - '0');
      ++frac_digits;
      ++i;
    }
  }
  if (i != s.size() || whole_digits + frac_digits == 0) return std::nullopt;
  for (size_t k = std::min<size_t>(frac_digits, 3); k < 3; ++k) frac_ms *= 10;
  int64_t ms = whole * 1000 + frac_ms;
  return negative ? -ms : ms;
}

// A count ("4", or "4.0" as some exporters write integers).
std::optional<int64_t> ParseCount(std::string_view s) {
  s = Trim(s);
  size_t dot = s.find('.');
  if (dot != std::string_view::npos) {
    if (dot == 0 || s.find_first_not_of('0', dot + 1) != std::string_view::npos) return std::nullopt;
    s = s.substr(0, dot);
  }
  return ParseInt(s);
}

// What is wrong with a time value that did not parse.
const char* TimeProblem(std::string_view s) {
  return LooksLikeIsoDate(Trim(s)) ? "not a valid date and time (YYYY-MM-DD[ HH:MM[:SS[.fff]]][Z|+HH:MM])"
                                   : "expected seconds or a datetime like 2017-10-09 07:01:55";
}

// A time value: seconds since the epoch, or an ISO-8601 datetime; decided per value.
std::optional<Time> ParseTimeValue(std::string_view s) {
  s = Trim(s);
  if (LooksLikeIsoDate(s)) return ParseIsoTime(s);
  auto ms = ParseSecondsToMillis(s);
  if (!ms) return std::nullopt;
  return Time::FromMillis(*ms);
}

// "V100M16|V100M32" -> {"V100M16", "V100M32"}. Names are kept as written; repeats are dropped
// (the Alibaba trace has "V100M16|V100M32|V100M32") because the list is an any-of set.
std::vector<std::string> ParseModelList(std::string_view s) {
  std::vector<std::string> out;
  for (const std::string& part : Split(Trim(s), '|')) {
    std::string name(Trim(part));
    if (name.empty() || std::find(out.begin(), out.end(), name) != out.end()) continue;
    out.push_back(std::move(name));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Errors.

// Where a row sits, for messages.
struct RowContext {
  const std::string& path;
  int64_t line;

  Status Bad(std::string_view field, std::string_view what, std::string_view value) const {
    std::string msg = path + ":" + std::to_string(line) + ": ";
    msg.append(field);
    msg += ": ";
    msg.append(what);
    msg += ", got '";
    // A value of megabytes (a field that swallowed the rest of a file) is shown by its start.
    constexpr size_t kShown = 200;
    if (value.size() <= kShown) {
      msg.append(value);
      msg += "'";
    } else {
      size_t cut = kShown;
      while (cut > 0 && (static_cast<unsigned char>(value[cut]) & 0xC0) == 0x80) --cut;  // (whole UTF-8 characters)
      msg.append(value.substr(0, cut));
      msg += "...' (" + std::to_string(value.size()) + " bytes)";
    }
    return Status::InvalidArgument(std::move(msg));
  }
  Status BadNoValue(std::string_view field, std::string_view what) const {
    std::string msg(field);
    msg += ": ";
    msg.append(what);
    return Message(msg);
  }
  Status Message(std::string_view what) const {
    return Status::InvalidArgument(path + ":" + std::to_string(line) + ": " + std::string(what));
  }
};

// ---------------------------------------------------------------------------------------------
// Time checks every reader makes.

constexpr const char* kNegativeTime =
    "must not be negative (times are seconds since the epoch or since the trace's start, or datetimes "
    "from 1970 on)";

enum class TimeForm { kUnset, kSeconds, kDatetime };

const char* TimeFormName(TimeForm f) { return f == TimeForm::kDatetime ? "datetimes" : "seconds"; }

TimeForm FormOfText(std::string_view text) {
  return LooksLikeIsoDate(Trim(text)) ? TimeForm::kDatetime : TimeForm::kSeconds;
}

// One trace gives its times in one form: seconds or datetimes. A datetime among second offsets
// (or the reverse) would put its job decades away from the others and stretch the run by orders
// of magnitude, so it is an error. The form is set by the first accepted row.
class TimeForms {
 public:
  void StartRow() { row_form_ = TimeForm::kUnset; }
  Status Check(const RowContext& ctx, std::string_view field, std::string_view text, TimeForm form) {
    if (form_ != TimeForm::kUnset && form != form_) {
      if (row_form_ == TimeForm::kUnset) ++other_form_rows_;  // (counted once a row)
      row_form_ = form;
      return ctx.Bad(field,
                     std::string(form == TimeForm::kDatetime ? "a datetime" : "a time in seconds") +
                         " in a trace that gives its times as " + TimeFormName(form_) + " (line " +
                         std::to_string(line_) + ": '" + example_ + "'); use one form throughout",
                     text);
    }
    if (row_form_ == TimeForm::kUnset) {
      row_form_ = form;
      row_field_.assign(field);
      row_example_.assign(Trim(text));
    } else if (form != row_form_) {
      // Two forms in one row (seconds for the submit time, a datetime for the end): the job
      // would run for decades.
      return ctx.Bad(field,
                     std::string(form == TimeForm::kDatetime ? "a datetime" : "a time in seconds") + " in a row whose " +
                         row_field_ + " is " + (row_form_ == TimeForm::kDatetime ? "a datetime" : "a time in seconds") +
                         " ('" + row_example_ + "'); use one form throughout",
                     text);
    }
    return Status::Ok();
  }
  // The form the accepted rows set (kUnset before the first).
  TimeForm form() const { return form_; }
  // The row was accepted: the first such row sets the trace's form.
  void Accept(int64_t line) {
    if (form_ == TimeForm::kUnset && row_form_ != TimeForm::kUnset) {
      form_ = row_form_;
      line_ = line;
      example_ = row_example_;
    }
    if (form_ != TimeForm::kUnset) ++accepted_rows_;
  }
  // When bad rows are skipped: an error when more rows were skipped for giving their times in the
  // other form than were read in the trace's, which the first good row set (a stray datetime at
  // the top of a trace of seconds would otherwise leave one job and skip the rest).
  Status CheckSkipped(const std::string& path) const {
    if (other_form_rows_ <= accepted_rows_) return Status::Ok();
    const TimeForm other = form_ == TimeForm::kDatetime ? TimeForm::kSeconds : TimeForm::kDatetime;
    return Status::InvalidArgument(
        path + ":" + std::to_string(line_) + ": this row set the trace's times as " + TimeFormName(form_) + " ('" +
        example_ + "'), but " + std::to_string(other_form_rows_) + " row(s) after it give theirs as " +
        TimeFormName(other) + " and would be skipped, more than the " + std::to_string(accepted_rows_) +
        " read: fix or remove line " + std::to_string(line_) + " (one form throughout)");
  }

 private:
  TimeForm form_ = TimeForm::kUnset;
  int64_t line_ = 0;
  std::string example_;
  TimeForm row_form_ = TimeForm::kUnset;
  std::string row_example_;
  std::string row_field_;
  int64_t accepted_rows_ = 0;    // rows read once the form was set (the first included)
  int64_t other_form_rows_ = 0;  // rows refused for giving a time in the other form
};

// Collects a reader's jobs: keeps ids unique, and counts bad rows when skipping or turns the first
// into the read's error. Ids that the reader made from row numbers are unique by construction and
// are not checked (that check would cost a third of the time on the 82k-row Philly trace).
class JobSink {
 public:
  // `expected_rows` is an upper bound used to reserve space (TraceJob is large; regrowing costs).
  // With `compact`, jobs go there instead of the trace's vector.
  JobSink(TraceFormat format, bool skip, bool check_ids, size_t expected_rows, CompactTrace* compact)
      : skip_(skip), check_ids_(check_ids), compact_(compact) {
    trace_.format = format;
    if (compact_) {
      compact_->Reserve(expected_rows);
    } else {
      trace_.jobs.reserve(expected_rows);
    }
  }

  // Adds a converted job; a repeated id is a bad row.
  Status AddJob(const RowContext& ctx, TraceJob&& job) {
    if (check_ids_) {
      auto [it, inserted] = first_line_of_id_.emplace(job.id, ctx.line);
      if (!inserted) return Add(ctx.Bad("id", "repeats the id of line " + std::to_string(it->second), job.id));
    }
    if (compact_) {
      compact_->Add(job);
    } else {
      trace_.jobs.push_back(std::move(job));
    }
    return Status::Ok();
  }

  Status Add(const Status& row_error) {
    if (!skip_) return row_error;
    ++trace_.bad_rows_skipped;
    if (trace_.warnings.size() < kMaxRowWarnings) trace_.warnings.push_back(row_error.message());
    return Status::Ok();
  }
  Trace Finish() && {
    int64_t hidden = trace_.bad_rows_skipped - static_cast<int64_t>(kMaxRowWarnings);
    if (hidden > 0) trace_.warnings.push_back("... and " + std::to_string(hidden) + " more bad rows");
    return std::move(trace_);
  }

 private:
  bool skip_;
  bool check_ids_;
  CompactTrace* compact_;
  Trace trace_;
  std::unordered_map<std::string, int64_t> first_line_of_id_;
};

// The shape rule shared by every reader: `gpus` total as one part, unless a gang shape is given.
Status CheckGpus(const RowContext& ctx, std::string_view field, std::string_view text, int64_t gpus) {
  if (gpus <= 0) return ctx.Bad(field, "must be a positive number of GPUs", text);
  if (gpus > kMaxGpus) return ctx.Bad(field, "must be at most 4096 GPUs", text);
  return Status::Ok();
}

// Every produced job passes JobSpec::Validate(); a failure is a bad row.
Status ValidateJob(const RowContext& ctx, const model::JobSpec& spec) {
  Status s = spec.Validate();
  if (s.ok()) return s;
  return ctx.BadNoValue("job", s.message());
}

// ---------------------------------------------------------------------------------------------
// CSV records come from model::CsvReader (model/csv.h) with unquoted fields trimmed, as
// hand-edited traces write "a, b".

using model::CsvReader;

// ---------------------------------------------------------------------------------------------
// Formats and their headers.

constexpr const char* kFields[] = {"id",       "submit",    "duration", "end",   "gpus",
                                   "team",     "name",      "priority", "gpu_milli",
                                   "gpu_type", "nodes",     "cpus",     "memory"};

std::string FieldList() {
  std::string out;
  for (const char* f : kFields) {
    if (!out.empty()) out += ", ";
    out += f;
  }
  return out;
}

const std::vector<std::string> kPhillyColumns = {"timestamp", "duration", "num_gpus", "gpu_time",
                                                 "cluster"};
const std::vector<std::string> kTiresiasColumns = {"job_id",     "num_gpu",  "submit_time", "iterations",
                                                   "model_name", "duration", "interval"};
const std::vector<std::string> kAlibabaColumns = {
    "name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec",
    "qos",  "pod_phase", "creation_time", "deletion_time", "scheduled_time"};

std::map<std::string, std::string> PhillyMap() {
  return {{"submit", "timestamp"}, {"duration", "duration"}, {"gpus", "num_gpus"}, {"team", "cluster"}};
}
std::map<std::string, std::string> TiresiasMap() {
  return {{"id", "job_id"},
          {"submit", "submit_time"},
          {"duration", "duration"},
          {"gpus", "num_gpu"},
          {"name", "model_name"}};
}

bool HasColumns(const std::vector<std::string>& header, const std::vector<std::string>& wanted) {
  for (const auto& w : wanted) {
    if (std::find(header.begin(), header.end(), w) == header.end()) return false;
  }
  return true;
}

std::string Unsupported(const std::string& path, std::string_view first_line) {
  std::string shown(first_line.substr(0, 120));
  return path + ": cannot tell the trace format from its first line '" + shown +
         "'. Supported formats: philly (header " + Join(kPhillyColumns, ",") +
         "), alibaba2023 (header " + Join(kAlibabaColumns, ",") + "), tiresias (header " +
         Join(kTiresiasColumns, ",") +
         "), jsonl (one JSON job object per line), gavel (Gavel's tab-separated job traces), csv (any "
         "header, with a column map). "
         "Name the format with --format, or map a CSV's columns with --columns "
         "field=column,... (fields: " +
         FieldList() + ")";
}

// ---------------------------------------------------------------------------------------------
// The column-mapped CSV reader (generic CSV, Philly, Tiresias).

struct Column {
  int index = -1;
  std::string name;  // the CSV column's name, used in messages
  bool present() const { return index >= 0; }
};

struct ColumnPlan {
  Column id, submit, duration, end, gpus, team, name, priority, gpu_milli, gpu_type, nodes, cpus, memory;
};

Result<ColumnPlan> PlanColumns(const std::string& path, const std::vector<std::string>& header,
                               const std::map<std::string, std::string>& columns) {
  ColumnPlan plan;
  const std::map<std::string, Column*> slots = {
      {"id", &plan.id},       {"submit", &plan.submit},       {"duration", &plan.duration},
      {"end", &plan.end},     {"gpus", &plan.gpus},           {"team", &plan.team},
      {"name", &plan.name},   {"priority", &plan.priority},   {"gpu_milli", &plan.gpu_milli},
      {"gpu_type", &plan.gpu_type}, {"nodes", &plan.nodes},   {"cpus", &plan.cpus},
      {"memory", &plan.memory}};
  for (const auto& [field, column] : columns) {
    auto slot = slots.find(field);
    if (slot == slots.end()) {
      return Status::InvalidArgument("unknown trace field '" + field + "' in the column map; fields are: " +
                                     FieldList());
    }
    auto it = std::find(header.begin(), header.end(), column);
    if (it == header.end()) {
      return Status::InvalidArgument(path + ":1: column '" + column + "' (mapped to " + field +
                                     ") is not in the header; columns are: " + Join(header, ", "));
    }
    // A mapped column that the header names twice: which one is meant cannot be told.
    if (const auto second = std::find(it + 1, header.end(), column); second != header.end()) {
      return Status::InvalidArgument(path + ":1: column '" + column + "' (mapped to " + field +
                                     ") appears twice in the header (columns " + std::to_string(it - header.begin() + 1) +
                                     " and " + std::to_string(second - header.begin() + 1) + "); rename one");
    }
    slot->second->index = static_cast<int>(it - header.begin());
    slot->second->name = column;
  }
  std::vector<std::string> missing;
  if (!plan.submit.present()) missing.push_back("submit");
  if (!plan.gpus.present()) missing.push_back("gpus");
  if (!plan.duration.present() && !plan.end.present()) missing.push_back("duration (or end)");
  if (!missing.empty()) {
    return Status::InvalidArgument(path + ": the column map must name " + Join(missing, ", ") +
                                   "; fields are: " + FieldList());
  }
  if (plan.duration.present() && plan.end.present()) {
    return Status::InvalidArgument(path + ": map either duration or end, not both");
  }
  return plan;
}

Result<TraceJob> ConvertMappedRow(const RowContext& ctx, const CsvReader& row, const ColumnPlan& plan,
                                  int64_t row_number, TimeForms& forms) {
  auto text = [&](const Column& c) -> const std::string& { return row.field(static_cast<size_t>(c.index)); };
  TraceJob job;
  model::JobSpec& spec = job.spec;
  job.id = plan.id.present() ? text(plan.id) : std::to_string(row_number);
  if (job.id.empty()) return ctx.BadNoValue(plan.id.name, "must not be empty");

  const std::string& submit_text = text(plan.submit);
  auto submit = ParseTimeValue(submit_text);
  if (!submit) {
    return ctx.Bad(plan.submit.name, TimeProblem(submit_text), submit_text);
  }
  if (submit->millis() < 0) return ctx.Bad(plan.submit.name, kNegativeTime, submit_text);
  GF_RETURN_IF_ERROR(forms.Check(ctx, plan.submit.name, submit_text, FormOfText(submit_text)));
  spec.submit = *submit;

  if (plan.duration.present()) {
    const std::string& d = text(plan.duration);
    auto ms = ParseSecondsToMillis(d);
    if (!ms) {
      return ctx.Bad(plan.duration.name,
                     "expected a number of seconds (at most " + std::to_string(kMaxAbsSeconds) + ", about 31,700 years)", d);
    }
    if (*ms < 0) return ctx.Bad(plan.duration.name, "must not be negative", d);
    job.work = Duration::Millis(*ms);
  } else {
    const std::string& e = text(plan.end);
    auto end = ParseTimeValue(e);
    if (!end) return ctx.Bad(plan.end.name, TimeProblem(e), e);
    GF_RETURN_IF_ERROR(forms.Check(ctx, plan.end.name, e, FormOfText(e)));
    if (*end < spec.submit) return ctx.Bad(plan.end.name, "ends before the job was submitted", e);
    job.work = *end - spec.submit;
  }

  const std::string& g = text(plan.gpus);
  auto gpus = ParseCount(g);
  if (!gpus) return ctx.Bad(plan.gpus.name, "expected a whole number of GPUs", g);
  GF_RETURN_IF_ERROR(CheckGpus(ctx, plan.gpus.name, g, *gpus));
  int64_t nodes = 1;
  if (plan.nodes.present() && !text(plan.nodes).empty()) {
    const std::string& n = text(plan.nodes);
    auto v = ParseCount(n);
    if (!v || *v <= 0 || *v > kMaxGpus) return ctx.Bad(plan.nodes.name, "expected a positive node count", n);
    if (*gpus % *v != 0) {
      return ctx.Bad(plan.nodes.name, "must divide the job's " + std::to_string(*gpus) + " GPUs evenly", n);
    }
    nodes = *v;
  }
  spec.nodes = static_cast<int>(nodes);
  spec.gpus_per_node = static_cast<int>(*gpus / nodes);

  if (plan.team.present()) spec.team = text(plan.team);
  if (plan.name.present()) spec.name = text(plan.name);
  if (plan.priority.present() && !text(plan.priority).empty()) {
    const std::string& p = text(plan.priority);
    auto v = ParseInt(p);
    if (!v || *v < -1'000'000 || *v > 1'000'000) return ctx.Bad(plan.priority.name, "expected an integer", p);
    spec.priority = static_cast<int>(*v);
  }
  if (plan.gpu_milli.present() && !text(plan.gpu_milli).empty()) {
    const std::string& m = text(plan.gpu_milli);
    auto v = ParseCount(m);
    if (!v || *v <= 0 || *v > model::kMilliGpuPerGpu) {
      return ctx.Bad(plan.gpu_milli.name, "expected milli-GPU between 1 and 1000", m);
    }
    spec.gpu_milli = *v;
  }
  if (plan.gpu_type.present()) spec.gpu_models = ParseModelList(text(plan.gpu_type));
  if (plan.cpus.present() && !text(plan.cpus).empty()) {
    const std::string& c = text(plan.cpus);
    auto ms = ParseSecondsToMillis(c);  // cores with up to three decimals -> milli-CPU
    if (!ms || *ms < 0) return ctx.Bad(plan.cpus.name, "expected a non-negative number of cores", c);
    spec.cpu_milli = *ms;
  }
  if (plan.memory.present() && !text(plan.memory).empty()) {
    const std::string& m = text(plan.memory);
    auto v = ParseCount(m);
    if (!v || *v < 0) return ctx.Bad(plan.memory.name, "expected a non-negative whole number of MiB", m);
    spec.mem_mib = *v;
  }
  GF_RETURN_IF_ERROR(ValidateJob(ctx, spec));
  return job;
}

// What a CSV reader gets: the reader positioned after the header, and the header itself.
struct CsvInput {
  const std::string& path;
  std::string_view text;  // the whole file
  CsvReader& reader;
  const std::vector<std::string>& header;
  const TraceOptions& options;
  TraceFormat format;
  size_t expected_rows;
  CompactTrace* compact;  // where the jobs go; null: the trace's vector
};

Status CheckFieldCount(const RowContext& ctx, const CsvReader& row, size_t expected) {
  if (row.size() == expected) return Status::Ok();
  return ctx.BadNoValue("row", "expected " + std::to_string(expected) + " columns as in the header, got " +
                                   std::to_string(row.size()));
}

// One part of a trace read by ReadMappedCsvInHalves. (Aligned: two threads write two of them
// side by side.)
struct alignas(64) TracePart {
  CompactTrace jobs;
  int64_t rows = 0;
  TimeForm form = TimeForm::kUnset;
  bool clean = true;  // every record became a job (else the part was left where it failed)
};

// Reads the records left in `reader` into `part`, numbering rows from 1; stops at the first
// record that does not make a job.
void ReadPart(const std::string& path, CsvReader& reader, size_t columns, const ColumnPlan& plan,
              size_t expected_rows, TracePart& part) {
  part.jobs.Reserve(expected_rows);
  TimeForms forms;
  while (true) {
    Result<bool> more = reader.Next();
    if (!more.ok() || !*more) {
      part.clean = more.ok();
      break;
    }
    ++part.rows;
    forms.StartRow();
    RowContext ctx{path, reader.line()};
    if (reader.size() != columns) {
      part.clean = false;
      break;
    }
    auto job = ConvertMappedRow(ctx, reader, plan, part.rows, forms);
    if (!job.ok()) {
      part.clean = false;
      break;
    }
    part.jobs.Add(*job);
    forms.Accept(ctx.line);
  }
  part.form = forms.form();
}

// A large trace read in two halves at once (a thread each), when what they give together is known
// to be what one reader would: nothing is quoted (so each line end ends a record and the text
// splits after any LF), rows carry no ids or names (ids are row numbers, renumbered in the second
// half once the first half's rows are counted), neither half has a bad row, and both give their
// times in one form. Anything else returns nullopt, and the caller reads the whole text in order,
// which also gives errors, warnings and their line numbers as ever.
std::optional<Trace> ReadMappedCsvInHalves(const CsvInput& in, const ColumnPlan& plan) {
  const std::string_view text = in.text;
  if (in.compact == nullptr || plan.id.present() || plan.name.present() ||
      text.size() < in.options.split_min_bytes || text.find('"') != std::string_view::npos) {
    return std::nullopt;
  }
  const size_t lf = text.find('\n', text.size() / 2);
  if (lf == std::string_view::npos) return std::nullopt;
  const std::string_view first = text.substr(0, lf + 1), second = text.substr(lf + 1);
  // A reader drops a byte order mark at the start of its text; one in the middle of the file is
  // part of its row.
  if (second.starts_with("\xEF\xBB\xBF")) return std::nullopt;
  const size_t columns = in.header.size();
  const model::CsvOptions csv{.trim = true};
  TracePart a, b;
  auto read_first = [&] {
    CsvReader reader(first, in.path, csv);
    Result<bool> header = reader.Next();  // as the caller read it
    if (!header.ok() || !*header) {
      a.clean = false;
      return;
    }
    // Room for every row of the file: the second half's jobs are appended here without moving
    // these (the second half's own columns, about half the trace, are held until then).
    ReadPart(in.path, reader, columns, plan, in.expected_rows, a);
  };
  std::thread reader_a;
  try {
    reader_a = std::thread(read_first);
  } catch (const std::system_error&) {
    return std::nullopt;  // no thread to be had: one pass
  }
  {
    struct Joiner {  // joins at the end of this block, or on an exception out of it
      std::thread& t;
      ~Joiner() { t.join(); }
    } joiner{reader_a};
    CsvReader reader(second, in.path, csv);
    ReadPart(in.path, reader, columns, plan, in.expected_rows / 2 + 1, b);
  }
  if (!a.clean || !b.clean) return std::nullopt;
  if (a.form != TimeForm::kUnset && b.form != TimeForm::kUnset && a.form != b.form) return std::nullopt;
  *in.compact = std::move(a.jobs);
  in.compact->AppendNumbered(b.jobs, a.rows + 1);
  Trace trace;
  trace.format = in.format;
  trace.read_in_halves = true;
  return trace;
}

Result<Trace> ReadMappedCsv(const CsvInput& in, const std::map<std::string, std::string>& columns) {
  const std::string& path = in.path;
  CsvReader& reader = in.reader;
  const std::vector<std::string>& header = in.header;
  GF_ASSIGN_OR_RETURN(ColumnPlan plan, PlanColumns(path, header, columns));
  if (std::optional<Trace> halves = ReadMappedCsvInHalves(in, plan)) return std::move(*halves);
  JobSink sink(in.format, in.options.skip_bad_rows, /*check_ids=*/plan.id.present(), in.expected_rows, in.compact);
  TimeForms forms;
  int64_t row_number = 0;
  while (true) {
    GF_ASSIGN_OR_RETURN(bool more, reader.Next());
    if (!more) break;
    ++row_number;
    forms.StartRow();
    RowContext ctx{path, reader.line()};
    Status s = CheckFieldCount(ctx, reader, header.size());
    if (!s.ok()) {
      GF_RETURN_IF_ERROR(sink.Add(s));
      continue;
    }
    auto job = ConvertMappedRow(ctx, reader, plan, row_number, forms);
    if (!job.ok()) {
      GF_RETURN_IF_ERROR(sink.Add(job.status()));
      continue;
    }
    GF_RETURN_IF_ERROR(sink.AddJob(ctx, std::move(job).value()));
    forms.Accept(ctx.line);
  }
  GF_RETURN_IF_ERROR(forms.CheckSkipped(path));
  return std::move(sink).Finish();
}

// ---------------------------------------------------------------------------------------------
// Alibaba GPU 2023 pod lists.

// QoS class -> priority. Guaranteed pods are the most protected in Kubernetes and LS
// (latency-sensitive, mostly inference) is Alibaba's main online class; Burstable and BE
// (best-effort, mostly batch training) may be squeezed. Larger is more important.
std::optional<int> QosPriority(std::string_view qos) {
  if (qos == "Guaranteed") return 3;
  if (qos == "LS") return 2;
  if (qos == "Burstable") return 1;
  if (qos == "BE") return 0;
  return std::nullopt;
}

struct AlibabaColumns {
  size_t name, cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec, qos, creation, deletion, scheduled;
};

size_t IndexOf(const std::vector<std::string>& header, const std::string& column) {
  return static_cast<size_t>(std::find(header.begin(), header.end(), column) - header.begin());
}

// Returns no job for CPU-only pods, which the caller counts.
Result<std::optional<TraceJob>> ConvertAlibabaRow(const RowContext& ctx, const CsvReader& row,
                                                  const AlibabaColumns& col) {
  const std::string& num_gpu_text = row.field(col.num_gpu);
  auto num_gpu = ParseCount(num_gpu_text);
  if (!num_gpu || *num_gpu < 0) return ctx.Bad("num_gpu", "expected a whole number of GPUs", num_gpu_text);
  if (*num_gpu == 0) return std::optional<TraceJob>();
  GF_RETURN_IF_ERROR(CheckGpus(ctx, "num_gpu", num_gpu_text, *num_gpu));

  TraceJob job;
  model::JobSpec& spec = job.spec;
  job.id = row.field(col.name);
  if (job.id.empty()) return ctx.BadNoValue("name", "must not be empty");
  spec.name = job.id;
  spec.gpus_per_node = static_cast<int>(*num_gpu);
  spec.nodes = 1;

  const std::string& scheduled_text = row.field(col.scheduled);
  if (scheduled_text.empty()) {
    return ctx.BadNoValue("scheduled_time", "empty: never scheduled (the pod never ran, so it has no run time)");
  }
  const std::string& creation_text = row.field(col.creation);
  auto creation = ParseSecondsToMillis(creation_text);
  if (!creation) return ctx.Bad("creation_time", "expected a number of seconds", creation_text);
  if (*creation < 0) return ctx.Bad("creation_time", kNegativeTime, creation_text);
  auto scheduled = ParseSecondsToMillis(scheduled_text);
  if (!scheduled) return ctx.Bad("scheduled_time", "expected a number of seconds", scheduled_text);
  const std::string& deletion_text = row.field(col.deletion);
  auto deletion = ParseSecondsToMillis(deletion_text);
  if (!deletion) return ctx.Bad("deletion_time", "expected a number of seconds", deletion_text);
  if (*deletion < *scheduled) {
    return ctx.Bad("deletion_time", "is before scheduled_time " + scheduled_text, deletion_text);
  }
  spec.submit = Time::FromMillis(*creation);
  job.work = Duration::Millis(*deletion - *scheduled);

  const std::string& milli_text = row.field(col.gpu_milli);
  if (!milli_text.empty()) {
    auto milli = ParseCount(milli_text);
    if (!milli || *milli <= 0 || *milli > model::kMilliGpuPerGpu) {
      return ctx.Bad("gpu_milli", "expected milli-GPU between 1 and 1000", milli_text);
    }
    if (*milli < model::kMilliGpuPerGpu) {
      if (*num_gpu != 1) return ctx.Bad("gpu_milli", "a GPU share needs num_gpu 1", milli_text);
      spec.gpu_milli = *milli;
    }
  }
  spec.gpu_models = ParseModelList(row.field(col.gpu_spec));

  const std::string& cpu_text = row.field(col.cpu_milli);
  if (!cpu_text.empty()) {
    auto cpu = ParseCount(cpu_text);
    if (!cpu || *cpu < 0) return ctx.Bad("cpu_milli", "expected a non-negative whole number", cpu_text);
    spec.cpu_milli = *cpu;
  }
  const std::string& mem_text = row.field(col.memory_mib);
  if (!mem_text.empty()) {
    auto mem = ParseCount(mem_text);
    if (!mem || *mem < 0) return ctx.Bad("memory_mib", "expected a non-negative whole number", mem_text);
    spec.mem_mib = *mem;
  }
  const std::string& qos = row.field(col.qos);
  auto priority = QosPriority(qos);
  if (!priority) return ctx.Bad("qos", "expected Guaranteed, LS, Burstable or BE", qos);
  spec.priority = *priority;
  spec.team = ToLower(qos);

  GF_RETURN_IF_ERROR(ValidateJob(ctx, spec));
  return std::optional<TraceJob>(std::move(job));
}

Result<Trace> ReadAlibaba(const CsvInput& in) {
  const std::string& path = in.path;
  CsvReader& reader = in.reader;
  const std::vector<std::string>& header = in.header;
  std::vector<std::string> missing;
  for (const auto& c : kAlibabaColumns) {
    if (c != "pod_phase" && std::find(header.begin(), header.end(), c) == header.end()) missing.push_back(c);
  }
  if (!missing.empty()) {
    return Status::InvalidArgument(path + ":1: an Alibaba 2023 pod list needs the columns " +
                                   Join(missing, ", ") + "; the header has: " + Join(header, ", "));
  }
  AlibabaColumns col{IndexOf(header, "name"),          IndexOf(header, "cpu_milli"),
                     IndexOf(header, "memory_mib"),    IndexOf(header, "num_gpu"),
                     IndexOf(header, "gpu_milli"),     IndexOf(header, "gpu_spec"),
                     IndexOf(header, "qos"),           IndexOf(header, "creation_time"),
                     IndexOf(header, "deletion_time"), IndexOf(header, "scheduled_time")};
  JobSink sink(in.format, in.options.skip_bad_rows, /*check_ids=*/true, in.expected_rows, in.compact);
  int64_t cpu_only = 0;
  while (true) {
    GF_ASSIGN_OR_RETURN(bool more, reader.Next());
    if (!more) break;
    RowContext ctx{path, reader.line()};
    Status s = CheckFieldCount(ctx, reader, header.size());
    if (!s.ok()) {
      GF_RETURN_IF_ERROR(sink.Add(s));
      continue;
    }
    auto job = ConvertAlibabaRow(ctx, reader, col);
    if (!job.ok()) {
      GF_RETURN_IF_ERROR(sink.Add(job.status()));
      continue;
    }
    if (!job->has_value()) {
      ++cpu_only;
      continue;
    }
    GF_RETURN_IF_ERROR(sink.AddJob(ctx, std::move(**job)));
  }
  Trace trace = std::move(sink).Finish();
  if (cpu_only > 0) trace.warnings.push_back("skipped " + std::to_string(cpu_only) + " CPU-only pods");
  return trace;
}

// ---------------------------------------------------------------------------------------------
// JSON Lines (gpufleet's own job format).

using Json = nlohmann::json;

constexpr const char* kJsonKeys[] = {"id",       "name",     "team",       "priority",       "submit",
                                     "work",     "gpus",     "gpus_per_node", "nodes",       "gpu_milli",
                                     "gpu_models", "cpus",   "memory_mib", "estimate",       "checkpoint_interval",
                                     "constraints", "market"};

std::string JsonKeyList() {
  std::string out;
  for (const char* k : kJsonKeys) {
    if (!out.empty()) out += ", ";
    out += k;
  }
  return out;
}

std::string Shown(const Json& v) { return v.dump(-1, ' ', false, Json::error_handler_t::replace); }

std::optional<int64_t> JsonInt(const Json& v) {
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (std::isfinite(d) && d == std::trunc(d) && std::fabs(d) < 9e15) return static_cast<int64_t>(d);
  }
  return std::nullopt;
}

// A number of seconds, or for times also an ISO datetime string -> milliseconds.
std::optional<int64_t> JsonSecondsToMillis(const Json& v) {
  if (v.is_number_integer()) {
    auto s = JsonInt(v);
    if (!s || *s > kMaxAbsSeconds || *s < -kMaxAbsSeconds) return std::nullopt;
    return *s * 1000;
  }
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (!std::isfinite(d) || std::fabs(d) > static_cast<double>(kMaxAbsSeconds)) return std::nullopt;
    return std::llround(d * 1000.0);
  }
  return std::nullopt;
}

// Typed access to one JSONL object's optional keys; errors name the key and the line.
class JsonRow {
 public:
  JsonRow(const RowContext& ctx, const Json& obj) : ctx_(ctx), obj_(obj) {}

  bool Has(const char* key) const { return obj_.contains(key); }
  const Json& At(const char* key) const { return obj_.at(key); }

  Result<std::optional<std::string>> String(const char* key) const {
    auto it = obj_.find(key);
    if (it == obj_.end()) return std::optional<std::string>();
    if (!it->is_string()) return ctx_.Bad(key, "expected a string", Shown(*it));
    return std::optional<std::string>(it->get<std::string>());
  }
  Result<std::optional<int64_t>> Int(const char* key, int64_t lo, int64_t hi, const char* what) const {
    auto it = obj_.find(key);
    if (it == obj_.end()) return std::optional<int64_t>();
    auto v = JsonInt(*it);
    if (!v || *v < lo || *v > hi) return ctx_.Bad(key, what, Shown(*it));
    return v;
  }
  // Seconds (a number) -> milliseconds, at least `min_ms`. Times may also be ISO-8601 strings.
  Result<std::optional<int64_t>> Millis(const char* key, bool allow_iso, int64_t min_ms, const char* what) const {
    auto it = obj_.find(key);
    if (it == obj_.end()) return std::optional<int64_t>();
    std::optional<int64_t> ms;
    if (allow_iso && it->is_string()) {
      if (auto t = ParseTimeValue(it->get<std::string>())) ms = t->millis();
    } else {
      ms = JsonSecondsToMillis(*it);
    }
    if (!ms || *ms < min_ms) return ctx_.Bad(key, what, Shown(*it));
    return ms;
  }

 private:
  const RowContext& ctx_;
  const Json& obj_;
};

constexpr int64_t kNoMinimum = std::numeric_limits<int64_t>::min();

Result<TraceJob> ConvertJsonObject(const RowContext& ctx, const Json& obj, int64_t row_number, TimeForms& forms) {
  if (!obj.is_object()) return ctx.Bad("json", "expected one JSON object per line", Shown(obj));
  for (const auto& item : obj.items()) {
    const std::string& key = item.key();
    if (std::find_if(std::begin(kJsonKeys), std::end(kJsonKeys),
                     [&](const char* k) { return key == k; }) == std::end(kJsonKeys)) {
      return ctx.Message("unknown key '" + key + "' (known keys: " + JsonKeyList() + ")");
    }
  }
  JsonRow row(ctx, obj);
  TraceJob job;
  model::JobSpec& spec = job.spec;

  GF_ASSIGN_OR_RETURN(std::optional<std::string> id, row.String("id"));
  job.id = id ? *id : std::to_string(row_number);
  if (job.id.empty()) return ctx.BadNoValue("id", "must not be empty");
  GF_ASSIGN_OR_RETURN(std::optional<std::string> name, row.String("name"));
  if (name) spec.name = *name;
  GF_ASSIGN_OR_RETURN(std::optional<std::string> team, row.String("team"));
  if (team) spec.team = *team;
  GF_ASSIGN_OR_RETURN(std::optional<int64_t> priority,
                      row.Int("priority", -1'000'000, 1'000'000, "expected an integer"));
  if (priority) spec.priority = static_cast<int>(*priority);

  GF_ASSIGN_OR_RETURN(std::optional<int64_t> submit,
                      row.Millis("submit", /*allow_iso=*/true, kNoMinimum,
                                 "expected seconds since the epoch or an ISO-8601 datetime"));
  if (!submit) return ctx.BadNoValue("submit", "is required (seconds since the epoch)");
  const Json& submit_value = row.At("submit");
  const std::string submit_text = submit_value.is_string() ? submit_value.get<std::string>() : Shown(submit_value);
  if (*submit < 0) return ctx.Bad("submit", kNegativeTime, submit_text);
  // (A number in a string, "100", is seconds as the bare number is.)
  GF_RETURN_IF_ERROR(forms.Check(ctx, "submit", submit_text,
                                 submit_value.is_string() ? FormOfText(submit_text) : TimeForm::kSeconds));
  spec.submit = Time::FromMillis(*submit);
  GF_ASSIGN_OR_RETURN(std::optional<int64_t> work,
                      row.Millis("work", /*allow_iso=*/false, 0, "expected a non-negative number of seconds"));
  if (!work) return ctx.BadNoValue("work", "is required (seconds of uninterrupted run time)");
  job.work = Duration::Millis(*work);

  if (row.Has("gpus")) {
    if (row.Has("gpus_per_node") || row.Has("nodes")) {
      return ctx.BadNoValue("gpus", "give either gpus (the total) or gpus_per_node and nodes, not both");
    }
    auto gpus = JsonInt(row.At("gpus"));
    if (!gpus) return ctx.Bad("gpus", "expected a whole number of GPUs", Shown(row.At("gpus")));
    GF_RETURN_IF_ERROR(CheckGpus(ctx, "gpus", Shown(row.At("gpus")), *gpus));
    spec.gpus_per_node = static_cast<int>(*gpus);
    spec.nodes = 1;
  } else if (row.Has("gpus_per_node")) {
    GF_ASSIGN_OR_RETURN(std::optional<int64_t> per_node,
                        row.Int("gpus_per_node", 1, kMaxGpus, "expected a positive number of GPUs"));
    GF_ASSIGN_OR_RETURN(std::optional<int64_t> nodes, row.Int("nodes", 1, kMaxGpus, "expected a positive node count"));
    spec.gpus_per_node = static_cast<int>(*per_node);
    spec.nodes = nodes ? static_cast<int>(*nodes) : 1;
    if (static_cast<int64_t>(spec.gpus_per_node) * spec.nodes > kMaxGpus) {
      return ctx.BadNoValue("nodes", "the job asks for more than 4096 GPUs in all");
    }
  } else {
    return ctx.BadNoValue("gpus", "is required (or gpus_per_node and nodes)");
  }

  GF_ASSIGN_OR_RETURN(std::optional<int64_t> gpu_milli,
                      row.Int("gpu_milli", 1, model::kMilliGpuPerGpu, "expected milli-GPU between 1 and 1000"));
  if (gpu_milli) spec.gpu_milli = *gpu_milli;
  if (row.Has("gpu_models")) {
    const Json& models = row.At("gpu_models");
    if (!models.is_array()) return ctx.Bad("gpu_models", "expected a list of GPU model names", Shown(models));
    for (const Json& m : models) {
      if (!m.is_string()) return ctx.Bad("gpu_models", "expected a list of GPU model names", Shown(models));
      spec.gpu_models.push_back(m.get<std::string>());
    }
  }
  // Cores -> milli-CPU is the same scaling as seconds -> milliseconds.
  GF_ASSIGN_OR_RETURN(std::optional<int64_t> cpu_milli,
                      row.Millis("cpus", /*allow_iso=*/false, 0, "expected a non-negative number of cores"));
  if (cpu_milli) spec.cpu_milli = *cpu_milli;
  GF_ASSIGN_OR_RETURN(std::optional<int64_t> mem_mib,
                      row.Int("memory_mib", 0, int64_t{1} << 50, "expected a non-negative whole number of MiB"));
  if (mem_mib) spec.mem_mib = *mem_mib;
  GF_ASSIGN_OR_RETURN(std::optional<int64_t> estimate,
                      row.Millis("estimate", /*allow_iso=*/false, 1, "expected a positive number of seconds"));
  if (estimate) spec.duration_estimate = Duration::Millis(*estimate);
  GF_ASSIGN_OR_RETURN(std::optional<int64_t> checkpoint,
                      row.Millis("checkpoint_interval", /*allow_iso=*/false, 0,
                                 "expected a non-negative number of seconds"));
  if (checkpoint) spec.checkpoint_interval = Duration::Millis(*checkpoint);

  if (row.Has("constraints")) {
    const Json& labels = row.At("constraints");
    if (!labels.is_object()) return ctx.Bad("constraints", "expected an object of label: value", Shown(labels));
    for (const auto& [key, value] : labels.items()) {
      if (!value.is_string()) return ctx.Bad("constraints." + key, "expected a string label value", Shown(value));
      spec.constraints[key] = value.get<std::string>();
    }
  }
  GF_ASSIGN_OR_RETURN(std::optional<std::string> market, row.String("market"));
  if (market) {
    auto parsed = model::ParseMarketPreference(*market);
    if (!parsed.ok()) return ctx.Bad("market", "expected any, spot or on-demand", *market);
    spec.market = *parsed;
  }
  GF_RETURN_IF_ERROR(ValidateJob(ctx, spec));
  return job;
}

// nlohmann's "[json.exception.parse_error.101] parse error at line 1, column 8: syntax error while
// parsing value - invalid literal; last read: '"id": x'" -> "JSON syntax error while parsing value:
// invalid literal; last read: '"id": x'". The position is dropped: it counts within the parsed
// text, and the caller says where that lies in the file.
std::string CleanJsonParseError(std::string_view what) {
  if (StartsWith(what, "[json.exception.")) {
    size_t close = what.find("] ");
    if (close != std::string_view::npos) what.remove_prefix(close + 2);
  }
  if (StartsWith(what, "parse error")) {
    size_t colon = what.find(": ");
    if (colon != std::string_view::npos) what.remove_prefix(colon + 2);
  }
  std::string out(what);
  if (StartsWith(out, "syntax error")) {
    size_t dash = out.find(" - ");
    if (dash != std::string::npos) out.replace(dash, 3, ": ");
    out = "JSON " + out;
  }
  return out;
}

// `first_column` is the 1-based column of line[0] in the file's line (after spaces and a byte
// order mark), so that a syntax error names FILE:LINE:COLUMN.
Result<TraceJob> ConvertJsonLine(const RowContext& ctx, std::string_view line, size_t first_column,
                                 int64_t row_number, TimeForms& forms) {
  // nlohmann's parser and the walks after it recurse once per level: bound it per line first.
  Status depth = CheckNestingDepth(line, NestingSyntax::kJson);
  if (!depth.ok()) return ctx.BadNoValue("json", depth.message());
  try {
    return ConvertJsonObject(ctx, Json::parse(line.begin(), line.end()), row_number, forms);
  } catch (const Json::parse_error& e) {
    // e.byte is the 1-based offset in `line` of the byte the parser stopped at.
    const size_t column = first_column + (e.byte > 0 ? e.byte - 1 : 0);
    return Status::InvalidArgument(ctx.path + ":" + std::to_string(ctx.line) + ":" + std::to_string(column) +
                                   ": " + CleanJsonParseError(e.what()));
  } catch (const Json::out_of_range& e) {
    // A number beyond a double ("1e400"): nlohmann's text after its "[json.exception...]" tag.
    std::string what = e.what();
    if (size_t tag = what.find("] "); what.starts_with("[json.exception") && tag != std::string::npos) what.erase(0, tag + 2);
    return ctx.BadNoValue("json", what + " (a number too large for any field)");
  } catch (const Json::exception& e) {
    return ctx.BadNoValue("json", e.what());
  }
}

Result<Trace> ReadJsonl(const std::string& path, std::string_view data, const TraceOptions& options,
                        size_t expected_rows, CompactTrace* compact) {
  JobSink sink(TraceFormat::kJsonl, options.skip_bad_rows, /*check_ids=*/true, expected_rows, compact);
  TimeForms forms;
  int64_t line_number = 0;
  int64_t row_number = 0;
  size_t pos = 0;
  while (pos < data.size()) {
    size_t end = data.find('\n', pos);
    if (end == std::string_view::npos) end = data.size();
    size_t line_start = pos;
    std::string_view line = Trim(data.substr(pos, end - pos));
    pos = end + 1;
    ++line_number;
    if (line_number == 1 && StartsWith(line, "\xEF\xBB\xBF")) {
      line.remove_prefix(3);
      line_start += 3;  // a byte order mark takes no column
    }
    if (line.empty()) continue;
    ++row_number;
    RowContext ctx{path, line_number};
    forms.StartRow();
    const size_t first_column = static_cast<size_t>(line.data() - data.data()) - line_start + 1;
    auto job = ConvertJsonLine(ctx, line, first_column, row_number, forms);
    if (!job.ok()) {
      GF_RETURN_IF_ERROR(sink.Add(job.status()));
      continue;
    }
    GF_RETURN_IF_ERROR(sink.AddJob(ctx, std::move(job).value()));
    forms.Accept(line_number);
  }
  GF_RETURN_IF_ERROR(forms.CheckSkipped(path));
  return std::move(sink).Finish();
}

// ---------------------------------------------------------------------------------------------
// Gavel job traces (github.com/stanford-futuredata/gavel, scheduler/traces/): one job per line,
// tab-separated, no header. Current layout (10 fields):
//   job_type, command, working_directory, num_steps_arg, needs_data_dir, total_steps,
//   scale_factor, priority_weight, SLO, arrival_time
// Older traces lack working_directory (9 fields). Work is counted in steps; Gavel's throughputs
// file gives steps per second per worker type and job type, so that
//   work = total_steps / throughputs[worker]["('<job_type>', <scale_factor>)"]["null"].

Result<std::string> ReadFile(const std::string& path);

constexpr size_t kGavelFields = 10;
constexpr size_t kGavelFieldsOld = 9;  // without working_directory

// (job type, scale factor) -> steps per second on the chosen worker type.
using GavelRates = std::map<std::pair<std::string, int64_t>, double>;

// "('ResNet-18 (batch size 16)', 1)" -> {"ResNet-18 (batch size 16)", 1}.
std::optional<std::pair<std::string, int64_t>> ParseGavelKey(std::string_view key) {
  key = Trim(key);
  if (!StartsWith(key, "('") || key.size() < 6 || key.back() != ')') return std::nullopt;
  size_t close = key.rfind("', ");
  if (close == std::string_view::npos || close < 2) return std::nullopt;
  auto scale = ParseInt(Trim(key.substr(close + 3, key.size() - close - 4)));
  if (!scale) return std::nullopt;
  return std::make_pair(std::string(key.substr(2, close - 2)), *scale);
}

Result<GavelRates> LoadGavelThroughputs(const std::string& path, const std::string& worker) {
  auto read = ReadFile(path);
  if (!read.ok()) return read.status().WithContext("Gavel throughputs");
  const std::string& text = *read;
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument(path + ": not a Gavel throughputs file (invalid JSON: " + e.what() + ")");
  }
  if (!doc.is_object()) return Status::InvalidArgument(path + ": expected an object of worker types");
  auto w = doc.find(worker);
  if (w != doc.end() && !w->is_object()) {
    return Status::InvalidArgument(path + ": worker type '" + worker +
                                   "': expected an object of job types, like {\"('ResNet-50', 1)\": {\"null\": 12.5}}, got " +
                                   w->dump().substr(0, 80));
  }
  if (w == doc.end()) {
    std::vector<std::string> workers;
    for (const auto& [name, value] : doc.items()) workers.push_back(name);
    return Status::InvalidArgument(path + ": no worker type '" + worker + "' (the file has: " +
                                   Join(workers, ", ") + ")");
  }
  GavelRates rates;
  for (const auto& [key, value] : w->items()) {
    auto parsed = ParseGavelKey(key);
    if (!parsed) {
      return Status::InvalidArgument(path + ": " + worker + ": job type key '" + key +
                                     "' is not of the form ('Model', scale_factor)");
    }
    if (!value.is_object() || !value.contains("null") || !value.at("null").is_number()) {
      return Status::InvalidArgument(path + ": " + worker + ": " + key +
                                     ": expected an object with the job's own throughput under \"null\"");
    }
    rates[*parsed] = value.at("null").get<double>();
  }
  return rates;
}

Result<TraceJob> ConvertGavelRow(const RowContext& ctx, const std::vector<std::string>& f, int64_t row_number,
                                 const GavelRates& rates, const TraceOptions& options) {
  if (f.size() != kGavelFields && f.size() != kGavelFieldsOld) {
    return ctx.BadNoValue("row", "expected 10 tab-separated fields (job_type, command, working_directory, "
                                 "num_steps_arg, needs_data_dir, total_steps, scale_factor, priority_weight, "
                                 "SLO, arrival_time) or 9 without working_directory, got " +
                                     std::to_string(f.size()));
  }
  const size_t shift = f.size() == kGavelFields ? 1 : 0;  // fields after command move by one
  const std::string& job_type = f[0];
  const std::string& needs_data_dir = f[3 + shift];
  const std::string& steps_text = f[4 + shift];
  const std::string& scale_text = f[5 + shift];
  const std::string& weight_text = f[6 + shift];
  const std::string& slo_text = f[7 + shift];
  const std::string& arrival_text = f[8 + shift];

  TraceJob job;
  model::JobSpec& spec = job.spec;
  job.id = std::to_string(row_number);
  if (Trim(job_type).empty()) return ctx.BadNoValue("job_type", "must not be empty");
  spec.name = std::string(Trim(job_type));
  std::string data_dir = ToLower(Trim(needs_data_dir));
  if (data_dir != "0" && data_dir != "1" && data_dir != "true" && data_dir != "false") {
    return ctx.Bad("needs_data_dir", "expected 0 or 1", needs_data_dir);
  }
  auto steps = ParseCount(steps_text);
  if (!steps || *steps <= 0) return ctx.Bad("total_steps", "expected a positive whole number of steps", steps_text);
  auto scale = ParseCount(scale_text);
  if (!scale || *scale < 1 || *scale > kMaxGpus) {
    return ctx.Bad("scale_factor", "expected a whole number of GPUs from 1 to 4096", scale_text);
  }
  auto weight = ParseDouble(Trim(weight_text));
  if (!weight || !(*weight > 0) || !std::isfinite(*weight)) {
    return ctx.Bad("priority_weight", "expected a positive number", weight_text);
  }
  std::string_view slo = Trim(slo_text);
  if (!slo.empty() && slo != "None" && !ParseDouble(slo)) return ctx.Bad("SLO", "expected a number or None", slo_text);
  auto arrival = ParseSecondsToMillis(arrival_text);
  if (!arrival) return ctx.Bad("arrival_time", "expected a number of seconds", arrival_text);
  if (*arrival < 0) return ctx.Bad("arrival_time", kNegativeTime, arrival_text);
  spec.submit = Time::FromMillis(*arrival);
  spec.gpus_per_node = static_cast<int>(*scale);
  spec.nodes = 1;

  auto rate = rates.find({spec.name, *scale});
  if (rate == rates.end()) {
    return ctx.Bad("job_type",
                   "has no throughput for scale factor " + std::to_string(*scale) + " on worker type " +
                       options.gavel_worker + " in " + options.gavel_throughputs,
                   job_type);
  }
  if (!(rate->second > 0) || !std::isfinite(rate->second)) {
    return ctx.Bad("job_type",
                   "runs at " + std::to_string(rate->second) + " steps/s on worker type " + options.gavel_worker +
                       " (it cannot run there)",
                   job_type);
  }
  const double work_ms = static_cast<double>(*steps) / rate->second * 1000.0;
  if (work_ms > static_cast<double>(kMaxAbsSeconds) * 1000.0) {
    return ctx.Bad("total_steps", "gives a run time beyond the simulator's range", steps_text);
  }
  job.work = Duration::Millis(std::llround(work_ms));
  GF_RETURN_IF_ERROR(ValidateJob(ctx, spec));
  return job;
}

Result<Trace> ReadGavel(const std::string& path, std::string_view data, const TraceOptions& options,
                        size_t expected_rows, CompactTrace* compact) {
  if (options.gavel_throughputs.empty()) {
    return Status::InvalidArgument(path + ": a Gavel trace counts work in steps; give Gavel's throughputs file "
                                          "(--gavel-throughputs FILE.json) to turn steps into run time");
  }
  GF_ASSIGN_OR_RETURN(GavelRates rates, LoadGavelThroughputs(options.gavel_throughputs, options.gavel_worker));
  JobSink sink(TraceFormat::kGavel, options.skip_bad_rows, /*check_ids=*/false, expected_rows, compact);
  int64_t line_number = 0;
  int64_t row_number = 0;
  size_t pos = 0;
  while (pos < data.size()) {
    size_t end = data.find('\n', pos);
    if (end == std::string_view::npos) end = data.size();
    std::string_view line = data.substr(pos, end - pos);
    pos = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line_number == 1 && StartsWith(line, "\xEF\xBB\xBF")) line.remove_prefix(3);
    if (Trim(line).empty()) continue;
    ++row_number;
    RowContext ctx{path, line_number};
    auto job = ConvertGavelRow(ctx, Split(line, '\t'), row_number, rates, options);
    if (!job.ok()) {
      GF_RETURN_IF_ERROR(sink.Add(job.status()));
      continue;
    }
    GF_RETURN_IF_ERROR(sink.AddJob(ctx, std::move(job).value()));
  }
  return std::move(sink).Finish();
}

// Seconds as a JSON number: an integer when whole, else a decimal that reads back exactly.
Json SecondsJson(int64_t ms) {
  if (ms % 1000 == 0) return Json(ms / 1000);
  return Json(static_cast<double>(ms) / 1000.0);
}

// ---------------------------------------------------------------------------------------------

// Stable sort by submit time. TraceJob is large (strings, a map, a vector), so the order is found
// on (submit, position) keys and then applied in place by following the permutation's cycles:
// no second copy of the jobs, which matters for 100k-row traces.
void SortBySubmit(std::vector<TraceJob>& jobs) {
  auto by_submit = [](const TraceJob& a, const TraceJob& b) { return a.spec.submit < b.spec.submit; };
  if (std::is_sorted(jobs.begin(), jobs.end(), by_submit)) return;
  std::vector<std::pair<Time, size_t>> keys;
  keys.reserve(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) keys.emplace_back(jobs[i].spec.submit, i);
  std::sort(keys.begin(), keys.end());  // ties broken by position: stable
  // Position i of the result takes jobs[keys[i].second].
  std::vector<bool> done(jobs.size(), false);
  for (size_t start = 0; start < jobs.size(); ++start) {
    if (done[start]) continue;
    TraceJob held = std::move(jobs[start]);
    size_t i = start;
    while (true) {
      done[i] = true;
      size_t from = keys[i].second;
      if (from == start) {
        jobs[i] = std::move(held);
        break;
      }
      jobs[i] = std::move(jobs[from]);
      i = from;
    }
  }
}

Result<std::string> ReadFile(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    int err = errno;
    if (err == ENOENT) return Status::NotFound("trace file not found: " + path);
    return Status::Unavailable("cannot open trace " + path + ": " + std::strerror(err));
  }
  struct stat st {};
  if (::fstat(::fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
    std::fclose(f);
    return Status::InvalidArgument(path + " is a directory; give the trace file in it");
  }
  std::string data;
  // The size of a regular file only (a pipe or a device says nothing, or nonsense).
  if (S_ISREG(st.st_mode) && st.st_size > 0) data.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) data.append(buf, n);
  bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) return Status::Unavailable("cannot read trace " + path);
  return data;
}

std::string_view FirstNonBlankLine(std::string_view data) {
  if (StartsWith(data, "\xEF\xBB\xBF")) data.remove_prefix(3);
  size_t pos = 0;
  while (pos < data.size()) {
    size_t end = data.find('\n', pos);
    if (end == std::string_view::npos) end = data.size();
    std::string_view line = Trim(data.substr(pos, end - pos));
    if (!line.empty()) return line;
    pos = end + 1;
  }
  return {};
}

}  // namespace

Result<TraceFormat> ParseTraceFormat(const std::string& s) {
  std::string name = ToLower(Trim(s));
  if (name == "auto" || name.empty()) return TraceFormat::kAuto;
  if (name == "philly") return TraceFormat::kPhilly;
  if (name == "alibaba2023" || name == "alibaba-2023" || name == "alibaba") return TraceFormat::kAlibaba2023;
  if (name == "csv") return TraceFormat::kCsv;
  if (name == "tiresias") return TraceFormat::kTiresias;
  if (name == "jsonl" || name == "json") return TraceFormat::kJsonl;
  if (name == "gavel") return TraceFormat::kGavel;
  return Status::InvalidArgument("unknown trace format '" + s +
                                 "' (expected auto, philly, alibaba2023, csv, tiresias, jsonl or gavel)");
}

const char* TraceFormatName(TraceFormat f) {
  switch (f) {
    case TraceFormat::kAuto: return "auto";
    case TraceFormat::kPhilly: return "philly";
    case TraceFormat::kAlibaba2023: return "alibaba2023";
    case TraceFormat::kCsv: return "csv";
    case TraceFormat::kTiresias: return "tiresias";
    case TraceFormat::kJsonl: return "jsonl";
    case TraceFormat::kGavel: return "gavel";
  }
  return "?";
}

Result<std::map<std::string, std::string>> ParseColumnMap(const std::string& spec) {
  std::map<std::string, std::string> out;
  if (Trim(spec).empty()) {
    return Status::InvalidArgument("empty column map; expected field=column,... with fields: " + FieldList());
  }
  for (const std::string& part : Split(spec, ',')) {
    std::string_view pair = Trim(part);
    size_t eq = pair.find('=');
    if (eq == std::string_view::npos) {
      return Status::InvalidArgument("column map: expected field=column, got '" + std::string(pair) +
                                     "'; fields are: " + FieldList());
    }
    std::string field(Trim(pair.substr(0, eq)));
    std::string column(Trim(pair.substr(eq + 1)));
    if (std::find_if(std::begin(kFields), std::end(kFields), [&](const char* f) { return field == f; }) ==
        std::end(kFields)) {
      return Status::InvalidArgument("column map: unknown field '" + field + "'; fields are: " + FieldList());
    }
    if (column.empty()) {
      return Status::InvalidArgument("column map: field '" + field + "' has no column name, got '" +
                                     std::string(pair) + "'");
    }
    if (!out.emplace(field, column).second) {
      return Status::InvalidArgument("column map: field '" + field + "' is mapped twice");
    }
  }
  return out;
}

namespace {

// ReadTrace, its jobs into `compact` when given (the returned trace's jobs stay empty).
Result<Trace> Read(const std::string& path, const TraceOptions& options, CompactTrace* compact) {
  TraceFormat format = options.format;
  if (!options.columns.empty() && format != TraceFormat::kAuto && format != TraceFormat::kCsv) {
    return Status::InvalidArgument(path + ": a column map applies only to the csv format, not " +
                                   TraceFormatName(format));
  }
  if (format == TraceFormat::kCsv && options.columns.empty()) {
    return Status::InvalidArgument(path + ": the csv format needs a column map (--columns field=column,...; "
                                   "fields: " + FieldList() + ")");
  }
  GF_ASSIGN_OR_RETURN(std::string data, ReadFile(path));
  // At most one job per line.
  const size_t expected_rows = static_cast<size_t>(std::count(data.begin(), data.end(), '\n')) + 1;
  std::string_view first_line = FirstNonBlankLine(data);
  if (format == TraceFormat::kAuto) {
    // An explicit column map is the caller's intent and wins over header detection.
    if (!options.columns.empty()) {
      format = TraceFormat::kCsv;
    } else if (StartsWith(first_line, "{") || StartsWith(first_line, "[")) {
      format = TraceFormat::kJsonl;  // (a JSON array is refused there, saying what JSON Lines is)
    } else if (first_line.find('\t') != std::string_view::npos) {
      format = TraceFormat::kGavel;  // Gavel's traces are the only tab-separated format
    }
  }

  Result<Trace> trace = Status::Internal("no reader ran");
  if (format == TraceFormat::kJsonl) {
    trace = ReadJsonl(path, data, options, expected_rows, compact);
  } else if (format == TraceFormat::kGavel) {
    trace = ReadGavel(path, data, options, expected_rows, compact);
  } else {
    CsvReader reader(data, path, model::CsvOptions{.trim = true});
    GF_ASSIGN_OR_RETURN(bool has_header, reader.Next());
    if (!has_header) return Status::InvalidArgument(path + ": empty trace (no header line)");
    std::vector<std::string> header = reader.Fields();
    if (format == TraceFormat::kAuto) {
      if (HasColumns(header, kTiresiasColumns)) {
        format = TraceFormat::kTiresias;
      } else if (HasColumns(header, kPhillyColumns)) {
        format = TraceFormat::kPhilly;
      } else if (HasColumns(header, kAlibabaColumns)) {
        format = TraceFormat::kAlibaba2023;
      } else {
        return Status::InvalidArgument(Unsupported(path, first_line));
      }
    }
    CsvInput in{path, data, reader, header, options, format, expected_rows, compact};
    switch (format) {
      case TraceFormat::kPhilly: trace = ReadMappedCsv(in, PhillyMap()); break;
      case TraceFormat::kTiresias: trace = ReadMappedCsv(in, TiresiasMap()); break;
      case TraceFormat::kCsv: trace = ReadMappedCsv(in, options.columns); break;
      case TraceFormat::kAlibaba2023: trace = ReadAlibaba(in); break;
      case TraceFormat::kAuto:
      case TraceFormat::kJsonl:
      case TraceFormat::kGavel: break;  // handled above
    }
  }
  if (!trace.ok()) return trace.status();
  if (compact) {
    compact->SortBySubmit();
    if (options.max_jobs > 0) compact->Truncate(options.max_jobs);
    return trace;
  }
  SortBySubmit(trace->jobs);
  if (options.max_jobs > 0 && trace->jobs.size() > options.max_jobs) trace->jobs.resize(options.max_jobs);
  return trace;
}

}  // namespace

Result<Trace> ReadTrace(const std::string& path, const TraceOptions& options) {
  return Read(path, options, nullptr);
}

Result<CompactTraceRead> ReadCompactTrace(const std::string& path, const TraceOptions& options) {
  CompactTraceRead out;
  GF_ASSIGN_OR_RETURN(out.info, Read(path, options, &out.jobs));
  return out;
}

std::string TraceJsonLine(const TraceJob& job) {
  const model::JobSpec& spec = job.spec;
  nlohmann::ordered_json obj;
  obj["id"] = job.id;
  if (!spec.name.empty()) obj["name"] = spec.name;
  if (!spec.team.empty()) obj["team"] = spec.team;
  if (spec.priority != 0) obj["priority"] = spec.priority;
  obj["submit"] = SecondsJson(spec.submit.millis());
  obj["work"] = SecondsJson(job.work.millis());
  if (spec.nodes == 1) {
    obj["gpus"] = spec.gpus_per_node;
  } else {
    obj["gpus_per_node"] = spec.gpus_per_node;
    obj["nodes"] = spec.nodes;
  }
  if (spec.gpu_milli != model::kMilliGpuPerGpu) obj["gpu_milli"] = spec.gpu_milli;
  if (!spec.gpu_models.empty()) obj["gpu_models"] = spec.gpu_models;
  if (spec.cpu_milli != 0) obj["cpus"] = SecondsJson(spec.cpu_milli);
  if (spec.mem_mib != 0) obj["memory_mib"] = spec.mem_mib;
  if (spec.duration_estimate) obj["estimate"] = SecondsJson(spec.duration_estimate->millis());
  if (spec.checkpoint_interval != Duration::Zero()) {
    obj["checkpoint_interval"] = SecondsJson(spec.checkpoint_interval.millis());
  }
  if (!spec.constraints.empty()) obj["constraints"] = spec.constraints;
  if (spec.market != model::MarketPreference::kAny) obj["market"] = model::MarketPreferenceName(spec.market);
  // Invalid UTF-8 in a name is replaced, not thrown on.
  return obj.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

Status WriteJsonl(const std::string& path, const std::vector<TraceJob>& jobs) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return Status::Unavailable("cannot write " + path + ": " + std::strerror(errno));
  for (const TraceJob& job : jobs) out << TraceJsonLine(job) << '\n';
  out.flush();
  if (!out) return Status::Unavailable("cannot write " + path);
  return Status::Ok();
}

}  // namespace gpufleet::sim
