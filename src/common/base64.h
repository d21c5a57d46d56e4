// Base64 (RFC 4648) for the protocols that carry it: HTTP Basic/ApiKey credentials, OTLP/JSON
// bytes. Pure functions, thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace sediment {

// The standard alphabet, with '=' padding.
std::string EncodeBase64(std::string_view raw);

// The standard or the URL-safe alphabet (both accepted, also mixed), trailing '=' padding
// optional. nullopt for any other character or a length no encoding has (4n+1 digits).
std::optional<std::string> DecodeBase64(std::string_view in);

}  // namespace sediment
