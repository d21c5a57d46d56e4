// Lookup files for match(): what the query library needs from its caller, and the tables built
// from them. The query library does not know where files live (the server keeps them in Global,
// global/README.md): its caller passes a LookupFiles to Compile, and match()'s factory reads the
// file it names while the query compiles. The built table is part of the compiled stage, so
// executing never reads files (each node compiles the query text with its own LookupFiles).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/status.h"

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
};

// CSV (".csv": a header line, then rows; RFC 4180 quoting with `"`, `""` inside quotes; spaces
// kept; CRLF or LF) or JSON (".json": an array of objects whose values are scalars; columns in
// order of first appearance). InvalidArgument naming the problem otherwise.
Result<LookupTable> ParseLookupTable(std::string_view name, std::string_view content);

// match()'s compiled table: the rows of `table` by the value of its key column (the first row of
// a value wins), with the columns the stage adds. Immutable; shared by the stage's copies.
struct MatchTable {
  bool ignore_case = false;          // keys are stored lower-cased and looked up lower-cased
  std::vector<std::string> include;  // the added columns, in this order
  // key -> the included cells of its row (same order as `include`; absent cells as nullopt-less
  // empty markers are not stored: `present[i]` says whether cell i exists)
  struct Row {
    std::vector<std::string> cells;
    std::vector<bool> present;
  };
  std::unordered_map<std::string, Row> rows;
};

// Builds the MatchTable of `table` keyed by `column`, adding `include` (every column but
// `column` when `include_all`). InvalidArgument for a column or an included name not in the
// table.
Result<std::shared_ptr<const MatchTable>> BuildMatchTable(const LookupTable& table,
                                                          const std::string& column,
                                                          std::vector<std::string> include,
                                                          bool include_all, bool ignore_case);

// The per-record step of match(): looks the record's `st.field` up in `st.match_table`; a match
// sets the included columns; returns false (drop) when nothing matched and `st.strict`.
bool ApplyMatch(const Stage& st, Record& r);

}  // namespace sediment::query
