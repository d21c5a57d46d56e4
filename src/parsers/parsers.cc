#include "parsers/parsers.h"

#include <algorithm>
#include <cmath>

#include "common/time_parse.h"
#include "parsers/internal.h"
#include "query/compiled.h"
#include "query/record.h"
#include "query/transform.h"

namespace sediment::parsers {

namespace internal {

void SetError(Event* e, std::string_view message) {
  SetField(e, "@error", "true");
  SetField(e, "@error_msg", message);
}

void SetField(Event* e, std::string_view name, std::string_view value) {
  for (Field& f : e->fields) {
    if (f.name == name) {
      f.value.assign(value);
      return;
    }
  }
  e->fields.push_back(Field{std::string(name), std::string(value)});
}

std::optional<int64_t> TimestampFromText(std::string_view s) {
  if (auto ms = ParseIso8601Millis(s)) return ms;
  std::optional<double> n = query::ParseNumber(s);
  if (!n || !std::isfinite(*n)) return std::nullopt;
  // As ingest reads numeric timestamps: |n| < 1e11 is epoch seconds, larger is milliseconds.
  double ms = std::fabs(*n) < 1e11 ? std::round(*n * 1000.0) : std::trunc(*n);
  if (ms < -62135596800000.0 || ms > 253402300799999.0) return std::nullopt;
  return static_cast<int64_t>(ms);
}

}  // namespace internal

namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

const char* MetricName(query::Metric::Kind k) {
  using K = query::Metric::Kind;
  switch (k) {
    case K::kCount:
      return "count()";
    case K::kSum:
      return "sum()";
    case K::kAvg:
      return "avg()";
    case K::kMin:
      return "min()";
    case K::kMax:
      return "max()";
    case K::kPercentile:
      return "percentile()";
    case K::kStdDev:
      return "stdDev()";
    case K::kRange:
      return "range()";
    case K::kCollect:
      return "collect()";
    case K::kSelectMax:
      return "selectFromMax()";
    case K::kSelectMin:
      return "selectFromMin()";
    case K::kSelectLast:
      return "selectLast()";
    case K::kSubquery:
      return "a subquery";
  }
  return "an aggregate";
}

// The name of a collecting stage for the refusal message.
std::string CollectingName(const query::Stage& st) {
  using K = query::Stage::Kind;
  switch (st.kind) {
    case K::kHead:
      return "head()";
    case K::kTail:
      return "tail()";
    case K::kSort:
      return "sort()";
    case K::kTable:
      return "table()";
    case K::kAggregate:
      if (st.grouping != query::Stage::Grouping::kNone)
        return "groupBy()/timeChart()/bucket()/top()";
      if (!st.metrics.empty()) {
        return std::string(MetricName(st.metrics[0].kind)) + " at position " +
               std::to_string(st.metrics[0].position);
      }
      return "an aggregate";
    default:
      return "a collecting stage";
  }
}

// Runs a compiled pipeline of per-record stages on one event.
class PipelineParser final : public Parser {
 public:
  PipelineParser(std::string name, std::shared_ptr<const query::CompiledQuery> q,
                 std::vector<std::string> tag_fields)
      : Parser(std::move(name)),
        q_(std::move(q)),
        tag_fields_(std::move(tag_fields)),
        kv_only_(IsKvOnly(*q_, tag_fields_)) {}

  // A kvParse() alone (the default "kv" parser) keeps an event whose @rawstring has no pair as it
  // came, when the round trip through a record cannot change it either: every tag is a "#name"
  // other than #repo and no field name starts with '@' or '#' (those are dropped, turned into
  // tags or collide with @rawstring/@timestamp in ToEvent).
  bool KeepsAsIs(const Tags& tags, const std::vector<Field>& fields,
                 std::string_view raw) const override {
    if (!kv_only_) return false;
    for (const auto& [name, value] : tags) {
      if (name.empty() || name[0] != '#' || name == "#repo") return false;
    }
    for (const Field& f : fields) {
      if (f.name.empty() || f.name[0] == '@' || f.name[0] == '#') return false;
    }
    return !query::KvParseFindsPairs(raw);
  }

