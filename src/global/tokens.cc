#include "global/tokens.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <cstdlib>

#include "global/global.h"

namespace sediment {

std::string Sha256(std::string_view data) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest);
  return std::string(reinterpret_cast<const char*>(digest), sizeof(digest));
}

std::string HashTokenWithSalt(std::string_view salt, std::string_view secret) {
  std::string input;
  input.reserve(salt.size() + secret.size());
  input.append(salt).append(secret);
  std::string out(salt);
  out += Sha256(input);
  OPENSSL_cleanse(input.data(), input.size());
  return out;
}

std::string HashToken(std::string_view secret) {
  unsigned char salt[kTokenSaltBytes];
  if (RAND_bytes(salt, sizeof(salt)) != 1) std::abort();  // no entropy: nothing safe to do
  return HashTokenWithSalt(std::string_view(reinterpret_cast<const char*>(salt), sizeof(salt)),
                           secret);
}

std::string NewSecret(size_t bytes) {
  std::string raw(bytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), static_cast<int>(bytes)) != 1) {
    std::abort();
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes * 2);
  for (unsigned char c : raw) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  OPENSSL_cleanse(raw.data(), raw.size());
  return out;
}

std::string LegacyTokenHash(std::string_view secret) {
  std::string seed = "sediment legacy token salt\n";
  seed.append(secret);
  const std::string salt = Sha256(seed).substr(0, kTokenSaltBytes);
  OPENSSL_cleanse(seed.data(), seed.size());
  return HashTokenWithSalt(salt, secret);
}

bool IsTokenHash(std::string_view s) { return s.size() == kTokenHashBytes; }

bool TokenMatches(std::string_view hash, std::string_view secret) {
  if (!IsTokenHash(hash)) return false;
  const std::string want = HashTokenWithSalt(hash.substr(0, kTokenSaltBytes), secret);
  return CRYPTO_memcmp(want.data(), hash.data(), kTokenHashBytes) == 0;
}

std::optional<std::string> IngestRepoForToken(const GlobalState& state, std::string_view token) {
  if (token.empty()) return std::nullopt;
  std::optional<std::string> found;
  // Every hash is compared, also after a match: the time does not depend on which one matched.
  for (const auto& [hash, repo] : state.ingest_token_hashes) {
    if (TokenMatches(hash, token) && !found) found = repo;
  }
  return found;
}

bool IsApiToken(const GlobalState& state, std::string_view token) {
  return ApiPrincipalForToken(state, token).has_value();
}

uint32_t ApiPrincipal::On(std::string_view repo) const {
  if (admin) return kPermAll;
  auto it = repos.find(std::string(repo));
  return it == repos.end() ? 0 : it->second;
}

std::optional<ApiPrincipal> ApiPrincipalByHash(const GlobalState& state, const std::string& name,
                                               const std::string& hash) {
  if (name == kStartupTokenName) {
    if (state.api_token_hashes.count(hash) == 0) return std::nullopt;
    return ApiPrincipal{kStartupTokenName, true, {}, hash};
  }
  auto it = state.api_tokens.find(name);
  if (it == state.api_tokens.end() || it->second.token_hash != hash) return std::nullopt;
  return ApiPrincipal{name, it->second.admin, it->second.repos, hash};
}

std::optional<ApiPrincipal> ApiPrincipalForToken(const GlobalState& state, std::string_view token) {
  if (token.empty()) return std::nullopt;
  std::optional<ApiPrincipal> found;
  // Every hash is compared, also after a match: the time does not depend on which one matched.
  for (const std::string& hash : state.api_token_hashes) {
    if (TokenMatches(hash, token) && !found)
      found = ApiPrincipal{kStartupTokenName, true, {}, hash};
  }
  for (const auto& [name, info] : state.api_tokens) {
    if (TokenMatches(info.token_hash, token) && !found) {
      found = ApiPrincipal{name, info.admin, info.repos, info.token_hash};
    }
  }
  return found;
}

std::optional<IngestTokenMatch> IngestTokenByHash(const GlobalState& state,
                                                  const std::string& hash) {
  auto it = state.ingest_token_hashes.find(hash);
  if (it == state.ingest_token_hashes.end()) return std::nullopt;
  IngestTokenMatch m;
  m.repo = it->second;
  m.token_hash = hash;
  auto repo = state.repos.find(it->second);
  if (repo != state.repos.end()) {
    for (const auto& [name, info] : repo->second.ingest_tokens) {
      if (info.token_hash == hash) {
        m.name = name;
        m.parser = info.parser;
        break;
      }
    }
  }
  return m;
}

std::optional<IngestTokenMatch> IngestTokenForToken(const GlobalState& state,
                                                    std::string_view token) {
  if (token.empty()) return std::nullopt;
  const std::string* matched = nullptr;
  for (const auto& [hash, repo] : state.ingest_token_hashes) {
    if (TokenMatches(hash, token) && matched == nullptr) matched = &hash;
  }
  if (matched == nullptr) return std::nullopt;
  return IngestTokenByHash(state, *matched);
}

bool IsClusterSecret(const GlobalState& state, std::string_view secret) {
  return !secret.empty() && TokenMatches(state.cluster_secret_verifier, secret);
}

std::optional<std::string> TokenLookup::IngestRepo(std::string_view token) const {
  auto m = Ingest(token);
  if (!m) return std::nullopt;
  return m->repo;
}

std::optional<IngestTokenMatch> TokenLookup::Ingest(std::string_view token) const {
  if (token.empty()) return std::nullopt;
  const std::string key = Sha256(token);
  std::optional<std::string> cached;
  {
    MutexLock lock(&mu_);
    auto it = ingest_.find(key);
    if (it != ingest_.end()) cached = it->second;
  }
  std::optional<IngestTokenMatch> m;
  if (cached) {
    global_->Read([&](const GlobalState& st) { m = IngestTokenByHash(st, *cached); });
    if (m) return m;
    MutexLock lock(&mu_);  // revoked: forget it, and look the token up again (a new grant?)
    ingest_.erase(key);
  }
  global_->Read([&](const GlobalState& st) { m = IngestTokenForToken(st, token); });
  if (m) {
    MutexLock lock(&mu_);
    if (ingest_.size() >= kMaxEntries) ingest_.clear();
    ingest_.insert_or_assign(key, m->token_hash);
  }
  return m;
}

std::optional<ApiPrincipal> TokenLookup::Api(std::string_view token) const {
  if (token.empty()) return std::nullopt;
  const std::string key = Sha256(token);
  std::optional<std::pair<std::string, std::string>> cached;
  {
    MutexLock lock(&mu_);
    auto it = api_.find(key);
    if (it != api_.end()) cached = it->second;
  }
  std::optional<ApiPrincipal> p;
  if (cached) {
    global_->Read(
        [&](const GlobalState& st) { p = ApiPrincipalByHash(st, cached->first, cached->second); });
    if (p) return p;
    MutexLock lock(&mu_);
    api_.erase(key);
  }
  global_->Read([&](const GlobalState& st) { p = ApiPrincipalForToken(st, token); });
  if (p) {
    MutexLock lock(&mu_);
    if (api_.size() >= kMaxEntries) api_.clear();
    api_.insert_or_assign(key, std::make_pair(p->name, p->token_hash));
  }
  return p;
}

}  // namespace sediment
