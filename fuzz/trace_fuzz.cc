// Fuzzes the trace readers (sim/trace.h): Philly, Alibaba 2023, mapped CSV, Tiresias, JSON Lines
// and Gavel files, which users download from the internet and hand to `gpufleet sim` and
// `gpufleet plan`.
//
// Input layout: the first byte picks the options, the rest is the trace file.
//   bits 0-2  the format: auto, philly, alibaba2023, csv (the columns of generic.csv), tiresias,
//             jsonl, gavel, or auto with the columns of generic_end.csv (which selects csv);
//             '@' 'A' 'B' ... 'G' in the seeds
//   bit  5    skip_bad_rows (lower-case seed letters)
//   bit  4    max_jobs = 2
// For Gavel, a line "%%" splits the trace from its throughputs JSON; without one the reader gets
// tests/data/traces/gavel_throughputs.json.
//
// Checked: no crash; a refusal is a Status; an accepted trace is sorted by submit time, has no
// negative submit time and at most max_jobs jobs; and WriteJsonl of it reads back (as JSON Lines)
// to the same file, byte for byte, since that is how traces are tiled.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/check.h"
#include "fuzz/mem_file.h"
#include "sim/trace.h"

namespace gpufleet::fuzz {
namespace {

constexpr sim::TraceFormat kFormats[8] = {
    sim::TraceFormat::kAuto,     sim::TraceFormat::kPhilly, sim::TraceFormat::kAlibaba2023,
    sim::TraceFormat::kCsv,      sim::TraceFormat::kTiresias, sim::TraceFormat::kJsonl,
    sim::TraceFormat::kGavel,    sim::TraceFormat::kAuto};

// The column maps of tests/data/traces: generic.csv (every field, a duration) for the csv format,
// generic_end.csv (an end time) for auto with a column map.
const std::map<std::string, std::string>& DurationColumns() {
  static const auto* columns = new std::map<std::string, std::string>{
      {"id", "job"},         {"submit", "submitted_at"}, {"duration", "runtime_s"}, {"gpus", "gpu_count"},
      {"team", "owner"},     {"name", "title"},          {"priority", "prio"},      {"gpu_milli", "share"},
      {"gpu_type", "gpu"},   {"nodes", "hosts"},         {"cpus", "cores"},         {"memory", "mem"}};
  return *columns;
}

const std::map<std::string, std::string>& EndColumns() {
  static const auto* columns = new std::map<std::string, std::string>{
      {"id", "id"}, {"submit", "start"}, {"end", "finish"}, {"gpus", "gpus"}};
  return *columns;
}

struct Files {
  MemFile trace{"trace"};
  MemFile throughputs{"throughputs"};
  MemFile written{"written"};
  MemFile rewritten{"rewritten"};
};

Files& TheFiles() {
  static Files* files = new Files();
  return *files;
}

void CheckOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return;
  const uint8_t mode = data[0];
  std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  Files& files = TheFiles();

  sim::TraceOptions options;
  options.format = kFormats[mode & 0x07];
  if (options.format == sim::TraceFormat::kCsv) options.columns = DurationColumns();
  if ((mode & 0x07) == 7) options.columns = EndColumns();
  options.skip_bad_rows = (mode & 0x20) != 0;
  if (mode & 0x10) options.max_jobs = 2;
  if (options.format == sim::TraceFormat::kGavel || options.format == sim::TraceFormat::kAuto) {
    size_t split = text.find("\n%%\n");
    if (split != std::string_view::npos) {
      files.throughputs.Write(text.substr(split + 4));
      text = text.substr(0, split + 1);
      options.gavel_throughputs = files.throughputs.path();
    } else {
      options.gavel_throughputs = std::string(GPUFLEET_SOURCE_DIR) + "/tests/data/traces/gavel_throughputs.json";
    }
  }
  files.trace.Write(text);

  Result<sim::Trace> trace = sim::ReadTrace(files.trace.path(), options);
  if (!trace.ok()) {
    CHECK(!trace.status().message().empty()) << trace.status().ToString();
    return;
  }
  const std::vector<sim::TraceJob>& jobs = trace->jobs;
  if (options.max_jobs > 0) CHECK(jobs.size() <= options.max_jobs) << jobs.size();
  for (size_t i = 0; i < jobs.size(); ++i) {
    CHECK(jobs[i].spec.submit.millis() >= 0) << "job " << jobs[i].id << " submitted at "
                                             << jobs[i].spec.submit.millis() << " ms";
    if (i > 0) CHECK(jobs[i - 1].spec.submit <= jobs[i].spec.submit) << "not sorted at job " << jobs[i].id;
  }

  Status written = sim::WriteJsonl(files.written.path(), jobs);
  CHECK(written.ok()) << written.ToString();
  sim::TraceOptions jsonl;
  jsonl.format = sim::TraceFormat::kJsonl;
  Result<sim::Trace> again = sim::ReadTrace(files.written.path(), jsonl);
  const std::string first = files.written.Read();
  CHECK(again.ok()) << "WriteJsonl's output does not read back: " << again.status().ToString() << "\n"
                    << first;
  CHECK(again->jobs.size() == jobs.size()) << again->jobs.size() << " of " << jobs.size() << " jobs read back";
  Status rewritten = sim::WriteJsonl(files.rewritten.path(), again->jobs);
  CHECK(rewritten.ok()) << rewritten.ToString();
  const std::string second = files.rewritten.Read();
  CHECK(first == second) << "the JSON Lines round trip changed the trace\n  first:\n"
                         << first << "  second:\n" << second;
}

}  // namespace
}  // namespace gpufleet::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gpufleet::fuzz::CheckOneInput(data, size);
  return 0;
}
