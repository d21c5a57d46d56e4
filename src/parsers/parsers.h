// Parsers at ingest (LogScale's model): a parser is a named per-record pipeline of the query
// language run on every event of a request before it is appended to the commit log, so the log
// holds parsed events. Built-in parsers and compiled custom ones; README.md states the contract.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "ingest/ingest.h"
#include "model/event.h"
#include "query/query.h"

namespace sediment::parsers {

using Tags = std::vector<std::pair<std::string, std::string>>;  // "#name" -> value

// An event with the datasource tags it goes to (the repository is the caller's).
struct TaggedEvent {
  Tags tags;
  Event event;
};

// A compiled parser. Immutable; shareable across threads; Run is reentrant.
class Parser {
 public:
  virtual ~Parser() = default;
  const std::string& name() const { return name_; }

  // Parses `in` (taken by value: callers move it; its tags are readable as "#name" fields) and
  // appends what it gives to `out`: usually one event; none when the script drops it (a filter,
  // dropEvent()); several after split(). Never fails on data: a timestamp that does not parse
  // leaves @timestamp as it was and sets @error=true and @error_msg; a built-in whose line does not
  // have its shape keeps the event as it came, with @error=true and @error_msg. Fields whose names
  // start with '#' and the parser's tag fields become tags (the field is then not kept as a field).
  virtual void Run(TaggedEvent in, std::vector<TaggedEvent>* out) const = 0;

  // True when every event Run gives is at most 2 x in.event.ByteSize() + 1 KiB (the native
  // built-ins: their fields are pieces of the line), so ApplyParsers need not keep a copy of a
  // small input for the over-the-limit fallback.
  virtual bool Bounded() const { return false; }

  // True only when Run(in) would give back exactly `in` (one event, the same tags, fields, raw
  // text and timestamps) for an event with these tags, fields and raw text (whatever its
  // timestamps). ApplyParsers then keeps such an event without running the parser and without a
  // copy for the fallback. Cheap next to Run; never wrong in the "true" direction.
  virtual bool KeepsAsIs(const Tags& /*tags*/, const std::vector<Field>& /*fields*/,
                         std::string_view /*raw*/) const {
    return false;
  }
  bool KeepsAsIs(const Tags& tags, const Event& event) const {
    return KeepsAsIs(tags, event.fields, event.raw);
  }

 protected:
  explicit Parser(std::string name) : name_(std::move(name)) {}

 private:
  std::string name_;
};

// The built-in parsers: "kv", "json", "accesslog", "syslog", "none", and "csv(a,b,c)" (a header
// list: the line's comma-separated values become the fields a, b, c). Names are case-insensitive.
// nullptr when `name` is none of them ("csv" without a list is none).
std::shared_ptr<const Parser> Builtin(std::string_view name);
// Whether `name` is reserved by a built-in ("csv" and any "csv(...)" included).
bool IsBuiltinName(std::string_view name);
// Names listed by the API (csv as "csv(...)").
std::vector<std::string> BuiltinNames();

// Compiles a custom parser: `script` is a query-language pipeline of per-record stages.
// InvalidArgument with the query parser's "at position N" for a bad script, and naming the stage
// for an aggregate or other collecting stage (groupBy, count, sort, head, ...): a parser sees one
// event at a time. `tag_fields` (LogScale's tagFields): fields turned into tags "#field".
Result<std::shared_ptr<const Parser>> CompileCustom(std::string name, std::string_view script,
                                                    std::vector<std::string> tag_fields = {});

// A valid custom parser name: 1 to 100 bytes of letters, digits, '-', '_', '.'; not a built-in.
bool IsValidParserName(std::string_view name);

// Compiled custom parsers by (repository, name, script), so that a request does not recompile
// them. Thread-safe. Bounded: at 1024 entries it is emptied.
class ParserCache {
 public:
  Result<std::shared_ptr<const Parser>> Get(const std::string& repo, const std::string& name,
                                            const std::string& script,
                                            const std::vector<std::string>& tag_fields);

 private:
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<const Parser>> cache_;  // guarded by mu_
};

// Which parser an event of a request gets. `resolve(name)` answers the parser of that name (a
// built-in or the repository's custom one) or nullptr.
struct Selection {
  ingest::Format format = ingest::Format::kRaw;
  // The ingest token's parser (--ingest-token REPO:TOKEN:PARSER); empty: none assigned.
  std::string token_parser;
  std::function<std::shared_ptr<const Parser>(std::string_view name)> resolve;
};

// The parser of one event: humio-structured events get the token's parser only (none when it has
// none: they arrive structured); others the `#type` tag (humio-unstructured's `type`) or the
// `sourcetype` field (HEC) when a parser of that name exists, else the token's parser, else `kv`
// for raw, HEC raw and unstructured, else none.
// nullptr: the event is kept as it is.
std::shared_ptr<const Parser> ParserFor(const Selection& selection, const Tags& tags,
                                        const Event& event);

// Whether ApplyParsers keeps every event of `batch` (a raw or HEC raw body's lines, of
// `selection.format`) as it is, so that the request's messages are the ones its lines make
// (ingest::AppendLines may append them without building the events): true when the lines'
// parser is none, or keeps each line as it is.
bool KeepsLinesAsIs(const Selection& selection, const ingest::LineBatch& batch);

// Runs each event of `result` through its parser (ParserFor) and regroups the output by
// datasource into messages as ingest::ParseRequest does (options.repo, max_message_bytes).
// An event whose parsed form exceeds options.max_event_bytes is kept unparsed with @error.
// Never fails; event_count is updated.
void ApplyParsers(const Selection& selection, const ingest::ParseOptions& options,
                  ingest::ParseResult* result);

}  // namespace sediment::parsers
