// OTLP/HTTP logs: an ExportLogsServiceRequest in protobuf (otlp/otlp_logs.proto) or OTLP/JSON
// (decoded with simdjson into the same messages), mapped to events (README.md, "OTLP logs").
// A request that does not decode is refused whole; a log record over an event bound is refused
// alone (counted for the answer's partial_success) and the others are kept.
#include <google/protobuf/io/coded_stream.h>
#include <simdjson.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

#include "common/base64.h"
#include "common/json_writer.h"
#include "ingest/internal.h"
#include "ingest/json_util.h"
#include "ingest/otlp.h"
#include "otlp/otlp_logs.pb.h"

namespace sediment::ingest {
namespace {

using internal::JsonTypeName;

namespace pb = ::sediment::otlp;
namespace dom = simdjson::dom;
using internal::Builder;
using internal::CheckEventSize;
using internal::CheckRawSize;
using internal::DedupFields;

// A request's events may hold at most this many bytes (Event::ByteSize summed) beyond
// kExpansionFactor times the body: every record repeats its resource's and scope's attributes,
// so a small body of many tiny records under one large resource would otherwise expand without
// bound (the per-event bounds do not limit the sum).
constexpr size_t kExpansionFactor = 16;
constexpr size_t kExpansionSlackBytes = 64u << 20;

// ---------------------------------------------------------------------------------------------
// Text encodings.

constexpr char kHexDigits[] = "0123456789abcdef";

std::string Hex(const std::string& bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kHexDigits[c >> 4]);
    out.push_back(kHexDigits[c & 15]);
  }
  return out;
}

