// Elastic bulk bodies (POST /_bulk, /{index}/_bulk, /api/v1/ingest/elastic-bulk): NDJSON pairs of
// an action line and, for index / create / update, a source line (README.md "elastic-bulk").
#include <simdjson.h>

#include <charconv>
#include <optional>
#include <string>
#include <tuple>

#include "ingest/internal.h"
#include "ingest/json_util.h"

namespace sediment::ingest::internal {
namespace {

namespace dom = simdjson::dom;

// Elastic's auto-generated ids are 20 URL-safe base64 characters; these are random ones.
std::string GeneratedId() {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string id;
  id.reserve(20);
  uint64_t bits = RandomMessageId();
  for (int i = 0; i < 20; ++i) {
    if (i == 10) bits = RandomMessageId();
    id.push_back(kAlphabet[bits & 63]);
    bits >>= 6;
  }
  return id;
}

// One line of the body without its "\n" (and a "\r" before it).
struct Line {
  std::string_view text;
  size_t number = 0;  // 1-based, as Elastic counts them in its messages
};

class Lines {
 public:
  explicit Lines(std::string_view body) : body_(body) {}
  // The next line that is not blank; false at the end of the body.
  bool Next(Line* out) {
    while (pos_ < body_.size()) {
      size_t end = body_.find('\n', pos_);
      if (end == std::string_view::npos) end = body_.size();
      std::string_view text = body_.substr(pos_, end - pos_);
      pos_ = end + 1;
      ++number_;
      if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
      if (text.find_first_not_of(" \t\r") == std::string_view::npos) continue;
      *out = Line{text, number_};
      return true;
    }
    return false;
  }

