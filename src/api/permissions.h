// The API's permission policy (DESIGN section 11), in one place: what each kind of route needs
// and how a token's grants answer it. API tokens are either --api-token tokens (admin) or named
// tokens (GlobalState::api_tokens) with an organization-level `admin` flag and per-repository
// `read` / `ingest` / `manage` bits (global.h kPerm*). Pure functions; thread-safe.
//
//   read    query, query jobs, live queries; GET of files, parsers, retention; parser tests
//   ingest  the ingest routes with an API token and ?repo=R (an ingest token needs nothing else)
//   manage  PUT/POST/DELETE of files and parsers; PUT retention; the repository's ingest tokens
//   admin   create/delete repositories, API tokens, /api/v1/cluster, /api/v1/status, storage
//
// `admin` implies every bit on every repository; no bit implies another.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "global/tokens.h"
#include "http/http_server.h"

namespace sediment::api {

enum class Permission { kRead, kIngest, kManage, kAdmin };

// "read", "ingest", "manage", "admin".
const char* PermissionName(Permission p);
// The kPerm* bit of "read", "ingest" or "manage"; nullopt for anything else.
std::optional<uint32_t> PermissionBit(std::string_view name);
// The names of the bits set in `bits`, in the order read, ingest, manage.
std::vector<std::string> PermissionNames(uint32_t bits);

// Whether `who` holds `need` on `repo` (`repo` is ignored for kAdmin).
bool Allows(const ApiPrincipal& who, Permission need, std::string_view repo);

// The 403 answer for `who` lacking `need` on `repo`: {"error": "..."} naming the token, the
// permission and the repository.
http::Response Forbidden(const ApiPrincipal& who, Permission need, std::string_view repo);

}  // namespace sediment::api