bool AllZero(const std::string& bytes) {
  return std::all_of(bytes.begin(), bytes.end(), [](char c) { return c == 0; });
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::optional<std::string> FromHex(std::string_view s) {
  if (s.size() % 2 != 0) return std::nullopt;
  std::string out;
  out.reserve(s.size() / 2);
  for (size_t i = 0; i < s.size(); i += 2) {
    int hi = HexValue(s[i]), lo = HexValue(s[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi << 4 | lo));
  }
  return out;
}

// Shortest text that reads back as `v`; NaN and infinities as protobuf's JSON mapping names them.
std::string DoubleText(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  char buf[32];
  return std::string(buf, std::to_chars(buf, buf + sizeof(buf), v).ptr);
}

// ---------------------------------------------------------------------------------------------
// OTLP/JSON into the protobuf messages. Member names in lowerCamelCase (the specification's) or
// as in the .proto; unknown members and null values are ignored; 64-bit integers as numbers or
// decimal strings; traceId / spanId hex; bytesValue base64; enums as integers.

bool Named(std::string_view key, std::string_view camel, std::string_view snake) {
  return key == camel || key == snake;
}

Status Bad(const std::string& where, const std::string& what) {
  return Status::InvalidArgument(where + ": " + what);
}

Status JsonString(dom::element e, const std::string& where, std::string* out) {
  std::string_view sv;
  if (e.get_string().get(sv))
    return Bad(where, std::string("expected a string, got ") + JsonTypeName(e));
  out->assign(sv);
  return Status::OK();
}

// An integer in [lo, hi] as a JSON number (integral) or a decimal string.
template <typename T>
Status JsonInt(dom::element e, const std::string& where, T* out) {
  switch (e.type()) {
    case dom::element_type::INT64: {
      int64_t v = 0;
      std::ignore = e.get_int64().get(v);
      if (std::in_range<T>(v)) {
        *out = static_cast<T>(v);
        return Status::OK();
      }
      break;
    }
    case dom::element_type::UINT64: {
      uint64_t v = 0;
      std::ignore = e.get_uint64().get(v);
      if (std::in_range<T>(v)) {
        *out = static_cast<T>(v);
        return Status::OK();
      }
      break;
    }
    case dom::element_type::DOUBLE: {
      double d = 0;
      std::ignore = e.get_double().get(d);
      // Exactly representable integers only (1.5e18 is one; 2^64 is out of every range here).
      if (std::trunc(d) == d && d >= static_cast<double>(std::numeric_limits<T>::min()) &&
          d < std::ldexp(1.0, std::numeric_limits<T>::digits)) {
        *out = static_cast<T>(d);
        return Status::OK();
      }
      break;
    }
    case dom::element_type::STRING: {
      std::string_view sv;
      std::ignore = e.get_string().get(sv);
      T v{};
      auto [ptr, ec] = std::from_chars(sv.data(), sv.data() + sv.size(), v);
      if (!sv.empty() && ec == std::errc() && ptr == sv.data() + sv.size()) {
        *out = v;
        return Status::OK();
      }
      return Bad(where, "'" + std::string(sv.substr(0, 64)) + "' is not an integer in range");
    }
    default:
      return Bad(where, std::string("expected an integer, got ") + JsonTypeName(e));
  }
  return Bad(where, "integer " + simdjson::minify(e) + " is out of range");
}

Status JsonDouble(dom::element e, const std::string& where, double* out) {
  switch (e.type()) {
    case dom::element_type::INT64:
    case dom::element_type::UINT64:
    case dom::element_type::DOUBLE:
      std::ignore = e.get_double().get(*out);
      return Status::OK();
    case dom::element_type::STRING: {
      std::string_view sv;
      std::ignore = e.get_string().get(sv);
      if (sv == "NaN") {
        *out = std::numeric_limits<double>::quiet_NaN();
      } else if (sv == "Infinity") {
        *out = std::numeric_limits<double>::infinity();
      } else if (sv == "-Infinity") {
        *out = -std::numeric_limits<double>::infinity();
      } else {
        auto [ptr, ec] = std::from_chars(sv.data(), sv.data() + sv.size(), *out);
        if (sv.empty() || ec != std::errc() || ptr != sv.data() + sv.size()) {
          return Bad(where, "'" + std::string(sv.substr(0, 64)) + "' is not a number");
        }
      }
      return Status::OK();
    }
    default:
      return Bad(where, std::string("expected a number, got ") + JsonTypeName(e));
  }
}

Status JsonHexId(dom::element e, const std::string& where, std::string* out) {
  std::string text;
  RETURN_IF_ERROR(JsonString(e, where, &text));
  auto bytes = FromHex(text);
  if (!bytes) return Bad(where, "'" + text.substr(0, 64) + "' is not hex");
  *out = std::move(*bytes);
  return Status::OK();
}

Status JsonBase64(dom::element e, const std::string& where, std::string* out) {
  std::string text;
  RETURN_IF_ERROR(JsonString(e, where, &text));
  auto bytes = DecodeBase64(text);
  if (!bytes) return Bad(where, "'" + text.substr(0, 64) + "' is not base64");
  *out = std::move(*bytes);
  return Status::OK();
}

Status JsonObject(dom::element e, const std::string& where, dom::object* out) {
  if (e.get_object().get(*out)) {
    return Bad(where, std::string("expected an object, got ") + JsonTypeName(e));
  }
  return Status::OK();
}

// Calls fn(element, where_of_element) for each element of the array `e`.
template <typename Fn>
Status JsonEach(dom::element e, const std::string& where, Fn&& fn) {
  dom::array arr;
  if (e.get_array().get(arr))
    return Bad(where, std::string("expected an array, got ") + JsonTypeName(e));
  size_t i = 0;
  for (dom::element item : arr) {
    RETURN_IF_ERROR(fn(item, where + "[" + std::to_string(i) + "]"));
    ++i;
  }
  return Status::OK();
}

Status JsonKeyValue(dom::element e, const std::string& where, pb::KeyValue* out);

Status JsonAnyValue(dom::element e, const std::string& where, pb::AnyValue* out) {
  dom::object obj;
  RETURN_IF_ERROR(JsonObject(e, where, &obj));
  for (auto [key, v] : obj) {
    if (v.is_null()) continue;
    const std::string w = where + "." + std::string(key);
    if (Named(key, "stringValue", "string_value")) {
      RETURN_IF_ERROR(JsonString(v, w, out->mutable_string_value()));
    } else if (Named(key, "boolValue", "bool_value")) {
      bool b = false;
      if (v.get_bool().get(b))
        return Bad(w, std::string("expected a boolean, got ") + JsonTypeName(v));
      out->set_bool_value(b);
    } else if (Named(key, "intValue", "int_value")) {
      int64_t i = 0;
      RETURN_IF_ERROR(JsonInt(v, w, &i));
      out->set_int_value(i);
    } else if (Named(key, "doubleValue", "double_value")) {
      double d = 0;
      RETURN_IF_ERROR(JsonDouble(v, w, &d));
      out->set_double_value(d);
    } else if (Named(key, "bytesValue", "bytes_value")) {
      RETURN_IF_ERROR(JsonBase64(v, w, out->mutable_bytes_value()));
    } else if (Named(key, "arrayValue", "array_value")) {
      pb::ArrayValue* arr = out->mutable_array_value();
      dom::object a;
      RETURN_IF_ERROR(JsonObject(v, w, &a));
      for (auto [k2, v2] : a) {
        if (k2 == "values" && !v2.is_null()) {
          RETURN_IF_ERROR(
              JsonEach(v2, w + ".values", [&](dom::element item, const std::string& iw) {
                return JsonAnyValue(item, iw, arr->add_values());
              }));
        }
      }
    } else if (Named(key, "kvlistValue", "kvlist_value")) {
      pb::KeyValueList* list = out->mutable_kvlist_value();
      dom::object l;
      RETURN_IF_ERROR(JsonObject(v, w, &l));
      for (auto [k2, v2] : l) {
        if (k2 == "values" && !v2.is_null()) {
          RETURN_IF_ERROR(
              JsonEach(v2, w + ".values", [&](dom::element item, const std::string& iw) {
                return JsonKeyValue(item, iw, list->add_values());
              }));
        }
      }
    }
  }
  return Status::OK();
}

Status JsonKeyValue(dom::element e, const std::string& where, pb::KeyValue* out) {
  dom::object obj;
  RETURN_IF_ERROR(JsonObject(e, where, &obj));
  for (auto [key, v] : obj) {
    if (v.is_null()) continue;
    if (key == "key") {
      RETURN_IF_ERROR(JsonString(v, where + ".key", out->mutable_key()));
    } else if (key == "value") {
      RETURN_IF_ERROR(JsonAnyValue(v, where + ".value", out->mutable_value()));
    }
  }
  return Status::OK();
}

template <typename Message>
Status JsonAttributes(dom::element v, const std::string& where, Message* out) {
  return JsonEach(v, where, [&](dom::element item, const std::string& iw) {
    return JsonKeyValue(item, iw, out->add_attributes());
  });
}

Status JsonLogRecord(dom::element e, const std::string& where, pb::LogRecord* out) {
  dom::object obj;
  RETURN_IF_ERROR(JsonObject(e, where, &obj));
  for (auto [key, v] : obj) {
    if (v.is_null()) continue;
    const std::string w = where + "." + std::string(key);
    if (Named(key, "timeUnixNano", "time_unix_nano")) {
      uint64_t ns = 0;
      RETURN_IF_ERROR(JsonInt(v, w, &ns));
      out->set_time_unix_nano(ns);
    } else if (Named(key, "observedTimeUnixNano", "observed_time_unix_nano")) {
      uint64_t ns = 0;
      RETURN_IF_ERROR(JsonInt(v, w, &ns));
      out->set_observed_time_unix_nano(ns);
    } else if (Named(key, "severityNumber", "severity_number")) {
      int32_t n = 0;
      RETURN_IF_ERROR(JsonInt(v, w, &n));
      out->set_severity_number(n);
    } else if (Named(key, "severityText", "severity_text")) {
      RETURN_IF_ERROR(JsonString(v, w, out->mutable_severity_text()));
    } else if (key == "body") {
      RETURN_IF_ERROR(JsonAnyValue(v, w, out->mutable_body()));
    } else if (key == "attributes") {
      RETURN_IF_ERROR(JsonAttributes(v, w, out));
    } else if (Named(key, "droppedAttributesCount", "dropped_attributes_count")) {
      uint32_t n = 0;
      RETURN_IF_ERROR(JsonInt(v, w, &n));
      out->set_dropped_attributes_count(n);
    } else if (key == "flags") {
      uint32_t n = 0;
      RETURN_IF_ERROR(JsonInt(v, w, &n));
      out->set_flags(n);
    } else if (Named(key, "traceId", "trace_id")) {
      RETURN_IF_ERROR(JsonHexId(v, w, out->mutable_trace_id()));
    } else if (Named(key, "spanId", "span_id")) {
      RETURN_IF_ERROR(JsonHexId(v, w, out->mutable_span_id()));
    } else if (Named(key, "eventName", "event_name")) {
      RETURN_IF_ERROR(JsonString(v, w, out->mutable_event_name()));
    }
  }
  return Status::OK();
}

Status JsonScopeLogs(dom::element e, const std::string& where, pb::ScopeLogs* out) {
  dom::object obj;
  RETURN_IF_ERROR(JsonObject(e, where, &obj));
  for (auto [key, v] : obj) {
    if (v.is_null()) continue;
    const std::string w = where + "." + std::string(key);
    if (key == "scope") {
      pb::InstrumentationScope* scope = out->mutable_scope();
      dom::object s;
      RETURN_IF_ERROR(JsonObject(v, w, &s));
      for (auto [k2, v2] : s) {
        if (v2.is_null()) continue;
        const std::string w2 = w + "." + std::string(k2);
        if (k2 == "name") {
          RETURN_IF_ERROR(JsonString(v2, w2, scope->mutable_name()));
        } else if (k2 == "version") {
          RETURN_IF_ERROR(JsonString(v2, w2, scope->mutable_version()));
        } else if (k2 == "attributes") {
          RETURN_IF_ERROR(JsonAttributes(v2, w2, scope));
        }
      }
    } else if (Named(key, "logRecords", "log_records")) {
      RETURN_IF_ERROR(JsonEach(v, w, [&](dom::element item, const std::string& iw) {
        return JsonLogRecord(item, iw, out->add_log_records());
      }));
    }
  }
  return Status::OK();
}

Status JsonResourceLogs(dom::element e, const std::string& where, pb::ResourceLogs* out) {
  dom::object obj;
  RETURN_IF_ERROR(JsonObject(e, where, &obj));
  for (auto [key, v] : obj) {
    if (v.is_null()) continue;
    const std::string w = where + "." + std::string(key);
    if (key == "resource") {
      dom::object r;
      RETURN_IF_ERROR(JsonObject(v, w, &r));
      for (auto [k2, v2] : r) {
        if (k2 == "attributes" && !v2.is_null()) {
          RETURN_IF_ERROR(JsonAttributes(v2, w + ".attributes", out->mutable_resource()));
        }
      }
    } else if (Named(key, "scopeLogs", "scope_logs")) {
      RETURN_IF_ERROR(JsonEach(v, w, [&](dom::element item, const std::string& iw) {
        return JsonScopeLogs(item, iw, out->add_scope_logs());
      }));
    }
  }
  return Status::OK();
}

Status DecodeJson(std::string_view body, pb::ExportLogsServiceRequest* out) {
  simdjson::padded_string padded(body);
  dom::parser parser;
  dom::element root;
  if (auto err = parser.parse(padded).get(root)) {
    return Status::InvalidArgument(std::string("malformed JSON: ") + simdjson::error_message(err));
  }
  dom::object obj;
  RETURN_IF_ERROR(JsonObject(root, "request", &obj));
  for (auto [key, v] : obj) {
    if (Named(key, "resourceLogs", "resource_logs") && !v.is_null()) {
      RETURN_IF_ERROR(JsonEach(v, "resourceLogs", [&](dom::element item, const std::string& iw) {
        return JsonResourceLogs(item, iw, out->add_resource_logs());
      }));
    }
  }
  return Status::OK();
}

Status DecodeProtobuf(std::string_view body, const ParseOptions& options,
                      pb::ExportLogsServiceRequest* out) {
  if (body.size() > static_cast<size_t>(INT_MAX)) {
    return Status::TooLarge("OTLP request over 2 GiB");
  }
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(body.data()),
                                            static_cast<int>(body.size()));
  // Every nesting level of an attribute value is three messages (AnyValue, KeyValueList,
  // KeyValue) below the five that lead to a record's body; deeper than the event's depth bound
  // would be refused anyway. Capped: the decoder recurses once per message level.
  in.SetRecursionLimit(std::clamp(3 * options.max_json_depth + 16, 100, 1000));
  if (!out->ParseFromCodedStream(&in) || !in.ConsumedEntireMessage()) {
    return Status::InvalidArgument(
        "malformed protobuf: the body is not an OTLP ExportLogsServiceRequest");
  }
  return Status::OK();
}

