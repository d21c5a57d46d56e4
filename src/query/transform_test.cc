#include "query/transform.h"

#include <gtest/gtest.h>
#include <re2/re2.h>

#include <chrono>
#include <ctime>
#include <limits>
#include <memory>
#include <random>

#include "query/search.h"

namespace sediment::query {
namespace {

using FK = FilterNode::Kind;
using SK = Stage::Kind;

// ---- events in a hand-built decoded block ----

struct TestEvent {
  int64_t ts = 0;
  std::string raw;
  std::vector<std::pair<std::string, std::string>> fields;
};

// A DecodedBlock whose views point into its own buffer, as SegmentReader builds them.
class TestBlock {
 public:
  explicit TestBlock(std::vector<TestEvent> events) {
    ds_.repo = "web";
    ds_.tags = {{"#type", "accesslog"}};
    struct Spans {
      size_t raw_at, raw_len;
      std::vector<std::array<size_t, 4>> fields;  // name at/len, value at/len
    };
    std::vector<Spans> spans;
    std::string& buf = block_.buffer;
    for (const TestEvent& e : events) {
      Spans s;
      s.raw_at = buf.size();
      s.raw_len = e.raw.size();
      buf += e.raw;
      for (const auto& [k, v] : e.fields) {
        std::array<size_t, 4> f{buf.size(), k.size(), 0, v.size()};
        buf += k;
        f[2] = buf.size();
        buf += v;
        s.fields.push_back(f);
      }
      spans.push_back(std::move(s));
    }
    block_.field_begin.push_back(0);
    for (size_t i = 0; i < events.size(); ++i) {
      block_.timestamps.push_back(events[i].ts);
      block_.ingest_ts.push_back(events[i].ts + 5);
      block_.positions.push_back(Position{Offset(100 + static_cast<int64_t>(i)), 3});
      block_.raw.emplace_back(buf.data() + spans[i].raw_at, spans[i].raw_len);
      for (const auto& f : spans[i].fields) {
        std::string_view name(buf.data() + f[0], f[1]);
        block_.fields.push_back(FieldView{name, std::string_view(buf.data() + f[2], f[3])});
        block_.field_names.push_back(name);
      }
      block_.field_begin.push_back(static_cast<uint32_t>(block_.fields.size()));
    }
    block_.event_count = events.size();
  }

  Record At(size_t i) const { return Record(EventRef{&block_, &ds_, PartitionId(7), i}); }

 private:
  DecodedBlock block_;
  Datasource ds_;
};

// One event: @timestamp 1000, fields as given.
class OneEvent {
 public:
  OneEvent(std::string raw, std::vector<std::pair<std::string, std::string>> fields = {},
           int64_t ts = 1000)
      : block_({TestEvent{ts, std::move(raw), std::move(fields)}}) {}
  Record Get() const { return block_.At(0); }

