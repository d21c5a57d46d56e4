// Lookup files for match(): what the query library needs from its caller, and the tables built
// from them. The query library does not know where files live (the server keeps them in Global,
// global/README.md): its caller passes a LookupFiles to Compile, and match()'s factory reads the
// file it names while the query compiles. The built table is part of the compiled stage, so
// executing never reads files (each node compiles the query text with its own LookupFiles).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "query/geo.h"
#include "query/ip_address.h"
#include "query/query.h"

namespace sediment::query {

class CompiledQuery;
struct Stage;
class Record;

// The lookup files a query may read (one repository's). Implementations must be usable from the
// thread that calls Compile for the duration of that call.
class LookupFiles {
 public:
  virtual ~LookupFiles() = default;
  // The content of file `name` as uploaded; NotFound when there is none.
  virtual Result<std::string> Read(std::string_view name) const = 0;
  // The node's GeoIP databases (geo.h) for ipLocation(), asn() and worldMap(ip=); null: none
  // (those functions then refuse to compile, naming the server flag).
  virtual std::shared_ptr<const GeoDatabases> Geo() const { return nullptr; }
};

// Compile(text) with `files` available to match() (null: none; match() then refuses to compile
// with NotFound's message as InvalidArgument). Thread-safe: the files are visible only to
// this thread's compilation.
Result<std::shared_ptr<const CompiledQuery>> Compile(std::string_view text,
                                                     const LookupFiles* files);

// The LookupFiles of the Compile running on this thread (null outside one, or none given).
const LookupFiles* CurrentLookupFiles();

// A parsed lookup file: column names and rows of text cells (a row may be shorter than the
// header; its missing cells are absent).
struct LookupTable {
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;
  bool operator==(const LookupTable&) const = default;
};

// The results of a query's defineTable()/join() subqueries by table name (TableQuery::name),
// which a coordinator computes before it runs the query (coordinator/README.md).
using BoundTables = std::map<std::string, LookupTable>;

// Compile(text, files) with the tables of the query's defineTable()/join() bound: match(table=)
// and join() read them (a name not in `tables` is an error), and the result has tables_bound
// set. `tables` null: as Compile(text, files) (the tables are not known yet: the stages that read
// them hold no table, and the query cannot run until compiled again with them).
Result<std::shared_ptr<const CompiledQuery>> Compile(std::string_view text,
                                                     const LookupFiles* files,
                                                     const BoundTables* tables);

// The BoundTables of the Compile running on this thread (null outside one, or none given).
const BoundTables* CurrentBoundTables();

// CSV (".csv": a header line, then rows; RFC 4180 quoting with `"`, `""` inside quotes; spaces
// kept; CRLF or LF) or JSON (".json": an array of objects whose values are scalars; columns in
// order of first appearance). InvalidArgument naming the problem otherwise.
Result<LookupTable> ParseLookupTable(std::string_view name, std::string_view content);

// match()'s compiled table: the rows of `table` by the value of its key column (the first row of
// a value wins), with the columns the stage adds. Immutable; shared by the stage's copies.
// How match() compares an event's field with the key column (match(mode=)).
enum class MatchMode : uint8_t {
  kString,  // equal texts (a hash lookup)
  kGlob,    // the key is a glob pattern (`*` any run of characters) matched against the whole
            // value; the first row in file order that matches wins
  kCidr,    // the key is an IPv4/IPv6 subnet (ip_address.h) holding the value's address; the
            // most specific (longest prefix) wins, ties in file order
};

struct MatchTable {
  MatchMode mode = MatchMode::kString;
  bool ignore_case = false;          // kString/kGlob: keys compared ignoring case
  std::vector<std::string> include;  // the added columns, in this order
  // The included cells of a row (same order as `include`; `present[i]` says whether cell i
  // exists).
  struct Row {
    std::vector<std::string> cells;
    std::vector<bool> present;
  };
  std::unordered_map<std::string, Row> rows;  // kString: key (lower-cased with ignore_case)
  struct Pattern {
    std::string glob;  // kGlob
    IpSubnet subnet;   // kCidr
    Row row;
  };
  std::vector<Pattern> patterns;  // kGlob/kCidr: in file order (kCidr: longest prefix first)
};

// Builds the MatchTable of `table` keyed by `column`, adding `include` (every column but
// `column` when `include_all`). InvalidArgument for a column or an included name not in the
// table, and (kCidr) for a key that is not a subnet, naming its row.
Result<std::shared_ptr<const MatchTable>> BuildMatchTable(const LookupTable& table,
                                                          const std::string& column,
                                                          std::vector<std::string> include,
                                                          bool include_all, bool ignore_case,
                                                          MatchMode mode = MatchMode::kString);

// A table the query defines by a subquery (defineTable(name=, query={...}, include=[...]) or
// join(query={...}, ...)): its subquery runs first, over the query's repository and range (or
// start=/end=), and its result rows become a table match(table=) and join() read (BoundTables,
// lookup.h). Only a coordinator can run it: it binds the results before the query runs.
struct TableQuery {
  std::string name;                  // defineTable's name=; join: "join@<position>"
  std::string function;              // "defineTable" or "join", for messages
  std::string query;                 // the subquery's text, without its braces
  std::vector<std::string> include;  // the table's columns (include_all: every field)
  bool include_all = false;
  std::string start, end;  // as given ("" = the main query's)
  int64_t limit = 200000;  // most result rows (more: the query fails)
  size_t position = 0;     // of the function name
};

// The query's tables (CompiledQuery::tables, in text order) and whether they were bound when it
// was compiled (a query with tables that are not bound cannot run).
const std::vector<TableQuery>& QueryTables(const CompiledQuery& q);
bool TablesBound(const CompiledQuery& q);

// The table a defineTable()/join() subquery's result rows make: the `include` columns (every
// field, in order of first appearance, with include_all), a row per result row, a missing field
// an empty cell.
LookupTable TableFromRows(const TableQuery& t, const std::vector<Row>& rows);
// The subquery's time range: `main`, with start=/end= when given (relative times count back from
// the main query's end). InvalidArgument naming the bad value.
Result<TimeRange> TableRange(const TableQuery& t, const TimeRange& main);

// The per-record step of match(): looks the record's `st.field` up in `st.match_table`; a match
// sets the included columns; returns false (drop) when nothing matched and `st.strict`.
bool ApplyMatch(const Stage& st, Record& r);

}  // namespace sediment::query
