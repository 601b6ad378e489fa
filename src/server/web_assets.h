// The dashboard's files (web/), compiled into the binary by CMake (generated/web_assets.cc)
// so `gantry server` serves its UI at / with nothing beside it.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

namespace gantry {

struct WebAsset {
  const char* path;  // "/index.html", "/vendor/uplot/uPlot.iife.min.js"
  const char* content_type;
  const char* data;
  size_t size;
};

// Every embedded file (generated).
const std::vector<WebAsset>& WebAssets();
// The file served at `path`; "/" is /index.html. Null when there is none.
const WebAsset* FindWebAsset(std::string_view path);

}  // namespace gantry