 private:
  TestBlock block_;
};

Record RowRecord(Row row) { return Record::FromRow(std::move(row), RecordKey{0, 0, 42, 0}); }

// ---- AST builders ----

FilterPtr Node(FK kind) {
  auto n = std::make_shared<FilterNode>();
  n->kind = kind;
  return n;
}
FilterPtr Text(const std::string& t) {
  auto n = std::make_shared<FilterNode>();
  n->kind = FK::kText;
  n->searcher = std::make_shared<CiSearcher>(t);
  n->text = n->searcher->needle();
  return n;
}
FilterPtr TextGlob(const std::string& pattern) {
  auto n = std::make_shared<FilterNode>();
  n->kind = FK::kTextGlob;
  n->text = pattern;
  size_t start = 0;
  for (size_t i = 0; i <= pattern.size(); ++i) {
    if (i == pattern.size() || pattern[i] == '*') {
      if (i > start) n->pieces.emplace_back(pattern.substr(start, i - start));
      start = i + 1;
    }
  }
  return n;
}
FilterPtr RawRegex(const std::string& re) {
  auto n = std::make_shared<FilterNode>();
  n->kind = FK::kRawRegex;
  n->text = re;
  n->re = std::make_shared<RE2>(re);
  return n;
}
FilterPtr Field(FK kind, const std::string& field, const std::string& text,
                bool ignore_case = false) {
  auto n = std::make_shared<FilterNode>();
  n->kind = kind;
  n->field = field;
  n->text = text;
  n->ignore_case = ignore_case;
  if (kind == FK::kFieldRegex) n->re = std::make_shared<RE2>(text);
  return n;
}
FilterPtr Cmp(const std::string& field, FilterNode::Cmp cmp, double number) {
  auto n = std::make_shared<FilterNode>();
  n->kind = FK::kFieldCmp;
  n->field = field;
  n->cmp = cmp;
  n->number = number;
  return n;
}
FilterPtr Bool(FK kind, FilterPtr a, FilterPtr b) {
  auto n = std::make_shared<FilterNode>();
  n->kind = kind;
  n->children = {std::move(a), std::move(b)};
  return n;
}
FilterPtr Not(FilterPtr a) {
  auto n = std::make_shared<FilterNode>();
  n->kind = FK::kNot;
  n->children = {std::move(a)};
  return n;
}

ExprPtr E(Expr::Kind kind, std::string text, std::vector<ExprPtr> args = {}) {
  auto e = std::make_shared<Expr>();
  e->kind = kind;
  e->text = std::move(text);
  e->args = std::move(args);
  return e;
}
ExprPtr F(const std::string& name) { return E(Expr::Kind::kField, name); }
ExprPtr S(const std::string& s) { return E(Expr::Kind::kString, s); }
ExprPtr N(const std::string& spelling) {
  auto e = E(Expr::Kind::kNumber, spelling);
  std::const_pointer_cast<Expr>(e)->number = std::stod(spelling);
  return e;
}
ExprPtr Call(const std::string& fn, std::vector<ExprPtr> args = {}) {
  return E(Expr::Kind::kCall, fn, std::move(args));
}
ExprPtr Un(const std::string& op, ExprPtr a) { return E(Expr::Kind::kUnary, op, {std::move(a)}); }
ExprPtr Bin(const std::string& op, ExprPtr a, ExprPtr b) {
  return E(Expr::Kind::kBinary, op, {std::move(a), std::move(b)});
}

Value I(int64_t v) { return Value(v); }
Value D(double v) { return Value(v); }
Value Str(std::string v) { return Value(std::move(v)); }

std::vector<Record> Apply(const Stage& st, Record r) {
  std::vector<Record> out;
  ApplyTransform(st, std::move(r), &out);
  return out;
}

std::optional<std::string> GetText(const Record& r, std::string_view name) {
  std::string scratch;
  auto v = r.Get(name, &scratch);
  if (!v) return std::nullopt;
  return std::string(*v);
}

// ---- Matches ----

TEST(MatchesTest, FreeTextIsCaseInsensitiveSubstringOfRawstring) {
  OneEvent ev("GET /Index.HTML 200 user=Bob", {{"user", "bob"}});
  Record r = ev.Get();
  EXPECT_TRUE(Matches(*Text("index.html"), r));
  EXPECT_TRUE(Matches(*Text("INDEX"), r));
  EXPECT_FALSE(Matches(*Text("index.htm "), r));
  // Only @rawstring is searched, not other fields.
  OneEvent ev2("nothing here", {{"user", "bob"}});
  EXPECT_FALSE(Matches(*Text("bob"), ev2.Get()));
  // Without a searcher the text (lower-cased) is still searched.
  auto n = std::make_shared<FilterNode>();
  n->kind = FK::kText;
  n->text = "user=bob";
  EXPECT_TRUE(Matches(*n, r));
  // A row without @rawstring never matches free text.
  EXPECT_FALSE(Matches(*Text("x"), RowRecord({{"a", Str("x")}})));
  EXPECT_TRUE(Matches(*Text("x"), RowRecord({{"@rawstring", Str("aXb")}})));
}

TEST(MatchesTest, TextGlobPiecesInOrderWithoutOverlap) {
  OneEvent ev("Error: disk FULL on host a1");
  Record r = ev.Get();
  EXPECT_TRUE(Matches(*TextGlob("error*full"), r));
  EXPECT_TRUE(Matches(*TextGlob("*disk*host*"), r));
  EXPECT_FALSE(Matches(*TextGlob("full*error"), r));  // order matters
  OneEvent ev2("aba");
  EXPECT_FALSE(Matches(*TextGlob("ab*ba"), ev2.Get()));  // pieces may not overlap
  EXPECT_TRUE(Matches(*TextGlob("ab*a"), ev2.Get()));
  EXPECT_TRUE(Matches(*TextGlob("*"), ev2.Get()));  // no pieces: every event
}

TEST(MatchesTest, RawRegexSearchesRawstring) {
  OneEvent ev("status=503 took 12ms", {{"x", "status=200"}});
  EXPECT_TRUE(Matches(*RawRegex("status=5\\d\\d"), ev.Get()));
  EXPECT_FALSE(Matches(*RawRegex("^took"), ev.Get()));
  EXPECT_FALSE(Matches(*RawRegex("status=2"), ev.Get()));
}

TEST(MatchesTest, FieldEqualityIsWholeValueAndCaseSensitiveUnlessIgnoreCase) {
  OneEvent ev("raw", {{"user", "Bob"}, {"empty", ""}});
  Record r = ev.Get();
  EXPECT_TRUE(Matches(*Field(FK::kFieldEq, "user", "Bob"), r));
  EXPECT_FALSE(Matches(*Field(FK::kFieldEq, "user", "bob"), r));
  EXPECT_FALSE(Matches(*Field(FK::kFieldEq, "user", "Bo"), r));
  EXPECT_TRUE(Matches(*Field(FK::kFieldEq, "user", "bOB", true), r));
  EXPECT_FALSE(Matches(*Field(FK::kFieldEq, "user", "bOBx", true), r));
  EXPECT_TRUE(Matches(*Field(FK::kFieldEq, "empty", ""), r));
  // Missing field: false, so its negation is true (even for an empty literal).
  EXPECT_FALSE(Matches(*Field(FK::kFieldEq, "nope", ""), r));
  EXPECT_TRUE(Matches(*Not(Field(FK::kFieldEq, "nope", "x")), r));
}

TEST(MatchesTest, BuiltinsAndTagsAreFields) {
  OneEvent ev("raw line", {}, 123456);
  Record r = ev.Get();
  EXPECT_TRUE(Matches(*Field(FK::kFieldEq, "@timestamp", "123456"), r));
  EXPECT_TRUE(Matches(*Field(FK::kFieldEq, "@ingesttimestamp", "123461"), r));
  EXPECT_TRUE(Matches(*Field(FK::kFieldEq, "@id", "7-100-3"), r));
  EXPECT_TRUE(Matches(*Field(FK::kFieldEq, "#type", "accesslog"), r));
  EXPECT_TRUE(Matches(*Field(FK::kFieldEq, "#repo", "web"), r));
  EXPECT_TRUE(Matches(*Field(FK::kFieldEq, "@rawstring", "raw line"), r));
  EXPECT_FALSE(Matches(*Field(FK::kFieldEq, "#host", "x"), r));
  EXPECT_TRUE(Matches(*Cmp("@timestamp", FilterNode::Cmp::kGt, 123455), r));
}

TEST(MatchesTest, FieldGlobIsAnchored) {
  OneEvent ev("raw", {{"path", "/api/v1/Users"}});
  Record r = ev.Get();
  EXPECT_TRUE(Matches(*Field(FK::kFieldGlob, "path", "*"), r));  // present
  EXPECT_FALSE(Matches(*Field(FK::kFieldGlob, "nope", "*"), r));
  EXPECT_TRUE(Matches(*Field(FK::kFieldGlob, "path", "/api/*/Users"), r));
  EXPECT_FALSE(Matches(*Field(FK::kFieldGlob, "path", "api/*"), r));
  EXPECT_FALSE(Matches(*Field(FK::kFieldGlob, "path", "*/users"), r));
  EXPECT_TRUE(Matches(*Field(FK::kFieldGlob, "path", "*/users", true), r));
}

TEST(MatchesTest, FieldRegexSearchesTheValue) {
  OneEvent ev("raw", {{"ua", "Mozilla/5.0 (X11)"}});
  Record r = ev.Get();
  EXPECT_TRUE(Matches(*Field(FK::kFieldRegex, "ua", "X1+"), r));
  EXPECT_FALSE(Matches(*Field(FK::kFieldRegex, "ua", "^X11"), r));
  EXPECT_FALSE(Matches(*Field(FK::kFieldRegex, "missing", ".*"), r));
}

TEST(MatchesTest, NumericComparisons) {
  OneEvent ev("raw", {{"status", "503"},
                      {"lat", "0.25"},
                      {"word", "abc"},
                      {"inf", "inf"},
                      {"plusminus", "+-3"},
                      {"plus", "+7"}});
  Record r = ev.Get();
  using C = FilterNode::Cmp;
  EXPECT_TRUE(Matches(*Cmp("status", C::kGe, 500), r));
  EXPECT_FALSE(Matches(*Cmp("status", C::kLt, 500), r));
  EXPECT_TRUE(Matches(*Cmp("status", C::kEq, 503), r));
  EXPECT_TRUE(Matches(*Cmp("status", C::kNe, 502), r));
  EXPECT_TRUE(Matches(*Cmp("status", C::kLe, 503), r));
  EXPECT_TRUE(Matches(*Cmp("status", C::kGt, 99), r));  // numeric, not text order
  EXPECT_TRUE(Matches(*Cmp("lat", C::kLt, 0.3), r));
  EXPECT_TRUE(Matches(*Cmp("plus", C::kEq, 7), r));
  // Non-numeric or missing: false for every operator, != included.
  for (C c : {C::kLt, C::kLe, C::kGt, C::kGe, C::kEq, C::kNe}) {
    EXPECT_FALSE(Matches(*Cmp("word", c, 0), r));
    EXPECT_FALSE(Matches(*Cmp("missing", c, 0), r));
    EXPECT_FALSE(Matches(*Cmp("inf", c, 0), r));
    EXPECT_FALSE(Matches(*Cmp("plusminus", c, -3), r));
  }
  // Typed row values.
  Record row = RowRecord({{"_count", I(12)}, {"_avg", D(2.5)}});
  EXPECT_TRUE(Matches(*Cmp("_count", C::kGt, 11.5), row));
  EXPECT_TRUE(Matches(*Cmp("_avg", C::kEq, 2.5), row));
}

TEST(MatchesTest, BooleanStructure) {
  OneEvent ev("abc", {{"a", "1"}});
  Record r = ev.Get();
  FilterPtr t = Node(FK::kTrue), f = Node(FK::kFalse);
  EXPECT_TRUE(Matches(*t, r));
  EXPECT_FALSE(Matches(*f, r));
  EXPECT_TRUE(Matches(*Bool(FK::kAnd, t, Text("b")), r));
  EXPECT_FALSE(Matches(*Bool(FK::kAnd, Text("b"), f), r));
  EXPECT_TRUE(Matches(*Bool(FK::kOr, f, Text("c")), r));
  EXPECT_FALSE(Matches(*Bool(FK::kOr, f, Text("z")), r));
  EXPECT_TRUE(Matches(*Not(Text("z")), r));
  EXPECT_FALSE(Matches(*Not(Field(FK::kFieldEq, "a", "1")), r));
}

TEST(MatchesTest, SeesStageChanges) {
  OneEvent ev("raw", {{"a", "1"}});
  Record r = ev.Get();
  r.Set("a", Value(std::string("2")));
  EXPECT_TRUE(Matches(*Field(FK::kFieldEq, "a", "2"), r));
  r.Set("n", Value(int64_t{5}));
  EXPECT_TRUE(Matches(*Field(FK::kFieldEq, "n", "5"), r));
  EXPECT_TRUE(Matches(*Cmp("n", FilterNode::Cmp::kEq, 5), r));
  r.Remove("a");
  EXPECT_FALSE(Matches(*Field(FK::kFieldGlob, "a", "*"), r));
  r.Set("@rawstring", Value(std::string("replaced")));
  EXPECT_TRUE(Matches(*Text("replaced"), r));
}

// ---- Evaluate ----

TEST(EvaluateTest, LeavesAndTypes) {
  OneEvent ev("raw", {{"status", "200"}}, 5000);
  Record r = ev.Get();
  EXPECT_EQ(Evaluate(*F("status"), r), Str("200"));
  EXPECT_EQ(Evaluate(*F("@timestamp"), r), I(5000));
  EXPECT_EQ(Evaluate(*F("@id"), r), Str("7-100-3"));
  EXPECT_EQ(Evaluate(*F("#type"), r), Str("accesslog"));
  EXPECT_EQ(Evaluate(*F("missing"), r), std::nullopt);
  EXPECT_EQ(Evaluate(*S("lit"), r), Str("lit"));
  EXPECT_EQ(Evaluate(*N("2"), r), I(2));
  EXPECT_EQ(Evaluate(*N("0.5"), r), D(0.5));
  EXPECT_EQ(Evaluate(*N("2.0"), r), D(2.0));
  EXPECT_EQ(Evaluate(*N("9007199254740993"), r), I(9007199254740993));
  // Typed values set by earlier stages and typed row cells keep their type.
  r.Set("n", Value(int64_t{7}));
  r.Set("d", Value(1.25));
  EXPECT_EQ(Evaluate(*F("n"), r), I(7));
  EXPECT_EQ(Evaluate(*F("d"), r), D(1.25));
  Record row = RowRecord({{"_count", I(3)}, {"s", Str("x")}});
  EXPECT_EQ(Evaluate(*F("_count"), row), I(3));
  EXPECT_EQ(Evaluate(*F("s"), row), Str("x"));
}

TEST(EvaluateTest, Arithmetic) {
  OneEvent ev("raw", {{"status", "200"}, {"half", "0.5"}, {"word", "abc"}});
  Record r = ev.Get();
  EXPECT_EQ(Evaluate(*Bin("*", F("status"), N("2")), r), I(400));
  EXPECT_EQ(Evaluate(*Bin("+", F("status"), F("half")), r), D(200.5));
  EXPECT_EQ(Evaluate(*Bin("-", N("3"), N("5")), r), I(-2));
  EXPECT_EQ(Evaluate(*Bin("/", N("6"), N("3")), r), I(2));
  EXPECT_EQ(Evaluate(*Bin("/", N("7"), N("2")), r), D(3.5));
  EXPECT_EQ(Evaluate(*Bin("/", N("7"), N("0")), r), std::nullopt);
  EXPECT_EQ(Evaluate(*Bin("/", N("7.5"), N("0")), r), std::nullopt);
  EXPECT_EQ(Evaluate(*Bin("%", N("7"), N("3")), r), I(1));
  EXPECT_EQ(Evaluate(*Bin("%", N("-7"), N("3")), r), I(-1));
  EXPECT_EQ(Evaluate(*Bin("%", N("7"), N("0")), r), std::nullopt);
  EXPECT_EQ(Evaluate(*Bin("%", N("7.5"), N("2")), r), D(1.5));
  // Non-numbers and missing operands.
  EXPECT_EQ(Evaluate(*Bin("+", F("word"), N("1")), r), std::nullopt);
  EXPECT_EQ(Evaluate(*Bin("+", S("a"), S("b")), r), std::nullopt);
  EXPECT_EQ(Evaluate(*Bin("*", F("missing"), N("1")), r), std::nullopt);
  // int64 overflow falls back to double.
  const int64_t max = std::numeric_limits<int64_t>::max();
  const int64_t min = std::numeric_limits<int64_t>::min();
  Record big = RowRecord({{"max", I(max)}, {"min", I(min)}});
  EXPECT_EQ(Evaluate(*Bin("+", F("max"), N("1")), big), D(static_cast<double>(max) + 1));
  EXPECT_EQ(Evaluate(*Bin("*", F("max"), N("2")), big), D(static_cast<double>(max) * 2));
  EXPECT_EQ(Evaluate(*Bin("-", F("min"), N("1")), big), D(static_cast<double>(min) - 1));
  EXPECT_EQ(Evaluate(*Bin("/", F("min"), N("-1")), big), D(-static_cast<double>(min)));
  EXPECT_EQ(Evaluate(*Bin("%", F("min"), N("-1")), big), I(0));
  EXPECT_EQ(Evaluate(*Un("-", F("min")), big), D(-static_cast<double>(min)));
}

TEST(EvaluateTest, UnaryOperators) {
  OneEvent ev("raw", {{"n", "5"}, {"w", "abc"}, {"zero", "0"}});
  Record r = ev.Get();
  EXPECT_EQ(Evaluate(*Un("-", F("n")), r), I(-5));
  EXPECT_EQ(Evaluate(*Un("-", N("1.5")), r), D(-1.5));
  EXPECT_EQ(Evaluate(*Un("-", F("w")), r), std::nullopt);
  EXPECT_EQ(Evaluate(*Un("!", F("n")), r), I(0));
  EXPECT_EQ(Evaluate(*Un("!", F("zero")), r), I(1));
  EXPECT_EQ(Evaluate(*Un("!", F("missing")), r), I(1));
  EXPECT_EQ(Evaluate(*Un("!", S("false")), r), I(1));
  EXPECT_EQ(Evaluate(*Un("!", S("")), r), I(1));
  EXPECT_EQ(Evaluate(*Un("!", S("yes")), r), I(0));
}

TEST(EvaluateTest, ComparisonsAndLogic) {
  OneEvent ev("raw", {{"a", "10"}, {"b", "9"}, {"s", "abc"}});
  Record r = ev.Get();
  // Numeric when both are numbers ("10" > "9"), text otherwise.
  EXPECT_EQ(Evaluate(*Bin(">", F("a"), F("b")), r), I(1));
  EXPECT_EQ(Evaluate(*Bin("<", F("a"), F("b")), r), I(0));
  EXPECT_EQ(Evaluate(*Bin("==", F("a"), N("10.0")), r), I(1));
  EXPECT_EQ(Evaluate(*Bin("==", S("007"), N("7")), r), I(1));
  EXPECT_EQ(Evaluate(*Bin("<", F("s"), S("abd")), r), I(1));
  EXPECT_EQ(Evaluate(*Bin("<", F("a"), F("s")), r), I(1));  // "10" < "abc" as text
  EXPECT_EQ(Evaluate(*Bin("!=", F("s"), S("abc")), r), I(0));
  EXPECT_EQ(Evaluate(*Bin("<=", F("s"), S("abc")), r), I(1));
  EXPECT_EQ(Evaluate(*Bin(">=", F("b"), N("10")), r), I(0));
  EXPECT_EQ(Evaluate(*Bin("==", F("missing"), S("x")), r), std::nullopt);
  // && and || give 1/0, count no value as false and short-circuit.
  EXPECT_EQ(Evaluate(*Bin("&&", F("a"), F("b")), r), I(1));
  EXPECT_EQ(Evaluate(*Bin("&&", F("a"), F("missing")), r), I(0));
  EXPECT_EQ(Evaluate(*Bin("||", F("missing"), F("b")), r), I(1));
  EXPECT_EQ(Evaluate(*Bin("||", N("0"), S("")), r), I(0));
  EXPECT_EQ(Evaluate(*Bin("||", N("1"), Bin("/", N("1"), N("0"))), r), I(1));
}

TEST(EvaluateTest, StringFunctions) {
  OneEvent ev("raw", {{"name", "ÉCOLE Straße ΣΑΣ Привет Ÿ"}, {"sp", "  hi there \t"}});
  Record r = ev.Get();
  EXPECT_EQ(Evaluate(*Call("lower", {F("name")}), r), Str("école straße σασ привет ÿ"));
  EXPECT_EQ(Evaluate(*Call("upper", {F("name")}), r), Str("ÉCOLE STRAßE ΣΑΣ ПРИВЕТ Ÿ"));
  EXPECT_EQ(Evaluate(*Call("upper", {S("straße ÿ ς abc")}), r), Str("STRAßE Ÿ Σ ABC"));
  EXPECT_EQ(Evaluate(*Call("lower", {F("missing")}), r), std::nullopt);
  EXPECT_EQ(Evaluate(*Call("lower", {N("12")}), r), Str("12"));
  EXPECT_EQ(Evaluate(*Call("length", {S("héllo")}), r), I(5));
  EXPECT_EQ(Evaluate(*Call("length", {S("")}), r), I(0));
  EXPECT_EQ(Evaluate(*Call("length", {S("😀x")}), r), I(2));
  EXPECT_EQ(Evaluate(*Call("trim", {F("sp")}), r), Str("hi there"));
  EXPECT_EQ(Evaluate(*Call("concat", {S("a"), N("1"), F("missing"), N("2.5")}), r), Str("a12.5"));
  EXPECT_EQ(Evaluate(*Call("concat", {}), r), Str(""));
  EXPECT_EQ(Evaluate(*Call("tostring", {N("1.5")}), r), Str("1.5"));
  EXPECT_EQ(Evaluate(*Call("tostring", {F("@timestamp")}), r), Str("1000"));
}

TEST(EvaluateTest, Substr) {
  OneEvent ev("raw");
  Record r = ev.Get();
  EXPECT_EQ(Evaluate(*Call("substr", {S("hello"), N("1"), N("3")}), r), Str("ell"));
  EXPECT_EQ(Evaluate(*Call("substr", {S("hello"), N("2")}), r), Str("llo"));
  EXPECT_EQ(Evaluate(*Call("substr", {S("hello"), N("1"), N("99")}), r), Str("ello"));
  EXPECT_EQ(Evaluate(*Call("substr", {S("hello"), N("5")}), r), Str(""));
  EXPECT_EQ(Evaluate(*Call("substr", {S("hello"), N("6")}), r), std::nullopt);
  EXPECT_EQ(Evaluate(*Call("substr", {S("hello"), N("-1")}), r), std::nullopt);
  EXPECT_EQ(Evaluate(*Call("substr", {S("hello"), N("1"), N("-1")}), r), std::nullopt);
  EXPECT_EQ(Evaluate(*Call("substr", {S("hello"), N("1.5")}), r), std::nullopt);
  EXPECT_EQ(Evaluate(*Call("substr", {S("hello"), S("x")}), r), std::nullopt);
  // Code points, not bytes.
  EXPECT_EQ(Evaluate(*Call("substr", {S("añbñc"), N("1"), N("3")}), r), Str("ñbñ"));
  EXPECT_EQ(Evaluate(*Call("substr", {S("hello")}), r), std::nullopt);
}

TEST(EvaluateTest, NumericFunctions) {
  OneEvent ev("raw", {{"x", "3.7"}, {"w", "abc"}});
  Record r = ev.Get();
  EXPECT_EQ(Evaluate(*Call("round", {F("x")}), r), I(4));
  EXPECT_EQ(Evaluate(*Call("round", {N("2.5")}), r), I(3));
  EXPECT_EQ(Evaluate(*Call("round", {Un("-", N("2.5"))}), r), I(-3));
  EXPECT_EQ(Evaluate(*Call("floor", {Un("-", N("1.5"))}), r), I(-2));
  EXPECT_EQ(Evaluate(*Call("ceil", {N("1.2")}), r), I(2));
  EXPECT_EQ(Evaluate(*Call("ceil", {N("7")}), r), I(7));
  EXPECT_EQ(Evaluate(*Call("round", {N("1e300")}), r), D(1e300));
  EXPECT_EQ(Evaluate(*Call("round", {F("w")}), r), std::nullopt);
  EXPECT_EQ(Evaluate(*Call("abs", {Un("-", N("4"))}), r), I(4));
  EXPECT_EQ(Evaluate(*Call("abs", {Un("-", N("4.5"))}), r), D(4.5));
  EXPECT_EQ(Evaluate(*Call("min", {N("3"), F("x"), N("5")}), r), I(3));
  EXPECT_EQ(Evaluate(*Call("min", {N("4"), F("x")}), r), D(3.7));
  EXPECT_EQ(Evaluate(*Call("max", {N("3"), F("x"), N("-1")}), r), D(3.7));
  EXPECT_EQ(Evaluate(*Call("max", {N("3"), F("w")}), r), std::nullopt);
  EXPECT_EQ(Evaluate(*Call("max", {N("3"), F("missing")}), r), std::nullopt);
  EXPECT_EQ(Evaluate(*Call("min", {}), r), std::nullopt);
  EXPECT_EQ(Evaluate(*Call("tonumber", {S("12")}), r), I(12));
  EXPECT_EQ(Evaluate(*Call("tonumber", {S("+1.5")}), r), D(1.5));
  EXPECT_EQ(Evaluate(*Call("tonumber", {S("1e3")}), r), D(1000));
  EXPECT_EQ(Evaluate(*Call("tonumber", {S("12abc")}), r), std::nullopt);
  EXPECT_EQ(Evaluate(*Call("tonumber", {S("nan")}), r), std::nullopt);
}

TEST(EvaluateTest, IfNowFormatTimeAndUnknown) {
  OneEvent ev("raw", {{"status", "503"}}, 86400000);
  Record r = ev.Get();
  ExprPtr is_error = Bin(">=", F("status"), N("500"));
  EXPECT_EQ(Evaluate(*Call("if", {is_error, S("error"), S("ok")}), r), Str("error"));
  EXPECT_EQ(Evaluate(*Call("if", {F("missing"), S("a"), N("2")}), r), I(2));
  // Only the chosen branch is evaluated (the other one would give no value anyway).
  EXPECT_EQ(Evaluate(*Call("if", {N("1"), N("1"), Bin("/", N("1"), N("0"))}), r), I(1));
  EXPECT_EQ(Evaluate(*Call("if", {N("1"), N("2")}), r), std::nullopt);

  const auto clock_ms = [] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  const int64_t before = clock_ms();
  std::optional<Value> now = Evaluate(*Call("now"), r);
  const int64_t after = clock_ms();
  ASSERT_TRUE(now && std::holds_alternative<int64_t>(*now));
  EXPECT_GE(std::get<int64_t>(*now), before);
  EXPECT_LE(std::get<int64_t>(*now), after);

  EXPECT_EQ(Evaluate(*Call("formattime", {S("%F %T"), F("@timestamp")}), r),
            Str("1970-01-02 00:00:00"));
  EXPECT_EQ(Evaluate(*Call("formattime", {S("%F %H:%M %z"), F("@timestamp"), S("-01:30")}), r),
            Str("1970-01-01 22:30 -0130"));
  EXPECT_EQ(Evaluate(*Call("formattime", {S("%F"), F("@timestamp"), S("Mars/Base")}), r),
            std::nullopt);
  EXPECT_EQ(Evaluate(*Call("formattime", {S("%F"), S("soon")}), r), std::nullopt);
  EXPECT_EQ(Evaluate(*Call("nosuchfunction", {N("1")}), r), std::nullopt);
}

TEST(EvaluateTest, DurationAndGetField) {
  OneEvent ev("raw", {{"status", "503"}, {"which", "status"}, {"a[1]", "x"}}, 86400000);
  Record r = ev.Get();
  EXPECT_EQ(Evaluate(*Call("duration", {S("5m")}), r), I(300000));
  EXPECT_EQ(Evaluate(*Call("duration", {S("1 hour")}), r), I(3600000));
  EXPECT_EQ(Evaluate(*Call("duration", {S("soon")}), r), std::nullopt);
  EXPECT_EQ(Evaluate(*Call("getfield", {F("which")}), r), Str("503"));
  EXPECT_EQ(Evaluate(*Call("getfield", {S("a[1]")}), r), Str("x"));
  EXPECT_EQ(Evaluate(*Call("getfield", {S("nosuch")}), r), std::nullopt);
  EXPECT_EQ(Evaluate(*Call("getfield", {F("nosuch")}), r), std::nullopt);
}

TEST(EvaluateTest, FormatDuration) {
  OneEvent ev("raw", {{"ms", "90061001"}, {"text", "soon"}});
  Record r = ev.Get();
  // 1 d + 1 h + 1 m + 1 s + 1 ms.
  EXPECT_EQ(Evaluate(*Call("formatduration", {F("ms")}), r), Str("1d1h1m1s1ms"));
  EXPECT_EQ(Evaluate(*Call("formatduration", {N("0")}), r), Str("0ms"));
  EXPECT_EQ(Evaluate(*Call("formatduration", {N("-1500")}), r), Str("-1s500ms"));
  EXPECT_EQ(Evaluate(*Call("formatduration", {F("text")}), r), std::nullopt);
  EXPECT_EQ(Evaluate(*Call("formatduration", {F("nosuch")}), r), std::nullopt);
}

// ---- FormatTime ----

TEST(FormatTimeTest, Conversions) {
  // 2024-02-29 13:05:09.007 UTC, a Thursday (leap day).
  const int64_t ms = 1709211909007;
  EXPECT_EQ(FormatTime("%Y-%m-%d %H:%M:%S.%L", ms, "UTC"), "2024-02-29 13:05:09.007");
  EXPECT_EQ(FormatTime("%F %T", ms, "Z"), "2024-02-29 13:05:09");
  EXPECT_EQ(FormatTime("%j %a %A %b %B %h", ms, "UTC"), "060 Thu Thursday Feb February Feb");
  EXPECT_EQ(FormatTime("%e|%y|%C|%I|%l|%p|%k", ms, "UTC"), "29|24|20|01|1|pm|13");
  EXPECT_EQ(FormatTime("%s %Q", ms, "UTC"), "1709211909 1709211909007");
  EXPECT_EQ(FormatTime("%Z %z", ms, "UTC"), "UTC +0000");
  EXPECT_EQ(FormatTime("%D %R %N", ms, "UTC"), "02/29/24 13:05 007000000");
  EXPECT_EQ(FormatTime("100%% %q %", ms, "UTC"), "100% %q %");
  EXPECT_EQ(FormatTime("", ms, "UTC"), "");
  EXPECT_EQ(FormatTime("%e %I %p", 1709164800000, "UTC"), "29 12 am");  // midnight
}

TEST(FormatTimeTest, TimezoneOffsets) {
  const int64_t ms = 1709251200000;  // 2024-03-01 00:00:00 UTC
  EXPECT_EQ(FormatTime("%F %T %z %Z", ms, "+02:00"), "2024-03-01 02:00:00 +0200 +02:00");
  // Back across the leap day.
  EXPECT_EQ(FormatTime("%F %T %z", ms, "-05:00"), "2024-02-29 19:00:00 -0500");
  EXPECT_EQ(FormatTime("%F %T %z", ms, "+0530"), "2024-03-01 05:30:00 +0530");
  EXPECT_EQ(FormatTime("%T", ms, "-09"), "15:00:00");
  EXPECT_EQ(FormatTime("%T %z", ms, "UTC+01:00"), "01:00:00 +0100");
  // %s is the same instant whatever the zone.
  EXPECT_EQ(FormatTime("%s", ms, "+02:00"), "1709251200");
  // Named zones (TimeZone): Paris is +01:00 (CET) on 2024-03-01.
  EXPECT_EQ(FormatTime("%T %z %Z", ms, "Europe/Paris"), "01:00:00 +0100 CET");
  // Unusable zones are UTC.
  for (const char* bad : {"Europe/Atlantis", "+25:00", "+02:61", "02:00", "+2", ""}) {
    EXPECT_EQ(FormatTime("%T %z", ms, bad), "00:00:00 +0000") << bad;
  }
}

TEST(FormatTimeTest, LeapYearsAndNegativeTimes) {
  EXPECT_EQ(FormatTime("%F %j", 951782400000, "UTC"), "2000-02-29 060");    // divisible by 400
  EXPECT_EQ(FormatTime("%F %j", -2203891200000, "UTC"), "1900-03-01 060");  // 1900 not leap
  EXPECT_EQ(FormatTime("%F %j", 1735603200000, "UTC"), "2024-12-31 366");
  EXPECT_EQ(FormatTime("%F %j", 1703980800000, "UTC"), "2023-12-31 365");
  EXPECT_EQ(FormatTime("%F %T.%L %a", -1, "UTC"), "1969-12-31 23:59:59.999 Wed");
  EXPECT_EQ(FormatTime("%s", -1, "UTC"), "-1");
  EXPECT_EQ(FormatTime("%F %T", 0, "-00:30"), "1969-12-31 23:30:00");
}

TEST(FormatTimeTest, AgreesWithGmtime) {
  std::mt19937_64 rng(12345);
  std::uniform_int_distribution<int64_t> dist(-5000000000000, 30000000000000);
  for (int k = 0; k < 20000; ++k) {
    const int64_t ms = dist(rng);
    const int64_t secs = ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000);
    const time_t t = static_cast<time_t>(secs);
    struct tm tm {};
    ASSERT_NE(gmtime_r(&t, &tm), nullptr);
    char want[64];
    std::strftime(want, sizeof(want), "%Y-%m-%d %H:%M:%S %j", &tm);
    static const char* kDays[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    ASSERT_EQ(FormatTime("%F %T %j %a", ms, "UTC"), std::string(want) + " " + kDays[tm.tm_wday])
        << ms;
  }
}

// ---- ApplyTransform ----

TEST(TransformTest, FilterKeepsOrDrops) {
  OneEvent ev("hello world");
  Stage st;
  st.kind = SK::kFilter;
  st.filter = Text("world");
  std::vector<Record> out = Apply(st, ev.Get());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].key(), ev.Get().key());
  EXPECT_TRUE(out[0].is_event());
  st.filter = Text("nope");
  EXPECT_TRUE(Apply(st, ev.Get()).empty());
}

