#include "agent/progress.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/strings.h"

namespace gpufleet::agent {
namespace {

Time ModTime(const struct stat& sb) {
  return Time::FromMillis(static_cast<int64_t>(sb.st_mtim.tv_sec) * 1000 + sb.st_mtim.tv_nsec / 1'000'000);
}

}  // namespace

Progress ParseProgress(std::string_view text) {
  Progress p;
  // The last non-blank line.
  std::string line;
  std::vector<std::string> lines = Split(text, '\n');
  for (auto it = lines.rbegin(); it != lines.rend() && line.empty(); ++it) line = std::string(Trim(*it));
  if (line.empty()) return p;
  if (line.front() == '{') {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object()) {
      if (auto s = j.find("step"); s != j.end() && s->is_number_integer()) p.step = s->get<int64_t>();
      if (auto l = j.find("loss"); l != j.end() && l->is_number()) p.loss = l->get<double>();
    }
    return p;
  }
  if (auto n = ParseInt(line)) {  // a bare step number
    p.step = *n;
    return p;
  }
  for (const std::string& word : Split(line, ' ')) {
    auto eq = word.find('=');
    if (eq == std::string::npos) continue;
    std::string_view key = std::string_view(word).substr(0, eq), value = std::string_view(word).substr(eq + 1);
    if (key == "step") {
      if (auto n = ParseInt(value)) p.step = *n;
    } else if (key == "loss") {
      if (auto d = ParseDouble(value)) p.loss = *d;
    }
  }
  return p;
}

std::optional<ProgressFile> ReadProgressFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
  if (fd < 0) return std::nullopt;
  struct stat sb;
  if (::fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size == 0) {
    ::close(fd);
    return std::nullopt;
  }
  constexpr off_t kTail = 4096;
  off_t from = std::max<off_t>(0, sb.st_size - kTail);
  std::string buf(static_cast<size_t>(sb.st_size - from), '\0');
  ssize_t n = ::pread(fd, buf.data(), buf.size(), from);
  ::close(fd);
  buf.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return ProgressFile{ModTime(sb), ParseProgress(buf)};
}

std::optional<Time> LastWritten(const std::string& path) {
  struct stat sb;
  if (::stat(path.c_str(), &sb) != 0 || sb.st_size == 0) return std::nullopt;
  return ModTime(sb);
}

}  // namespace gpufleet::agent
