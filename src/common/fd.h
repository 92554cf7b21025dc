// UniqueFd: owns one file descriptor and closes it once. LiftFd: moves a descriptor above the
// standard ones. Shared by the code that starts processes (the agent's launcher, the local
// provider's spawner). Plain values; a UniqueFd belongs to one thread at a time.
#pragma once

namespace gpufleet {

class UniqueFd {
 public:
  explicit UniqueFd(int fd = -1) : fd_(fd) {}
  ~UniqueFd() { Reset(); }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  int get() const { return fd_; }
  void Reset();

 private:
  int fd_;
};

// Moves `fd` to a descriptor >= 3 with FD_CLOEXEC, so that a child's dup2 onto 0..2 cannot
// clobber it and other children never inherit it. Closes the original; keeps errno of a failure.
int LiftFd(int fd);

}  // namespace gpufleet