TEST(TransformTest, EvalAssignsInOrder) {
  OneEvent ev("raw", {{"status", "200"}, {"keep", "old"}});
  Stage st;
  st.kind = SK::kEval;
  st.assignments = {{"a", Bin("*", F("status"), N("2"))},
                    {"b", Bin("+", F("a"), N("1"))},  // sees a
                    {"keep", F("missing")},           // no value: keep stays
                    {"gone", Bin("/", N("1"), N("0"))},
                    {"status", S("overridden")}};
  std::vector<Record> out = Apply(st, ev.Get());
  ASSERT_EQ(out.size(), 1u);
  const Record& r = out[0];
  EXPECT_EQ(r.GetValue("a"), I(400));
  EXPECT_EQ(r.GetValue("b"), I(401));
  EXPECT_EQ(r.GetValue("keep"), Str("old"));
  EXPECT_FALSE(r.Has("gone"));
  EXPECT_EQ(r.GetValue("status"), Str("overridden"));
  EXPECT_EQ(r.key(), ev.Get().key());
}

Stage RegexStage(const std::string& re, std::vector<std::string> groups, bool strict = true,
                 std::string field = "") {
  Stage st;
  st.kind = SK::kRegex;
  st.re = std::make_shared<RE2>(re);
  EXPECT_TRUE(st.re->ok()) << re;
  st.groups = std::move(groups);
  st.strict = strict;
  st.field = std::move(field);
  return st;
}

