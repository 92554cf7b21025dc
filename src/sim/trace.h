// Trace readers: job histories from real clusters turned into gpufleet jobs for the simulator.
//
// Formats: the Microsoft Philly job list (Pollux/Sia flattening), the Alibaba GPU 2023 pod list
// (fractional GPUs, GPU-model constraints), a generic CSV whose columns are mapped by the user,
// Tiresias' example traces, Gavel's tab-separated job traces (work in steps, turned into seconds
// by Gavel's throughputs file), and JSON Lines in gpufleet's own job format. The format is
// detected from the first line when the caller does not name it.
//
// Every reader rejects a negative submit time, and a trace that mixes times in seconds with
// datetimes (one ISO time among second offsets), naming the file, line and field.
//
// Thread-safety: free functions over values; no shared state.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/time.h"
#include "model/types.h"
#include "sim/compact_trace.h"

namespace gpufleet::sim {

struct TraceJob {
  std::string id;       // the trace's own id (row number when the trace has none)
  model::JobSpec spec;  // submit time, shape, team, ...
  // How long the job runs, uninterrupted, on the trace's reference GPU. The simulator scales it
  // by GPU speed and adds rework after preemptions.
  Duration work;
};

enum class TraceFormat { kAuto, kPhilly, kAlibaba2023, kCsv, kTiresias, kJsonl, kGavel };
// Names: auto, philly, alibaba2023, csv, tiresias, jsonl, gavel (the names TraceFormatName returns).
Result<TraceFormat> ParseTraceFormat(const std::string& s);
const char* TraceFormatName(TraceFormat f);

struct TraceOptions {
  TraceFormat format = TraceFormat::kAuto;
  // For kCsv: gpufleet field -> CSV column name. Fields: id, submit, duration, end, gpus, team,
  // name, priority, gpu_milli, gpu_type, nodes, cpus, memory. Required: submit, gpus, and one of
  // duration or end. Times are seconds (int or decimal) or ISO-8601 datetimes (UTC unless an
  // offset is given), detected per value; `gpus` is the job's total, split evenly over `nodes`
  // when that is mapped; `gpu_type` is an any-of list "A|B"; `cpus` cores; `memory` MiB.
  // A map given with kAuto selects kCsv.
  std::map<std::string, std::string> columns;
  bool skip_bad_rows = false;  // count and skip bad rows instead of failing on the first
  size_t max_jobs = 0;         // 0 = all
  // A CSV trace of at least this many bytes, read compactly, is read in two halves at once when
  // the result is sure to be the same (sim/trace.cc, ReadMappedCsvInHalves); smaller ones, and
  // the rest, in one pass.
  size_t split_min_bytes = size_t{1} << 18;
  // For kGavel: Gavel's throughputs JSON ({worker type: {"('Model', scale factor)": {"null":
  // steps per second, ...}}}) and the worker type whose column gives a job's work: work =
  // total_steps / throughput of (job_type, scale_factor) alone on that worker type.
  std::string gavel_throughputs;
  std::string gavel_worker = "v100";
};

struct Trace {
  TraceFormat format = TraceFormat::kAuto;  // the format that was read
  std::vector<TraceJob> jobs;               // sorted by submit time, then by position in the file
  int64_t bad_rows_skipped = 0;
  std::vector<std::string> warnings;        // first few bad-row messages when skipping
  bool read_in_halves = false;              // read by two threads (TraceOptions::split_min_bytes)
};

// Reads a whole trace. Errors name the file and line: "philly.csv:17: duration: expected a
// number of seconds, got 'abc'". A missing file is NotFound; bad input is InvalidArgument.
// Every job asks for its total GPUs as one part (gpus_per_node = total, nodes = 1) unless the
// trace gives a gang shape (JSONL gpus_per_node/nodes, a mapped `nodes` column); the simulator
// splits jobs larger than a node. Traces without ids number their data rows from 1.
Result<Trace> ReadTrace(const std::string& path, const TraceOptions& options);

// ReadTrace with the jobs held compactly (CompactTrace), in the same order, for long replays: a
// million Philly jobs take about 40 MB so, against several hundred as TraceJobs.
struct CompactTraceRead {
  Trace info;  // format, skipped rows and warnings; its jobs vector stays empty
  CompactTrace jobs;
};
Result<CompactTraceRead> ReadCompactTrace(const std::string& path, const TraceOptions& options);

// Parses "--columns id=job,submit=submitted_at,..." into a field map; unknown fields are errors.
Result<std::map<std::string, std::string>> ParseColumnMap(const std::string& spec);

// One job as a line of gpufleet's own JSON Lines format (no newline): what kJsonl reads back.
// The one writer of the format: WriteJsonl, and `gpufleet history -o jsonl` for a live
// cluster's history, both use it.
std::string TraceJsonLine(const TraceJob& job);

// Writes jobs as JSON Lines in gpufleet's own format (one object per line, the format that
// kJsonl reads back), for tiling traces and for tests.
Status WriteJsonl(const std::string& path, const std::vector<TraceJob>& jobs);

}  // namespace gpufleet::sim
