#include "common/exec_child.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstring>

namespace gpufleet::exec_child {

void ResetDispositions() {
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &dfl, nullptr);  // glibc's own: EINVAL
  }
}

void ResetSignals() {
  ResetDispositions();
  sigset_t empty;
  sigemptyset(&empty);
  sigprocmask(SIG_SETMASK, &empty, nullptr);
}

void CloseRange(int lo, int hi) {
  if (lo > hi) return;
  if (close_range(static_cast<unsigned>(lo), static_cast<unsigned>(hi), 0) < 0) {
    for (int fd = lo; fd <= hi && fd < 65536; ++fd) close(fd);
  }
}

int KeepOnlyStdioAndReport(int report_fd) {
  if (report_fd != 3) {
    if (dup2(report_fd, 3) < 0) return -1;  // dup2 clears FD_CLOEXEC: set again below
    report_fd = 3;
  }
  if (fcntl(report_fd, F_SETFD, FD_CLOEXEC) < 0) return -1;
  CloseRange(4, 0x7fffffff);
  return report_fd;
}

}  // namespace gpufleet::exec_child
