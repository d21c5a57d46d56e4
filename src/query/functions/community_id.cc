// communityId(sourceip, destinationip, proto, sourceport, destinationport, icmptype, icmpcode,
// seed=0, as=_community_id): the Community ID (version 1) of a network flow, `1:` and the Base64
// of a SHA-1 over the flow's 5-tuple, as the Community ID specification defines it, so that the
// two directions of a flow get the same ID. A per-record stage.
//
// Every parameter but `as` and `seed` names a field. The hashed bytes: the seed (2 bytes, network
// order), the source and destination address (4 or 16 bytes each), the protocol number, a zero
// byte, and, when ports are given (both port fields, or for ICMP/ICMPv6 both icmptype and
// icmpcode), the source and destination port (2 bytes each). The endpoints are put in order
// first (the smaller address, or with equal addresses the smaller port, first). For ICMP the
// type is the source port and the destination port is the type of the matching reply/request
// (echo 8 <-> 0, ...), else the code, in which case the flow is one-way and not reordered.
// `proto` holds a protocol number (0-255) or an IANA keyword (tcp, udp, icmp, ipv6-icmp, sctp,
// ...; any case). Invalid input (an address that is no IPv4/IPv6 address or of two families, a
// port out of 0-65535, an unknown protocol, a missing field) sets `as` to "" as LogScale
// documents.
#include <arpa/inet.h>
#include <openssl/evp.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "query/functions/list.h"
#include "query/functions/transforms.h"
#include "query/text_util.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "sourceip", .type = Type::kField, .required = true},
    {.name = "destinationip", .type = Type::kField, .required = true},
    {.name = "proto", .type = Type::kField, .required = true},
    {.name = "sourceport", .type = Type::kField},
    {.name = "destinationport", .type = Type::kField},
    {.name = "icmptype", .type = Type::kField},
    {.name = "icmpcode", .type = Type::kField},
    {.name = "seed", .type = Type::kLimit, .default_value = "0", .max = 65535},
    {.name = "as", .type = Type::kField, .default_value = "_community_id"},
};

constexpr int kIcmp = 1, kIcmp6 = 58;

// The protocol number of `text`, or -1.
int ProtocolOf(std::string_view text) {
  if (std::optional<int64_t> n = ParseInt(text)) {
    if (*n < 0 || *n > 255) return -1;
    return static_cast<int>(*n);
  }
  static constexpr std::pair<std::string_view, int> kNames[] = {
      {"icmp", 1},   {"igmp", 2},  {"tcp", 6},        {"udp", 17},    {"gre", 47},
      {"esp", 50},   {"ah", 51},   {"ipv6-icmp", 58}, {"icmpv6", 58}, {"icmp6", 58},
      {"eigrp", 88}, {"ospf", 89}, {"ospfigp", 89},   {"pim", 103},   {"sctp", 132},
  };
  const std::string lower = Lower(text);
  for (const auto& [name, number] : kNames) {
    if (lower == name) return number;
  }
  return -1;
}

// The address bytes of an IPv4 or IPv6 address.
std::optional<std::string> AddressBytes(std::string_view text) {
  const std::string s(text);
  std::array<unsigned char, 16> buf{};
  if (inet_pton(AF_INET, s.c_str(), buf.data()) == 1) {
    return std::string(reinterpret_cast<const char*>(buf.data()), 4);
  }
  if (inet_pton(AF_INET6, s.c_str(), buf.data()) == 1) {
    return std::string(reinterpret_cast<const char*>(buf.data()), 16);
  }
  return std::nullopt;
}

// The ICMP/ICMPv6 type of the other direction of a request/response pair, or -1.
int IcmpCounterpart(int proto, int type) {
  static constexpr std::pair<int, int> kV4[] = {{8, 0},   {0, 8},  {13, 14}, {14, 13}, {15, 16},
                                                {16, 15}, {10, 9}, {9, 10},  {17, 18}, {18, 17}};
  static constexpr std::pair<int, int> kV6[] = {{128, 129}, {129, 128}, {133, 134}, {134, 133},
                                                {135, 136}, {136, 135}, {130, 131}, {131, 130},
                                                {139, 140}, {140, 139}, {144, 145}, {145, 144}};
  if (proto == kIcmp) {
    for (const auto& [a, b] : kV4) {
      if (a == type) return b;
    }
  } else {
    for (const auto& [a, b] : kV6) {
      if (a == type) return b;
    }
  }
  return -1;
}

struct Fields {
  std::string sip, dip, proto, sport, dport, itype, icode, as;
  int seed = 0;
};

