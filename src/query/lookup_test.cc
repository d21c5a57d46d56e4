// match() and its lookup tables (lookup.h, functions/match.cc): CSV/JSON parsing, the table
// index, compiling with and without lookup files, and the per-record step.
#include "query/lookup.h"

#include <gtest/gtest.h>

#include <map>

#include "query/compiled.h"
#include "query/query.h"
#include "query/record.h"
#include "query/transform.h"

namespace sediment::query {
namespace {

class MapFiles final : public LookupFiles {
 public:
  explicit MapFiles(std::map<std::string, std::string> files) : files_(std::move(files)) {}
  Result<std::string> Read(std::string_view name) const override {
    auto it = files_.find(std::string(name));
    if (it == files_.end()) return Status::NotFound("no lookup file '" + std::string(name) + "'");
    return it->second;
  }

 private:
  std::map<std::string, std::string> files_;
};

// The example file of LogScale's lookup API documentation.
const char* kUsersCsv = "userid,name\n1,chr\n2,krab\n\"4\",\"p,m\"\n7,mgr\n";

TEST(LookupTable, CsvWithQuotesAndCrlf) {
  auto t = ParseLookupTable("users.csv", kUsersCsv);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->columns, (std::vector<std::string>{"userid", "name"}));
  ASSERT_EQ(t->rows.size(), 4u);
  EXPECT_EQ(t->rows[2], (std::vector<std::string>{"4", "p,m"}));
  auto crlf = ParseLookupTable("X.CSV", "a, b\r\n\"x \"\"y\"\"\", z\r\n\r\n3\r\n");
  ASSERT_TRUE(crlf.ok()) << crlf.status().ToString();
  EXPECT_EQ(crlf->columns, (std::vector<std::string>{"a", " b"}));  // spaces are kept
  ASSERT_EQ(crlf->rows.size(), 2u);
  EXPECT_EQ(crlf->rows[0], (std::vector<std::string>{"x \"y\"", " z"}));
  EXPECT_EQ(crlf->rows[1], (std::vector<std::string>{"3"}));
  EXPECT_EQ(ParseLookupTable("a.csv", "").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseLookupTable("a.csv", "a\n\"open").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseLookupTable("a.txt", "a\n").status().code(), StatusCode::kInvalidArgument);
}

TEST(LookupTable, JsonArrayOfObjects) {
  auto t = ParseLookupTable(
      "u.json", R"([{"userid": "1", "name": "chr"}, {"userid": 2, "ok": true, "name": null}])");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->columns, (std::vector<std::string>{"userid", "name", "ok"}));
  EXPECT_EQ(t->rows[0], (std::vector<std::string>{"1", "chr", ""}));
  EXPECT_EQ(t->rows[1], (std::vector<std::string>{"2", "", "true"}));
  for (const char* bad : {R"({"1": {"name": "chr"}})", "[1]", R"([{"a": [1]}])", "["}) {
    EXPECT_EQ(ParseLookupTable("u.json", bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

Record Row(std::vector<std::pair<std::string, std::string>> fields) {
  query::Row row;
  for (auto& [k, v] : fields) row.emplace_back(k, Value(v));
  return Record::FromRow(std::move(row), RecordKey{});
}

std::optional<std::string> Text(const Record& r, std::string_view name) {
  std::string scratch;
  auto v = r.Get(name, &scratch);
  return v ? std::optional<std::string>(std::string(*v)) : std::nullopt;
}

const Stage& MatchStage(const CompiledQuery& q) {
  for (const Stage& st : q.stages) {
    if (st.kind == Stage::Kind::kMatch) return st;
  }
  ADD_FAILURE() << "no match stage";
  return q.stages.front();
}

TEST(Match, EnrichesAndFiltersLikeTheDocumentation) {
  const MapFiles files(std::map<std::string, std::string>{{"users.csv", kUsersCsv}});
  // The defaults: column = field, every other column added, strict.
  auto q = Compile("match(file=\"users.csv\", field=userid)", &files);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  const Stage& st = MatchStage(**q);
  Record hit = Row({{"userid", "4"}});
  EXPECT_TRUE(ApplyTransformInPlace(st, hit));
  EXPECT_EQ(Text(hit, "name"), "p,m");
  Record miss = Row({{"userid", "5"}});
  EXPECT_FALSE(ApplyTransformInPlace(st, miss));
  Record none = Row({{"other", "1"}});
  EXPECT_FALSE(ApplyTransformInPlace(st, none));

  // column= names the file's key column; include=[] only filters; strict=false keeps misses.
  q = Compile("match(\"users.csv\", field=id, column=userid, include=[], strict=false)", &files);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  Record kept = Row({{"id", "5"}});
  EXPECT_TRUE(ApplyTransformInPlace(MatchStage(**q), kept));
  Record only = Row({{"id", "7"}});
  EXPECT_TRUE(ApplyTransformInPlace(MatchStage(**q), only));
  EXPECT_EQ(Text(only, "name"), std::nullopt);

  q = Compile("match(file=\"users.csv\", field=who, column=name, include=userid, ignoreCase=true)",
              &files);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  Record upper = Row({{"who", "KRAB"}});
  EXPECT_TRUE(ApplyTransformInPlace(MatchStage(**q), upper));
  EXPECT_EQ(Text(upper, "userid"), "2");
}

// mode=glob: the first row (file order) whose pattern matches the whole value; mode=cidr: the
// most specific subnet holding the address (IPv4 and IPv6 apart), ties in file order.
TEST(Match, GlobAndCidrModes) {
  const MapFiles files(std::map<std::string, std::string>{
      {"hosts.csv", "host,role\nweb-*,web\n*-db,database\nweb-db,never\n*,other\n"},
      {"nets.csv",
       "net,zone\n10.0.0.0/8,corp\n10.1.0.0/16,lab\n10.1.2.3,host\n10.1.0.0/16,second\n"
       "2001:db8::/32,v6\n"}});
  auto q = Compile("match(file=\"hosts.csv\", field=h, column=host, mode=glob)", &files);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  for (const auto& [host, role] : std::vector<std::pair<std::string, std::string>>{
           {"web-1", "web"}, {"web-db", "web"}, {"orders-db", "database"}, {"x", "other"}}) {
    Record r = Row({{"h", host}});
    EXPECT_TRUE(ApplyTransformInPlace(MatchStage(**q), r)) << host;
    EXPECT_EQ(Text(r, "role"), role) << host;
  }
  q = Compile("match(file=\"hosts.csv\", field=h, column=host, mode=glob, ignoreCase=true)",
              &files);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  Record upper = Row({{"h", "WEB-7"}});
  EXPECT_TRUE(ApplyTransformInPlace(MatchStage(**q), upper));
  EXPECT_EQ(Text(upper, "role"), "web");

  q = Compile("match(file=\"nets.csv\", field=ip, column=net, mode=cidr)", &files);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  for (const auto& [ip, zone] :
       std::vector<std::pair<std::string, std::string>>{{"10.9.9.9", "corp"},
                                                        {"10.1.7.7", "lab"},
                                                        {"10.1.2.3", "host"},
                                                        {"2001:db8::1", "v6"}}) {
    Record r = Row({{"ip", ip}});
    EXPECT_TRUE(ApplyTransformInPlace(MatchStage(**q), r)) << ip;
    EXPECT_EQ(Text(r, "zone"), zone) << ip;
  }
  for (const char* miss : {"11.0.0.1", "::ffff:10.1.2.3", "not an address", ""}) {
    Record r = Row({{"ip", miss}});
    EXPECT_FALSE(ApplyTransformInPlace(MatchStage(**q), r)) << miss;
  }
}

TEST(Match, RefusalsNameTheProblem) {
  const MapFiles files(std::map<std::string, std::string>{
      {"users.csv", kUsersCsv}, {"bad.json", "{}"}, {"nets.csv", "net,zone\n10.0.0.0/8,a\n"}});
  for (const auto& [query, wanted] : std::vector<std::pair<std::string, std::string>>{
           {"match(file=\"nope.csv\", field=userid)", "no lookup file 'nope.csv'"},
           {"match(file=\"users.csv\", field=x)", "no column 'x'"},
           {"match(file=\"users.csv\", field=userid, include=[zip])", "no column 'zip'"},
           {"match(file=\"users.csv\", field=userid, mode=regex)", "string, glob or cidr"},
           {"match(file=\"users.csv\", field=userid, mode=cidr)",
            "row 1: '1' in column 'userid' is not an IPv4 or IPv6 subnet"},
           {"match(file=\"nets.csv\", field=ip, column=net, mode=cidr, ignoreCase=true)",
            "ignoreCase"},
           {"match(file=\"bad.json\", field=userid)", "array of objects"},
           {"match(table=t, field=userid)", "table"},
       }) {
    auto q = Compile(query, &files);
    ASSERT_FALSE(q.ok()) << query;
    EXPECT_EQ(q.status().code(), StatusCode::kInvalidArgument) << query;
    EXPECT_NE(q.status().message().find(wanted), std::string::npos) << q.status().message();
  }
  // Without lookup files (Compile(text)), match() cannot compile.
  auto q = Compile("match(file=\"users.csv\", field=userid)");
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.status().message().find("no lookup files"), std::string::npos);
  // The scope ends with the call: a later Compile on this thread sees no files.
  ASSERT_TRUE(Compile("match(file=\"users.csv\", field=userid)", &files).ok());
  EXPECT_FALSE(Compile("match(file=\"users.csv\", field=userid)").ok());
  EXPECT_EQ(CurrentLookupFiles(), nullptr);
}

// defineTable()/join(): the tables are collected unbound, refused where undefined, bound by
// Compile(text, files, &tables), and a query with unbound tables does not execute.
TEST(Tables, CollectedBoundAndRefused) {
  auto q = Compile(
      "defineTable(name=a, query={x=1 | groupBy(k)}, include=[k], start=1h) | y=2 "
      "| match(table=a, field=k) | join({z=3}, field=k, key=kk, include=[v, w], mode=left)",
      nullptr);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  const std::vector<TableQuery>& t = QueryTables(**q);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].name, "a");
  EXPECT_EQ(t[0].function, "defineTable");
  EXPECT_EQ(t[0].query, "x=1 | groupBy(k)");
  EXPECT_EQ(t[0].include, (std::vector<std::string>{"k"}));
  EXPECT_EQ(t[0].start, "1h");
  EXPECT_EQ(t[1].function, "join");
  EXPECT_EQ(t[1].query, "z=3");
  EXPECT_EQ(t[1].include, (std::vector<std::string>{"kk", "v", "w"}));
  EXPECT_EQ(t[1].limit, 100000);
  EXPECT_FALSE(TablesBound(**q));
  // defineTable() is no stage; y=2 stays the leading filter.
  ASSERT_EQ((*q)->stages.size(), 2u);
  EXPECT_EQ(DebugString(*(*q)->filter), R"((eq "y" "2"))");
  EXPECT_EQ((*q)->stages[0].match_table, nullptr);
  auto ran = Execute(Env::Default(), **q, TimeRange{0, 1}, ScanInput{});
  ASSERT_FALSE(ran.ok());
  EXPECT_EQ(ran.status().code(), StatusCode::kFailedPrecondition);

  // Bound: the tables are read like lookup files.
  BoundTables tables;
  tables["a"] = LookupTable{{"k", "extra"}, {{"1", "one"}, {"2", "two"}}};
  tables[t[1].name] = LookupTable{{"kk", "v", "w"}, {{"2", "vv", ""}}};
  auto b = Compile((*q)->text, nullptr, &tables);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_TRUE(TablesBound(**b));
  Record r = Row({{"k", "2"}});
  EXPECT_TRUE(ApplyTransformInPlace((*b)->stages[0], r));
  EXPECT_EQ(Text(r, "extra"), "two");
  EXPECT_TRUE(ApplyTransformInPlace((*b)->stages[1], r));  // join: key kk
  EXPECT_EQ(Text(r, "v"), "vv");
  Record miss = Row({{"k", "3"}});
  EXPECT_FALSE(ApplyTransformInPlace((*b)->stages[0], miss));  // match strict
  Record left = Row({{"k", "3"}});
  EXPECT_TRUE(ApplyTransformInPlace((*b)->stages[1], left));  // join mode=left keeps it

  // A table's rows from result rows: the include columns, a missing field an empty cell; `*`:
  // every field in order of first appearance.
  TableQuery tq;
  tq.include = {"k", "v"};
  LookupTable made = TableFromRows(
      tq, {{{"k", Value(int64_t{1})}, {"z", Value(std::string("s"))}}, {{"v", Value(2.5)}}});
  EXPECT_EQ(made, (LookupTable{{"k", "v"}, {{"1", ""}, {"", "2.5"}}}));
  tq.include_all = true;
  made = TableFromRows(tq, {{{"k", Value(int64_t{1})}}, {{"z", Value(std::string("s"))}}});
  EXPECT_EQ(made.columns, (std::vector<std::string>{"k", "z"}));
  // start=/end= move the subquery's range; relative times count back from the main end.
  tq.start = "1h";
  auto range = TableRange(tq, TimeRange{0, 7'200'000});
  ASSERT_TRUE(range.ok());
  EXPECT_EQ(range->start_ms, 3'600'000);
  EXPECT_EQ(range->end_ms, 7'200'000);
  tq.end = "nonsense";
  EXPECT_FALSE(TableRange(tq, TimeRange{0, 1}).ok());

  for (const auto& [query, wanted] : std::vector<std::pair<std::string, std::string>>{
           {"match(table=t, field=k)", "unknown table 't' in match()"},
           {"defineTable(name=t, query=x, include=[k])", "parameter 'query'"},
           {"defineTable(name=t, query={x}, include=[k]) | defineTable(name=t, query={y}, "
            "include=[k])",
            "table 't' is defined twice"},
           {"groupBy(a, function={defineTable(name=t, query={x}, include=[k]) | count()})",
            "cannot be used inside a subquery"},
           {"defineTable(name=t, query={x})", "missing required parameter 'include'"},
           {"defineTable(name=t, query={x}, include=[k], view=other)", "'view'"},
           {"join({x}, field=k, mode=right)", "inner or left"},
           {"join({x}, field=k, max=2)", "max"},
           {"join({x}, field=k, repo=other)", "'repo'"},
           {"join({x}, field=k, limit=300000)", "limit"},
       }) {
    auto bad = Compile(query, nullptr);
    ASSERT_FALSE(bad.ok()) << query;
    EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument) << query;
    EXPECT_NE(bad.status().message().find(wanted), std::string::npos) << bad.status().message();
  }
  // Bound, a table the caller did not give is an error.
  BoundTables none;
  EXPECT_FALSE(Compile("defineTable(name=t, query={x}, include=[k]) | match(table=t, field=k)",
                       nullptr, &none)
                   .ok());
  EXPECT_EQ(CurrentBoundTables(), nullptr);
}