// ---------------------------------------------------------------------------------------------
// Log records to events.

// AnyValue as JSON: kvlist as an object, array as an array, bytes as base64, NaN / infinities as
// strings, an empty value as null. Recursion is bounded by the decoder's nesting limits.
void AnyValueJson(const pb::AnyValue& v, JsonWriter* w) {
  switch (v.value_case()) {
    case pb::AnyValue::kStringValue:
      w->String(v.string_value());
      return;
    case pb::AnyValue::kBoolValue:
      w->Bool(v.bool_value());
      return;
    case pb::AnyValue::kIntValue:
      w->Int(v.int_value());
      return;
    case pb::AnyValue::kDoubleValue:
      if (std::isfinite(v.double_value())) {
        w->Raw(DoubleText(v.double_value()));
      } else {
        w->String(DoubleText(v.double_value()));
      }
      return;
    case pb::AnyValue::kBytesValue:
      w->String(EncodeBase64(v.bytes_value()));
      return;
    case pb::AnyValue::kArrayValue:
      w->BeginArray();
      for (const pb::AnyValue& item : v.array_value().values()) AnyValueJson(item, w);
      w->EndArray();
      return;
    case pb::AnyValue::kKvlistValue:
      w->BeginObject();
      for (const pb::KeyValue& kv : v.kvlist_value().values()) {
        w->Key(kv.key());
        AnyValueJson(kv.value(), w);
      }
      w->EndObject();
      return;
    case pb::AnyValue::VALUE_NOT_SET:
      break;
  }
  w->Null();
}

