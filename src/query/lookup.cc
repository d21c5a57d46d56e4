// Lookup files for match(): the compile-time scope, the CSV/JSON table parser and the per-record
// step (lookup.h).
#include "query/lookup.h"

#include <simdjson.h>

#include <algorithm>
#include <cctype>

#include "query/compiled.h"
#include "query/query.h"
#include "query/record.h"

namespace sediment::query {
namespace {

thread_local const LookupFiles* t_files = nullptr;
thread_local const BoundTables* t_tables = nullptr;

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool EndsWithNoCase(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && Lower(s.substr(s.size() - suffix.size())) == suffix;
}

Result<LookupTable> ParseCsv(std::string_view in) {
  std::vector<std::vector<std::string>> records;
  std::vector<std::string> record;
  std::string cell;
  bool quoted = false, in_quotes = false, any = false;
  auto end_cell = [&] {
    record.push_back(std::move(cell));
    cell.clear();
    quoted = false;
  };
  auto end_record = [&] {
    end_cell();
    if (!(record.size() == 1 && record[0].empty())) records.push_back(std::move(record));
    record.clear();
  };
  for (size_t i = 0; i < in.size(); ++i) {
    const char c = in[i];
    any = true;
    if (in_quotes) {
      if (c == '"') {
        if (i + 1 < in.size() && in[i + 1] == '"') {
          cell.push_back('"');
          ++i;
        } else {
          in_quotes = false;
        }
      } else {
        cell.push_back(c);
      }
      continue;
    }
    if (c == '"' && cell.empty() && !quoted) {
      in_quotes = quoted = true;
    } else if (c == ',') {
      end_cell();
    } else if (c == '\n') {
      end_record();
    } else if (c == '\r' && i + 1 < in.size() && in[i + 1] == '\n') {
      // CRLF: the '\n' ends the record
    } else {
      cell.push_back(c);
    }
  }
  if (in_quotes) return Status::InvalidArgument("CSV: a quoted value is not closed");
  if (any && (!cell.empty() || !record.empty())) end_record();
  if (records.empty()) return Status::InvalidArgument("CSV: no header line");
  LookupTable t;
  t.columns = std::move(records.front());
  t.rows.assign(std::make_move_iterator(records.begin() + 1),
                std::make_move_iterator(records.end()));
  return t;
}

Result<LookupTable> ParseJson(std::string_view in) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  simdjson::dom::array rows;
  if (parser.parse(in.data(), in.size()).get(doc) || doc.get_array().get(rows)) {
    return Status::InvalidArgument("JSON: match() reads a JSON array of objects");
  }
  LookupTable t;
  std::unordered_map<std::string, size_t> index;
  std::vector<std::vector<std::pair<size_t, std::string>>> cells;
  for (simdjson::dom::element row : rows) {
    simdjson::dom::object obj;
    if (row.get_object().get(obj)) {
      return Status::InvalidArgument("JSON: every element of the array must be an object");
    }
    auto& out = cells.emplace_back();
    for (auto [key, value] : obj) {
      std::string text;
      std::string_view sv;
      if (!value.get_string().get(sv)) {
        text = std::string(sv);
      } else if (value.is_object() || value.is_array()) {
        return Status::InvalidArgument("JSON: values must be strings, numbers or booleans");
      } else if (value.is_null()) {
        continue;
      } else {
        text = simdjson::minify(value);
      }
      auto [it, added] = index.emplace(std::string(key), t.columns.size());
      if (added) t.columns.emplace_back(key);
      out.emplace_back(it->second, std::move(text));
    }
  }
  for (auto& row : cells) {
    std::vector<std::string> r(t.columns.size());
    for (auto& [col, text] : row) r[col] = std::move(text);
    t.rows.push_back(std::move(r));
  }
  return t;
}

}  // namespace

const LookupFiles* CurrentLookupFiles() { return t_files; }

const BoundTables* CurrentBoundTables() { return t_tables; }

const std::vector<TableQuery>& QueryTables(const CompiledQuery& q) { return q.tables; }
bool TablesBound(const CompiledQuery& q) { return q.tables_bound; }

Result<std::shared_ptr<const CompiledQuery>> Compile(std::string_view text,
                                                     const LookupFiles* files) {
  return Compile(text, files, nullptr);
}

Result<std::shared_ptr<const CompiledQuery>> Compile(std::string_view text,
                                                     const LookupFiles* files,
                                                     const BoundTables* tables) {
  const LookupFiles* outer = t_files;
  const BoundTables* outer_tables = t_tables;
  t_files = files;
  t_tables = tables;
  auto result = Compile(text);
  t_files = outer;
  t_tables = outer_tables;
  if (result.ok() && tables != nullptr) {
    auto q = std::make_shared<CompiledQuery>(**result);
    q->tables_bound = true;
    return std::shared_ptr<const CompiledQuery>(std::move(q));
  }
  return result;
}

LookupTable TableFromRows(const TableQuery& t, const std::vector<Row>& rows) {
  LookupTable out;
  if (t.include_all) {
    for (const Row& r : rows) {
      for (const auto& [name, v] : r) {
        if (std::find(out.columns.begin(), out.columns.end(), name) == out.columns.end()) {
          out.columns.push_back(name);
        }
      }
    }
  } else {
    out.columns = t.include;
  }
  out.rows.reserve(rows.size());
  for (const Row& r : rows) {
    std::vector<std::string> cells(out.columns.size());
    for (size_t c = 0; c < out.columns.size(); ++c) {
      for (const auto& [name, v] : r) {
        if (name == out.columns[c]) {
          cells[c] = ValueToString(v);
          break;
        }
      }
    }
    out.rows.push_back(std::move(cells));
  }
  return out;
}

