#include "api/permissions.h"

#include "global/global.h"

namespace sediment::api {

const char* PermissionName(Permission p) {
  switch (p) {
    case Permission::kRead:
      return "read";
    case Permission::kIngest:
      return "ingest";
    case Permission::kManage:
      return "manage";
    case Permission::kAdmin:
      return "admin";
  }
  return "?";
}

std::optional<uint32_t> PermissionBit(std::string_view name) {
  if (name == "read") return kPermRead;
  if (name == "ingest") return kPermIngest;
  if (name == "manage") return kPermManage;
  return std::nullopt;
}

std::vector<std::string> PermissionNames(uint32_t bits) {
  std::vector<std::string> out;
  if (bits & kPermRead) out.emplace_back("read");
  if (bits & kPermIngest) out.emplace_back("ingest");
  if (bits & kPermManage) out.emplace_back("manage");
  return out;
}

bool Allows(const ApiPrincipal& who, Permission need, std::string_view repo) {
  if (who.admin) return true;
  switch (need) {
    case Permission::kRead:
      return (who.On(repo) & kPermRead) != 0;
    case Permission::kIngest:
      return (who.On(repo) & kPermIngest) != 0;
    case Permission::kManage:
      return (who.On(repo) & kPermManage) != 0;
    case Permission::kAdmin:
      return false;
  }
  return false;
}

http::Response Forbidden(const ApiPrincipal& who, Permission need, std::string_view repo) {
  if (need == Permission::kAdmin) {
    return http::JsonError(403, "API token '" + who.name + "' lacks the admin permission");
  }
  return http::JsonError(403, "API token '" + who.name + "' lacks the " + PermissionName(need) +
                                  " permission on repository '" + std::string(repo) + "'");
}

}  // namespace sediment::api
