// A fresh directory under /tmp for one test, removed (with everything in it) when it goes.
// Header-only; for GoogleTest tests.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

#include "common/env.h"

namespace sediment {

class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "sediment_test") {
    std::string tmpl = "/tmp/" + prefix + "_XXXXXX";
    char* p = ::mkdtemp(tmpl.data());
    EXPECT_NE(p, nullptr);
    path_ = p ? p : "/tmp";
  }
  ~TempDir() { (void)Env::Default()->RemoveAll(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string Sub(const std::string& name) const { return JoinPath(path_, name); }

 private:
  std::string path_;
};

}  // namespace sediment
