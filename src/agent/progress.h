// Progress reports for the stalled-job watchdog (docs/observability.md).
//
// The agent gives every part a file to write its progress to, named by GPUFLEET_PROGRESS. The
// job overwrites or appends a line whenever it finishes a step; the file's modification time is
// the time of the last report, and its last line may carry the step and the loss, either as
//     step=1200 loss=0.4312          (key=value words; other keys are ignored)
// or as a JSON object
//     {"step": 1200, "loss": 0.4312}
// or as a bare step number. A line the agent cannot read still counts as progress (the time).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/time.h"

namespace gpufleet::agent {

struct Progress {
  std::optional<int64_t> step;
  std::optional<double> loss;
};

// The step and loss in the last non-blank line of `text`.
Progress ParseProgress(std::string_view text);

struct ProgressFile {
  Time written;  // modification time
  Progress progress;
};
// The file's modification time and what its last line says; nullopt when it does not exist or
// is empty. Reads at most the last 4 KiB.
std::optional<ProgressFile> ReadProgressFile(const std::string& path);

// The modification time of a file that is not empty (a part's log), or nullopt.
std::optional<Time> LastWritten(const std::string& path);

}  // namespace gpufleet::agent