// Text of a scalar AnyValue: strings as they are, other values as JSON text.
std::string ScalarText(const pb::AnyValue& v) {
  switch (v.value_case()) {
    case pb::AnyValue::kStringValue:
      return v.string_value();
    case pb::AnyValue::kBoolValue:
      return v.bool_value() ? "true" : "false";
    case pb::AnyValue::kIntValue:
      return std::to_string(v.int_value());
    case pb::AnyValue::kDoubleValue:
      return DoubleText(v.double_value());
    case pb::AnyValue::kBytesValue:
      return EncodeBase64(v.bytes_value());
    default:
      return "null";
  }
}

// One event's fields, within its bounds as the JSON flattener keeps them (README.md): at most
// max_event_bytes of names and values, max_fields_per_event fields, nesting at most
// max_json_depth (an attribute is level 1, a member of its kvlist or array level 2). Stops at the
// first bound crossed.
class EventFields {
 public:
  EventFields(const ParseOptions& options, std::vector<Field>* out)
      : options_(options), out_(out) {}

  bool Add(std::string name, std::string value) {
    if (bytes_ + name.size() + value.size() > options_.max_event_bytes) return Cross(kBytes);
    if (out_->size() >= options_.max_fields_per_event) return Cross(kFields);
    bytes_ += name.size() + value.size();
    out_->push_back(Field{std::move(name), std::move(value)});
    return true;
  }