  void Run(TaggedEvent in, std::vector<TaggedEvent>* out) const override {
    query::Row row;
    row.reserve(in.event.fields.size() + in.tags.size() + 2);
    row.emplace_back("@rawstring", query::Value(std::move(in.event.raw)));
    row.emplace_back("@timestamp", query::Value(in.event.timestamp_ms));
    for (auto& [name, value] : in.tags)
      row.emplace_back(std::move(name), query::Value(std::move(value)));
    for (Field& f : in.event.fields) {
      row.emplace_back(std::move(f.name), query::Value(std::move(f.value)));
    }
    query::Record rec = query::Record::FromRow(std::move(row), query::RecordKey{});
    if (q_->filter->kind != query::FilterNode::Kind::kTrue && !query::Matches(*q_->filter, rec)) {
      return;
    }
    std::vector<query::Record> cur;
    cur.push_back(std::move(rec));
    std::vector<query::Record> next;
    for (const query::Stage& st : q_->stages) {
      if (query::EmitsOneOrNone(st)) {
        size_t w = 0;
        for (size_t i = 0; i < cur.size(); ++i) {
          if (query::ApplyTransformInPlace(st, cur[i])) {
            if (w != i) cur[w] = std::move(cur[i]);
            ++w;
          }
        }
        cur.resize(w);
      } else {
        next.clear();
        for (query::Record& r : cur) query::ApplyTransform(st, std::move(r), &next);
        cur.swap(next);
      }
      if (cur.empty()) return;
    }
    for (const query::Record& r : cur) out->push_back(ToEvent(r, in.event));
  }

 private:
  TaggedEvent ToEvent(const query::Record& r, const Event& in) const {
    TaggedEvent t;
    t.event.ingest_ms = in.ingest_ms;
    t.event.timestamp_ms = in.timestamp_ms;
    std::string bad_time;
    for (auto& [name, value] : r.ToRow()) {
      if (name == "@rawstring") {
        t.event.raw = query::ValueToString(value);
      } else if (name == "@timestamp") {
        if (const int64_t* i = std::get_if<int64_t>(&value)) {
          t.event.timestamp_ms = *i;
        } else if (const double* d = std::get_if<double>(&value)) {
          if (std::isfinite(*d)) t.event.timestamp_ms = static_cast<int64_t>(std::llround(*d));
        } else if (auto ms = internal::TimestampFromText(std::get<std::string>(value))) {
          t.event.timestamp_ms = *ms;
        } else {
          bad_time = std::get<std::string>(value);
        }
      } else if (name == "@ingesttimestamp" || name == "@id" || name == "#repo") {
        continue;
      } else if (!name.empty() && name[0] == '#') {
        t.tags.emplace_back(name, query::ValueToString(value));
      } else if (std::find(tag_fields_.begin(), tag_fields_.end(), name) != tag_fields_.end()) {
        t.tags.emplace_back("#" + name, query::ValueToString(value));
      } else {
        t.event.fields.push_back(Field{name, query::ValueToString(value)});
      }
    }
    if (!bad_time.empty()) {
      internal::SetError(&t.event, "@timestamp: '" + bad_time + "' is not a timestamp");
    }
    return t;
  }

  static bool IsKvOnly(const query::CompiledQuery& q, const std::vector<std::string>& tag_fields) {
    return tag_fields.empty() && q.filter->kind == query::FilterNode::Kind::kTrue &&
           q.stages.size() == 1 && q.stages[0].kind == query::Stage::Kind::kKvParse &&
           (q.stages[0].field.empty() || q.stages[0].field == "@rawstring");
  }

  std::shared_ptr<const query::CompiledQuery> q_;
  std::vector<std::string> tag_fields_;
  bool kv_only_;
};

// Keeps events as they are.
class NoneParser final : public Parser {
 public:
  NoneParser() : Parser("none") {}
  void Run(TaggedEvent in, std::vector<TaggedEvent>* out) const override {
    out->push_back(std::move(in));
  }
  bool Bounded() const override { return true; }
};

std::shared_ptr<const Parser> CompileBuiltin(const char* name, const char* script) {
  auto q = query::Compile(script);
  if (!q.ok()) return nullptr;  // a built-in's script is tested to compile
  return std::make_shared<PipelineParser>(name, std::move(*q), std::vector<std::string>{});
}

bool IsColumnName(std::string_view s) {
  if (s.empty() || s.size() > 100) return false;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-' || c == '@';
    if (!ok) return false;
  }
  return !(s[0] >= '0' && s[0] <= '9') && s[0] != '-' && s[0] != '@';
}

// "csv(a,b,c)" -> its parser; nullptr when the list is malformed.
std::shared_ptr<const Parser> CsvParser(std::string_view name) {
  std::string_view list = name.substr(4, name.size() - 5);
  std::string columns;
  size_t i = 0;
  while (i <= list.size()) {
    size_t comma = list.find(',', i);
    if (comma == std::string_view::npos) comma = list.size();
    std::string_view col = list.substr(i, comma - i);
    while (!col.empty() && col.front() == ' ') col.remove_prefix(1);
    while (!col.empty() && col.back() == ' ') col.remove_suffix(1);
    if (!IsColumnName(col)) return nullptr;
    if (!columns.empty()) columns += ", ";
    columns.append(col);
    i = comma + 1;
  }
  auto q = query::Compile("parseCsv(columns=[" + columns + "])");
  if (!q.ok()) return nullptr;
  return std::make_shared<PipelineParser>(std::string(name), std::move(*q),
                                          std::vector<std::string>{});
}

}  // namespace