TEST(ReadFile, EmitsTheRowsOfTheFilesInOrder) {
  const MapFiles files(std::map<std::string, std::string>{{"users.csv", kUsersCsv},
                                                          {"hosts.csv", "host,site\nh1,s1\nh2\n"}});
  auto q =
      Compile("readFile([\"users.csv\", \"hosts.csv\"], include=[userid, host], limit=6)", &files);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  // The repository's events play no part.
  auto r = Execute(Env::Default(), **q, TimeRange{0, 1000}, ScanInput{});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const std::vector<sediment::query::Row> want = {
      {{"userid", Value("1")}}, {{"userid", Value("2")}}, {{"userid", Value("4")}},
      {{"userid", Value("7")}}, {{"host", Value("h1")}},  {{"host", Value("h2")}}};
  EXPECT_EQ(r->rows, want);

  // The files given as positional values, as LogScale's examples write it.
  q = Compile("readFile(\"users.csv\", \"hosts.csv\", include=[userid, host], limit=6)", &files);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  r = Execute(Env::Default(), **q, TimeRange{0, 1000}, ScanInput{});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->rows, want);

  q = Compile("readFile(\"hosts.csv\", limit=1) | site=s1", &files);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  r = Execute(Env::Default(), **q, TimeRange{0, 1000}, ScanInput{});
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->rows.size(), 1u);

  for (const char* bad : {"readFile(\"nope.csv\")", "readFile(\"users.csv\", limit=0)"}) {
    auto e = Compile(bad, &files);
    ASSERT_FALSE(e.ok()) << bad;
    EXPECT_NE(e.status().message().find("readFile()"), std::string::npos) << e.status().message();
    EXPECT_NE(e.status().message().find("at position"), std::string::npos);
  }
  EXPECT_NE(Compile("readFile(\"users.csv\")").status().message().find("no lookup files"),
            std::string::npos);
}

}  // namespace
}  // namespace sediment::query
