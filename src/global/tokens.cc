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
  if (token.empty()) return false;
  bool found = false;
  for (const std::string& hash : state.api_token_hashes) found |= TokenMatches(hash, token);
  return found;
}

bool IsClusterSecret(const GlobalState& state, std::string_view secret) {
  return !secret.empty() && TokenMatches(state.cluster_secret_verifier, secret);
}

std::optional<std::string> TokenLookup::IngestRepo(std::string_view token) const {
  if (token.empty()) return std::nullopt;
  const std::string key = Sha256(token);
  {
    MutexLock lock(&mu_);
    auto it = ingest_.find(key);
    if (it != ingest_.end()) return it->second;
  }
  std::optional<std::string> repo;
  global_->Read([&](const GlobalState& st) { repo = IngestRepoForToken(st, token); });
  if (repo) {
    MutexLock lock(&mu_);
    if (ingest_.size() >= kMaxEntries) ingest_.clear();
    ingest_.emplace(key, *repo);
  }
  return repo;
}

bool TokenLookup::IsApiToken(std::string_view token) const {
  if (token.empty()) return false;
  const std::string key = Sha256(token);
  {
    MutexLock lock(&mu_);
    if (api_.count(key) != 0) return true;
  }
  bool known = false;
  global_->Read([&](const GlobalState& st) { known = sediment::IsApiToken(st, token); });
  if (known) {
    MutexLock lock(&mu_);
    if (api_.size() >= kMaxEntries) api_.clear();
    api_.insert(key);
  }
  return known;
}

}  // namespace sediment
