// humio-structured, humio-unstructured and HEC event bodies (simdjson DOM: every document is fully
// validated before any of its values is used).
#include <simdjson.h>

#include <algorithm>
#include <charconv>
#include <optional>
#include <string>
#include <tuple>

#include "common/time_parse.h"
#include "ingest/internal.h"
#include "ingest/json_util.h"

namespace sediment::ingest::internal {
namespace {

namespace dom = simdjson::dom;
using Tags = std::vector<std::pair<std::string, std::string>>;

const char* TypeName(dom::element_type t) {
  switch (t) {
    case dom::element_type::ARRAY:
      return "an array";
    case dom::element_type::OBJECT:
      return "an object";
    case dom::element_type::INT64:
    case dom::element_type::UINT64:
    case dom::element_type::DOUBLE:
      return "a number";
    case dom::element_type::STRING:
      return "a string";
    case dom::element_type::BOOL:
      return "a boolean";
    case dom::element_type::NULL_VALUE:
      return "null";
  }
  return "an unknown value";
}

const char* TypeName(dom::element e) { return TypeName(e.type()); }

bool IsContainer(dom::element e) {
  return e.type() == dom::element_type::ARRAY || e.type() == dom::element_type::OBJECT;
}

std::string Quote(std::string_view s) {
  constexpr size_t kMax = 64;
  std::string out = "'";
  out.append(s.substr(0, kMax));
  if (s.size() > kMax) out.append("...");
  out.push_back('\'');
  return out;
}

// Text of a scalar: strings as they are, other values as JSON (12, 1.5, true, null).
void ScalarText(dom::element e, std::string* out) {
  switch (e.type()) {
    case dom::element_type::STRING: {
      std::string_view sv;
      std::ignore = e.get_string().get(sv);
      out->assign(sv);
      return;
    }
    case dom::element_type::INT64:
    case dom::element_type::UINT64: {
      char buf[24];
      char* end;
      int64_t i;
      if (!e.get_int64().get(i)) {
        end = std::to_chars(buf, buf + sizeof(buf), i).ptr;
      } else {
        uint64_t u = 0;
        std::ignore = e.get_uint64().get(u);
        end = std::to_chars(buf, buf + sizeof(buf), u).ptr;
      }
      out->assign(buf, end);
      return;
    }
    case dom::element_type::BOOL: {
      bool b = false;
      std::ignore = e.get_bool().get(b);
      out->assign(b ? "true" : "false");
      return;
    }
    case dom::element_type::NULL_VALUE:
      out->assign("null");
      return;
    default:
      *out = simdjson::minify(e);
      return;
  }
}

// Flattens JSON objects into fields (nested objects as a.b, arrays as a[0]; strings as they are,
// other scalars as JSON text, empty containers as "{}" / "[]") within the event's bounds: the
// fields it adds to `out` may hold at most options.max_event_bytes of names and values together,
// `out` at most options.max_fields_per_event fields, and no field may be nested deeper than
// options.max_json_depth. It stops at the first bound crossed, so a small body that would expand
// to a huge event (deep nesting under long keys repeats every key in every name below it) costs
// no more than the bound. One per event: the bounds count every Members call on it.
class Flattener {
 public:
  Flattener(const ParseOptions& options, std::vector<Field>* out) : options_(options), out_(out) {}

  // TooLarge naming `where` and the bound crossed; `out` then holds a part of the fields.
  Status Members(dom::object obj, const std::string& where) {
    std::string path;
    for (auto [key, value] : obj) {
      path.assign(key);
      if (!Flatten(value, &path, 1)) return Crossed(where);
    }
    return Status::OK();
  }

 private:
  enum class Bound { kNone, kBytes, kFields, kDepth };

