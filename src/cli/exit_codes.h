// The exit codes of every gpufleet command, one contract that scripts can trust:
//
//   0  success
//   1  the command ran and failed: a runtime failure (a file could not be written, the server
//      broke or said "not found" or "conflict", the job failed, no plan met the SLO)
//   2  bad input: the command line, or a file or value the user gave (a malformed YAML, CSV or
//      trace, an unknown name, a file that does not exist); nothing was changed or written
//   3  the controller cannot be reached or refused the token (client commands); `select`: no
//      offer fits the job
//
// Thread-safety: constants and a pure function.
#pragma once

#include "common/status.h"

namespace gpufleet::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitUnreachable = 3;

// The exit code for a failure: 2 for bad input (InvalidArgument and NotFound: a malformed or
// missing file or value the user named), 1 for everything else.
inline int ExitCodeFor(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk:
      return kExitOk;
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
      return kExitUsage;
    default:
      return kExitFailed;
  }
}

}  // namespace gpufleet::cli