bool IsBuiltinName(std::string_view name) {
  const std::string n = Lower(name);
  return n == "kv" || n == "json" || n == "accesslog" || n == "syslog" || n == "none" ||
         n == "csv" || n.rfind("csv(", 0) == 0;
}

std::vector<std::string> BuiltinNames() {
  return {"accesslog", "csv(...)", "json", "kv", "none", "syslog"};
}

std::shared_ptr<const Parser> Builtin(std::string_view name) {
  static const std::shared_ptr<const Parser> kKv = CompileBuiltin("kv", "kvParse()");
  // JSON: the object's members become fields; a "@timestamp" member (ISO-8601 or epoch number)
  // sets the event's time.
  static const std::shared_ptr<const Parser> kJson = CompileBuiltin("json", "parseJson()");
  static const std::shared_ptr<const Parser> kNone = std::make_shared<NoneParser>();
  static const std::shared_ptr<const Parser> kAccess = internal::NewAccessLogParser();
  static const std::shared_ptr<const Parser> kSyslog = internal::NewSyslogParser();
  const std::string n = Lower(name);
  if (n == "kv") return kKv;
  if (n == "json") return kJson;
  if (n == "none") return kNone;
  if (n == "accesslog") return kAccess;
  if (n == "syslog") return kSyslog;
  if (n.size() > 5 && n.rfind("csv(", 0) == 0 && n.back() == ')') {
    return CsvParser(name);  // the column names keep their case
  }
  return nullptr;
}

bool IsValidParserName(std::string_view name) {
  if (name.empty() || name.size() > 100 || IsBuiltinName(name)) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.';
    if (!ok) return false;
  }
  return name != "." && name != "..";
}

Result<std::shared_ptr<const Parser>> CompileCustom(std::string name, std::string_view script,
                                                    std::vector<std::string> tag_fields) {
  auto q = query::Compile(script);
  if (!q.ok()) return q.status();
  for (const query::Stage& st : (*q)->stages) {
    if (!st.IsTransform()) {
      return Status::InvalidArgument(
          "a parser runs on one event at a time: " + CollectingName(st) +
          " needs many events and is not allowed in a parser (aggregates, head, tail, sort, "
          "table)");
    }
  }
  for (std::string& f : tag_fields) {
    if (!f.empty() && f[0] == '#') f.erase(0, 1);
    if (f.empty()) return Status::InvalidArgument("tagFields: an empty field name");
  }
  return std::shared_ptr<const Parser>(
      std::make_shared<PipelineParser>(std::move(name), std::move(*q), std::move(tag_fields)));
}

Result<std::shared_ptr<const Parser>> ParserCache::Get(const std::string& repo,
                                                       const std::string& name,
                                                       const std::string& script,
                                                       const std::vector<std::string>& tag_fields) {
  std::string key = repo;
  key.push_back('\x1f');
  key += name;
  key.push_back('\x1f');
  key += script;
  for (const std::string& f : tag_fields) {
    key.push_back('\x1f');
    key += f;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
  }
  auto parser = CompileCustom(name, script, tag_fields);
  if (!parser.ok()) return parser.status();
  std::lock_guard<std::mutex> lock(mu_);
  if (cache_.size() >= 1024) cache_.clear();
  cache_.emplace(std::move(key), *parser);
  return *parser;
}

namespace {

// ParserFor of an event with these fields (HEC's sourcetype is one of them).
std::shared_ptr<const Parser> ParserForFields(const Selection& selection, const Tags& tags,
                                              const std::vector<Field>& fields) {
  using F = ingest::Format;
  auto by_name = [&](std::string_view name) -> std::shared_ptr<const Parser> {
    if (name.empty() || !selection.resolve) return nullptr;
    return selection.resolve(name);
  };
  if (selection.format == F::kHumioStructured) {
    // Stored as sent, unless the token has a parser (LogScale: parsing structured data further).
    return selection.token_parser.empty() ? nullptr : by_name(selection.token_parser);
  }
  for (const auto& [name, value] : tags) {
    if (name == "#type") {
      if (auto p = by_name(value)) return p;
    }
  }
  if (selection.format == F::kHecEvent || selection.format == F::kHecRaw) {
    for (const Field& f : fields) {
      if (f.name != "sourcetype") continue;
      if (auto p = by_name(f.value)) return p;
      break;  // the first one, as Event::Find
    }
  }
  if (!selection.token_parser.empty()) return by_name(selection.token_parser);
  if (selection.format == F::kRaw || selection.format == F::kHecRaw ||
      selection.format == F::kHumioUnstructured) {
    static const std::shared_ptr<const Parser> kKv = Builtin("kv");  // once, not per event
    return kKv;
  }
  return nullptr;
}

}  // namespace

