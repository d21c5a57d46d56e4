// Secrets in Global (DESIGN section 11): ingest tokens, API tokens and the cluster secret are kept
// only as salted hashes, in the state, in its events on the global log, in its snapshots and so
// in the bucket. A hash is `salt (16 bytes) || SHA-256(salt || secret)` (48 bytes, OpenSSL's
// libcrypto); a new one gets a fresh random salt (RAND_bytes). Comparisons are constant-time per
// stored hash (CRYPTO_memcmp). Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "common/mutex.h"
#include "common/thread_annotations.h"

namespace sediment {

struct GlobalState;
class Global;

inline constexpr size_t kTokenSaltBytes = 16;
inline constexpr size_t kTokenHashBytes = kTokenSaltBytes + 32;

// A new secret (generated tokens, the cluster secret): `bytes` bytes from the system's CSPRNG
// (RAND_bytes) as 2 * `bytes` lower-case hex digits (aborts if the system has no entropy).
std::string NewSecret(size_t bytes);
// The hash to store for `secret`, with a fresh random salt (aborts if the system has no entropy).
std::string HashToken(std::string_view secret);
// The hash of `secret` with `salt` (kTokenSaltBytes bytes).
std::string HashTokenWithSalt(std::string_view salt, std::string_view secret);
// The hash of a secret that was stored in clear before hashing existed (event versions 1 and 2,
// snapshot versions 1 to 5). Its salt is derived from the secret itself, so every node migrating
// the same record or snapshot reaches the same state; it still differs from any other
// installation's hash of another secret, but unlike HashToken a guess can be checked against every
// migrated hash at once: such tokens should be replaced (README).
std::string LegacyTokenHash(std::string_view secret);
// Whether `s` has the shape of a hash (kTokenHashBytes bytes).
bool IsTokenHash(std::string_view s);
// Whether `hash` is the hash of `secret` (constant time in the secret's content).
bool TokenMatches(std::string_view hash, std::string_view secret);
// SHA-256 of `data` (32 bytes): the key of in-memory caches of positive lookups. Never persisted.
std::string Sha256(std::string_view data);

// Lookups over a state: each stored hash is compared (constant time each); a miss costs one hash
// per stored token. Empty `token`: no match.
// The repository of an ingest token; when two repositories hold a hash of it (two nodes added the
// same token to different repositories at the same time: the apply rule cannot compare salted
// hashes), the first in hash order, the same on every node.
std::optional<std::string> IngestRepoForToken(const GlobalState& state, std::string_view token);
bool IsApiToken(const GlobalState& state, std::string_view token);

// Who an API token is: a named token (CreateApiToken) with its permissions, or a --api-token
// token (unnamed: name kStartupTokenName, admin).
struct ApiPrincipal {
  std::string name;
  bool admin = false;
  std::map<std::string, uint32_t> repos;  // repository -> kPerm* bits (global.h)
  // The stored hash the token matched: what TokenLookup's cache checks is still stored.
  std::string token_hash;
  // The bits this principal holds on `repo` (kPermAll for admin).
  uint32_t On(std::string_view repo) const;
};
// The name whoami reports for a --api-token token (not a valid resource name: no named token
// can take it).
inline constexpr const char* kStartupTokenName = "(start-up token)";
std::optional<ApiPrincipal> ApiPrincipalForToken(const GlobalState& state, std::string_view token);
// The principal whose stored hash is `hash`, named `name` (kStartupTokenName: the --api-token
// set); nullopt once it is revoked. No hashing: a map lookup.
std::optional<ApiPrincipal> ApiPrincipalByHash(const GlobalState& state, const std::string& name,
                                               const std::string& hash);

// What an ingest token is, for the ingest routes: its repository and (named tokens) its parser
// and name.
struct IngestTokenMatch {
  std::string repo;
  std::string name;    // empty: a --ingest-token token
  std::string parser;  // empty: none in Global (a --ingest-token token's is in the config)
  std::string token_hash;
};
std::optional<IngestTokenMatch> IngestTokenForToken(const GlobalState& state,
                                                    std::string_view token);
// The match of stored hash `hash`; nullopt once it is revoked (or its repository deleted).
std::optional<IngestTokenMatch> IngestTokenByHash(const GlobalState& state,
                                                  const std::string& hash);
// Whether `secret` matches the cluster's verifier (false when the cluster has none).
bool IsClusterSecret(const GlobalState& state, std::string_view secret);

// The lookups of a node's requests, over `global`'s current state, with the positive answers
// cached in memory (keyed by the SHA-256 of the token, never the token; nothing here is
// persisted) so that a known token costs one hash instead of one per stored token. A cached
// answer remembers which stored hash the token matched, and every hit checks in the current state
// that this hash is still stored (a map lookup, no hashing) and reads the permissions from there:
// a revoked token, a deleted repository or changed permissions take effect on the next request,
// on every node, as soon as the node has applied the event. Misses are not cached (a token added
// later must be found). Thread-safe; `global` is borrowed and must outlive it.
class TokenLookup {
 public:
  explicit TokenLookup(const Global* global) : global_(global) {}
  std::optional<std::string> IngestRepo(std::string_view token) const;
  std::optional<IngestTokenMatch> Ingest(std::string_view token) const;
  std::optional<ApiPrincipal> Api(std::string_view token) const;
  bool IsApiToken(std::string_view token) const { return Api(token).has_value(); }

 private:
  // Entries beyond this: the cache is emptied (a flood of distinct valid tokens only costs hashes).
  static constexpr size_t kMaxEntries = 4096;
  const Global* const global_;
  mutable Mutex mu_;
  // SHA-256(token) -> the stored hash it matched.
  mutable std::map<std::string, std::string> ingest_ GUARDED_BY(mu_);
  // SHA-256(token) -> (principal name, the stored hash it matched).
  mutable std::map<std::string, std::pair<std::string, std::string>> api_ GUARDED_BY(mu_);
};

}  // namespace sediment
