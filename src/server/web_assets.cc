// Looks up the dashboard's embedded files by their path.
#include "server/web_assets.h"

namespace gantry {

const WebAsset* FindWebAsset(std::string_view path) {
  if (path == "/" || path.empty()) path = "/index.html";
  for (const WebAsset& a : WebAssets()) {
    if (path == a.path) return &a;
  }
  return nullptr;
}

}  // namespace gantry