TEST(TransformTest, NegatedStageKeepsExactlyTheDroppedRecordsUnchanged) {
  OneEvent ev("GET /index.html 200 12ms");
  Stage st = RegexStage(R"((?P<method>[A-Z]+) )", {"method"});
  st.negate = true;
  // The regex matches: the negated stage drops the record.
  EXPECT_TRUE(Apply(st, ev.Get()).empty());
  // It does not match: the record passes without the stage's fields.
  OneEvent other("get lower case only");
  std::vector<Record> out = Apply(st, other.Get());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_FALSE(out[0].Has("method"));
  EXPECT_EQ(out[0].key(), other.Get().key());
}

// regex(repeat=true): a copy per match (its own groups, the event's key), at most the limit; no
// match: dropped when strict, else the event itself. ApplyTransform only: it emits several.
TEST(TransformTest, RegexRepeatGivesOneRecordPerMatch) {
  OneEvent ev("a=1 b=22 c=333");
  Stage st = RegexStage(R"((?P<k>[a-z])=(?P<v>\d+))", {"k", "v"});
  st.repeat_limit = 100;
  EXPECT_FALSE(EmitsOneOrNone(st));
  std::vector<Record> out = Apply(st, ev.Get());
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(GetText(out[0], "k"), "a");
  EXPECT_EQ(GetText(out[1], "v"), "22");
  EXPECT_EQ(GetText(out[2], "k"), "c");
  EXPECT_EQ(out[2].key(), ev.Get().key());
  st.repeat_limit = 2;
  EXPECT_EQ(Apply(st, ev.Get()).size(), 2u);
  // An empty match moves on by one character instead of looping.
  Stage empty = RegexStage(R"((?P<d>\d*))", {"d"});
  empty.repeat_limit = 100;
  OneEvent digits("1a");
  out = Apply(empty, digits.Get());
  ASSERT_EQ(out.size(), 3u);  // "1" at 0, "" at 1, "" at 2
  EXPECT_EQ(GetText(out[0], "d"), "1");
  OneEvent none("no pairs");
  EXPECT_TRUE(Apply(st, none.Get()).empty());
  st.strict = false;
  out = Apply(st, none.Get());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_FALSE(out[0].Has("k"));
}

