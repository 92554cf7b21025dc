// ReadFileText: a whole file a user named (a job file, a config, a table), with an error that says
// what is wrong with the path: missing, a directory, not readable.
#pragma once

#include <string>

#include "common/status.h"

namespace gpufleet {

// The bytes of `path`. Errors (the message starts with the path):
//   NotFound          "PATH: no such file"
//   InvalidArgument   "PATH: is a directory, not a file"
//   Unavailable       "PATH: cannot read it (Permission denied)" and other read errors
Result<std::string> ReadFileText(const std::string& path);

// Whether writing `output` would write over `input`: the same file when both exist (one device
// and inode: a hard link or a symbolic link to it counts, as does another spelling of the path),
// else the same path once resolved. For refusing an output that is one of a command's inputs.
bool SameFile(const std::string& output, const std::string& input);

}  // namespace gpufleet