std::shared_ptr<const Parser> ParserFor(const Selection& selection, const Tags& tags,
                                        const Event& event) {
  return ParserForFields(selection, tags, event.fields);
}

bool KeepsLinesAsIs(const Selection& selection, const ingest::LineBatch& batch) {
  // Every line has the batch's tags and fields, so the same parser.
  const std::shared_ptr<const Parser> parser =
      ParserForFields(selection, batch.datasource.tags, batch.fields);
  if (parser == nullptr) return true;
  for (std::string_view line : batch.lines) {
    if (!parser->KeepsAsIs(batch.datasource.tags, batch.fields, line)) return false;
  }
  return true;
}

void ApplyParsers(const Selection& selection, const ingest::ParseOptions& options,
                  ingest::ParseResult* result) {
  using F = ingest::Format;
  // Without a token parser only the formats whose events name a parser (#type, sourcetype) or
  // default to kv are looked at; the structured ones (humio-structured, JSON, Elastic bulk, OTLP)
  // are stored as sent.
  const F f = selection.format;
  if (selection.token_parser.empty() && f != F::kRaw && f != F::kHecRaw && f != F::kHecEvent &&
      f != F::kHumioUnstructured) {
    return;
  }
  // Most requests' events all stay as they came (no parser, or kv on lines without pairs): then
  // the messages stay as ParseRequest cut them, which is what regrouping unchanged events gives.
  bool changed = false;
  for (IngestMessage& msg : result->messages) {
    for (const Event& e : msg.events) {
      std::shared_ptr<const Parser> parser = ParserFor(selection, msg.datasource.tags, e);
      if (parser != nullptr && !parser->KeepsAsIs(msg.datasource.tags, e)) {
        changed = true;
        break;
      }
    }
    if (changed) break;
  }
  // Parsers change the events only: what the request's answer is made of (Elastic bulk's item
  // per action, OTLP's rejected events) stays as ParseRequest found it.
  auto keep_outcomes = [&](ingest::ParseResult regrouped) {
    regrouped.rejected_count = result->rejected_count;
    regrouped.rejected_message = std::move(result->rejected_message);
    regrouped.items = std::move(result->items);
    *result = std::move(regrouped);
  };
  if (!changed) {
    // What GroupEvents returns for these events: the same messages.
    ingest::ParseResult kept;
    kept.messages = std::move(result->messages);
    kept.event_count = result->event_count;
    keep_outcomes(std::move(kept));
    return;
  }
  ingest::TaggedEvents all;
  all.reserve(result->event_count);
  std::vector<TaggedEvent> out;
  TaggedEvent in;  // the tags of the current message
  for (IngestMessage& msg : result->messages) {
    in.tags = msg.datasource.tags;
    for (Event& e : msg.events) {
      std::shared_ptr<const Parser> parser = ParserFor(selection, in.tags, e);
      if (parser == nullptr || parser->KeepsAsIs(in.tags, e)) {
        all.emplace_back(in.tags, std::move(e));
        continue;
      }
      // The input is kept for the over-the-limit fallback only when the parser could exceed it.
      const bool keep = !parser->Bounded() || 2 * e.ByteSize() + 1024 > options.max_event_bytes;
      std::optional<Event> original;
      if (keep) original = e;
      out.clear();
      parser->Run(TaggedEvent{in.tags, std::move(e)}, &out);
      for (TaggedEvent& t : out) {
        if (t.event.raw.size() > options.max_event_bytes ||
            t.event.ByteSize() > options.max_event_bytes) {
          // (Bounded parsers cannot get here without `original`; the fallback keeps the line.)
          TaggedEvent kept{
              in.tags, original ? std::move(*original)
                                : Event{t.event.timestamp_ms, t.event.ingest_ms, t.event.raw, {}}};
          internal::SetError(&kept.event, "parser '" + parser->name() +
                                              "': the parsed event exceeds the event limit of " +
                                              std::to_string(options.max_event_bytes) + " bytes");
          all.emplace_back(std::move(kept.tags), std::move(kept.event));
          continue;
        }
        // Tags the event came with stay unless the parser set them again.
        Tags tags = in.tags;
        for (auto& [name, value] : t.tags) {
          auto it = std::find_if(tags.begin(), tags.end(),
                                 [&](const auto& tag) { return tag.first == name; });
          if (it != tags.end()) {
            it->second = std::move(value);
          } else {
            tags.emplace_back(std::move(name), std::move(value));
          }
        }
        all.emplace_back(std::move(tags), std::move(t.event));
      }
    }
  }
  keep_outcomes(ingest::GroupEvents(std::move(all), options));
}

}  // namespace sediment::parsers