TEST(TransformTest, RegexExtractsNamedGroups) {
  OneEvent ev("GET /index.html 200 12ms", {{"msg", "user=alice"}});
  Stage st = RegexStage(R"((?P<method>[A-Z]+) (?P<path>\S+) (?P<status>\d+)(?: (?P<extra>x))?)",
                        {"method", "path", "status", "extra"});
  std::vector<Record> out = Apply(st, ev.Get());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(GetText(out[0], "method"), "GET");
  EXPECT_EQ(GetText(out[0], "path"), "/index.html");
  EXPECT_EQ(GetText(out[0], "status"), "200");
  EXPECT_FALSE(out[0].Has("extra"));  // optional group did not take part
  EXPECT_EQ(out[0].key(), ev.Get().key());

  // An empty group is set to "".
  st = RegexStage(R"(GET(?P<e>x*) )", {"e"});
  out = Apply(st, ev.Get());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(GetText(out[0], "e"), "");

  // Another field; a group that is not listed is not set.
  st = RegexStage(R"(user=(?P<user>\w+))", {}, true, "msg");
  out = Apply(st, ev.Get());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_FALSE(out[0].Has("user"));
  st.groups = {"user"};
  out = Apply(st, ev.Get());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(GetText(out[0], "user"), "alice");

  // A group may overwrite its own source field.
  st = RegexStage(R"(user=(?P<msg>\w+))", {"msg"}, true, "msg");
  out = Apply(st, ev.Get());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(GetText(out[0], "msg"), "alice");
}

TEST(TransformTest, RegexPrefixFastPathAgreesWithAPlainSearch) {
  // The same stage with and without the prefix hint (and with and without precomputed group
  // indexes) must give the same records, also when the prefix occurs many times before the match
  // (the fallback after a few candidates) and when its first byte occurs without the rest.
  std::mt19937 rng(5);
  const char* patterns[] = {R"(" (?P<status>\d{3}) )", R"(a(?P<x>b+)c)", R"(\.(?P<ext>[a-z]+)$)",
                            R"(ab(?P<x>c*)a)"};
  const char* prefix[] = {"\" ", "a", ".", "ab"};
  const char* group[] = {"status", "x", "ext", "x"};
  for (size_t k = 0; k < 4; ++k) {
    Stage plain = RegexStage(patterns[k], {group[k]}, /*strict=*/false);
    Stage fast = plain;
    fast.regex_prefix = prefix[k];
    fast.group_index = {1};
    // Candidates found by the searcher (as SetStageRegex gives prefixes of two bytes or more)
    // instead of memchr of the first byte; texts long enough for its 32-byte steps.
    Stage searched = fast;
    searched.regex_prefix_searcher = std::make_shared<CiSearcher>(prefix[k], /*exact_case=*/true);
    for (int trial = 0; trial < 3000; ++trial) {
      std::string text;
      const int len = static_cast<int>(rng() % (trial % 2 == 0 ? 40 : 120));
      for (int i = 0; i < len; ++i) text.push_back("\"a. bc123xyz"[rng() % 12]);
      OneEvent ev(text);
      std::vector<Record> a = Apply(plain, ev.Get());
      std::vector<Record> b = Apply(fast, ev.Get());
      std::vector<Record> c = Apply(searched, ev.Get());
      ASSERT_EQ(a.size(), b.size());
      ASSERT_EQ(a.size(), c.size());
      ASSERT_EQ(a[0].ToRow(), b[0].ToRow()) << patterns[k] << " on " << text;
      ASSERT_EQ(a[0].ToRow(), c[0].ToRow()) << patterns[k] << " on " << text;
    }
  }
  // Eleven quotes before the match: past the candidate limit.
  Stage st = RegexStage(R"(" (?P<status>\d{3}) )", {"status"});
  st.regex_prefix = "\" ";
  OneEvent ev(R"(" " " " " " " " " " " x" 404 end)");
  std::vector<Record> out = Apply(st, ev.Get());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(GetText(out[0], "status"), "404");
  // The prefix at the very end, with no room for the rest of a match.
  OneEvent tail(R"(x")");
  EXPECT_TRUE(Apply(st, tail.Get()).empty());
}

TEST(TransformTest, RegexOverAFieldSetByAnEarlierStage) {
  // The text lives in the record's own fields, which setting the groups may move (a short,
  // in-place string moves with the vector that holds it).
  OneEvent ev("x");
  Record r = ev.Get();
  r.Set("msg", Value(std::string("user=al id=42")));
  r.Set("a", Value(std::string("1")));
  Stage st = RegexStage(R"(user=(?P<u>\w+) id=(?P<id>\d+))", {"u", "id"}, true, "msg");
  st.regex_prefix = "user=";
  st.group_index = {1, 2};
  std::vector<Record> out = Apply(st, std::move(r));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(GetText(out[0], "u"), "al");
  EXPECT_EQ(GetText(out[0], "id"), "42");
  // A group that replaces its own source field.
  Stage self = RegexStage(R"(user=(?P<msg>\w+))", {"msg"}, true, "msg");
  out = Apply(self, std::move(out[0]));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(GetText(out[0], "msg"), "al");
}

