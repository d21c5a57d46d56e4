#include "cluster/node_identity.h"

#include <charconv>
#include <cstdio>
#include <random>

#include "common/checksum.h"

namespace sediment {
namespace {

constexpr std::string_view kPrefix = "sediment-node-id v1 ";

std::string Body(NodeId id) { return std::string(kPrefix) + std::to_string(id.value); }

}  // namespace

std::string EncodeNodeIdFile(NodeId id) {
  std::string body = Body(id);
  char crc[16];
  std::snprintf(crc, sizeof(crc), "%08x", Crc32c(body));
  return body + " " + crc + "\n";
}

Result<NodeId> DecodeNodeIdFile(std::string_view s) {
  if (!s.empty() && s.back() == '\n') s.remove_suffix(1);
  if (s.substr(0, 17) != "sediment-node-id ") {
    return Status::Corruption("not a sediment node-id file");
  }
  if (s.substr(0, kPrefix.size()) != kPrefix) {
    return Status::Corruption("unsupported node-id file version (expected v1)");
  }
  std::string_view rest = s.substr(kPrefix.size());
  size_t space = rest.find(' ');
  if (space == std::string_view::npos) return Status::Corruption("node-id file has no checksum");
  std::string_view id_text = rest.substr(0, space);
  std::string_view crc_text = rest.substr(space + 1);
  int64_t id = 0;
  auto [id_end, id_ec] = std::from_chars(id_text.data(), id_text.data() + id_text.size(), id);
  if (id_ec != std::errc() || id_end != id_text.data() + id_text.size() || id < 1 ||
      id > kMaxNodeId) {
    return Status::Corruption("node-id file holds no valid id (expected 1.." +
                              std::to_string(kMaxNodeId) + ")");
  }
  uint32_t crc = 0;
  auto [crc_end, crc_ec] =
      std::from_chars(crc_text.data(), crc_text.data() + crc_text.size(), crc, 16);
  if (crc_text.size() != 8 || crc_ec != std::errc() ||
      crc_end != crc_text.data() + crc_text.size()) {
    return Status::Corruption("node-id file has a malformed checksum");
  }
  if (crc != Crc32c(s.substr(0, kPrefix.size() + space))) {
    return Status::Corruption("node-id file checksum mismatch");
  }
  // The canonical encoding must match byte for byte: no leading zeros, signs or upper-case hex.
  if (EncodeNodeIdFile(NodeId(id)) != std::string(s) + "\n") {
    return Status::Corruption("node-id file is not in canonical form");
  }
  return NodeId(id);
}

Result<NodeId> LoadOrCreateNodeId(Env* env, const std::string& data_dir) {
  const std::string path = JoinPath(data_dir, kNodeIdFileName);
  auto contents = env->ReadFile(path);
  if (contents.ok()) {
    auto id = DecodeNodeIdFile(*contents);
    if (!id.ok()) {
      return Status::Corruption(path + ": " + id.status().message() +
                                "; if this node's identity is not needed, delete the file and "
                                "restart to get a new node id");
    }
    return id;
  }
  if (contents.status().code() != StatusCode::kNotFound) {
    return contents.status().WithContext("reading node id " + path);
  }
  RETURN_IF_ERROR(env->CreateDirs(data_dir).WithContext("creating data directory " + data_dir));
  std::random_device rd;
  std::mt19937_64 rng((static_cast<uint64_t>(rd()) << 32) ^ rd());
  NodeId id(std::uniform_int_distribution<int64_t>(1, kMaxNodeId)(rng));
  RETURN_IF_ERROR(
      env->WriteFileAtomic(path, EncodeNodeIdFile(id)).WithContext("writing node id " + path));
  return id;
}

}  // namespace sediment
