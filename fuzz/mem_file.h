// MemFile: an anonymous in-memory file (memfd) with a path, /proc/self/fd/N, for fuzzing readers
// whose API takes a file name. Nothing touches the disk and parallel fuzz jobs do not share it.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <string>
#include <string_view>

#include "common/check.h"

namespace gpufleet::fuzz {

class MemFile {
 public:
  explicit MemFile(const char* name) : fd_(memfd_create(name, 0)) {
    CHECK(fd_ >= 0) << "memfd_create failed";
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;
  ~MemFile() { close(fd_); }

  const std::string& path() const { return path_; }

  void Write(std::string_view data) {
    CHECK(ftruncate(fd_, 0) == 0);
    size_t done = 0;
    while (done < data.size()) {
      ssize_t n = pwrite(fd_, data.data() + done, data.size() - done, static_cast<off_t>(done));
      CHECK(n > 0) << "pwrite to a memfd failed";
      done += static_cast<size_t>(n);
    }
  }

  std::string Read() const {
    std::string out;
    char buf[4096];
    off_t at = 0;
    ssize_t n;
    while ((n = pread(fd_, buf, sizeof buf, at)) > 0) {
      out.append(buf, static_cast<size_t>(n));
      at += n;
    }
    return out;
  }

 private:
  int fd_;
  std::string path_;
};

}  // namespace gpufleet::fuzz