TEST(TransformTest, RecordHoldsBytesOfItsOwnValuesOnly) {
  // regex() matches text in place unless the record itself holds it (then setting the groups
  // may move it): views into the block, the datasource and scratch are not held.
  OneEvent ev("GET /index.html 200", {{"status", "200"}});
  Record r = ev.Get();
  std::string scratch;
  for (const char* name : {"@rawstring", "status", "#repo", "#type", "@timestamp"}) {
    std::optional<std::string_view> v = r.Get(name, &scratch);
    ASSERT_TRUE(v.has_value()) << name;
    EXPECT_FALSE(r.HoldsBytesOf(*v)) << name;
  }
  r.Set("long", Value(std::string(100, 'a')));
  r.Set("short", Value(std::string("ab")));  // held inside the string object itself
  r.Set("n", Value(int64_t{5}));             // read as text through scratch
  std::optional<std::string_view> long_v = r.Get("long", &scratch);
  ASSERT_TRUE(long_v.has_value());
  EXPECT_TRUE(r.HoldsBytesOf(*long_v));
  EXPECT_TRUE(r.HoldsBytesOf(long_v->substr(10, 5)));
  std::optional<std::string_view> short_v = r.Get("short", &scratch);
  ASSERT_TRUE(short_v.has_value());
  EXPECT_TRUE(r.HoldsBytesOf(*short_v));
  std::optional<std::string_view> n = r.Get("n", &scratch);
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(*n, "5");
  EXPECT_FALSE(r.HoldsBytesOf(*n));
  // A field that overrides an event field is the record's own.
  r.Set("status", Value(std::string("404")));
  std::optional<std::string_view> status = r.Get("status", &scratch);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(r.HoldsBytesOf(*status));
  // Every field of a row is held by it.
  Record row = RowRecord({{"a", Value(std::string("text"))}});
  std::optional<std::string_view> a = row.Get("a", &scratch);
  ASSERT_TRUE(a.has_value());
  EXPECT_TRUE(row.HoldsBytesOf(*a));
}

TEST(TransformTest, RecordSetTextEqualsSetOfAString) {
  OneEvent ev("GET /index.html 200", {{"status", "200"}, {"path", "/index.html"}});
  Record a = ev.Get(), b = ev.Get();
  auto both = [&](std::string_view name, std::string_view text) {
    a.Set(name, Value(std::string(text)));
    b.SetText(name, text);
    ASSERT_EQ(a.ToRow(), b.ToRow()) << name;
  };
  both("new", "x");
  both("status", "404");  // overrides an event field
  both("new", std::string(40, 'y'));
  a.Set("n", Value(int64_t{7}));
  b.Set("n", Value(int64_t{7}));
  both("n", "eight");  // replaces a number
  a.Remove("path");
  b.Remove("path");
  both("path", "/back");  // a removed event field comes back
  // Text the record holds itself, also while adding fields moves the values: copied first.
  std::string scratch;
  for (int i = 0; i < 20; ++i) {
    const std::string name = "f" + std::to_string(i);
    std::string_view own = *b.Get("new", &scratch);
    a.Set(name, Value(std::string(own.substr(1))));
    b.SetText(name, own.substr(1));
    own = *b.Get(name, &scratch);
    a.Set("new", Value(std::string(own)));
    b.SetText("new", own);  // onto itself
  }
  EXPECT_EQ(a.ToRow(), b.ToRow());
}

TEST(TransformTest, RegexStrictness) {
  OneEvent ev("no digits here");
  Stage st = RegexStage(R"((?P<n>\d+))", {"n"});
  EXPECT_TRUE(Apply(st, ev.Get()).empty());
  st.strict = false;
  std::vector<Record> out = Apply(st, ev.Get());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_FALSE(out[0].Has("n"));
  EXPECT_EQ(out[0].ToRow(), ev.Get().ToRow());
  // A missing source field: dropped when strict, unchanged otherwise.
  st.field = "missing";
  EXPECT_EQ(Apply(st, ev.Get()).size(), 1u);
  st.strict = true;
  EXPECT_TRUE(Apply(st, ev.Get()).empty());
}

TEST(TransformTest, RegexWithManyGroups) {
  std::string re, text;
  std::vector<std::string> groups;
  for (int i = 0; i < 20; ++i) {
    re += "(?P<g" + std::to_string(i) + ">\\d)";
    text += std::to_string(i % 10);
    groups.push_back("g" + std::to_string(i));
  }
  OneEvent ev(text);
  std::vector<Record> out = Apply(RegexStage(re, groups), ev.Get());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(GetText(out[0], "g0"), "0");
  EXPECT_EQ(GetText(out[0], "g19"), "9");
}

Stage JsonStage(std::string field = "", std::string prefix = "") {
  Stage st;
  st.kind = SK::kParseJson;
  st.field = std::move(field);
  st.prefix = std::move(prefix);
  return st;
}

TEST(TransformTest, ParseJsonFlattens) {
  OneEvent ev(R"( {"a": {"b": 1.50, "c": [10, {"d": true}, [null, -2e3]]},
                   "s": "x\"y\n\u00e9\ud83d\ude00", "e": {}, "f": [], "z": false} )");
  std::vector<Record> out = Apply(JsonStage(), ev.Get());
  ASSERT_EQ(out.size(), 1u);
  const Record& r = out[0];
  EXPECT_EQ(GetText(r, "a.b"), "1.50");  // JSON spelling kept
  EXPECT_EQ(GetText(r, "a.c[0]"), "10");
  EXPECT_EQ(GetText(r, "a.c[1].d"), "true");
  EXPECT_EQ(GetText(r, "a.c[2][0]"), "null");
  EXPECT_EQ(GetText(r, "a.c[2][1]"), "-2e3");
  EXPECT_EQ(GetText(r, "s"), "x\"y\né😀");
  EXPECT_EQ(GetText(r, "e"), "{}");
  EXPECT_EQ(GetText(r, "f"), "[]");
  EXPECT_EQ(GetText(r, "z"), "false");
  EXPECT_FALSE(r.Has("a"));
  EXPECT_EQ(r.key(), ev.Get().key());
}

TEST(TransformTest, ParseJsonPrefixFieldAndArrays) {
  OneEvent ev("raw", {{"payload", R"({"user":{"id":7},"tags":["a","b"]})"},
                      {"list", R"([{"x":1},{"x":2}])"}});
  std::vector<Record> out = Apply(JsonStage("payload", "p."), ev.Get());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(GetText(out[0], "p.user.id"), "7");
  EXPECT_EQ(GetText(out[0], "p.tags[1]"), "b");
  out = Apply(JsonStage("list", "_events"), ev.Get());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(GetText(out[0], "_events[0].x"), "1");
  EXPECT_EQ(GetText(out[0], "_events[1].x"), "2");
  // Parsed values override fields of the event; duplicate keys: the last wins.
  OneEvent ev2(R"({"user":"new","k":1,"k":2})", {{"user", "old"}});
  out = Apply(JsonStage(), ev2.Get());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(GetText(out[0], "user"), "new");
  EXPECT_EQ(GetText(out[0], "k"), "2");
}

TEST(TransformTest, ParseJsonLeavesNonJsonUnchanged) {
  for (const char* bad :
       {"not json", R"({"a":1} trailing)", R"({"a":1)", R"({"a":01})", R"({"a":1,})",
        R"({"a":"unterminated})", R"({"a":tru})", R"({a:1})", "\"just a string\"", "42", "",
        R"({"a":"ctl)"
        "\x01"
        R"("})",
        R"({"a":"\q"})", R"({"a":-})", R"({"a":1.})", R"({"a":1e})", R"([1 2])"}) {
    OneEvent ev(bad, {{"f", "v"}});
    std::vector<Record> out = Apply(JsonStage(), ev.Get());
    ASSERT_EQ(out.size(), 1u) << bad;
    EXPECT_EQ(out[0].ToRow(), ev.Get().ToRow()) << bad;
  }
  // A missing source field: unchanged.
  OneEvent ev("{}");
  std::vector<Record> out = Apply(JsonStage("missing"), ev.Get());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].ToRow(), ev.Get().ToRow());
  // Deep nesting is refused rather than recursing without bound.
  std::string deep(10000, '[');
  deep += std::string(10000, ']');
  OneEvent ev_deep(deep);
  out = Apply(JsonStage(), ev_deep.Get());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].ToRow(), ev_deep.Get().ToRow());
}

Stage KvStage(bool override_fields = false, std::string field = "") {
  Stage st;
  st.kind = SK::kKvParse;
  st.override_fields = override_fields;
  st.field = std::move(field);
  return st;
}

TEST(TransformTest, KvParseQuotingAndSeparators) {
  OneEvent ev(R"(2024-01-01 INFO user=bob,status=200 msg="hello, world" q='it''s' )"
              R"(esc="say \"hi\" \\ ok" path=/a=b empty= last="x")");
  std::vector<Record> out = Apply(KvStage(), ev.Get());
  ASSERT_EQ(out.size(), 1u);
  const Record& r = out[0];
  EXPECT_EQ(GetText(r, "user"), "bob");
  EXPECT_EQ(GetText(r, "status"), "200");
  EXPECT_EQ(GetText(r, "msg"), "hello, world");
  EXPECT_EQ(GetText(r, "q"), "it");
  EXPECT_EQ(GetText(r, "esc"), R"(say "hi" \ ok)");
  EXPECT_EQ(GetText(r, "path"), "/a=b");
  EXPECT_EQ(GetText(r, "empty"), "");
  EXPECT_EQ(GetText(r, "last"), "x");
  EXPECT_FALSE(r.Has("INFO"));
  EXPECT_FALSE(r.Has("2024-01-01"));
  EXPECT_EQ(r.key(), ev.Get().key());
}