  // Every attribute as `prefix` + key, flattened.
  bool Attributes(const google::protobuf::RepeatedPtrField<pb::KeyValue>& attrs,
                  std::string_view prefix) {
    std::string path;
    for (const pb::KeyValue& kv : attrs) {
      path.assign(prefix);
      path.append(kv.key());
      if (!Flatten(kv.value(), &path, 1)) return false;
    }
    return true;
  }

  // `v` at nesting level `depth`, named *path: kvlist members as path.key, array items as
  // path[i], empty ones as "{}" / "[]", scalars as ScalarText.
  bool Flatten(const pb::AnyValue& v, std::string* path, int depth) {
    if (depth > options_.max_json_depth) return Cross(kDepth);
    if (path->size() + bytes_ > options_.max_event_bytes) return Cross(kBytes);
    if (v.value_case() == pb::AnyValue::kKvlistValue) {
      const auto& members = v.kvlist_value().values();
      if (members.empty()) return Add(*path, "{}");
      const size_t n = path->size();
      for (const pb::KeyValue& kv : members) {
        path->push_back('.');
        path->append(kv.key());
        bool ok = Flatten(kv.value(), path, depth + 1);
        path->resize(n);
        if (!ok) return false;
      }
      return true;
    }
    if (v.value_case() == pb::AnyValue::kArrayValue) {
      const auto& items = v.array_value().values();
      if (items.empty()) return Add(*path, "[]");
      const size_t n = path->size();
      for (int i = 0; i < items.size(); ++i) {
        path->push_back('[');
        path->append(std::to_string(i));
        path->push_back(']');
        bool ok = Flatten(items[i], path, depth + 1);
        path->resize(n);
        if (!ok) return false;
      }
      return true;
    }
    return Add(*path, ScalarText(v));
  }

