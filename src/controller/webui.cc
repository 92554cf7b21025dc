#include "controller/webui.h"

#include <map>
#include <span>
#include <string_view>
#include <utility>

namespace gpufleet::controller {

namespace webui_embedded {
// Defined in the file cmake/embed_assets.cmake generates from src/controller/webui/: each file's
// name and bytes.
std::span<const std::pair<std::string_view, std::string_view>> Files();
}  // namespace webui_embedded

namespace {

std::string_view ContentType(std::string_view name) {
  static const std::pair<std::string_view, std::string_view> kTypes[] = {
      {".html", "text/html; charset=utf-8"},
      {".js", "text/javascript; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},
      {".svg", "image/svg+xml"},
      {".png", "image/png"},
      {".json", "application/json"},
      {".txt", "text/plain; charset=utf-8"},
  };
  for (const auto& [ext, type] : kTypes) {
    if (name.size() > ext.size() && name.substr(name.size() - ext.size()) == ext) return type;
  }
  return "application/octet-stream";
}

// Built once, on first use; read-only after that.
const std::map<std::string_view, WebAsset>& Assets() {
  static const auto* assets = [] {
    auto* m = new std::map<std::string_view, WebAsset>();
    for (const auto& [name, body] : webui_embedded::Files()) m->emplace(name, WebAsset{ContentType(name), body});
    return m;
  }();
  return *assets;
}

}  // namespace

const WebAsset* FindWebAsset(std::string_view path) {
  // The page's own links are absolute (/ui/app.js), so it works from "/" and "/ui/" alike.
  std::string_view name;
  if (path == "/" || path == "/ui" || path == "/ui/") {
    name = "index.html";
  } else if (path.starts_with("/ui/")) {
    name = path.substr(4);
  } else {
    return nullptr;
  }
  // The assets sit in one flat folder: a name with a '/' (or "..") is none of them.
  if (name.find('/') != std::string_view::npos) return nullptr;
  const auto& assets = Assets();
  auto it = assets.find(name);
  return it == assets.end() ? nullptr : &it->second;
}

}  // namespace gpufleet::controller