TEST(TransformTest, KvParseEdgeCases) {
  OneEvent ev(R"("quoted key"=v1 "not a key" x=1 x=2 =nokey a="unterminated b=3 c='d')");
  std::vector<Record> out = Apply(KvStage(), ev.Get());
  ASSERT_EQ(out.size(), 1u);
  const Record& r = out[0];
  EXPECT_EQ(GetText(r, "quoted key"), "v1");
  EXPECT_EQ(GetText(r, "x"), "2");               // the last duplicate wins
  EXPECT_EQ(GetText(r, "a"), "\"unterminated");  // an unclosed quote is a plain value
  EXPECT_EQ(GetText(r, "b"), "3");
  EXPECT_EQ(GetText(r, "c"), "d");
  EXPECT_FALSE(r.Has(""));
  // No pairs at all: unchanged.
  OneEvent none("just words, no pairs");
  out = Apply(KvStage(), none.Get());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].ToRow(), none.Get().ToRow());
}

TEST(TransformTest, KvParseOverride) {
  OneEvent ev("user=new fresh=1", {{"user", "old"}});
  std::vector<Record> out = Apply(KvStage(false), ev.Get());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(GetText(out[0], "user"), "old");
  EXPECT_EQ(GetText(out[0], "fresh"), "1");
  out = Apply(KvStage(true), ev.Get());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(GetText(out[0], "user"), "new");
  // Another source field.
  OneEvent ev2("raw", {{"kv", "a=1 b=2"}});
  out = Apply(KvStage(false, "kv"), ev2.Get());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(GetText(out[0], "b"), "2");
}

Stage SplitStage(std::string field = "") {
  Stage st;
  st.kind = SK::kSplit;
  st.field = std::move(field);
  return st;
}

Stage EvalStage(const std::string& target, ExprPtr e) {
  Stage st;
  st.kind = SK::kEval;
  st.assignments = {{target, std::move(e)}};
  return st;
}

TEST(TransformTest, CaseTakesTheFirstMatchingBranch) {
  Stage st;
  st.kind = SK::kCase;
  CaseBranch error{Cmp("status", FilterNode::Cmp::kGe, 500),
                   {EvalStage("level", S("error")), EvalStage("x", Bin("+", F("level"), N("1")))}};
  CaseBranch ok{Field(FK::kFieldEq, "status", "200"),
                {EvalStage("level", S("ok")), EvalStage("seen", F("level"))}};
  st.branches = {error, ok};
  OneEvent e500("raw", {{"status", "503"}});
  std::vector<Record> out = Apply(st, e500.Get());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(GetText(out[0], "level"), "error");
  EXPECT_FALSE(out[0].Has("x"));  // stages run in order: "error" + 1 has no value
  EXPECT_EQ(out[0].key(), e500.Get().key());
  OneEvent e200("raw", {{"status", "200"}});
  out = Apply(st, e200.Get());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(GetText(out[0], "seen"), "ok");
  // No branch matches: dropped.
  OneEvent e404("raw", {{"status", "404"}});
  EXPECT_TRUE(Apply(st, e404.Get()).empty());
  // A `*` branch catches the rest; an empty branch passes the record.
  st.branches.push_back(CaseBranch{Node(FK::kTrue), {}});
  out = Apply(st, e404.Get());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].ToRow(), e404.Get().ToRow());
}

TEST(TransformTest, CaseBranchStagesMayEmitManyOrNone) {
  Stage filter;
  filter.kind = SK::kFilter;
  filter.filter = Cmp("_index", FilterNode::Cmp::kGe, 1);
  Stage st;
  st.kind = SK::kCase;
  st.branches = {CaseBranch{Node(FK::kTrue),
                            {SplitStage("a"), filter, EvalStage("v", Bin("*", F("a"), N("10")))}}};
  OneEvent ev("raw", {{"a[0]", "1"}, {"a[1]", "2"}, {"a[2]", "3"}});
  std::vector<Record> out = Apply(st, ev.Get());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].GetValue("v"), I(20));
  EXPECT_EQ(out[1].GetValue("v"), I(30));
  for (const Record& r : out) EXPECT_EQ(r.key(), ev.Get().key());
  // Nested case.
  Stage outer;
  outer.kind = SK::kCase;
  outer.branches = {CaseBranch{Node(FK::kTrue), {st}}};
  EXPECT_EQ(Apply(outer, ev.Get()).size(), 2u);
}

TEST(TransformTest, CaseBranchThatDropsTheRecordHandsItToTheNextBranch) {
  // LogScale: a clause matches when it returns events. Branch 1 sets x, then keeps status >= 500
  // only; the others go on to branch 2 without branch 1's x.
  Stage filter;
  filter.kind = SK::kFilter;
  filter.filter = Cmp("status", FilterNode::Cmp::kGe, 500);
  Stage st;
  st.kind = SK::kCase;
  st.branches = {
      CaseBranch{Node(FK::kTrue), {EvalStage("x", N("1")), filter, EvalStage("k", S("server"))}},
      CaseBranch{Node(FK::kTrue), {EvalStage("k", S("other"))}}};
  OneEvent e503("raw", {{"status", "503"}});
  std::vector<Record> out = Apply(st, e503.Get());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(GetText(out[0], "k"), "server");
  EXPECT_EQ(out[0].GetValue("x"), I(1));
  OneEvent e200("raw", {{"status", "200"}});
  out = Apply(st, e200.Get());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(GetText(out[0], "k"), "other");
  EXPECT_FALSE(out[0].Has("x"));
  EXPECT_EQ(out[0].key(), e200.Get().key());
  // The last branch dropping it: no branch matched, the record is dropped.
  st.branches.pop_back();
  EXPECT_TRUE(Apply(st, e200.Get()).empty());
  // A branch with dropEvent() drops what it does not pass on (no next branch for it).
  Stage drop_event;
  drop_event.kind = SK::kFilter;  // dropEvent()'s effect; the branch is known by the name
  drop_event.function = "dropEvent";
  drop_event.filter = Node(FK::kFalse);
  st.branches = {CaseBranch{Node(FK::kTrue), {drop_event}},
                 CaseBranch{Node(FK::kTrue), {EvalStage("k", S("other"))}}};
  EXPECT_TRUE(Apply(st, e200.Get()).empty());
}

Stage FormatTimeStage(std::string format, std::string field, std::string as,
                      std::string tz = "UTC") {
  Stage st;
  st.kind = SK::kFormatTime;
  st.format = std::move(format);
  st.field = std::move(field);
  st.as = std::move(as);
  st.timezone = std::move(tz);
  return st;
}

TEST(TransformTest, FormatTimeStage) {
  OneEvent ev("raw", {{"t", "1709251200000"}, {"td", "1709251200000.9"}, {"w", "later"}},
              1709211909007);
  std::vector<Record> out = Apply(FormatTimeStage("%F %T.%L", "", "fmt"), ev.Get());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(GetText(out[0], "fmt"), "2024-02-29 13:05:09.007");
  EXPECT_EQ(out[0].key(), ev.Get().key());
  out = Apply(FormatTimeStage("%F %H:%M", "t", "fmt", "-05:00"), ev.Get());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(GetText(out[0], "fmt"), "2024-02-29 19:00");
  out = Apply(FormatTimeStage("%T.%L", "td", "fmt"), ev.Get());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(GetText(out[0], "fmt"), "00:00:00.000");
  // Without `as` the source field is replaced.
  out = Apply(FormatTimeStage("%Y", "t", ""), ev.Get());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(GetText(out[0], "t"), "2024");
  // Missing or non-numeric: unchanged.
  for (const char* f : {"w", "missing"}) {
    out = Apply(FormatTimeStage("%Y", f, "fmt"), ev.Get());
    ASSERT_EQ(out.size(), 1u);
    EXPECT_FALSE(out[0].Has("fmt")) << f;
    EXPECT_EQ(out[0].ToRow(), ev.Get().ToRow()) << f;
  }
}

TEST(TransformTest, LowerStage) {
  OneEvent ev("raw", {{"name", "ÀBC Déf"}});
  Stage st;
  st.kind = SK::kLower;
  st.field = "name";
  std::vector<Record> out = Apply(st, ev.Get());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(GetText(out[0], "name"), "àbc déf");
  st.as = "low";
  out = Apply(st, ev.Get());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(GetText(out[0], "low"), "àbc déf");
  EXPECT_EQ(GetText(out[0], "name"), "ÀBC Déf");
  st.field = "missing";
  out = Apply(st, ev.Get());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_FALSE(out[0].Has("low"));
  // Malformed UTF-8 passes through byte by byte.
  OneEvent bad("raw", {{"b",
                        "A\xC3(\xFF"
                        "B"}});
  st.field = "b";
  st.as = "";
  out = Apply(st, bad.Get());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(GetText(out[0], "b"),
            "a\xC3(\xFF"
            "b");
}

