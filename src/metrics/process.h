// Process metrics as Prometheus clients name them, read from /proc at scrape time (Linux).
#pragma once

#include "metrics/metrics.h"

namespace sediment::metrics {

// Adds a collector writing process_cpu_seconds_total, process_resident_memory_bytes,
// process_virtual_memory_bytes, process_open_fds, process_max_fds and
// process_start_time_seconds of this process. A value /proc cannot give is left out.
void AddProcessCollector(Registry& registry);

}  // namespace sediment::metrics
