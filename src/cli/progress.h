// A one-line progress bar on stderr, for long work. Draws only when stderr is a terminal
// (or when forced), and at most a few times a second's worth of calls, so logs stay clean.
#pragma once

#include <cstdint>
#include <string>

namespace gpufleet::cli {

class ProgressBar {
 public:
  ProgressBar(std::string label, bool enabled);
  ~ProgressBar();
  void Update(int64_t done, int64_t total);
  void Finish();

 private:
  std::string label_;
  bool enabled_;
  int last_permille_ = -1;
  bool drawn_ = false;
};

// True when stderr is a terminal.
bool StderrIsTerminal();

}  // namespace gpufleet::cli