TEST(TransformTest, LengthStageCountsCodePoints) {
  OneEvent ev("héllo wörld", {{"e", ""}});
  Stage st;
  st.kind = SK::kLength;
  std::vector<Record> out = Apply(st, ev.Get());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].GetValue("_length"), I(11));
  st.field = "e";
  st.as = "n";
  out = Apply(st, ev.Get());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].GetValue("n"), I(0));
  st.field = "missing";
  out = Apply(st, ev.Get());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_FALSE(out[0].Has("n"));
}

TEST(TransformTest, SplitEmitsOneRecordPerElement) {
  OneEvent ev("raw", {{"a[0]", "x"}, {"a[1]", "y"}, {"b", "keep"}, {"a", "old"}});
  std::vector<Record> out = Apply(SplitStage("a"), ev.Get());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(GetText(out[0], "a"), "x");
  EXPECT_EQ(GetText(out[1], "a"), "y");
  EXPECT_EQ(out[0].GetValue("_index"), I(0));
  EXPECT_EQ(out[1].GetValue("_index"), I(1));
  EXPECT_EQ(GetText(out[0], "@id"), "7-100-3__0");
  EXPECT_EQ(GetText(out[1], "@id"), "7-100-3__1");
  for (const Record& r : out) {
    EXPECT_EQ(GetText(r, "b"), "keep");
    EXPECT_FALSE(r.Has("a[0]"));
    EXPECT_FALSE(r.Has("a[1]"));
    EXPECT_EQ(GetText(r, "@rawstring"), "raw");
    EXPECT_EQ(r.GetValue("@timestamp"), I(1000));
    EXPECT_EQ(r.key(), ev.Get().key());
  }
}

TEST(TransformTest, SplitObjectsAndDefaultField) {
  OneEvent ev("raw", {{"_events[0].name", "n0"},
                      {"_events[0].tags[0]", "t"},
                      {"_events[10].name", "n10"},
                      {"_events[2]", "scalar"},
                      {"_eventsx[0]", "other"},
                      {"_events[k]", "not an index"}});
  std::vector<Record> out = Apply(SplitStage(), ev.Get());
  ASSERT_EQ(out.size(), 3u);  // indices 0, 2, 10 in numeric order
  EXPECT_EQ(GetText(out[0], "_events.name"), "n0");
  EXPECT_EQ(GetText(out[0], "_events.tags[0]"), "t");
  EXPECT_EQ(GetText(out[1], "_events"), "scalar");
  EXPECT_EQ(out[1].GetValue("_index"), I(2));
  EXPECT_EQ(GetText(out[2], "_events.name"), "n10");
  EXPECT_EQ(out[2].GetValue("_index"), I(10));
  for (const Record& r : out) {
    EXPECT_EQ(GetText(r, "_eventsx[0]"), "other");
    EXPECT_EQ(GetText(r, "_events[k]"), "not an index");
  }
  EXPECT_FALSE(out[0].Has("_events"));
}

TEST(TransformTest, SplitStripDropsTheArrayPrefix) {
  OneEvent ev("raw", {{"items[0].sku", "X1"}, {"items[0].qty", "2"}, {"items[1]", "scalar"}});
  Stage st = SplitStage("items");
  st.strip = true;
  std::vector<Record> out = Apply(st, ev.Get());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(GetText(out[0], "sku"), "X1");
  EXPECT_EQ(GetText(out[0], "qty"), "2");
  EXPECT_FALSE(out[0].Has("items.sku"));
  EXPECT_EQ(GetText(out[1], "items"), "scalar");
}

TEST(TransformTest, SplitWithoutElementsPassesUnchanged) {
  OneEvent ev("raw", {{"a", "1"}, {"a[x]", "2"}});
  std::vector<Record> out = Apply(SplitStage("a"), ev.Get());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].is_event());
  EXPECT_EQ(out[0].ToRow(), ev.Get().ToRow());
  // parseJson then split: the array of a rawstring.
  OneEvent arr(R"([{"v":1},{"v":2}])");
  std::vector<Record> parsed = Apply(JsonStage("", "_events"), arr.Get());
  ASSERT_EQ(parsed.size(), 1u);
  out = Apply(SplitStage(), std::move(parsed[0]));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(GetText(out[1], "_events.v"), "2");
}

TEST(TransformTest, DropRenameSelect) {
  OneEvent ev("raw", {{"a", "1"}, {"b", "2"}, {"c", "3"}});
  Stage drop;
  drop.kind = SK::kDrop;
  drop.fields = {"a", "missing", "@rawstring"};
  std::vector<Record> out = Apply(drop, ev.Get());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_FALSE(out[0].Has("a"));
  EXPECT_FALSE(out[0].Has("@rawstring"));
  EXPECT_TRUE(out[0].Has("b"));
  EXPECT_EQ(out[0].key(), ev.Get().key());

  Stage rename;
  rename.kind = SK::kRename;
  rename.renames = {{"a", "x"}, {"missing", "y"}, {"b", "b"}, {"@timestamp", "ts"}};
  out = Apply(rename, ev.Get());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_FALSE(out[0].Has("a"));
  EXPECT_EQ(GetText(out[0], "x"), "1");
  EXPECT_FALSE(out[0].Has("y"));
  EXPECT_EQ(GetText(out[0], "b"), "2");
  EXPECT_EQ(out[0].GetValue("ts"), I(1000));
  EXPECT_FALSE(out[0].Has("@timestamp"));
  EXPECT_EQ(out[0].key(), ev.Get().key());

  Stage select;
  select.kind = SK::kSelect;
  select.fields = {"c", "missing", "@timestamp", "a", "c"};
  out = Apply(select, ev.Get());
  ASSERT_EQ(out.size(), 1u);
  Row want = {{"c", Str("3")}, {"@timestamp", I(1000)}, {"a", Str("1")}};
  EXPECT_EQ(out[0].ToRow(), want);
  EXPECT_EQ(out[0].key(), ev.Get().key());
  // Rows too.
  out = Apply(select, RowRecord({{"a", I(1)}, {"z", I(2)}, {"c", D(0.5)}}));
  ASSERT_EQ(out.size(), 1u);
  Row want_row = {{"c", D(0.5)}, {"a", I(1)}};
  EXPECT_EQ(out[0].ToRow(), want_row);
  EXPECT_EQ(out[0].key(), (RecordKey{0, 0, 42, 0}));
}

TEST(TransformTest, EveryTransformKeepsTheKey) {
  TestBlock block({TestEvent{111, "a=1 {x}", {{"f", "v"}, {"arr[0]", "e"}}},
                   TestEvent{222, R"({"j":1})", {{"f", "w"}}}});
  std::vector<Stage> stages;
  auto add = [&](SK kind) -> Stage& {
    stages.emplace_back();
    stages.back().kind = kind;
    return stages.back();
  };
  add(SK::kFilter).filter = Node(FK::kTrue);
  add(SK::kEval).assignments = {{"e", N("1")}};
  Stage& re = add(SK::kRegex);
  re.re = std::make_shared<RE2>("(?P<any>.)");
  re.groups = {"any"};
  add(SK::kParseJson);
  add(SK::kKvParse);
  add(SK::kCase).branches = {CaseBranch{Node(FK::kTrue), {}}};
  add(SK::kFormatTime).format = "%F";
  add(SK::kLower).field = "f";
  add(SK::kLength);
  add(SK::kSplit).field = "arr";
  add(SK::kDrop).fields = {"f"};
  add(SK::kRename).renames = {{"f", "g"}};
  add(SK::kSelect).fields = {"f"};
  for (size_t i = 0; i < 2; ++i) {
    const RecordKey key = block.At(i).key();
    EXPECT_EQ(key.ts, i == 0 ? 111 : 222);
    EXPECT_EQ(key.partition, 7);
    EXPECT_EQ(key.offset, 100 + static_cast<int64_t>(i));
    EXPECT_EQ(key.index, 3u);
    for (const Stage& st : stages) {
      std::vector<Record> out = Apply(st, block.At(i));
      ASSERT_FALSE(out.empty()) << static_cast<int>(st.kind);
      for (const Record& r : out) EXPECT_EQ(r.key(), key) << static_cast<int>(st.kind);
    }
  }
}

// A RecordFunction emitting two records per input (copyEvent()'s contract): the stage is not one
// ApplyTransformInPlace can run, and ApplyTransform appends what ApplyMany emits, in order.
class Twice final : public RecordFunction {
 public:
  bool Apply(Record&) const override { return true; }
  void ApplyMany(Record&& r, std::vector<Record>* out) const override {
    Record copy = r;
    copy.Set("copy", Value(int64_t{1}));
    out->push_back(std::move(r));
    out->push_back(std::move(copy));
  }
};

TEST(ApplyTransformTest, FunctionEmittingManyRecords) {
  Stage st;
  st.kind = SK::kFunction;
  st.record_function = std::make_shared<const Twice>();
  EXPECT_TRUE(EmitsOneOrNone(st));  // without function_emits_many: Apply, one record
  EXPECT_EQ(Apply(st, RowRecord({{"a", Str("x")}})).size(), 1u);
  st.function_emits_many = true;
  EXPECT_FALSE(EmitsOneOrNone(st));
  std::vector<Record> out = Apply(st, RowRecord({{"a", Str("x")}}));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(GetText(out[0], "copy"), std::nullopt);
  EXPECT_EQ(GetText(out[1], "copy"), "1");
  EXPECT_EQ(GetText(out[1], "a"), "x");
  EXPECT_EQ(out[0].key(), out[1].key());
}

}  // namespace
}  // namespace sediment::query