  Status Crossed(const std::string& where) const {
    switch (crossed_) {
      case kDepth:
        return Status::TooLarge(where + ": attributes nested deeper than the limit of " +
                                std::to_string(options_.max_json_depth) +
                                " levels (--max-json-depth)");
      case kFields:
        return Status::TooLarge(where + ": more fields than the limit of " +
                                std::to_string(options_.max_fields_per_event) +
                                " per event (--max-fields-per-event)");
      default:
        return Status::TooLarge(where + ": the event's fields exceed the event limit of " +
                                std::to_string(options_.max_event_bytes) +
                                " bytes (--max-event-bytes)");
    }
  }

 private:
  enum Bound { kNone, kBytes, kFields, kDepth };
  bool Cross(Bound b) {
    crossed_ = b;
    return false;
  }
  const ParseOptions& options_;
  std::vector<Field>* out_;
  size_t bytes_ = 0;
  Bound crossed_ = kNone;
};

int64_t NanosToMillis(uint64_t ns) { return static_cast<int64_t>(ns / 1000000); }

// The event of one log record (README.md, "OTLP logs"); TooLarge naming `where` when it crosses
// an event bound.
Status RecordEvent(const pb::LogRecord& rec, const pb::ScopeLogs& scope_logs,
                   const pb::ResourceLogs& resource_logs, const std::string* service_name,
                   const ParseOptions& options, const std::string& where, Event* e) {
  e->ingest_ms = options.now_ms;
  if (rec.time_unix_nano() != 0) {
    e->timestamp_ms = NanosToMillis(rec.time_unix_nano());
  } else if (rec.observed_time_unix_nano() != 0) {
    e->timestamp_ms = NanosToMillis(rec.observed_time_unix_nano());
  } else {
    e->timestamp_ms = options.now_ms;
  }
  const pb::AnyValue& body = rec.body();
  if (body.value_case() == pb::AnyValue::kStringValue) {
    RETURN_IF_ERROR(CheckRawSize(body.string_value().size(), options, where));
    e->raw = body.string_value();
  } else if (rec.has_body() && body.value_case() != pb::AnyValue::VALUE_NOT_SET) {
    JsonWriter w;
    AnyValueJson(body, &w);
    RETURN_IF_ERROR(CheckRawSize(w.str().size(), options, where));
    e->raw = w.Take();
  }
  EventFields f(options, &e->fields);
  bool ok = true;
  if (service_name != nullptr) ok = f.Add("service.name", *service_name);
  if (ok && !rec.severity_text().empty()) ok = f.Add("severity_text", rec.severity_text());
  if (ok && rec.severity_number() != 0) {
    ok = f.Add("severity_number", std::to_string(rec.severity_number()));
  }
  if (ok && !rec.trace_id().empty() && !AllZero(rec.trace_id())) {
    ok = f.Add("trace_id", Hex(rec.trace_id()));
  }
  if (ok && !rec.span_id().empty() && !AllZero(rec.span_id())) {
    ok = f.Add("span_id", Hex(rec.span_id()));
  }
  if (ok && rec.flags() != 0) ok = f.Add("flags", std::to_string(rec.flags()));
  if (ok && !rec.event_name().empty()) ok = f.Add("event_name", rec.event_name());
  if (ok) ok = f.Attributes(rec.attributes(), "attributes.");
  if (ok && (body.value_case() == pb::AnyValue::kKvlistValue ||
             body.value_case() == pb::AnyValue::kArrayValue)) {
    std::string path = "body";
    ok = f.Flatten(body, &path, 0);
  }
  const pb::InstrumentationScope& scope = scope_logs.scope();
  if (ok && !scope.name().empty()) ok = f.Add("scope.name", scope.name());
  if (ok && !scope.version().empty()) ok = f.Add("scope.version", scope.version());
  if (ok) ok = f.Attributes(scope.attributes(), "scope.attributes.");
  if (ok) ok = f.Attributes(resource_logs.resource().attributes(), "resource.attributes.");
  if (!ok) return f.Crossed(where);
  DedupFields(&e->fields);
  if (internal::TooBig(*e, options)) return CheckEventSize(*e, options, where);
  return Status::OK();
}