  bool Flatten(dom::element e, std::string* path, int depth) {
    if (depth > options_.max_json_depth) return Cross(Bound::kDepth);
    if (e.type() == dom::element_type::OBJECT) {
      dom::object obj;
      std::ignore = e.get_object().get(obj);
      if (obj.size() == 0) return Add(*path, "{}");
      for (auto [key, value] : obj) {
        if (!Child(key, false, 0, value, path, depth)) return false;
      }
      return true;
    }
    if (e.type() == dom::element_type::ARRAY) {
      dom::array arr;
      std::ignore = e.get_array().get(arr);
      if (arr.size() == 0) return Add(*path, "[]");
      size_t i = 0;
      for (dom::element child : arr) {
        if (!Child({}, true, i++, child, path, depth)) return false;
      }
      return true;
    }
    std::string value;
    ScalarText(e, &value);
    return Add(*path, std::move(value));
  }

  bool Child(std::string_view key, bool array_index, size_t index, dom::element child,
             std::string* path, int depth) {
    const size_t n = path->size();
    if (array_index) {
      char buf[24];
      path->push_back('[');
      path->append(buf, std::to_chars(buf, buf + sizeof(buf), index).ptr);
      path->push_back(']');
    } else {
      path->push_back('.');
      path->append(key);
    }
    // The name alone may cross the byte bound before any value is seen.
    if (bytes_ + path->size() > options_.max_event_bytes) return Cross(Bound::kBytes);
    bool ok = Flatten(child, path, depth + 1);
    path->resize(n);
    return ok;
  }

  bool Add(const std::string& name, std::string value) {
    if (bytes_ + name.size() + value.size() > options_.max_event_bytes) {
      return Cross(Bound::kBytes);
    }
    if (out_->size() >= options_.max_fields_per_event) return Cross(Bound::kFields);
    bytes_ += name.size() + value.size();
    out_->push_back(Field{name, std::move(value)});
    return true;
  }

  bool Cross(Bound bound) {
    crossed_ = bound;
    return false;
  }

  Status Crossed(const std::string& where) const {
    switch (crossed_) {
      case Bound::kDepth:
        return Status::TooLarge(where + ": fields nested deeper than the limit of " +
                                std::to_string(options_.max_json_depth) +
                                " levels (--max-json-depth)");
      case Bound::kFields:
        return Status::TooLarge(where + ": more fields than the limit of " +
                                std::to_string(options_.max_fields_per_event) +
                                " per event (--max-fields-per-event)");
      case Bound::kBytes:
      case Bound::kNone:
        break;
    }
    return Status::TooLarge(where + ": the event's fields exceed the event limit of " +
                            std::to_string(options_.max_event_bytes) +
                            " bytes once flattened (--max-event-bytes)");
  }