 private:
  std::string_view body_;
  size_t pos_ = 0;
  size_t number_ = 0;
};

Status Malformed(const Line& line, const std::string& what) {
  return Status::InvalidArgument("Malformed action/metadata line [" + std::to_string(line.number) +
                                 "], " + what);
}

// Parses `text` (a slice of a padded buffer: SIMDJSON_PADDING readable bytes follow it).
simdjson::error_code ParseLine(dom::parser& parser, std::string_view text, dom::element* out) {
  return parser.parse(reinterpret_cast<const uint8_t*>(text.data()), text.size(), false).get(*out);
}

void Refuse(BulkItem* item, std::string type, std::string reason, std::string cause_type = {},
            std::string cause_reason = {}) {
  item->status = 400;
  item->error_type = std::move(type);
  item->error_reason = std::move(reason);
  item->cause_type = std::move(cause_type);
  item->cause_reason = std::move(cause_reason);
}

// The document of an index / create action as an event; false with `item` refused when Elastic
// would refuse the document (the rest of the body goes on).
bool SourceEvent(dom::parser& parser, const Line& line, const ParseOptions& options, BulkItem* item,
                 Event* e) {
  dom::element doc;
  if (auto err = ParseLine(parser, line.text, &doc)) {
    Refuse(
        item, "mapper_parsing_exception", "failed to parse", "json_parse_exception",
        std::string("line [") + std::to_string(line.number) + "]: " + simdjson::error_message(err));
    return false;
  }
  dom::object obj;
  if (doc.get_object().get(obj)) {
    Refuse(item, "mapper_parsing_exception", "failed to parse", "not_x_content_exception",
           std::string("line [") + std::to_string(line.number) + "]: the document is " +
               JsonTypeName(doc) + ", not an object");
    return false;
  }
  const std::string where = "document of line " + std::to_string(line.number);
  e->ingest_ms = options.now_ms;
  e->timestamp_ms = options.now_ms;
  std::optional<std::string_view> message;
  for (auto [key, value] : obj) {
    if (key == "@timestamp") {
      Status st =
          JsonTimestampMillis(value, "@timestamp", EpochUnit::kAuto, true, where, &e->timestamp_ms);
      if (!st.ok()) {
        Refuse(item, "mapper_parsing_exception",
               "failed to parse field [@timestamp] of type [date] in document with id '" +
                   item->id + "'",
               "illegal_argument_exception", st.message());
        return false;
      }
    } else if (key == "message" && value.type() == dom::element_type::STRING) {
      std::string_view sv;
      std::ignore = value.get_string().get(sv);
      message = sv;
    }
  }
  Status st = FlattenJsonObject(obj, options, where, &e->fields);
  if (st.ok()) {
    std::erase_if(e->fields, [](const Field& f) { return f.name == "@timestamp"; });
    if (!item->index.empty()) e->fields.push_back(Field{"_index", item->index});
    DedupFields(&e->fields);
    e->raw = message ? std::string(*message) : simdjson::minify(doc);
    if (TooBig(*e, options)) st = CheckEventSize(*e, options, where);
  }
  if (!st.ok()) {
    // Elastic's wording for its own field and size limits.
    Refuse(item, "illegal_argument_exception", st.message());
    return false;
  }
  return true;
}

}  // namespace

Result<ParseResult> ParseElasticBulk(std::string_view body, const ParseOptions& options) {
  simdjson::padded_string padded(body);
  Lines lines(std::string_view(padded.data(), body.size()));
  dom::parser parser;
  Builder builder(options);
  std::vector<Event>* events = builder.Events({});
  std::vector<BulkItem> items;
  Line line;
  while (lines.Next(&line)) {
    dom::element action_doc;
    if (auto err = ParseLine(parser, line.text, &action_doc)) {
      return Malformed(line, std::string("not JSON: ") + simdjson::error_message(err));
    }
    dom::object action_obj;
    if (action_doc.get_object().get(action_obj) || action_obj.size() != 1) {
      return Malformed(line,
                       "expected an object with one of [create], [delete], [index] or "
                       "[update]");
    }
    auto [action_key, meta_value] = *action_obj.begin();
    const std::string action(action_key);
    if (action != "index" && action != "create" && action != "delete" && action != "update") {
      return Malformed(line, "expected field [create], [delete], [index] or [update] but found [" +
                                 action + "]");
    }
    dom::object meta;
    if (meta_value.get_object().get(meta)) {
      return Malformed(
          line, "the value of [" + action + "] must be an object, got " + JsonTypeName(meta_value));
    }
    BulkItem& item = items.emplace_back();
    item.action = action;
    item.index = options.bulk_index;
    for (auto [key, value] : meta) {
      if (key == "_index" || key == "_id") {
        if (value.type() == dom::element_type::OBJECT || value.type() == dom::element_type::ARRAY) {
          return Malformed(
              line, "[" + std::string(key) + "] must be a string, got " + JsonTypeName(value));
        }
        std::string text;
        if (value.type() == dom::element_type::STRING) {
          std::string_view sv;
          std::ignore = value.get_string().get(sv);
          text.assign(sv);
        } else {
          text = simdjson::minify(value);
        }
        (key == "_index" ? item.index : item.id) = std::move(text);
      }
    }
    const bool given_id = !item.id.empty();
    if (!given_id) item.id = GeneratedId();
    if (action == "delete") {
      Refuse(&item, "illegal_argument_exception",
             "the delete action is not supported: sediment stores events append-only");
      continue;
    }
    Line source;
    if (!lines.Next(&source)) {
      return Status::InvalidArgument("action/metadata line [" + std::to_string(line.number) +
                                     "] has no source line after it");
    }
    if (action == "update") {
      Refuse(&item, "illegal_argument_exception",
             "the update action is not supported: sediment stores events append-only");
      continue;
    }
    Event e;
    if (!SourceEvent(parser, source, options, &item, &e)) continue;
    if (given_id) e.fields.push_back(Field{"_id", item.id});
    DedupFields(&e.fields);
    events->push_back(std::move(e));
  }
  ParseResult result = builder.Finish();
  result.items = std::move(items);
  return result;
}

}  // namespace sediment::ingest::internal
