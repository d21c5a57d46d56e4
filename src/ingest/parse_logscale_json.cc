// LogScale's /api/v1/ingest/json: the body is one JSON object (one event) or an array of objects
// (one event each); README.md "json".
#include <simdjson.h>

#include <string>

#include "ingest/internal.h"
#include "ingest/json_util.h"

namespace sediment::ingest::internal {
namespace {

namespace dom = simdjson::dom;

Status JsonEvent(dom::element doc, const std::string& where, const ParseOptions& options,
                 Event* e) {
  dom::object obj;
  if (doc.get_object().get(obj)) {
    return Status::InvalidArgument(where + ": expected a JSON object, got " + JsonTypeName(doc));
  }
  e->ingest_ms = options.now_ms;
  e->timestamp_ms = options.now_ms;  // LogScale: @ingesttimestamp unless a parser sets one
  RETURN_IF_ERROR(FlattenJsonObject(obj, options, where, &e->fields));
  DedupFields(&e->fields);
  e->raw = simdjson::minify(doc);
  if (TooBig(*e, options)) return CheckEventSize(*e, options, where);
  return Status::OK();
}

}  // namespace

Result<ParseResult> ParseLogScaleJson(std::string_view body, const ParseOptions& options) {
  simdjson::padded_string padded(body);
  dom::parser parser;
  dom::element root;
  if (auto err = parser.parse(padded).get(root)) {
    return Status::InvalidArgument(std::string("malformed JSON: ") + simdjson::error_message(err));
  }
  Builder builder(options);
  std::vector<Event>* events = builder.Events({});
  if (root.type() == dom::element_type::ARRAY) {
    dom::array arr;
    std::ignore = root.get_array().get(arr);
    size_t i = 0;
    for (dom::element item : arr) {
      RETURN_IF_ERROR(
          JsonEvent(item, "event " + std::to_string(i++), options, &events->emplace_back()));
    }
  } else if (root.type() == dom::element_type::OBJECT) {
    RETURN_IF_ERROR(JsonEvent(root, "event 0", options, &events->emplace_back()));
  } else {
    return Status::InvalidArgument(std::string("expected a JSON object or an array of objects, "
                                               "got ") +
                                   JsonTypeName(root));
  }
  return builder.Finish();
}

}  // namespace sediment::ingest::internal