  const ParseOptions& options_;
  std::vector<Field>* out_;
  size_t bytes_ = 0;
  Bound crossed_ = Bound::kNone;
};

Status ParseTags(dom::element tags, const ParseOptions& options, const std::string& where,
                 Tags* out) {
  dom::object obj;
  if (tags.get_object().get(obj)) {
    return Status::InvalidArgument(where + ": 'tags' must be an object, got " + TypeName(tags));
  }
  for (auto [key, value] : obj) {
    if (IsContainer(value)) {
      return Status::InvalidArgument(where + ": tag " + Quote(key) + " must be a string, got " +
                                     TypeName(value));
    }
    std::string name = TagName(key);
    if (name.size() == 1) return Status::InvalidArgument(where + ": empty tag name");
    std::string text;
    ScalarText(value, &text);
    if (name == "#repo") {
      if (text != options.repo) {
        return Status::InvalidArgument(where + ": tag #repo " + Quote(text) +
                                       " does not match the token's repository " +
                                       Quote(options.repo));
      }
      continue;
    }
    out->emplace_back(std::move(name), std::move(text));
  }
  return Status::OK();
}

Status ParseJsonRoot(dom::parser& parser, const simdjson::padded_string& padded,
                     dom::array* batches) {
  dom::element root;
  if (auto err = parser.parse(padded).get(root)) {
    return Status::InvalidArgument(std::string("malformed JSON: ") + simdjson::error_message(err));
  }
  if (root.get_array().get(*batches)) {
    return Status::InvalidArgument(std::string("expected a JSON array of batches, got ") +
                                   TypeName(root));
  }
  return Status::OK();
}

std::string EventWhere(const char* kind, size_t index, size_t batch) {
  return std::string(kind) + " " + std::to_string(index) + " of batch " + std::to_string(batch);
}

// Reads a JSON timestamp member named `name`: a number or numeric string in `unit` (kAuto: |n| <
// 1e11 is seconds, larger is milliseconds), or, when allow_iso, an ISO-8601 string.
Status JsonTimestamp(dom::element v, const char* name, EpochUnit unit, bool allow_iso,
                     const std::string& where, int64_t* out) {
  std::optional<int64_t> ms;
  switch (v.type()) {
    case dom::element_type::STRING: {
      std::string_view sv;
      std::ignore = v.get_string().get(sv);
      if (allow_iso) ms = ParseIso8601Millis(sv);
      if (!ms) ms = ParseEpochText(sv, unit);
      if (!ms) {
        return Status::InvalidArgument(
            where + ": " + name + " " + Quote(sv) +
            (allow_iso ? " is not ISO-8601 or epoch" : " is not epoch seconds"));
      }
      break;
    }
    case dom::element_type::INT64: {
      int64_t i = 0;
      std::ignore = v.get_int64().get(i);
      ms = EpochFromInt(i, unit);
      break;
    }
    case dom::element_type::DOUBLE: {
      double d = 0;
      std::ignore = v.get_double().get(d);
      ms = EpochFromDouble(d, unit);
      break;
    }
    case dom::element_type::UINT64:
      break;
    default:
      return Status::InvalidArgument(where + ": " + name + " must be a string or a number, got " +
                                     TypeName(v));
  }
  if (!ms) {
    return Status::InvalidArgument(where + ": " + name + " " + simdjson::minify(v) +
                                   " is out of range");
  }
  *out = *ms;
  return Status::OK();
}

// LogScale structured timestamp: ISO-8601 string, or epoch number (or numeric string) where
// |n| < 1e11 is seconds and anything larger is milliseconds.
Status StructuredTimestamp(dom::element v, size_t index, size_t batch, int64_t* out) {
  return JsonTimestamp(v, "timestamp", EpochUnit::kAuto, true, EventWhere("event", index, batch),
                       out);
}

Status StructuredEvent(dom::element ev, size_t index, size_t batch, const ParseOptions& options,
                       Event* e) {
  auto where = [&] { return EventWhere("event", index, batch); };
  dom::object obj;
  if (ev.get_object().get(obj)) {
    return Status::InvalidArgument(where() + ": expected an object, got " + TypeName(ev));
  }
  e->timestamp_ms = options.now_ms;
  e->ingest_ms = options.now_ms;
  std::optional<dom::element> attributes;
  std::optional<std::string_view> rawstring;
  std::optional<std::string_view> timezone;
  for (auto [key, value] : obj) {
    if (key == "timestamp") {
      RETURN_IF_ERROR(StructuredTimestamp(value, index, batch, &e->timestamp_ms));
    } else if (key == "attributes") {
      if (value.type() != dom::element_type::OBJECT) {
        return Status::InvalidArgument(where() + ": 'attributes' must be an object, got " +
                                       TypeName(value));
      }
      attributes = value;
    } else if (key == "rawstring") {
      std::string_view sv;
      if (value.get_string().get(sv)) {
        return Status::InvalidArgument(where() + ": 'rawstring' must be a string, got " +
                                       TypeName(value));
      }
      rawstring = sv;
    } else if (key == "timezone") {
      std::string_view sv;
      if (value.get_string().get(sv)) {
        return Status::InvalidArgument(where() + ": 'timezone' must be a string, got " +
                                       TypeName(value));
      }
      timezone = sv;
    }
  }
  if (attributes) {
    dom::object attrs;
    std::ignore = attributes->get_object().get(attrs);
    // One field per member unless nested; the vector then grows as before.
    e->fields.reserve(std::min(attrs.size() + 1, options.max_fields_per_event));
    RETURN_IF_ERROR(Flattener(options, &e->fields).Members(attrs, where()));
  }
  if (timezone) e->fields.push_back(Field{"@timezone", std::string(*timezone)});
  if (rawstring) {
    e->raw.assign(*rawstring);
  } else if (attributes) {
    e->raw = simdjson::minify(*attributes);
  }
  DedupFields(&e->fields);
  if (TooBig(*e, options)) return CheckEventSize(*e, options, where());
  return Status::OK();
}

}  // namespace

Result<ParseResult> ParseHumioStructured(std::string_view body, const ParseOptions& options) {
  simdjson::padded_string padded(body);
  dom::parser parser;
  dom::array batches;
  RETURN_IF_ERROR(ParseJsonRoot(parser, padded, &batches));
  Builder builder(options);
  size_t bi = 0;
  for (dom::element batch : batches) {
    const std::string where = "batch " + std::to_string(bi);
    dom::object obj;
    if (batch.get_object().get(obj)) {
      return Status::InvalidArgument(where + ": expected an object, got " + TypeName(batch));
    }
    Tags tags;
    std::optional<dom::array> events_json;
    for (auto [key, value] : obj) {
      if (key == "tags") {
        RETURN_IF_ERROR(ParseTags(value, options, where, &tags));
      } else if (key == "events") {
        dom::array arr;
        if (value.get_array().get(arr)) {
          return Status::InvalidArgument(where + ": 'events' must be an array, got " +
                                         TypeName(value));
        }
        events_json = arr;
      }
    }
    if (!events_json) return Status::InvalidArgument(where + ": missing 'events' array");
    std::vector<Event>* events = builder.Events(std::move(tags));
    events->reserve(events->size() + events_json->size());
    size_t ei = 0;
    for (dom::element ev : *events_json) {
      RETURN_IF_ERROR(StructuredEvent(ev, ei, bi, options, &events->emplace_back()));
      ++ei;
    }
    ++bi;
  }
  return builder.Finish();
}

Result<ParseResult> ParseHumioUnstructured(std::string_view body, const ParseOptions& options) {
  simdjson::padded_string padded(body);
  dom::parser parser;
  dom::array batches;
  RETURN_IF_ERROR(ParseJsonRoot(parser, padded, &batches));
  Builder builder(options);
  size_t bi = 0;
  for (dom::element batch : batches) {
    const std::string where = "batch " + std::to_string(bi);
    dom::object obj;
    if (batch.get_object().get(obj)) {
      return Status::InvalidArgument(where + ": expected an object, got " + TypeName(batch));
    }
    Tags tags;
    std::vector<Field> fields;
    std::optional<std::string_view> type;
    std::optional<dom::array> messages;
    for (auto [key, value] : obj) {
      if (key == "tags") {
        RETURN_IF_ERROR(ParseTags(value, options, where, &tags));
      } else if (key == "fields") {
        dom::object f;
        if (value.get_object().get(f)) {
          return Status::InvalidArgument(where + ": 'fields' must be an object, got " +
                                         TypeName(value));
        }
        RETURN_IF_ERROR(Flattener(options, &fields).Members(f, where + " 'fields'"));
      } else if (key == "type") {
        std::string_view sv;
        if (value.get_string().get(sv)) {
          return Status::InvalidArgument(where + ": 'type' must be a string, got " +
                                         TypeName(value));
        }
        type = sv;
      } else if (key == "messages") {
        dom::array arr;
        if (value.get_array().get(arr)) {
          return Status::InvalidArgument(where + ": 'messages' must be an array, got " +
                                         TypeName(value));
        }
        messages = arr;
      }
    }
    if (!messages) return Status::InvalidArgument(where + ": missing 'messages' array");
    if (type) tags.emplace_back("#type", std::string(*type));
    DedupFields(&fields);
    std::vector<Event>* events = builder.Events(std::move(tags));
    events->reserve(events->size() + messages->size());
    size_t mi = 0;
    for (dom::element m : *messages) {
      std::string_view sv;
      if (m.get_string().get(sv)) {
        return Status::InvalidArgument(EventWhere("message", mi, bi) + ": expected a string, got " +
                                       TypeName(m));
      }
      if (sv.size() > options.max_event_bytes) {
        return CheckRawSize(sv.size(), options, EventWhere("message", mi, bi));
      }
      Event& e = events->emplace_back();
      e.timestamp_ms = options.now_ms;
      e.ingest_ms = options.now_ms;
      e.raw.assign(sv);
      e.fields = fields;
      if (TooBig(e, options)) return CheckEventSize(e, options, EventWhere("message", mi, bi));
      ++mi;
    }
    ++bi;
  }
  return builder.Finish();
}

namespace {

// Finds the end of the JSON object starting at body[begin] == '{' by bracket counting outside
// strings. Structure inside is checked later by the parser. False when the object never closes.
bool ScanObject(std::string_view body, size_t begin, size_t* end) {
  int64_t depth = 0;
  bool in_string = false;
  for (size_t i = begin; i < body.size(); ++i) {
    const char c = body[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        break;
      case '{':
      case '[':
        ++depth;
        break;
      case '}':
      case ']':
        if (--depth == 0) {
          *end = i + 1;
          return true;
        }
        break;
      default:
        break;
    }
  }
  return false;
}

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

struct HecDefaults {
  std::optional<std::string> host, source, sourcetype, channel;
};

Status EnvelopeString(dom::element v, std::string_view key, const std::string& where,
                      std::optional<std::string>* out) {
  if (IsContainer(v)) {
    return Status::InvalidArgument(where + ": '" + std::string(key) + "' must be a string, got " +
                                   TypeName(v));
  }
  std::string s;
  ScalarText(v, &s);
  *out = std::move(s);
  return Status::OK();
}

Status HecEvent(dom::element doc, size_t index, const ParseOptions& options,
                const HecDefaults& defaults, Event* e) {
  auto where = [&] { return "event " + std::to_string(index); };
  dom::object obj;
  if (doc.get_object().get(obj)) {
    return Status::InvalidArgument(where() + ": expected an object, got " + TypeName(doc));
  }
  e->timestamp_ms = options.now_ms;
  e->ingest_ms = options.now_ms;
  std::optional<dom::element> event, fields;
  std::optional<std::string> host, source, sourcetype, timezone;
  for (auto [key, value] : obj) {
    if (key == "event") {
      event = value;
    } else if (key == "time") {
      RETURN_IF_ERROR(
          JsonTimestamp(value, "time", EpochUnit::kSeconds, false, where(), &e->timestamp_ms));
    } else if (key == "host") {
      RETURN_IF_ERROR(EnvelopeString(value, key, where(), &host));
    } else if (key == "source") {
      RETURN_IF_ERROR(EnvelopeString(value, key, where(), &source));
    } else if (key == "sourcetype") {
      RETURN_IF_ERROR(EnvelopeString(value, key, where(), &sourcetype));
    } else if (key == "timezone") {
      RETURN_IF_ERROR(EnvelopeString(value, key, where(), &timezone));
    } else if (key == "index") {
      // Splunk clients send their index ("main"); the token alone selects the repository.
      std::optional<std::string> index;
      RETURN_IF_ERROR(EnvelopeString(value, key, where(), &index));
    } else if (key == "fields") {
      if (value.type() != dom::element_type::OBJECT) {
        return Status::InvalidArgument(where() + ": 'fields' must be an object, got " +
                                       TypeName(value));
      }
      fields = value;
    }
  }
  if (!event) {
    return Status::InvalidArgument(where() + ": Event field is required")
        .WithSubcode(StatusSubcode::kEventFieldRequired);
  }
  Flattener flattener(options, &e->fields);  // the event object and 'fields' share the bounds
  switch (event->type()) {
    case dom::element_type::NULL_VALUE:
      return Status::InvalidArgument(where() + ": Event field cannot be blank")
          .WithSubcode(StatusSubcode::kEventFieldBlank);
    case dom::element_type::STRING: {
      std::string_view sv;
      std::ignore = event->get_string().get(sv);
      if (sv.empty()) {
        return Status::InvalidArgument(where() + ": Event field cannot be blank")
            .WithSubcode(StatusSubcode::kEventFieldBlank);
      }
      if (sv.size() > options.max_event_bytes) return CheckRawSize(sv.size(), options, where());
      e->raw.assign(sv);
      break;
    }
    case dom::element_type::OBJECT: {
      dom::object members;
      std::ignore = event->get_object().get(members);
      RETURN_IF_ERROR(flattener.Members(members, where()));
      e->raw = simdjson::minify(*event);
      break;
    }
    default:
      e->raw = simdjson::minify(*event);
      break;
  }
  if (fields) {
    dom::object members;
    std::ignore = fields->get_object().get(members);
    RETURN_IF_ERROR(flattener.Members(members, where() + " 'fields'"));
  }
  auto add = [&](const char* name, const std::optional<std::string>& v,
                 const std::optional<std::string>& fallback) {
    if (v) {
      e->fields.push_back(Field{name, *v});
    } else if (fallback) {
      e->fields.push_back(Field{name, *fallback});
    }
  };
  add("host", host, defaults.host);
  add("source", source, defaults.source);
  add("sourcetype", sourcetype, defaults.sourcetype);
  add("channel", std::nullopt, defaults.channel);
  add("@timezone", timezone, std::nullopt);
  DedupFields(&e->fields);
  if (TooBig(*e, options)) return CheckEventSize(*e, options, where());
  return Status::OK();
}

}  // namespace

Result<ParseResult> ParseHecEvents(std::string_view body, const ParseOptions& options) {
  HecDefaults defaults;
  auto param = [&](const char* name, std::optional<std::string>* out) {
    auto it = options.params.find(name);
    if (it != options.params.end()) *out = it->second;
  };
  param("host", &defaults.host);
  param("source", &defaults.source);
  param("sourcetype", &defaults.sourcetype);
  param("channel", &defaults.channel);

  // The parser reads each object in place: every slice of `padded` is followed by at least
  // SIMDJSON_PADDING readable bytes.
  simdjson::padded_string padded(body);
  std::string_view text(padded.data(), body.size());
  dom::parser parser;
  Builder builder(options);
  std::vector<Event>* events = builder.Events({});
  size_t pos = 0;
  size_t index_no = 0;
  while (true) {
    while (pos < text.size() && IsSpace(text[pos])) ++pos;
    if (pos == text.size()) break;
    const std::string where = "event " + std::to_string(index_no);
    if (text[pos] != '{') {
      return Status::InvalidArgument(where + ": expected a JSON object, found " +
                                     Quote(text.substr(pos, 16)));
    }
    size_t end = 0;
    if (!ScanObject(text, pos, &end)) {
      return Status::InvalidArgument(where + ": truncated JSON object");
    }
    dom::element doc;
    auto err = parser.parse(reinterpret_cast<const uint8_t*>(text.data() + pos), end - pos, false)
                   .get(doc);
    if (err) {
      return Status::InvalidArgument(where + ": malformed JSON: " + simdjson::error_message(err));
    }
    RETURN_IF_ERROR(HecEvent(doc, index_no, options, defaults, &events->emplace_back()));
    pos = end;
    ++index_no;
  }
  return builder.Finish();
}

// json_util.h: the helpers above for the parsers in other files.
const char* JsonTypeName(dom::element e) { return TypeName(e); }
std::string QuoteForMessage(std::string_view s) { return Quote(s); }
Status FlattenJsonObject(dom::object obj, const ParseOptions& options, const std::string& where,
                         std::vector<Field>* out) {
  return Flattener(options, out).Members(obj, where);
}
Status JsonTimestampMillis(dom::element v, const char* name, EpochUnit unit, bool allow_iso,
                           const std::string& where, int64_t* out) {
  return JsonTimestamp(v, name, unit, allow_iso, where, out);
}

}  // namespace sediment::ingest::internal
