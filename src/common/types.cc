#include "common/types.h"

#include <string>

namespace sediment {

std::string FormatEventId(PartitionId p, Position pos) {
  std::string out = std::to_string(p.value);
  out += '-';
  out += std::to_string(pos.offset.value);
  out += '-';
  out += std::to_string(pos.index);
  return out;
}

}  // namespace sediment