// The resource's service.name when it is a scalar (the field `service.name` of its events).
std::optional<std::string> ServiceName(const pb::ResourceLogs& rl) {
  std::optional<std::string> name;
  for (const pb::KeyValue& kv : rl.resource().attributes()) {
    if (kv.key() != "service.name") continue;
    const auto c = kv.value().value_case();
    if (c == pb::AnyValue::kKvlistValue || c == pb::AnyValue::kArrayValue) continue;
    name = ScalarText(kv.value());  // the last one wins, as for the attribute itself
  }
  return name;
}

}  // namespace

namespace internal {

Result<ParseResult> ParseOtlpLogs(std::string_view body, const ParseOptions& options) {
  std::optional<OtlpEncoding> encoding = OtlpEncodingFor(options.content_type);
  if (!encoding) {
    return Status::InvalidArgument("unsupported Content-Type '" + options.content_type +
                                   "' (OTLP: application/x-protobuf or application/json)");
  }
  pb::ExportLogsServiceRequest request;
  if (*encoding == OtlpEncoding::kJson) {
    RETURN_IF_ERROR(DecodeJson(body, &request));
  } else {
    RETURN_IF_ERROR(DecodeProtobuf(body, options, &request));
  }
  const size_t max_total = kExpansionSlackBytes + kExpansionFactor * body.size();
  size_t total = 0;
  size_t rejected = 0;
  std::string first_reason;
  Builder builder(options);
  std::vector<Event>* events = builder.Events({});
  for (int r = 0; r < request.resource_logs_size(); ++r) {
    const pb::ResourceLogs& rl = request.resource_logs(r);
    const std::optional<std::string> service = ServiceName(rl);
    for (int s = 0; s < rl.scope_logs_size(); ++s) {
      const pb::ScopeLogs& sl = rl.scope_logs(s);
      for (int i = 0; i < sl.log_records_size(); ++i) {
        const std::string where = "resourceLogs[" + std::to_string(r) + "].scopeLogs[" +
                                  std::to_string(s) + "].logRecords[" + std::to_string(i) + "]";
        Event e;
        Status st = RecordEvent(sl.log_records(i), sl, rl, service ? &*service : nullptr, options,
                                where, &e);
        if (st.code() == StatusCode::kTooLarge) {
          if (rejected++ == 0) first_reason = st.message();
          continue;
        }
        RETURN_IF_ERROR(st);
        total += e.ByteSize();
        if (total > max_total) {
          return Status::TooLarge(
              "the OTLP request expands to more than " + std::to_string(max_total) +
              " bytes of events (every record repeats its resource's and scope's attributes); "
              "send fewer records per request");
        }
        events->push_back(std::move(e));
      }
    }
  }
  ParseResult result = builder.Finish();
  result.rejected_count = rejected;
  result.rejected_message = std::move(first_reason);
  return result;
}

}  // namespace internal

