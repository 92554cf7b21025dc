#include "cli/progress.h"

#include <unistd.h>

#include <cstdio>

namespace gpufleet::cli {

bool StderrIsTerminal() { return isatty(STDERR_FILENO) == 1; }

ProgressBar::ProgressBar(std::string label, bool enabled) : label_(std::move(label)), enabled_(enabled) {}

ProgressBar::~ProgressBar() { Finish(); }

void ProgressBar::Update(int64_t done, int64_t total) {
  if (!enabled_ || total <= 0) return;
  int permille = static_cast<int>(done * 1000 / total);
  if (permille == last_permille_) return;
  last_permille_ = permille;
  const int width = 30;
  int filled = permille * width / 1000;
  std::string bar(static_cast<size_t>(filled), '#');
  bar.append(static_cast<size_t>(width - filled), '.');
  std::fprintf(stderr, "\r%s [%s] %5.1f%% %lld/%lld", label_.c_str(), bar.c_str(), permille / 10.0,
               static_cast<long long>(done), static_cast<long long>(total));
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressBar::Finish() {
  if (drawn_) {
    std::fprintf(stderr, "\n");
    drawn_ = false;
  }
}

}  // namespace gpufleet::cli