Result<TimeRange> TableRange(const TableQuery& t, const TimeRange& main) {
  TimeRange r = main;
  if (!t.start.empty()) {
    auto s = ParseTimeBound(t.start, main.end_ms);
    if (!s.ok()) {
      return Status::InvalidArgument(t.function + "(start=" + t.start +
                                     "): " + s.status().message() + " at position " +
                                     std::to_string(t.position));
    }
    r.start_ms = *s;
  }
  if (!t.end.empty()) {
    auto e = ParseTimeBound(t.end, main.end_ms);
    if (!e.ok()) {
      return Status::InvalidArgument(t.function + "(end=" + t.end + "): " + e.status().message() +
                                     " at position " + std::to_string(t.position));
    }
    r.end_ms = *e;
  }
  return r;
}

Result<LookupTable> ParseLookupTable(std::string_view name, std::string_view content) {
  if (EndsWithNoCase(name, ".csv")) return ParseCsv(content);
  if (EndsWithNoCase(name, ".json")) return ParseJson(content);
  return Status::InvalidArgument("lookup file '" + std::string(name) +
                                 "': the name must end in .csv or .json");
}

Result<std::shared_ptr<const MatchTable>> BuildMatchTable(const LookupTable& table,
                                                          const std::string& column,
                                                          std::vector<std::string> include,
                                                          bool include_all, bool ignore_case,
                                                          MatchMode mode) {
  auto col_of = [&](const std::string& name) -> std::optional<size_t> {
    auto it = std::find(table.columns.begin(), table.columns.end(), name);
    if (it == table.columns.end()) return std::nullopt;
    return static_cast<size_t>(it - table.columns.begin());
  };
  std::optional<size_t> key = col_of(column);
  if (!key) return Status::InvalidArgument("the file has no column '" + column + "'");
  if (include_all) {
    include.clear();
    for (const std::string& c : table.columns) {
      if (c != column) include.push_back(c);
    }
  }
  std::vector<size_t> cols;
  for (const std::string& name : include) {
    std::optional<size_t> c = col_of(name);
    if (!c) return Status::InvalidArgument("the file has no column '" + name + "' to include");
    cols.push_back(*c);
  }
  auto m = std::make_shared<MatchTable>();
  m->mode = mode;
  m->ignore_case = ignore_case;
  m->include = std::move(include);
  for (size_t i = 0; i < table.rows.size(); ++i) {
    const auto& row = table.rows[i];
    if (*key >= row.size()) continue;
    MatchTable::Row r;
    for (size_t c : cols) {
      r.present.push_back(c < row.size());
      r.cells.push_back(c < row.size() ? row[c] : std::string());
    }
    switch (mode) {
      case MatchMode::kString: {
        std::string k = ignore_case ? Lower(row[*key]) : row[*key];
        m->rows.emplace(std::move(k), std::move(r));  // the first row of a value wins
        break;
      }
      case MatchMode::kGlob:
        m->patterns.push_back({row[*key], IpSubnet{}, std::move(r)});
        break;
      case MatchMode::kCidr: {
        std::optional<IpSubnet> subnet = ParseIpSubnet(row[*key]);
        if (!subnet) {
          return Status::InvalidArgument("row " + std::to_string(i + 1) + ": '" + row[*key] +
                                         "' in column '" + column +
                                         "' is not an IPv4 or IPv6 subnet (mode=cidr)");
        }
        m->patterns.push_back({std::string(), *subnet, std::move(r)});
        break;
      }
    }
  }
  if (mode == MatchMode::kCidr) {
    std::stable_sort(m->patterns.begin(), m->patterns.end(),
                     [](const MatchTable::Pattern& a, const MatchTable::Pattern& b) {
                       return a.subnet.bits > b.subnet.bits;
                     });
  }
  return std::shared_ptr<const MatchTable>(std::move(m));
}

bool ApplyMatch(const Stage& st, Record& r) {
  if (st.match_table == nullptr) return !st.strict;  // a table not bound (never executed)
  const MatchTable& t = *st.match_table;
  std::string scratch;
  std::optional<std::string_view> v = r.Get(st.field, &scratch);
  const MatchTable::Row* row = nullptr;
  if (v) {
    switch (t.mode) {
      case MatchMode::kString: {
        auto it = t.ignore_case ? t.rows.find(Lower(*v)) : t.rows.find(std::string(*v));
        if (it != t.rows.end()) row = &it->second;
        break;
      }
      case MatchMode::kGlob:
        for (const MatchTable::Pattern& p : t.patterns) {
          if (t.ignore_case ? GlobMatchIgnoreCase(p.glob, *v) : GlobMatch(p.glob, *v)) {
            row = &p.row;
            break;
          }
        }
        break;
      case MatchMode::kCidr:
        if (std::optional<IpAddress> a = ParseIpAddress(*v)) {
          for (const MatchTable::Pattern& p : t.patterns) {
            if (p.subnet.Contains(*a)) {
              row = &p.row;
              break;
            }
          }
        }
        break;
    }
  }
  if (!row) return !st.strict;
  for (size_t i = 0; i < t.include.size(); ++i) {
    if (row->present[i]) r.Set(t.include[i], Value(row->cells[i]));
  }
  return true;
}

}  // namespace sediment::query