// The port (0-65535) in `field`, or -1 when it is missing or not one.
int PortOf(const Record& r, const std::string& field) {
  if (field.empty()) return -1;
  std::string scratch;
  std::optional<std::string_view> v = r.Get(field, &scratch);
  if (!v) return -1;
  std::optional<int64_t> n = ParseInt(*v);
  if (!n || *n < 0 || *n > 65535) return -1;
  return static_cast<int>(*n);
}

// The Community ID of the record's flow, or "" for invalid input.
std::string CommunityId(const Fields& f, const Record& r) {
  std::string scratch;
  std::optional<std::string_view> sv = r.Get(f.sip, &scratch);
  std::optional<std::string> saddr = sv ? AddressBytes(*sv) : std::nullopt;
  std::optional<std::string_view> dv = r.Get(f.dip, &scratch);
  std::optional<std::string> daddr = dv ? AddressBytes(*dv) : std::nullopt;
  std::optional<std::string_view> pv = r.Get(f.proto, &scratch);
  const int proto = pv ? ProtocolOf(*pv) : -1;
  if (!saddr || !daddr || proto < 0 || saddr->size() != daddr->size()) return {};
  const bool icmp = proto == kIcmp || proto == kIcmp6;
  int sport = -1, dport = -1;
  bool one_way = false;
  if (icmp && !f.itype.empty()) {
    sport = PortOf(r, f.itype);
    const int code = PortOf(r, f.icode);
    if (sport < 0 || code < 0) return {};
    const int counterpart = IcmpCounterpart(proto, sport);
    one_way = counterpart < 0;
    dport = one_way ? code : counterpart;
  } else if (!f.sport.empty()) {
    sport = PortOf(r, f.sport);
    dport = PortOf(r, f.dport);
    if (sport < 0 || dport < 0) return {};
  }
  const bool has_ports = sport >= 0;
  const bool ordered =
      one_way || *saddr < *daddr || (*saddr == *daddr && has_ports && sport < dport);
  if (!ordered) {
    std::swap(saddr, daddr);
    std::swap(sport, dport);
  }
  std::string data;
  data.push_back(static_cast<char>(f.seed >> 8));
  data.push_back(static_cast<char>(f.seed & 0xFF));
  data += *saddr;
  data += *daddr;
  data.push_back(static_cast<char>(proto));
  data.push_back('\0');
  if (has_ports) {
    for (int p : {sport, dport}) {
      data.push_back(static_cast<char>(p >> 8));
      data.push_back(static_cast<char>(p & 0xFF));
    }
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), digest, &len, EVP_sha1(), nullptr) != 1) return {};
  unsigned char b64[4 * ((EVP_MAX_MD_SIZE + 2) / 3) + 1];
  const int n = EVP_EncodeBlock(b64, digest, static_cast<int>(len));
  return "1:" + std::string(reinterpret_cast<const char*>(b64), static_cast<size_t>(n));
}

bool Build(Call& c, Stage* st) {
  Fields f;
  f.sip = c.String("sourceip");
  f.dip = c.String("destinationip");
  f.proto = c.String("proto");
  f.sport = c.String("sourceport");
  f.dport = c.String("destinationport");
  f.itype = c.String("icmptype");
  f.icode = c.String("icmpcode");
  f.as = c.String("as");
  f.seed = static_cast<int>(c.Limit("seed"));
  // The port pairs come together: name the one given and the one missing.
  for (const auto& [x, y] : {std::pair<const char*, const char*>{"sourceport", "destinationport"},
                             {"destinationport", "sourceport"},
                             {"icmptype", "icmpcode"},
                             {"icmpcode", "icmptype"}}) {
    if (c.Given(x) && !c.Given(y)) {
      c.Error(c.GivenArg(x)->position,
              "parameter '" + std::string(x) + "' of communityId() needs '" + y + "' too");
      return false;
    }
  }
  std::vector<std::string> touched = {f.sip, f.dip, f.proto, f.as};
  for (const std::string* p : {&f.sport, &f.dport, &f.itype, &f.icode}) {
    if (!p->empty()) touched.push_back(*p);
  }
  SetRecordFunction(
      st,
      [f](Record& r) {
        r.Set(f.as, Value(CommunityId(f, r)));
        return true;
      },
      std::move(touched));
  return true;
}

}  // namespace

const Function kCommunityId = {
    .name = "communityId",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "the Community ID of a network flow",
    .stage = &Build,
};

}  // namespace sediment::query::functions
