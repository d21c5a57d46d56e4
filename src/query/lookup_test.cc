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

TEST(Match, RefusalsNameTheProblem) {
  const MapFiles files(
      std::map<std::string, std::string>{{"users.csv", kUsersCsv}, {"bad.json", "{}"}});
  for (const auto& [query, wanted] : std::vector<std::pair<std::string, std::string>>{
           {"match(file=\"nope.csv\", field=userid)", "no lookup file 'nope.csv'"},
           {"match(file=\"users.csv\", field=x)", "no column 'x'"},
           {"match(file=\"users.csv\", field=userid, include=[zip])", "no column 'zip'"},
           {"match(file=\"users.csv\", field=userid, mode=glob)", "mode"},
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
