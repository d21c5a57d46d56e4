// The saved searches a query calls as `$name()` (query/query.h ExpandSavedQueries), from this
// node's Global: one repository's (PutSavedSearch, global/README.md). The query and query-job
// routes expand a request's query text with one of these before anything else reads it.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "global/global.h"
#include "query/query.h"

namespace sediment::coordinator {

class GlobalSavedQueries final : public query::SavedQueries {
 public:
  // `global` is borrowed (null: no saved searches); thread-safe as Global::Read is.
  GlobalSavedQueries(const Global* global, std::string repo)
      : global_(global), repo_(std::move(repo)) {}

  std::optional<std::string> Find(std::string_view name) const override {
    std::optional<std::string> text;
    if (global_ == nullptr) return text;
    global_->Read([&](const GlobalState& st) {
      auto it = st.repos.find(repo_);
      if (it == st.repos.end()) return;
      auto s = it->second.saved_searches.find(std::string(name));
      if (s != it->second.saved_searches.end()) text = s->second.query;
    });
    return text;
  }

 private:
  const Global* global_;
  std::string repo_;
};

}  // namespace sediment::coordinator
