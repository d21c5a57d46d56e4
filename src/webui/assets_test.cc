#include "webui/assets.h"

#include <gtest/gtest.h>

#include <string>

namespace sediment::webui {
namespace {

TEST(WebuiAssets, IndexNamesEmbeddedScriptAndStyle) {
  const Asset& index = IndexHtml();
  EXPECT_EQ(index.content_type, "text/html; charset=utf-8");
  EXPECT_FALSE(index.immutable);
  int scripts = 0, styles = 0;
  for (const Asset& a : Assets()) {
    if (a.name == "index.html") continue;
    EXPECT_TRUE(a.immutable) << a.name;
    EXPECT_NE(index.body.find("/assets/" + std::string(a.name)), std::string_view::npos) << a.name;
    if (a.content_type.starts_with("text/javascript")) ++scripts;
    if (a.content_type.starts_with("text/css")) ++styles;
    EXPECT_GT(a.body.size(), 1000u) << a.name;
    EXPECT_EQ(a.etag.size(), 22u) << a.name;  // 20 hex digits in quotes
  }
  EXPECT_EQ(scripts, 1);
  EXPECT_EQ(styles, 1);
}

TEST(WebuiAssets, FindAssetByNameOnly) {
  EXPECT_EQ(FindAsset("index.html"), &IndexHtml());
  EXPECT_EQ(FindAsset("nope.js"), nullptr);
  EXPECT_EQ(FindAsset(""), nullptr);
  EXPECT_EQ(FindAsset("/index.html"), nullptr);
}

}  // namespace
}  // namespace sediment::webui
