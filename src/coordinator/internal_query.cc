#include "coordinator/internal_query.h"

#include <simdjson.h>

#include "common/json_writer.h"

namespace sediment::coordinator {

std::string EncodeInternalQuery(const InternalQuery& q) {
  JsonWriter w;
  w.BeginObject().Key("repo").String(q.repo).Key("queryString").String(q.query_string);
  w.Key("startMs").Int(q.range.start_ms).Key("endMs").Int(q.range.end_ms);
  w.Key("partitions").BeginArray();
  for (const auto& [p, e] : q.partitions) {
    w.BeginObject().Key("partition").Int(p.value).Key("epoch").Int(e.value).EndObject();
  }
  w.EndArray();
  w.Key("segments").BeginArray();
  for (SegmentId id : q.segments) w.Int(id.value);
  w.EndArray();
  w.Key("segmentFiles").BeginArray();
  for (const auto& f : q.segment_files) w.String(f);
  w.EndArray();
  if (q.max_events != SIZE_MAX) w.Key("maxEvents").Int(static_cast<int64_t>(q.max_events));
  if (!q.query_id.empty()) w.Key("queryId").String(q.query_id);
  if (q.timeout_ms > 0) w.Key("timeoutMs").Int(q.timeout_ms);
  if (q.max_memory_bytes > 0) w.Key("maxMemoryBytes").Int(static_cast<int64_t>(q.max_memory_bytes));
  if (!q.tables.empty()) {
    w.Key("tables").BeginArray();
    for (const auto& [name, t] : q.tables) {
      w.BeginObject().Key("name").String(name).Key("columns").BeginArray();
      for (const std::string& c : t.columns) w.String(c);
      w.EndArray().Key("rows").BeginArray();
      for (const auto& row : t.rows) {
        w.BeginArray();
        for (const std::string& cell : row) w.String(cell);
        w.EndArray();
      }
      w.EndArray().EndObject();
    }
    w.EndArray();
  }
  w.EndObject();
  return w.Take();
}

Result<InternalQuery> DecodeInternalQuery(std::string_view body) {
  InternalQuery q;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(body.data(), body.size()).get(doc) || !doc.is_object()) {
    return Status::InvalidArgument("internal query: body is not a JSON object");
  }
  std::string_view s;
  int64_t i = 0;
  if (doc["repo"].get(s)) return Status::InvalidArgument("internal query: no repo");
  q.repo = std::string(s);
  if (doc["queryString"].get(s)) return Status::InvalidArgument("internal query: no queryString");
  q.query_string = std::string(s);
  if (doc["startMs"].get(q.range.start_ms) || doc["endMs"].get(q.range.end_ms)) {
    return Status::InvalidArgument("internal query: no startMs/endMs");
  }
  simdjson::dom::array arr;
  if (!doc["partitions"].get(arr)) {
    for (simdjson::dom::element e : arr) {
      int64_t p = 0, epoch = 0;
      if (e["partition"].get(p) || e["epoch"].get(epoch)) {
        return Status::InvalidArgument("internal query: bad partition entry");
      }
      q.partitions.emplace_back(PartitionId(static_cast<int32_t>(p)), Epoch(epoch));
    }
  }
  if (!doc["segments"].get(arr)) {
    for (simdjson::dom::element e : arr) {
      if (e.get(i)) return Status::InvalidArgument("internal query: bad segment id");
      q.segments.emplace_back(i);
    }
  }
  if (!doc["segmentFiles"].get(arr)) {
    for (simdjson::dom::element e : arr) {
      std::string_view f;
      if (e.get(f)) return Status::InvalidArgument("internal query: bad segment file");
      q.segment_files.emplace_back(f);
    }
  }
  if (q.segment_files.size() != q.segments.size()) q.segment_files.assign(q.segments.size(), "");
  if (!doc["maxEvents"].get(i) && i > 0) q.max_events = static_cast<size_t>(i);
  if (!doc["queryId"].get(s)) q.query_id = std::string(s);
  if (!doc["timeoutMs"].get(i) && i > 0) q.timeout_ms = i;
  if (!doc["maxMemoryBytes"].get(i) && i > 0) q.max_memory_bytes = static_cast<uint64_t>(i);
  if (!doc["tables"].get(arr)) {
    for (simdjson::dom::element e : arr) {
      std::string_view name;
      simdjson::dom::array columns, rows;
      if (e["name"].get(name) || e["columns"].get(columns) || e["rows"].get(rows)) {
        return Status::InvalidArgument("internal query: bad table entry");
      }
      query::LookupTable t;
      for (simdjson::dom::element c : columns) {
        if (c.get(s)) return Status::InvalidArgument("internal query: bad table column");
        t.columns.emplace_back(s);
      }
      for (simdjson::dom::element r : rows) {
        simdjson::dom::array cells;
        if (r.get(cells)) return Status::InvalidArgument("internal query: bad table row");
        std::vector<std::string> row;
        for (simdjson::dom::element c : cells) {
          if (c.get(s)) return Status::InvalidArgument("internal query: bad table cell");
          row.emplace_back(s);
        }
        t.rows.push_back(std::move(row));
      }
      q.tables[std::string(name)] = std::move(t);
    }
  }
  return q;
}

std::string EncodeCancel(const std::string& query_id) {
  JsonWriter w;
  w.BeginObject().Key("queryId").String(query_id).EndObject();
  return w.Take();
}

Result<std::string> DecodeCancel(std::string_view body) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  std::string_view id;
  if (parser.parse(body.data(), body.size()).get(doc) || doc["queryId"].get(id) || id.empty()) {
    return Status::InvalidArgument("internal cancel: body must be {\"queryId\": \"...\"}");
  }
  return std::string(id);
}

std::string JoinIds(const std::vector<int64_t>& ids, size_t max_items) {
  std::string out;
  for (size_t i = 0; i < ids.size() && i < max_items; ++i) {
    if (i > 0) out += ",";
    out += std::to_string(ids[i]);
  }
  if (ids.size() > max_items) out += ",... (" + std::to_string(ids.size()) + " in all)";
  return out;
}

std::vector<int64_t> SplitIds(std::string_view text) {
  std::vector<int64_t> out;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = text.find(',', i);
    if (j == std::string_view::npos) j = text.size();
    try {
      out.push_back(std::stoll(std::string(text.substr(i, j - i))));
    } catch (const std::exception&) {
    }
    i = j + 1;
  }
  return out;
}

}  // namespace sediment::coordinator
