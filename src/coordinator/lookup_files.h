// The lookup files match() reads (query/lookup.h), from this node's Global: one repository's
// files (PutLookupFile, global/README.md). Every place that compiles a query of a repository
// (the query and query-job routes, the leaf's internal routes) compiles it with one of these; it
// also carries the node's GeoIP databases (query/geo.h) to ipLocation(), asn() and worldMap().
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "global/global.h"
#include "query/lookup.h"

namespace sediment::coordinator {

class GlobalLookupFiles final : public query::LookupFiles {
 public:
  // `global` is borrowed (null: no files); `geo` the node's GeoIP databases (null: none);
  // thread-safe as Global::Read is.
  GlobalLookupFiles(const Global* global, std::string repo,
                    std::shared_ptr<const query::GeoDatabases> geo)
      : global_(global), repo_(std::move(repo)), geo_(std::move(geo)) {}

  std::shared_ptr<const query::GeoDatabases> Geo() const override { return geo_; }

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
  std::shared_ptr<const query::GeoDatabases> geo_;
};

}  // namespace sediment::coordinator