std::optional<OtlpEncoding> OtlpEncodingFor(std::string_view content_type) {
  std::string_view t = content_type.substr(0, content_type.find(';'));
  while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) t.remove_prefix(1);
  while (!t.empty() && (t.back() == ' ' || t.back() == '\t')) t.remove_suffix(1);
  auto is = [&](std::string_view want) {
    return t.size() == want.size() &&
           std::equal(t.begin(), t.end(), want.begin(), [](char a, char b) {
             return (a >= 'A' && a <= 'Z' ? a - 'A' + 'a' : a) == b;
           });
  };
  if (t.empty() || is("application/x-protobuf") || is("application/protobuf")) {
    return OtlpEncoding::kProtobuf;
  }
  if (is("application/json")) return OtlpEncoding::kJson;
  return std::nullopt;
}

const char* OtlpContentType(OtlpEncoding encoding) {
  return encoding == OtlpEncoding::kJson ? "application/json" : "application/x-protobuf";
}

std::string OtlpLogsResponse(OtlpEncoding encoding, const ParseResult& result) {
  std::string message;
  if (result.rejected_count > 0) {
    message = "refused " + std::to_string(result.rejected_count) + " of " +
              std::to_string(result.rejected_count + result.event_count) +
              " log records; the first: " + result.rejected_message;
  }
  if (encoding == OtlpEncoding::kJson) {
    if (result.rejected_count == 0) return "{}";
    JsonWriter w;
    w.BeginObject().Key("partialSuccess").BeginObject();
    w.Key("rejectedLogRecords").String(std::to_string(result.rejected_count));
    w.Key("errorMessage").String(message);
    w.EndObject().EndObject();
    return w.Take();
  }
  pb::ExportLogsServiceResponse response;
  if (result.rejected_count > 0) {
    pb::ExportLogsPartialSuccess* partial = response.mutable_partial_success();
    partial->set_rejected_log_records(static_cast<int64_t>(result.rejected_count));
    partial->set_error_message(message);
  }
  return response.SerializeAsString();
}

std::string OtlpErrorBody(OtlpEncoding encoding, int http_status, std::string_view message) {
  int code = 13;  // INTERNAL
  switch (http_status) {
    case 400:
    case 415:
      code = 3;  // INVALID_ARGUMENT
      break;
    case 401:
      code = 16;  // UNAUTHENTICATED
      break;
    case 413:
      code = 8;  // RESOURCE_EXHAUSTED
      break;
    case 503:
      code = 14;  // UNAVAILABLE
      break;
    default:
      break;
  }
  if (encoding == OtlpEncoding::kJson) {
    JsonWriter w;
    w.BeginObject().Key("code").Int(code).Key("message").String(message).EndObject();
    return w.Take();
  }
  pb::RpcStatus status;
  status.set_code(code);
  status.set_message(std::string(message));
  return status.SerializeAsString();
}

}  // namespace sediment::ingest
