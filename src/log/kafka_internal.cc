#include "log/kafka_internal.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>

namespace sediment::kafka_internal {

int ToMs(std::chrono::milliseconds d) {
  return static_cast<int>(std::clamp<int64_t>(d.count(), 0, 24 * 3600 * 1000));
}

std::string ErrText(rd_kafka_resp_err_t err) {
  return std::string(rd_kafka_err2str(err)) + " (" + rd_kafka_err2name(err) + ")";
}

bool IsBrokerDownError(rd_kafka_resp_err_t err) {
  return err == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN || err == RD_KAFKA_RESP_ERR__TRANSPORT ||
         err == RD_KAFKA_RESP_ERR__RESOLVE || err == RD_KAFKA_RESP_ERR__TIMED_OUT ||
         err == RD_KAFKA_RESP_ERR__MSG_TIMED_OUT;
}

Status KafkaStatus(rd_kafka_resp_err_t err, const std::string& context) {
  std::string msg = context + ": " + ErrText(err);
  switch (err) {
    case RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE:
    case RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE:
      return Status::TooLarge(msg);
    case RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART:
    case RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC:
    case RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION:
      return Status::NotFound(msg);
    case RD_KAFKA_RESP_ERR_INVALID_CONFIG:
    case RD_KAFKA_RESP_ERR_INVALID_REPLICATION_FACTOR:
    case RD_KAFKA_RESP_ERR_INVALID_PARTITIONS:
    case RD_KAFKA_RESP_ERR_POLICY_VIOLATION:
    case RD_KAFKA_RESP_ERR__INVALID_ARG:
      return Status::InvalidArgument(msg);
    case RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
      return Status::PermissionDenied(msg);
    case RD_KAFKA_RESP_ERR__AUTHENTICATION:
    case RD_KAFKA_RESP_ERR_SASL_AUTHENTICATION_FAILED:
      return Status::Unauthenticated(msg);
    default:
      if (IsBrokerDownError(err)) return Status::Unavailable("brokers unreachable: " + msg);
      if (err == RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS ||
          err == RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND) {
        return Status::Unavailable("not enough in-sync replicas: " + msg);
      }
      return Status::Unavailable(msg);
  }
}

void LogCallback(const rd_kafka_t* rk, int level, const char* fac, const char* buf) {
  const char* name = rd_kafka_name(rk);
  if (level <= 3) {
    spdlog::error("kafka {} {}: {}", name, fac, buf);
  } else if (level == 4) {
    spdlog::warn("kafka {} {}: {}", name, fac, buf);
  } else {
    // librdkafka logs at 7 (debug) only the contexts the `debug` property names
    // (SEDIMENT_KAFKA_DEBUG=eos, ...): an operator who set it wants them in the log.
    spdlog::info("kafka {} {}: {}", name, fac, buf);
  }
}

Result<ConfPtr> NewConf(const KafkaOptions& o, const Settings& fixed) {
  ConfPtr conf(rd_kafka_conf_new(), &rd_kafka_conf_destroy);
  char errstr[512];
  auto set = [&](const std::string& k, const std::string& v) -> Status {
    if (rd_kafka_conf_set(conf.get(), k.c_str(), v.c_str(), errstr, sizeof(errstr)) !=
        RD_KAFKA_CONF_OK) {
      return Status::InvalidArgument("kafka property " + k + ": " + errstr);
    }
    return Status::OK();
  };
  RETURN_IF_ERROR(set("bootstrap.servers", o.brokers));
  RETURN_IF_ERROR(set("enable.metrics.push", "false"));  // a default: the user's may turn it on
  for (const auto& [k, v] : o.properties) RETURN_IF_ERROR(set(k, v));
  for (const auto& [k, v] : fixed) RETURN_IF_ERROR(set(k, v));
  rd_kafka_conf_set_log_cb(conf.get(), &LogCallback);
  return conf;
}

Result<rd_kafka_t*> NewHandle(rd_kafka_type_t type, ConfPtr conf) {
  char errstr[512];
  rd_kafka_t* rk = rd_kafka_new(type, conf.get(), errstr, sizeof(errstr));
  if (rk == nullptr) return Status::InvalidArgument(std::string("kafka client: ") + errstr);
  conf.release();  // owned by rk now
  return rk;
}

}  // namespace sediment::kafka_internal
