#include "common/read_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace gpufleet {

Result<std::string> ReadFileText(const std::string& path) {
  if (path.empty()) return Status::InvalidArgument("no file named (an empty path)");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return Status::NotFound(path + ": no such file");
    return Status::Unavailable(path + ": cannot read it (" + std::strerror(err) + ")");
  }
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd);
    return Status::InvalidArgument(path + ": is a directory, not a file");
  }
  std::string out;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      return Status::Unavailable(path + ": cannot read it (" + std::strerror(err) + ")");
    }
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

bool SameFile(const std::string& output, const std::string& input) {
  if (output.empty() || input.empty()) return false;
  struct stat a {}, b {};
  if (::stat(output.c_str(), &a) == 0 && ::stat(input.c_str(), &b) == 0) {
    return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
  }
  std::error_code e1, e2;
  const auto x = std::filesystem::weakly_canonical(output, e1), y = std::filesystem::weakly_canonical(input, e2);
  return e1 || e2 ? output == input : x == y;
}

}  // namespace gpufleet
