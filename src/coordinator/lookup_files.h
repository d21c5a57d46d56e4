// The lookup files match() reads (query/lookup.h), from this node's Global: one repository's
// files (PutLookupFile, global/README.md). Every place that compiles a query of a repository
// (the query and query-job routes, the leaf's internal routes) compiles it with one of these.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "global/global.h"
#include "query/lookup.h"

namespace sediment::coordinator {

class GlobalLookupFiles final : public query::LookupFiles {
 public:
  // `global` is borrowed (null: no files); thread-safe as Global::Read is.
  GlobalLookupFiles(const Global* global, std::string repo)
      : global_(global), repo_(std::move(repo)) {}

  Result<std::string> Read(std::string_view name) const override {
    std::optional<std::string> content;
    if (global_ != nullptr) {
      global_->Read([&](const GlobalState& st) {
        auto it = st.repos.find(repo_);
        if (it == st.repos.end()) return;
        auto f = it->second.lookup_files.find(std::string(name));
        if (f != it->second.lookup_files.end()) content = f->second;
      });
    }
    if (!content) {
      return Status::NotFound("no lookup file '" + std::string(name) + "' in repository '" + repo_ +
                              "'");
    }
    return std::move(*content);
  }

 private:
  const Global* global_;
  std::string repo_;
};

}  // namespace sediment::coordinator
