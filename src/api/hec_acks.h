// Splunk HEC indexer acknowledgement: per data channel, the ack ids issued to successful requests.
// sediment answers HEC 200 only once every event is durable, so every issued ack id is acknowledged
// ("true") from the moment it is issued; an id never issued on the channel is "false".
#pragma once

#include <cstdint>
#include <list>
#include <string>
#include <string_view>
#include <unordered_map>

#include "common/mutex.h"

namespace sediment::api {

// Whether `channel` is a GUID as Splunk requires of a data channel: 8-4-4-4-12 hex digits.
bool IsHecChannel(std::string_view channel);

// Thread-safe. Memory: at most `max_channels` channels (the least recently used one is forgotten
// beyond that; its ids then answer false), a counter each. In this process only: another node, or
// this one after a restart, knows none of the ids (clients then resend, as Splunk's do after a
// lost ack).
class HecAcks {
 public:
  explicit HecAcks(size_t max_channels = 100000) : max_channels_(max_channels) {}

  // The next ack id of `channel`: 0, 1, 2, ... per channel.
  uint64_t Issue(std::string_view channel);
  // Whether `id` was issued on `channel` (and the channel is still remembered).
  bool Acknowledged(std::string_view channel, uint64_t id);

 private:
  struct Channel {
    uint64_t next = 0;
    std::list<std::string>::iterator lru;
  };
  const size_t max_channels_;
  Mutex mu_;
  std::unordered_map<std::string, Channel> channels_ GUARDED_BY(mu_);
  std::list<std::string> lru_ GUARDED_BY(mu_);  // most recently used first
};

}  // namespace sediment::api
