#include "common/fd.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace gpufleet {

void UniqueFd::Reset() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

int LiftFd(int fd) {
  if (fd < 0 || fd >= 3) return fd;
  int lifted = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  int saved = errno;
  close(fd);
  errno = saved;
  return lifted;
}

}  // namespace gpufleet
