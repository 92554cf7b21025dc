#include "api/controller_list.h"

#include <algorithm>

#include "common/strings.h"

namespace gpufleet::api {

namespace {

std::string Normalized(std::string_view url) {
  std::string u(Trim(url));
  while (!u.empty() && u.back() == '/') u.pop_back();
  return u;
}

}  // namespace

ControllerList::ControllerList(std::vector<std::string> urls) : urls_(std::move(urls)), current_(urls_.front()) {}

Result<ControllerList> ControllerList::Parse(std::string_view text) {
  std::vector<std::string> urls;
  size_t start = 0;
  for (;;) {
    const size_t comma = text.find(',', start);
    std::string url = Normalized(text.substr(start, comma == std::string_view::npos ? text.npos : comma - start));
    if (!url.empty()) {
      if (!StartsWith(url, "http://") && !StartsWith(url, "https://")) {
        return Status::InvalidArgument("the controller URL '" + url +
                                       "' must start with http:// or https://, e.g. http://127.0.0.1:8470");
      }
      if (std::find(urls.begin(), urls.end(), url) == urls.end()) urls.push_back(std::move(url));
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  if (urls.empty()) {
    return Status::InvalidArgument("no controller URL in '" + std::string(text) +
                                   "': expected URL or URL1,URL2,... like http://127.0.0.1:8470");
  }
  return ControllerList(std::move(urls));
}

std::string ControllerList::Joined() const {
  std::string out;
  for (const auto& u : urls_) out += (out.empty() ? "" : ",") + u;
  return out;
}

bool ControllerList::Redirect(const std::string& from, std::string_view leader) {
  if (from != current_) return true;  // another caller moved on already: try where it went
  const std::string named = Normalized(leader);
  if (!named.empty() && named != from &&
      (StartsWith(named, "http://") || StartsWith(named, "https://"))) {
    current_ = named;
    auto it = std::find(urls_.begin(), urls_.end(), named);
    if (it != urls_.end()) cursor_ = static_cast<size_t>(it - urls_.begin());
    return true;
  }
  // The listed URL after the last listed one used (cursor_ is `from` itself when it is listed,
  // else the listed URL that named it).
  cursor_ = (cursor_ + 1) % urls_.size();
  current_ = urls_[cursor_];
  return current_ != from;
}

bool ControllerList::StartAt(std::string_view url) {
  auto it = std::find(urls_.begin(), urls_.end(), Normalized(url));
  if (it == urls_.end()) return false;
  cursor_ = static_cast<size_t>(it - urls_.begin());
  current_ = *it;
  return true;
}

}  // namespace gpufleet::api
