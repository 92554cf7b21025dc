// The web dashboard: a single-page app (src/controller/webui/) embedded into the binary at build
// time (cmake/embed_assets.cmake), so a controller serves it with nothing installed beside it.
//
// The assets hold no data and are served without a token; the page asks the user for a token and
// sends it with every /v1 call it makes, as any other API client does (docs/dashboard.md).
//
// Thread-safety: FindWebAsset may be called from any thread; what it returns lives for the whole
// run of the program.
#pragma once

#include <string_view>

namespace gpufleet::controller {

struct WebAsset { std::string_view content_type; std::string_view body; };
// The embedded asset for a request path: "/" and "/ui/" give index.html; "/ui/app.js" etc. nullptr when none.
const WebAsset* FindWebAsset(std::string_view path);

}  // namespace gpufleet::controller
