// Helpers shared by the librdkafka clients of this folder (kafka_log.cc, kafka_group.cc): client
// configuration, error mapping, logging. Internal to the sediment_kafka_log library.
#pragma once

#include <librdkafka/rdkafka.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "log/kafka_log.h"

namespace sediment::kafka_internal {

// A duration as librdkafka's int milliseconds, clamped to [0, 24 h].
int ToMs(std::chrono::milliseconds d);

// "Broker: Unknown member (UNKNOWN_MEMBER_ID)".
std::string ErrText(rd_kafka_resp_err_t err);

// Errors that mean "brokers unreachable or too slow" (transient).
bool IsBrokerDownError(rd_kafka_resp_err_t err);

// Maps a librdkafka error to a Status; everything not clearly the caller's fault is Unavailable
// (transient: the server answers 503 and the client retries).
Status KafkaStatus(rd_kafka_resp_err_t err, const std::string& context);

// librdkafka log callback: forwards to spdlog (levels 0-3 error, 4 warn, 5-6 info, 7 debug).
void LogCallback(const rd_kafka_t* rk, int level, const char* fac, const char* buf);

using ConfPtr = std::unique_ptr<rd_kafka_conf_t, decltype(&rd_kafka_conf_destroy)>;
using Settings = std::vector<std::pair<std::string, std::string>>;

// A configuration with bootstrap.servers, enable.metrics.push=false, then the user's
// `o.properties`, then `fixed` (which wins), and LogCallback. No client telemetry to the brokers
// (KIP-714) unless the user turns it on: sediment reports its own metrics, and with it on
// rd_kafka_destroy waits up to 1 s for a last push, so closing a log (and a node's shutdown) took
// a second per handle. InvalidArgument names the property librdkafka refused.
// Callers add their own error callback and opaque.
Result<ConfPtr> NewConf(const KafkaOptions& o, const Settings& fixed);

// rd_kafka_new; takes ownership of `conf` on success (on failure `conf` is destroyed).
Result<rd_kafka_t*> NewHandle(rd_kafka_type_t type, ConfPtr conf);

}  // namespace sediment::kafka_internal
