#include "webui/assets.h"

namespace sediment::webui {

const Asset* FindAsset(std::string_view name) {
  for (const Asset& a : Assets()) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

const Asset& IndexHtml() {
  // embed_assets.mjs refuses to generate a table without index.html.
  return *FindAsset("index.html");
}

}  // namespace sediment::webui
