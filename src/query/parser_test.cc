// Tests of Compile (parser.cc) and of the filter helpers of compiled.cc.
#include <gtest/gtest.h>
#include <re2/re2.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "query/compiled.h"
#include "query/query.h"

namespace sediment::query {
namespace {

// ---------- helpers ----------

std::shared_ptr<const CompiledQuery> MustCompile(std::string_view q) {
  auto r = Compile(q);
  EXPECT_TRUE(r.ok()) << q << ": " << r.status().ToString();
  return r.ok() ? *r : nullptr;
}

std::string Parsed(std::string_view q) {
  auto r = Compile(q);
  if (!r.ok()) return "ERROR: " + r.status().message();
  return DebugString(*(*r)->filter);
}

std::string ParseError(std::string_view q) {
  auto r = Compile(q);
  if (r.ok()) return "OK";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << q;
  return r.status().message();
}

std::string Num(double v) {
  std::string s = std::to_string(v);
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

std::string ExprString(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::kField:
      return e.text;
    case Expr::Kind::kString:
      return "\"" + e.text + "\"";
    case Expr::Kind::kNumber:
      return "#" + Num(e.number);
    case Expr::Kind::kCall:
    case Expr::Kind::kUnary:
    case Expr::Kind::kBinary: {
      std::string out = "(" + e.text;
      for (const ExprPtr& a : e.args) out += " " + ExprString(*a);
      return out + ")";
    }
    case Expr::Kind::kStage:
      return "(step " + e.stage->function + (e.text.empty() ? "" : " -> " + e.text) + ")";
  }
  return "?";
}

std::string MetricString(const Metric& m) {
  static const char* kNames[] = {"count", "sum", "avg", "min", "max", "percentile"};
  std::string out = kNames[static_cast<int>(m.kind)];
  out += "(" + m.field;
  if (m.distinct) out += " distinct";
  if (m.kind == Metric::Kind::kPercentile) {
    out += " [";
    for (size_t i = 0; i < m.percentiles.size(); ++i) {
      out += (i ? "," : "") + Num(m.percentiles[i]);
    }
    out += "]";
  }
  if (!m.as.empty()) out += " as " + m.as;
  return out + ")";
}

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + v[i];
  return out;
}

std::string StageString(const Stage& st);

std::string StagesString(const std::vector<Stage>& stages) {
  std::string out;
  for (size_t i = 0; i < stages.size(); ++i) out += (i ? " | " : "") + StageString(stages[i]);
  return out;
}

// Compact rendering of the parameters each stage kind uses.
std::string StageString(const Stage& st) {
  using K = Stage::Kind;
  switch (st.kind) {
    case K::kFilter:
      return "filter " + DebugString(*st.filter);
    case K::kEval: {
      std::string out = "eval";
      for (const auto& [f, e] : st.assignments) out += " " + f + "=" + ExprString(*e);
      return out;
    }
    case K::kRegex:
      return "regex " + st.re->pattern() + " field=" + st.field + " groups=[" + Join(st.groups) +
             "]" + (st.strict ? "" : " nonstrict");
    case K::kParseJson:
      return "parseJson field=" + st.field + " prefix=" + st.prefix;
    case K::kKvParse:
      return "kvParse field=" + st.field + (st.override_fields ? " override" : "");
    case K::kCase: {
      std::string out = "case {";
      for (size_t i = 0; i < st.branches.size(); ++i) {
        out += (i ? "; " : " ") + DebugString(*st.branches[i].condition);
        if (!st.branches[i].stages.empty()) out += " => " + StagesString(st.branches[i].stages);
      }
      return out + " }";
    }
    case K::kFormatTime:
      return "formatTime " + st.format + " field=" + st.field + " as=" + st.as +
             " tz=" + st.timezone;
    case K::kLower:
      return "lower " + st.field + " as=" + st.as;
    case K::kLength:
      return "length " + st.field + " as=" + st.as;
    case K::kSplit:
      return "split " + st.field;
    case K::kMatch:
      return "match field=" + st.field + (st.strict ? "" : " nonstrict");
    case K::kDrop:
      return "drop " + Join(st.fields);
    case K::kRename: {
      std::string out = "rename";
      for (const auto& [a, b] : st.renames) out += " " + a + "->" + b;
      return out;
    }
    case K::kSelect:
      return "select " + Join(st.fields);
    case K::kFunction:
      return st.function + " fields=[" + Join(st.function_fields) + "]" +
             (st.function_reads_all ? " all" : "");
    case K::kRows:
      return "rows " + st.function;
    case K::kHead:
      return "head " + std::to_string(st.limit);
    case K::kTail:
      return "tail " + std::to_string(st.limit);
    case K::kSort: {
      // One order (and the default type) for all fields: "sort a,b desc 200"; else per field
      // "sort a:asc:string,b:desc 200".
      bool uniform = true;
      for (const Stage::SortKey& k : st.sort_keys) {
        uniform = uniform && k.descending == st.descending && k.type == Stage::SortType::kNumber;
      }
      if (uniform) {
        return "sort " + Join(st.fields) + (st.descending ? " desc " : " asc ") +
               std::to_string(st.limit);
      }
      static const char* kType[] = {"", ":string", ":hex"};
      std::string out = "sort ";
      for (size_t i = 0; i < st.fields.size(); ++i) {
        const Stage::SortKey& k = st.sort_keys[i];
        out += (i ? "," : "") + st.fields[i] + (k.descending ? ":desc" : ":asc") +
               kType[static_cast<int>(k.type)];
      }
      return out + " " + std::to_string(st.limit);
    }
    case K::kTable:
      return "table " + Join(st.fields) + " " + std::to_string(st.limit);
    case K::kAggregate: {
      static const char* kG[] = {"none", "groupBy", "bucket", "top"};
      std::string out = std::string("agg/") + kG[static_cast<int>(st.grouping)];
      if (!st.fields.empty()) out += " [" + Join(st.fields) + "]";
      if (st.grouping != Stage::Grouping::kNone) out += " limit=" + std::to_string(st.limit);
      if (st.grouping == Stage::Grouping::kBucket) out += " span=" + std::to_string(st.span_ms);
      if (!st.top_sum.empty()) out += " sum=" + st.top_sum;
      if (st.top_percent) out += " percent";
      std::vector<std::string> ms;
      for (const Metric& m : st.metrics) ms.push_back(MetricString(m));
      return out + " {" + Join(ms) + "}";
    }
  }
  return "?";
}

// The stages of `q` rendered, or the error.
std::string Stages(std::string_view q) {
  auto r = Compile(q);
  if (!r.ok()) return "ERROR: " + r.status().message();
  return StagesString((*r)->stages);
}

// ---------- filters ----------

TEST(ParserFilterTest, Constructs) {
  EXPECT_EQ(Parsed(""), "true");
  EXPECT_EQ(Parsed("   "), "true");
  EXPECT_EQ(Parsed("*"), "true");
  EXPECT_EQ(Parsed("Foo"), R"((text "foo"))");
  EXPECT_EQ(Parsed("foo bar"), R"((and (text "foo") (text "bar")))");
  EXPECT_EQ(Parsed(R"("Hello \"World\"")"), R"((text "hello \"world\""))");
  EXPECT_EQ(Parsed(R"("a\\b")"), R"((text "a\\b"))");
  EXPECT_EQ(Parsed("status=200"), R"((eq "status" "200"))");
  EXPECT_EQ(Parsed("status = 200"), R"((eq "status" "200"))");
  EXPECT_EQ(Parsed("url=*api*v1"), R"((glob "url" "*api*v1"))");
  EXPECT_EQ(Parsed("status!=200"), R"((not (eq "status" "200")))");
  EXPECT_EQ(Parsed(R"(msg="a b")"), R"((eq "msg" "a b"))");
  EXPECT_EQ(Parsed(R"("my field"=x)"), R"((eq "my field" "x"))");
  EXPECT_EQ(Parsed("#repo=web"), R"((eq "#repo" "web"))");
  EXPECT_EQ(Parsed("#type=accesslog"), R"((eq "#type" "accesslog"))");
  EXPECT_EQ(Parsed("@rawstring=abc"), R"((eq "@rawstring" "abc"))");
  EXPECT_EQ(Parsed("a.b_c@d=1"), R"((eq "a.b_c@d" "1"))");
  EXPECT_EQ(Parsed("/err.r/"), R"q((regex "err.r"))q");
  EXPECT_EQ(Parsed("/err.r/i"), R"q((regex "(?i)err.r"))q");
  EXPECT_EQ(Parsed("/a/imd"), R"q((regex "(?i)(?m)(?s)a"))q");
  EXPECT_EQ(Parsed(R"q(/a\/b/)q"), R"q((regex "a/b"))q");
  EXPECT_EQ(Parsed("method=/get|post/i"), R"q((fregex "method" "(?i)get|post"))q");
  EXPECT_EQ(Parsed("foo*bar"), R"((textglob "foo*bar"))");
  EXPECT_EQ(Parsed("Foo*BAR"), R"((textglob "foo*bar"))");
  EXPECT_EQ(Parsed("**"), "true");
  EXPECT_EQ(Parsed(R"("Foo*bar baz")"), R"((textglob "foo*bar baz"))");
  EXPECT_EQ(Parsed(R"("*")"), "true");
  EXPECT_EQ(Parsed(R"("")"), R"((text ""))");
  EXPECT_EQ(Parsed(R"(url="*Api*v1")"), R"((glob "url" "*Api*v1"))");
  EXPECT_EQ(Parsed(R"(msg="a \\*b")"), R"((glob "msg" "a \\*b"))");
  EXPECT_EQ(Parsed(R"(status="*")"), R"((glob "status" "*"))");
  EXPECT_EQ(Parsed("status=*"), R"((glob "status" "*"))");
  EXPECT_EQ(Parsed("status!=*"), R"((not (glob "status" "*")))");
  EXPECT_EQ(Parsed("NOT status=*"), R"((not (glob "status" "*")))");
  EXPECT_EQ(Parsed(R"(status!="*")"), R"((not (glob "status" "*")))");
  EXPECT_EQ(Parsed("!a"), R"((not (text "a")))");
  EXPECT_EQ(Parsed("NOT a"), R"((not (text "a")))");
  EXPECT_EQ(Parsed("a AND b"), R"((and (text "a") (text "b")))");
  EXPECT_EQ(Parsed("a and b"), R"((and (text "a") (text "b")))");
  EXPECT_EQ(Parsed("not=1"), R"((eq "not" "1"))");
  EXPECT_EQ(Parsed("not(a)"), R"((not (text "a")))");
  // A word followed by a space and '(' is free text and a group, as before.
  EXPECT_EQ(Parsed("error (a or b)"), R"((and (text "error") (or (text "a") (text "b"))))");
  // Outside case { }, ';' is an ordinary word character; braces are syntax, never free text.
  EXPECT_EQ(Parsed("a;b"), R"((text "a;b"))");
  EXPECT_EQ(ParseError("a;b}"), "unexpected '}' at position 3");
  EXPECT_EQ(ParseError("a {b}"), "unexpected '{' at position 2");
}

TEST(ParserFilterTest, Precedence) {
  // LogScale: NOT binds tightest, then OR, then AND (explicit or implicit).
  EXPECT_EQ(Parsed("a b OR c"), R"((and (text "a") (or (text "b") (text "c"))))");
  EXPECT_EQ(Parsed("a OR b c"), R"((and (or (text "a") (text "b")) (text "c")))");
  EXPECT_EQ(Parsed("a or b and c"), R"((and (or (text "a") (text "b")) (text "c")))");
  EXPECT_EQ(Parsed("a AND b OR c AND d"),
            R"((and (and (text "a") (or (text "b") (text "c"))) (text "d")))");
  EXPECT_EQ(Parsed("a b OR c d"),
            R"((and (and (text "a") (or (text "b") (text "c"))) (text "d")))");
  EXPECT_EQ(Parsed("a OR b OR c d"),
            R"((and (or (or (text "a") (text "b")) (text "c")) (text "d")))");
  EXPECT_EQ(Parsed("x=1 or y=2 z=3"), R"((and (or (eq "x" "1") (eq "y" "2")) (eq "z" "3")))");
  EXPECT_EQ(Parsed("not a and b"), R"((and (not (text "a")) (text "b")))");
  EXPECT_EQ(Parsed("not a or b"), R"((or (not (text "a")) (text "b")))");
  EXPECT_EQ(Parsed("a or not b c"), R"((and (or (text "a") (not (text "b"))) (text "c")))");
  EXPECT_EQ(Parsed("(a or b) c"), R"((and (or (text "a") (text "b")) (text "c")))");
  EXPECT_EQ(Parsed("a (b c) or d"),
            R"((and (text "a") (or (and (text "b") (text "c")) (text "d"))))");
  EXPECT_EQ(Parsed("not (a or b)"), R"((not (or (text "a") (text "b"))))");
  EXPECT_EQ(Parsed("!!a"), R"((not (not (text "a"))))");
  EXPECT_EQ(Parsed("a or b or c"), R"((or (or (text "a") (text "b")) (text "c")))");
  EXPECT_EQ(Parsed("a and b and c"), R"((and (and (text "a") (text "b")) (text "c")))");
  EXPECT_EQ(Parsed("a OR b | count()"), R"((or (text "a") (text "b")))");
  EXPECT_EQ(Parsed("or=1 OR and=2"), R"((or (eq "or" "1") (eq "and" "2")))");
  EXPECT_EQ(Parsed("status>=500 or status<100"),
            R"((or (cmp "status" >= 500) (cmp "status" < 100)))");
}

TEST(ParserFilterTest, NumericComparisons) {
  EXPECT_EQ(Parsed("status>=500"), R"((cmp "status" >= 500))");
  EXPECT_EQ(Parsed("status >= 500"), R"((cmp "status" >= 500))");
  EXPECT_EQ(Parsed("status>500"), R"((cmp "status" > 500))");
  EXPECT_EQ(Parsed("status<500"), R"((cmp "status" < 500))");
  EXPECT_EQ(Parsed("status<=500"), R"((cmp "status" <= 500))");
  EXPECT_EQ(Parsed("status==500"), R"((cmp "status" == 500))");
  EXPECT_EQ(Parsed("latency < 0.25"), R"((cmp "latency" < 0.25))");
  EXPECT_EQ(Parsed("delta > -3"), R"((cmp "delta" > -3))");
  EXPECT_EQ(Parsed("x < 1e3"), R"((cmp "x" < 1000))");
  EXPECT_EQ(Parsed(R"(x < "12")"), R"((cmp "x" < 12))");
  EXPECT_EQ(Parsed(R"("my field" >= 2)"), R"((cmp "my field" >= 2))");
  EXPECT_EQ(Parsed("#code>=5"), R"((cmp "#code" >= 5))");
  // != stays text (in)equality: true when the field is missing or not that exact text.
  EXPECT_EQ(Parsed("status!=500"), R"((not (eq "status" "500")))");
  EXPECT_EQ(Parsed("not status>=500"), R"((not (cmp "status" >= 500)))");
  EXPECT_EQ(Parsed("a>5 b"), R"((and (cmp "a" > 5) (text "b")))");
  // A keyword followed by an operator is a field name.
  EXPECT_EQ(Parsed("or>1"), R"((cmp "or" > 1))");

  auto q = MustCompile("latency<=2.5");
  ASSERT_TRUE(q);
  ASSERT_EQ(q->filter->kind, FilterNode::Kind::kFieldCmp);
  EXPECT_EQ(q->filter->cmp, FilterNode::Cmp::kLe);
  EXPECT_EQ(q->filter->number, 2.5);
  EXPECT_EQ(q->filter->field, "latency");
  EXPECT_EQ(q->filter->position, 0u);

  EXPECT_EQ(ParseError("a>b"), "expected a number after '>' but found 'b' at position 2");
  EXPECT_EQ(ParseError("a >= 5x"), "expected a number after '>=' but found '5x' at position 5");
  EXPECT_EQ(ParseError("a<"), "expected a number after '<' but found end of query at position 2");
  EXPECT_EQ(ParseError("a==b"),
            "expected a number after '==' but found 'b' (use '=' to compare text) at position 3");
  EXPECT_EQ(ParseError("a > inf"), "expected a number after '>' but found 'inf' at position 4");
  EXPECT_EQ(ParseError("a > +-1"), "expected a number after '>' but found '+-1' at position 4");
  EXPECT_EQ(ParseError("a > 1e999"), "expected a number after '>' but found '1e999' at position 4");
  EXPECT_EQ(Parsed("a > +5"), R"((cmp "a" > 5))");
}

TEST(ParserFilterTest, InFunction) {
  EXPECT_EQ(Parsed(R"(in(status, values=[200, "30*", "a b"]))"),
            R"((or (or (eq "status" "200") (glob "status" "30*")) (eq "status" "a b")))");
  EXPECT_EQ(Parsed("in(field=loglevel, values=[error, warn], ignoreCase=true)"),
            R"((or (ieq "loglevel" "error") (ieq "loglevel" "warn")))");
  EXPECT_EQ(Parsed("in(f, values=x*, ignorecase=true)"), R"((iglob "f" "x*"))");
  EXPECT_EQ(Parsed("in(f, values=[a])"), R"((eq "f" "a"))");
  EXPECT_EQ(Parsed("!in(f, values=[a, b])"), R"((not (or (eq "f" "a") (eq "f" "b"))))");
  EXPECT_EQ(Parsed("x in(f, values=[a]) or y"), R"((and (text "x") (or (eq "f" "a") (text "y"))))");
  EXPECT_EQ(Parsed("in(#type, values=[access*])"), R"((glob "#type" "access*"))");
  EXPECT_EQ(Parsed("IN(f, values=[a])"), "ERROR: unknown function 'IN' at position 0");

  auto q = MustCompile("a | in(f, values=[x, y], ignoreCase=true)");
  ASSERT_TRUE(q);
  EXPECT_TRUE(q->stages.empty());
  EXPECT_EQ(DebugString(*q->filter), R"((and (text "a") (or (ieq "f" "x") (ieq "f" "y"))))");

  EXPECT_EQ(ParseError("in(f)"), "missing required parameter 'values' for in() at position 0");
  EXPECT_EQ(ParseError("in(values=[a])"),
            "missing required parameter 'field' for in() at position 0");
  EXPECT_EQ(ParseError("in(f, values=[])"),
            "invalid value '[...]' for parameter 'values' of in(): expected at least one value "
            "at position 13");
  EXPECT_EQ(ParseError("in(f, values=[a], ignoreCase=maybe)"),
            "invalid value 'maybe' for parameter 'ignoreCase' of in(): expected true or false at "
            "position 29");
  EXPECT_EQ(
      ParseError("in(f, values=[[a]])"),
      "invalid value '[...]' for parameter 'values' of in(): expected a string at position 14");
  EXPECT_EQ(ParseError("in(f, vals=[a])"), "unknown parameter 'vals' for in() at position 6");
}

TEST(ParserFilterTest, WildcardFunction) {
  // Without field=, the pattern is anchored on the whole @rawstring.
  EXPECT_EQ(Parsed("wildcard(\"*Error*\")"), R"((glob "@rawstring" "*Error*"))");
  EXPECT_EQ(Parsed("wildcard(pattern=horse, field=animal, ignoreCase=true)"),
            R"((ieq "animal" "horse"))");
  EXPECT_EQ(Parsed("wildcard(\"*h*rse*\", field=animal, ignoreCase=true)"),
            R"((iglob "animal" "*h*rse*"))");
  EXPECT_EQ(Parsed("wildcard(\"a*\", field=[x, y])"), R"((or (glob "x" "a*") (glob "y" "a*")))");
  EXPECT_EQ(Parsed("wildcard(\"*\", field=animal)"), R"((glob "animal" "*"))");
  EXPECT_EQ(Parsed("wildcard(\"*\", field=animal, includeEverythingOnAsterisk=true)"), "true");
  EXPECT_EQ(Parsed("not wildcard(x*, field=f)"), R"((not (glob "f" "x*")))");
  EXPECT_EQ(ParseError("wildcard(field=f)"),
            "missing required parameter 'pattern' for wildcard() at position 0");
}

TEST(ParserFilterTest, FunctionsInFilters) {
  EXPECT_EQ(ParseError("a foo(b)"), "unknown function 'foo' at position 2");
  EXPECT_EQ(ParseError("a count()"),
            "count() is not a filter: use it as a pipeline step of its own, after '|' at "
            "position 2");
  // regex() is a filter too (its stage's regex on its field).
  EXPECT_EQ(Parsed("a or regex(\"x\")"), R"((or (text "a") (regex "(?m)x")))");
}

TEST(ParserFilterTest, RequiredTermsFollowAndSpine) {
  auto terms = [](std::string_view q) {
    auto r = Compile(q);
    EXPECT_TRUE(r.ok()) << q;
    return r.ok() ? RequiredTerms(*(*r)->filter) : std::vector<std::string>{"ERROR"};
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(terms("Foo \"Bar Baz\" status=OK"), (V{"bar baz", "foo", "ok"}));
  EXPECT_EQ(terms("foo or bar"), V{});
  EXPECT_EQ(terms("foo not bar"), V{"foo"});
  EXPECT_EQ(terms("url=*Api*v1 #repo=web @timestamp=5 x=/re/"), (V{"api", "re", "v1"}));
  // A regex contributes the literals each of its matches certainly contains.
  EXPECT_EQ(terms("/Error.*disk.full/ @id=/abc/"), (V{"disk", "error", "full"}));
  EXPECT_EQ(terms("/Error.*disk (full|gone)/"), V{"error"});
  EXPECT_EQ(terms("/a?bcd|efg/i"), V{});
  EXPECT_EQ(terms("/abc/ or /abcd/"), V{"abc"});
  EXPECT_EQ(terms("not /abc/"), V{});
  EXPECT_EQ(terms("abc*def"), (V{"abc", "def"}));
  EXPECT_EQ(terms("alpha beta OR gamma"), V{"alpha"});
  EXPECT_EQ(terms("alpha OR beta gamma"), V{"gamma"});
  EXPECT_EQ(terms("alpha AND beta OR gamma AND delta"), (V{"alpha", "delta"}));
  EXPECT_EQ(terms("alpha or not beta"), V{});
  EXPECT_EQ(terms("alpha or *"), V{});
  EXPECT_EQ(terms("(error user=x) or (error user=y)"), V{"error"});
  EXPECT_EQ(terms("errors or ERROR"), V{"error"});
  EXPECT_EQ(terms("errors or error*x"), V{"error"});
  EXPECT_EQ(terms(R"("ab*CD ef")"), (V{"ab", "cd ef"}));
  EXPECT_EQ(terms(R"(url="*Api*v1")"), (V{"api", "v1"}));
  EXPECT_EQ(terms(R"("*" f=* g="*")"), V{});
  // New constructs: numeric comparisons require nothing; case-insensitive literals are the
  // same lower-cased terms; in() is an OR; wildcard() on @rawstring gives its pieces.
  EXPECT_EQ(terms("status>=500 foo"), V{"foo"});
  EXPECT_EQ(terms("in(level, values=[Error, ERRORS], ignoreCase=true)"), V{"error"});
  EXPECT_EQ(terms("in(level, values=[error, warn])"), V{});
  EXPECT_EQ(terms("wildcard(\"*Time*Out*\")"), (V{"out", "time"}));
  EXPECT_EQ(terms("wildcard(Abc, field=f, ignoreCase=true)"), V{"abc"});
}

TEST(ParserFilterTest, SpecializeFoldsTags) {
  Datasource ds{"web", {{"#type", "Access"}, {"#code", "42"}}};
  auto f = [&](std::string_view q) {
    auto c = MustCompile(q);
    return c ? DebugString(*Specialize(c->filter, ds)) : "ERROR";
  };
  EXPECT_EQ(f("#type=Access foo"), R"((text "foo"))");
  EXPECT_EQ(f("#type=access foo"), "false");
  EXPECT_EQ(f("#type=other or foo"), R"((text "foo"))");
  EXPECT_EQ(f("#repo=w* foo"), R"((text "foo"))");
  EXPECT_EQ(f("#repo!=web"), "false");
  EXPECT_EQ(f("#host=x"), "false");
  EXPECT_EQ(f("#host!=x"), "true");
  EXPECT_EQ(f("#type=/ACC/i"), "true");
  // Case-insensitive tag comparisons.
  EXPECT_EQ(f("in(#type, values=[access], ignoreCase=true) foo"), R"((text "foo"))");
  EXPECT_EQ(f("in(#type, values=[access]) foo"), "false");
  EXPECT_EQ(f("wildcard(\"ACC*\", field=#type, ignoreCase=true)"), "true");
  EXPECT_EQ(f("wildcard(\"ACC*\", field=#type)"), "false");
  // Numeric comparisons on tags: false when missing or not a number.
  EXPECT_EQ(f("#code>=42"), "true");
  EXPECT_EQ(f("#code>42"), "false");
  EXPECT_EQ(f("#code<42.5 x"), R"((text "x"))");
  EXPECT_EQ(f("#code==42"), "true");
  EXPECT_EQ(f("#type>1"), "false");
  EXPECT_EQ(f("#missing<1"), "false");
  EXPECT_EQ(DebugString(*Specialize(MustCompile("#t<0")->filter, Datasource{"w", {{"#t", "+-1"}}})),
            "false");
  EXPECT_EQ(DebugString(*Specialize(MustCompile("#t<0")->filter, Datasource{"w", {{"#t", "-1"}}})),
            "true");
  EXPECT_EQ(DebugString(*Specialize(MustCompile("#t>0")->filter, Datasource{"w", {{"#t", "inf"}}})),
            "false");
  EXPECT_EQ(f("not #missing<1"), "true");
  // Non-tag comparisons are kept (shared).
  auto c = MustCompile("status>=500");
  ASSERT_TRUE(c);
  EXPECT_EQ(Specialize(c->filter, ds), c->filter);
}

TEST(ParserFilterTest, DebugStringOfNewNodes) {
  auto node = std::make_shared<FilterNode>();
  node->kind = FilterNode::Kind::kFieldCmp;
  node->field = "f";
  node->number = -0.5;
  for (auto [cmp, name] :
       std::vector<std::pair<FilterNode::Cmp, std::string>>{{FilterNode::Cmp::kLt, "<"},
                                                            {FilterNode::Cmp::kLe, "<="},
                                                            {FilterNode::Cmp::kGt, ">"},
                                                            {FilterNode::Cmp::kGe, ">="},
                                                            {FilterNode::Cmp::kEq, "=="},
                                                            {FilterNode::Cmp::kNe, "!="}}) {
    node->cmp = cmp;
    EXPECT_EQ(DebugString(*node), "(cmp \"f\" " + name + " -0.5)");
  }
  Datasource ds{"web", {{"#n", "3"}}};
  node->field = "#n";
  node->number = 3;
  node->cmp = FilterNode::Cmp::kNe;
  EXPECT_EQ(DebugString(*Specialize(node, ds)), "false");
  node->number = 4;
  EXPECT_EQ(DebugString(*Specialize(node, ds)), "true");
}

TEST(GlobTest, Anchored) {
  EXPECT_TRUE(GlobMatch("abc", "abc"));
  EXPECT_FALSE(GlobMatch("abc", "abcd"));
  EXPECT_TRUE(GlobMatch("*", ""));
  EXPECT_TRUE(GlobMatch("a*", "abc"));
  EXPECT_FALSE(GlobMatch("a*", "bac"));
  EXPECT_TRUE(GlobMatch("*c", "abc"));
  EXPECT_TRUE(GlobMatch("a*b*c", "aXbYc"));
  EXPECT_FALSE(GlobMatch("a*b*c", "aXcYb"));
  EXPECT_FALSE(GlobMatch("ab*ba", "aba"));
  EXPECT_TRUE(GlobMatch("*x*", "abxcd"));
  EXPECT_FALSE(GlobMatch("*X*", "abxcd"));
  EXPECT_TRUE(GlobMatchIgnoreCase("*X*", "abxcd"));
  EXPECT_TRUE(GlobMatchIgnoreCase("AB*", "abc"));
  EXPECT_FALSE(GlobMatchIgnoreCase("AB*D", "abc"));
}

// ---------- pipeline ----------

TEST(ParserPipelineTest, LeadingFilterStepsAreAnded) {
  auto q = MustCompile("a | b=c | status>=500 | count()");
  ASSERT_TRUE(q);
  EXPECT_EQ(DebugString(*q->filter),
            R"((and (and (text "a") (eq "b" "c")) (cmp "status" >= 500)))");
  EXPECT_EQ(StagesString(q->stages), "agg/none {count()}");
  EXPECT_TRUE(q->is_aggregate);

  // After a non-filter stage, filters are stages.
  q = MustCompile("a | x := 1 | x=1 | head(5) | b");
  ASSERT_TRUE(q);
  EXPECT_EQ(DebugString(*q->filter), R"((text "a"))");
  EXPECT_EQ(StagesString(q->stages),
            R"(eval x=#1 | filter (eq "x" "1") | head 5 | filter (text "b"))");
  EXPECT_EQ(q->stages[1].position, 13u);
  EXPECT_EQ(q->stages[1].function, "filter");
  EXPECT_FALSE(q->is_aggregate);

  q = MustCompile("| head()");
  ASSERT_TRUE(q);
  EXPECT_EQ(DebugString(*q->filter), "true");
  EXPECT_EQ(StagesString(q->stages), "head 200");

  q = MustCompile("");
  ASSERT_TRUE(q);
  EXPECT_TRUE(q->stages.empty());
  EXPECT_EQ(q->text, "");
}

TEST(ParserPipelineTest, StagePositionsAndNames) {
  auto q = MustCompile("error | groupby(a) |  SORT_ME:=1 | timechart()");
  ASSERT_TRUE(q);
  ASSERT_EQ(q->stages.size(), 3u);
  EXPECT_EQ(q->stages[0].position, 8u);
  EXPECT_EQ(q->stages[0].function, "groupBy");
  EXPECT_EQ(q->stages[1].position, 22u);
  EXPECT_EQ(q->stages[1].function, "eval");
  EXPECT_EQ(q->stages[2].position, 35u);
  EXPECT_EQ(q->stages[2].function, "timeChart");
  EXPECT_EQ(q->text, "error | groupby(a) |  SORT_ME:=1 | timechart()");
}

TEST(ParserPipelineTest, IsAggregate) {
  for (const char* text : {"| count()", "| sort(a)", "| table([a])", "| groupBy(a)", "| [sum(x)]",
                           "| head() | top(a)", "| timeChart()"}) {
    auto q = MustCompile(text);
    ASSERT_TRUE(q);
    EXPECT_TRUE(q->is_aggregate) << text;
  }
  for (const char* text : {"a", "| head()", "| tail()", "| x := 1", "| regex(\"a\")",
                           "| select([a])", "| drop(a)", "| case { a | x := 1 }"}) {
    auto q = MustCompile(text);
    ASSERT_TRUE(q);
    EXPECT_FALSE(q->is_aggregate) << text;
  }
}

// ---------- functions ----------

TEST(ParserFunctionTest, CountAndMetrics) {
  EXPECT_EQ(Stages("| count()"), "agg/none {count()}");
  EXPECT_EQ(Stages("| count(user)"), "agg/none {count(user)}");
  EXPECT_EQ(Stages("| count(field=user, distinct=true, as=users)"),
            "agg/none {count(user distinct as users)}");
  EXPECT_EQ(Stages("| count(as=n)"), "agg/none {count( as n)}");
  EXPECT_EQ(Stages("| sum(bytes)"), "agg/none {sum(bytes)}");
  EXPECT_EQ(Stages("| avg(field=latency, as=mean)"), "agg/none {avg(latency as mean)}");
  EXPECT_EQ(Stages("| min(x) | max(y)"), "agg/none {min(x)} | agg/none {max(y)}");
  EXPECT_EQ(Stages("| percentile(latency)"), "agg/none {percentile(latency [50,75,99])}");
  EXPECT_EQ(Stages("| percentile(latency, percentiles=[50, 99.9], as=lat, accuracy=0.01)"),
            "agg/none {percentile(latency [50,99.9] as lat)}");
  EXPECT_EQ(Stages("| percentile(latency, percentiles=90)"), "agg/none {percentile(latency [90])}");

  auto q = MustCompile("| count()");
  ASSERT_TRUE(q);
  const Stage& st = q->stages[0];
  EXPECT_EQ(st.kind, Stage::Kind::kAggregate);
  EXPECT_EQ(st.grouping, Stage::Grouping::kNone);
  ASSERT_EQ(st.metrics.size(), 1u);
  EXPECT_EQ(st.metrics[0].kind, Metric::Kind::kCount);
  EXPECT_EQ(st.metrics[0].as, "");
  EXPECT_EQ(st.metrics[0].position, 2u);
  EXPECT_EQ(st.function, "count");

  EXPECT_EQ(ParseError("| count(distinct=true)"),
            "missing required parameter 'field' for count() with distinct=true at position 2");
  EXPECT_EQ(ParseError("| sum()"), "missing required parameter 'field' for sum() at position 2");
  EXPECT_EQ(ParseError("| avg(as=x)"),
            "missing required parameter 'field' for avg() at position 2");
  EXPECT_EQ(ParseError("| percentile(x, percentiles=[50, 101])"),
            "invalid value '101' for parameter 'percentiles' of percentile(): expected a number "
            "between 0 and 100 at position 33");
  EXPECT_EQ(ParseError("| percentile(x, percentiles=[])"),
            "invalid value '[...]' for parameter 'percentiles' of percentile(): expected a list "
            "of percentiles between 0 and 100 at position 28");
  EXPECT_EQ(ParseError("| percentile(x, accuracy=2)"),
            "invalid value '2' for parameter 'accuracy' of percentile(): expected a number "
            "between 0 and 1 at position 25");
  EXPECT_EQ(ParseError("| count(x, distinct=yes)"),
            "invalid value 'yes' for parameter 'distinct' of count(): expected true or false at "
            "position 20");
  EXPECT_EQ(ParseError("| count(x, y)"), "parameter 'field' of count() given twice at position 11");
  EXPECT_EQ(ParseError("| count(x, field=y)"),
            "parameter 'field' of count() given twice at position 11");
  EXPECT_EQ(ParseError("| sum([a, b])"),
            "invalid value '[...]' for parameter 'field' of sum(): expected a field name at "
            "position 6");
}

TEST(ParserFunctionTest, StatsAndShorthand) {
  EXPECT_EQ(Stages("| stats([count(), avg(x)])"), "agg/none {count(),avg(x)}");
  EXPECT_EQ(Stages("| stats(function=sum(x))"), "agg/none {sum(x)}");
  EXPECT_EQ(Stages("| stats()"), "agg/none {count()}");
  EXPECT_EQ(Stages("| [count(), max(x, as=top)]"), "agg/none {count(),max(x as top)}");
  EXPECT_EQ(Stages("[min(a), max(a)]"), "agg/none {min(a),max(a)}");
  auto q = MustCompile("x | [count()]");
  ASSERT_TRUE(q);
  EXPECT_EQ(q->stages[0].function, "stats");
  EXPECT_EQ(q->stages[0].position, 4u);

  EXPECT_EQ(ParseError("| [count(), count()]"),
            "duplicate output field '_count' in stats() (use as= to name the results) at "
            "position 12");
  EXPECT_EQ(ParseError("| [percentile(a), percentile(b)]"),
            "duplicate output field '_50' in stats() (use as= to name the results) at position "
            "18");
  EXPECT_EQ(Stages("| [percentile(a, as=a), percentile(b, as=b)]"),
            "agg/none {percentile(a [50,75,99] as a),percentile(b [50,75,99] as b)}");
  EXPECT_EQ(ParseError("| []"),
            "expected aggregate functions such as count() in [ ] at position 2");
  EXPECT_EQ(ParseError("| [a]"),
            "expected an aggregate function such as count() in [...] but found 'a' at position 3");
  EXPECT_EQ(ParseError("| [lower(a)]"),
            "unknown aggregate function 'lower' in [...] at position 3");
  EXPECT_EQ(ParseError("| stats(function=[nosuchagg(x)])"),
            "unknown aggregate function 'nosuchagg' in stats(function=...) at position 18");
}

TEST(ParserFunctionTest, GroupBy) {
  EXPECT_EQ(Stages("| groupBy(a)"), "agg/groupBy [a] limit=20000 {count()}");
  for (const char* text : {"| groupBy([a, b], function=count())",
                           "| groupby([a,b], function=[count()])", "|groupBy(field=[a,b])"}) {
    EXPECT_EQ(Stages(text), "agg/groupBy [a,b] limit=20000 {count()}") << text;
  }
  EXPECT_EQ(Stages("| groupBy(a, function=[sum(x), avg(y, as=m)], limit=5)"),
            "agg/groupBy [a] limit=5 {sum(x),avg(y as m)}");
  EXPECT_EQ(Stages("| groupBy(a, limit=max)"), "agg/groupBy [a] limit=1000000 {count()}");
  EXPECT_EQ(Stages("| groupBy(a, function=[])"), "agg/groupBy [a] limit=20000 {count()}");
  EXPECT_EQ(Stages("| groupBy(\"a b\", function=count(as=n))"),
            "agg/groupBy [a b] limit=20000 {count( as n)}");
  EXPECT_EQ(ParseError("| groupBy()"),
            "missing required parameter 'field' for groupBy() at position 2");
  EXPECT_EQ(ParseError("| groupBy(a, function=foo())"),
            "unknown aggregate function 'foo' in groupBy(function=...) at position 22");
  EXPECT_EQ(ParseError("| groupBy(a, function=x)"),
            "expected an aggregate function such as count() in groupBy(function=...) but found "
            "'x' at position 22");
  EXPECT_EQ(ParseError("| groupBy(a, limit=2000000)"),
            "invalid value '2000000' for parameter 'limit' of groupBy(): expected a non-negative "
            "integer up to 1000000 or max at position 19");
  EXPECT_EQ(ParseError("| groupBy(a, function=count(bogus=1))"),
            "unknown parameter 'bogus' for count() at position 28");
  EXPECT_EQ(ParseError("| groupBy([])"),
            "invalid value '[...]' for parameter 'field' of groupBy(): expected a field name or a "
            "list of field names at position 10");
}

TEST(ParserFunctionTest, TimeChartAndBucket) {
  EXPECT_EQ(Stages("| timeChart()"), "agg/bucket limit=10 span=0 {count()}");
  EXPECT_EQ(Stages("| timechart(host, span=5min, function=avg(x), limit=20)"),
            "agg/bucket [host] limit=20 span=300000 {avg(x)}");
  EXPECT_EQ(Stages("| timeChart(series=host, span=auto)"),
            "agg/bucket [host] limit=10 span=0 {count()}");
  EXPECT_EQ(Stages("| bucket(1h)"), "agg/bucket limit=10 span=3600000 {count()}");
  EXPECT_EQ(Stages("| bucket(span=30s, field=host, function=[count(), sum(b)], limit=3)"),
            "agg/bucket [host] limit=3 span=30000 {count(),sum(b)}");
  // Spans: LogScale's relative-time units.
  const std::pair<const char*, int64_t> kSpans[] = {
      {"1m", 60000},    {"5min", 300000},     {"1h", 3600000},     {"30s", 30000},
      {"1d", 86400000}, {"100ms", 100},       {"2w", 1209600000},  {"\"1 hour\"", 3600000},
      {"10sec", 10000}, {"3hours", 10800000}, {"1y", 31536000000}, {"15minutes", 900000},
  };
  for (const auto& [span, ms] : kSpans) {
    auto q = MustCompile(std::string("| timeChart(span=") + span + ")");
    ASSERT_TRUE(q) << span;
    EXPECT_EQ(q->stages[0].span_ms, ms) << span;
  }
  for (const char* span : {"0m", "1month", "1.5h", "h", "\"5 parsecs\"", "-1m"}) {
    EXPECT_NE(ParseError(std::string("| bucket(span=") + span + ")")
                  .find("for parameter 'span' of bucket(): expected a time span"),
              std::string::npos)
        << span;
  }
  EXPECT_EQ(ParseError("| timeChart(limit=501)"),
            "invalid value '501' for parameter 'limit' of timeChart(): expected a non-negative "
            "integer up to 500 at position 18");
  EXPECT_EQ(ParseError("| timeChart(timezone=UTC)"),
            "parameter 'timezone' of timeChart() is not supported at position 12");
  EXPECT_EQ(ParseError("| timeChart(buckets=0)"),
            "invalid value '0' for parameter 'buckets' of timeChart(): expected an integer from 1 "
            "to 1500 at position 20");
  EXPECT_EQ(ParseError("| timeChart(buckets=10, span=1m)"),
            "invalid value '10' for parameter 'buckets' of timeChart(): expected either span or "
            "buckets, not both at position 20");
  EXPECT_EQ(ParseError("| timeChart(unit=\"bytes to kb\")"),
            "invalid value 'bytes to kb' for parameter 'unit' of timeChart(): expected a "
            "conversion such as \"bytes/span to Kbytes/day\" at position 17");
  EXPECT_EQ(ParseError("| timeChart(function=[sum(a), max(b), min(c)], unit=[\"a/span to a/min\", "
                       "\"b/span to Kb/min\"])"),
            "invalid value '[...]' for parameter 'unit' of timeChart(): expected one conversion, "
            "or one per function at position 52");
  EXPECT_EQ(ParseError("| bucket(field=[a, b])"),
            "invalid value '[...]' for parameter 'field' of bucket(): expected one field at "
            "position 15");
  EXPECT_EQ(ParseError("| timeChart(series=h, function=[count(), count()])"),
            "duplicate output field '_count' in timeChart() (use as= to name the results) at "
            "position 41");
}

TEST(ParserFunctionTest, Top) {
  EXPECT_EQ(Stages("| top(url)"), "agg/top [url] limit=10 {count()}");
  EXPECT_EQ(Stages("| top([a, b], limit=3, percent=true, as=n)"),
            "agg/top [a,b] limit=3 percent {count( as n)}");
  EXPECT_EQ(Stages("| top(host, sum=bytes)"), "agg/top [host] limit=10 sum=bytes {sum(bytes)}");
  EXPECT_EQ(ParseError("| top()"), "missing required parameter 'field' for top() at position 2");
  EXPECT_EQ(ParseError("| top(a, max=x)"),
            "parameter 'max' of top() is not supported at position 9");
  EXPECT_EQ(ParseError("| top(a, rest=\"\")"),
            "invalid value '' for parameter 'rest' of top(): expected a non-empty value at "
            "position 14");
}

TEST(ParserFunctionTest, RowFunctions) {
  EXPECT_EQ(Stages("error | head(5) | tail(limit=3) | sort(status, order=asc, limit=10)"),
            "head 5 | tail 3 | sort status asc 10");
  EXPECT_EQ(Stages("| head() | tail()"), "head 200 | tail 200");
  EXPECT_EQ(Stages("| head(limit=max) | head(0)"), "head 200000 | head 0");
  EXPECT_EQ(Stages("| head (3)"), "head 3");
  EXPECT_EQ(Stages("x | sort(f)"), "sort f desc 200");
  EXPECT_EQ(Stages("| sort()"), "sort _count desc 200");
  EXPECT_EQ(Stages("| sort([a, b], order=[asc, asc])"), "sort a,b asc 200");
  EXPECT_EQ(Stages("| sort(a, order=descending)"), "sort a desc 200");
  EXPECT_EQ(Stages("| sort(a, reverse=false)"), "sort a asc 200");
  EXPECT_EQ(Stages("| sort(a, reverse=true)"), "sort a desc 200");
  EXPECT_EQ(Stages("| table([a, \"b c\"], limit=7)"), "table a,b c 7");
  EXPECT_EQ(Stages("| table(a)"), "table a 200");
  EXPECT_EQ(Stages("| select([a, b]) | drop(c) | drop([d, e])"), "select a,b | drop c | drop d,e");
  EXPECT_EQ(ParseError("| head(-1)"),
            "invalid value '-1' for parameter 'limit' of head(): expected a non-negative integer "
            "up to 200000 or max at position 7");
  EXPECT_EQ(ParseError("| head(x=1)"), "unknown parameter 'x' for head() at position 7");
  EXPECT_EQ(ParseError("| head(1, 2)"), "parameter 'limit' of head() given twice at position 10");
  EXPECT_EQ(ParseError("| sort(a, order=up)"),
            "invalid value 'up' for parameter 'order' of sort(): expected asc or desc at position "
            "16");
  EXPECT_EQ(ParseError("| sort([a, b, c], order=[asc, desc])"),
            "invalid value '[...]' for parameter 'order' of sort(): expected one value, or a list "
            "with one value per field (3) at position 24");
  EXPECT_EQ(ParseError("| sort(a, type=date)"),
            "invalid value 'date' for parameter 'type' of sort(): expected number, string, hex or "
            "any at position 15");
  EXPECT_EQ(Stages("| sort([a, b], order=[asc, desc])"), "sort a:asc,b:desc 200");
  EXPECT_EQ(Stages("| sort([a, b], type=[string, hex], order=asc, limit=5)"),
            "sort a:asc:string,b:asc:hex 5");
  EXPECT_EQ(Stages("| sort(a, type=number, order=asc)"), "sort a asc 200");
  EXPECT_EQ(Stages("| sort(a, type=ANY)"), "sort a desc 200");
  EXPECT_EQ(ParseError("| sort(a, order=asc, reverse=true)"),
            "sort() takes order or reverse, not both at position 21");
  EXPECT_EQ(ParseError("| table()"),
            "missing required parameter 'fields' for table() at position 2");
  EXPECT_EQ(ParseError("| table([a], reverse=true)"),
            "parameter 'reverse' of table() is not supported at position 13");
  EXPECT_EQ(Stages("| table([a, b], sortby=b, order=asc, limit=3)"), "sort b asc 3");
  EXPECT_EQ(ParseError("| table([a], order=asc)"),
            "invalid value 'asc' for parameter 'order' of table(): expected given only with "
            "sortby at position 19");
  EXPECT_EQ(ParseError("| table([a], limit=200001)"),
            "invalid value '200001' for parameter 'limit' of table(): expected a non-negative "
            "integer up to 200000 or max at position 19");
  EXPECT_EQ(ParseError("| select()"),
            "missing required parameter 'fields' for select() at position 2");
  EXPECT_EQ(ParseError("| drop([a, [b]])"),
            "invalid value '[...]' for parameter 'fields' of drop(): expected a field name at "
            "position 11");
}

TEST(ParserFunctionTest, Rename) {
  EXPECT_EQ(Stages("| rename(a, as=b)"), "rename a->b");
  EXPECT_EQ(Stages("| rename(field=a, as=\"b c\")"), "rename a->b c");
  EXPECT_EQ(Stages("| rename([[a, b], [c, d]])"), "rename a->b c->d");
  EXPECT_EQ(Stages("| rename(field=[[src_ip, source]])"), "rename src_ip->source");
  EXPECT_EQ(ParseError("| rename(a)"),
            "missing required parameter 'as' for rename() at position 2");
  EXPECT_EQ(ParseError("| rename([[a, b]], as=c)"),
            "rename() takes as only with a single field at position 19");
  EXPECT_EQ(ParseError("| rename([[a, b], [c]])"),
            "invalid value '[...]' for parameter 'field' of rename(): expected a [from, to] pair "
            "at position 18");
  EXPECT_EQ(ParseError("| rename([a, b], as=c)"),
            "invalid value '[...]' for parameter 'field' of rename(): expected a field name or a "
            "list of [from, to] pairs at position 9");
}

TEST(ParserFunctionTest, RegexStage) {
  auto q = MustCompile(R"q(| regex("user=(?<user>\w+) id=(\d+) (?<n>\d+)"))q");
  ASSERT_TRUE(q);
  ASSERT_EQ(q->stages.size(), 1u);
  const Stage& st = q->stages[0];
  EXPECT_EQ(st.kind, Stage::Kind::kRegex);
  EXPECT_EQ(st.function, "regex");
  EXPECT_EQ(st.position, 2u);
  EXPECT_EQ(st.field, "@rawstring");
  EXPECT_TRUE(st.strict);
  EXPECT_EQ(st.groups, (std::vector<std::string>{"user", "n"}));
  // Named groups use RE2's syntax; unnamed groups do not capture, so the capture groups are
  // exactly `groups` in order; the default flag m is applied.
  EXPECT_EQ(st.re->pattern(), R"q((?m)user=(?P<user>\w+) id=(?:\d+) (?P<n>\d+))q");
  ASSERT_EQ(st.re->NumberOfCapturingGroups(), 2);
  std::string user, n;
  EXPECT_TRUE(RE2::PartialMatch("x user=bob id=7 42", *st.re, &user, &n));
  EXPECT_EQ(user, "bob");
  EXPECT_EQ(n, "42");

  EXPECT_EQ(Stages(R"q(regex("a(?<x>b)c", field=msg, strict=false, flags=i))q"),
            "regex (?i)a(?P<x>b)c field=msg groups=[x] nonstrict");
  EXPECT_EQ(Stages(R"q(| regex(regex="[(](?<v>x)", flags=""))q"),
            "regex [(](?P<v>x) field=@rawstring groups=[v]");
  EXPECT_EQ(Stages(R"q(| regex("\\((?<v>x)\\)", limit=5, repeat=false, flags=dmF))q"),
            R"q(regex (?s)(?m)\((?P<v>x)\) field=@rawstring groups=[v])q");
  // As the first step, regex() is a stage, not part of the filter.
  q = MustCompile("regex(\"(?<a>x)\") | count()");
  ASSERT_TRUE(q);
  EXPECT_EQ(DebugString(*q->filter), "true");
  EXPECT_EQ(StagesString(q->stages),
            "regex (?m)(?P<a>x) field=@rawstring groups=[a] | agg/none {count()}");

  EXPECT_EQ(ParseError("| regex()"),
            "missing required parameter 'regex' for regex() at position 2");
  EXPECT_EQ(ParseError("| regex(\"(\")").substr(0, 48),
            "invalid regular expression in regex(): missing )");
  EXPECT_NE(ParseError("| regex(\"(\")").find("at position 8"), std::string::npos);
  EXPECT_EQ(ParseError("| regex(\"a\", flags=q)"),
            "invalid value 'q' for parameter 'flags' of regex(): expected a combination of the "
            "flags d, i and m at position 19");
  EXPECT_EQ(ParseError("| regex(\"a\", repeat=true, limit=0)"),
            "invalid value '0' for parameter 'limit' of regex(): expected a positive number of "
            "events per match with repeat=true at position 32");
}

TEST(ParserFunctionTest, RegexStageLiteralsJoinTheFilter) {
  auto filter = [](std::string_view q) -> std::string {
    auto c = Compile(q);
    EXPECT_TRUE(c.ok()) << q << ": " << c.status().ToString();
    return c.ok() ? DebugString(*(*c)->filter) : "<error>";
  };
  // A clause of one two-byte literal joins as an implied free-text node (searched over a block's
  // raw bytes at once); one byte does not.
  EXPECT_EQ(filter(R"q(regex("\" (?<code>\d{3}) ") | groupBy(code))q"), R"((text "\" "))");
  EXPECT_EQ(filter(R"q(regex("x(?<a>\d)") | count())q"), "true");
  // Longer clauses come first; at most two per stage.
  EXPECT_EQ(filter(R"q(regex("abc(?<x>\d+)de") | count())q"), R"((and (text "abc") (text "de")))");
  EXPECT_EQ(filter(R"q(regex("abc(?<x>\d+)def(?<y>\d+)gh") | count())q"),
            R"((and (text "abc") (text "def")))");
  // Not strict, or on another field: the stage keeps events without a match; nothing joins.
  EXPECT_EQ(filter(R"q(regex("\" (?<c>\d{3}) ", strict=false) | count())q"), "true");
  EXPECT_EQ(filter(R"q(regex("\" (?<c>\d{3}) ", field=msg) | count())q"), "true");
}

TEST(ParserFunctionTest, RegexPrefix) {
  auto prefix = [](std::string_view q) -> std::string {
    auto c = Compile(q);
    EXPECT_TRUE(c.ok()) << q << ": " << c.status().ToString();
    return c.ok() ? (*c)->stages.back().regex_prefix : "<error>";
  };
  EXPECT_EQ(prefix(R"q(| regex("\" (?<s>\d{3}) "))q"), "\" ");
  // Two bytes or more: candidates come from the pair searcher; one byte: memchr.
  auto searched = [](std::string_view q) {
    auto c = Compile(q);
    return c.ok() && (*c)->stages.back().regex_prefix_searcher != nullptr;
  };
  EXPECT_TRUE(searched(R"q(| regex("\" (?<s>\d{3}) "))q"));
  EXPECT_TRUE(searched(R"q(| regex("user=(?<u>\w+)"))q"));
  EXPECT_FALSE(searched(R"q(| regex("\.(?<ext>\w+)"))q"));
  EXPECT_EQ(prefix(R"q(| regex("user=(?<u>\w+)"))q"), "user=");
  EXPECT_EQ(prefix(R"q(| regex("\.(?<ext>\w+)"))q"), ".");
  EXPECT_EQ(prefix(R"q(| regex("a+(?<x>b)"))q"), "a");
  EXPECT_EQ(prefix(R"q(| regex("ab+(?<x>c)"))q"), "ab");
  EXPECT_EQ(prefix(R"q(| regex("ab?(?<x>c)"))q"), "a");
  EXPECT_EQ(prefix(R"q(| regex("ab*(?<x>c)"))q"), "a");
  EXPECT_EQ(prefix(R"q(| regex("ab{2}(?<x>c)"))q"), "a");
  EXPECT_EQ(prefix(R"q(| regex("a\.b\d(?<x>c)"))q"), "a.b");
  EXPECT_EQ(prefix(R"q(| regex("id=[0-9](?<x>c)"))q"), "id=");
  EXPECT_EQ(prefix(R"q(| regex("(?s)k.(?<x>c)"))q"), "k");
  EXPECT_EQ(prefix(R"q(/id=(?<id>\d+)/)q"), "id=");
  // Not certain: optional or repeated-from-zero first byte, alternation, classes, escapes that
  // are classes, case-insensitive matching, anchors.
  EXPECT_EQ(prefix(R"q(| regex("a?(?<x>b)"))q"), "");
  EXPECT_EQ(prefix(R"q(| regex("a*(?<x>b)"))q"), "");
  EXPECT_EQ(prefix(R"q(| regex("a{0,2}(?<x>b)"))q"), "");
  EXPECT_EQ(prefix(R"q(| regex("a(?<x>b)|c"))q"), "");
  EXPECT_EQ(prefix(R"q(| regex("a(?<x>b|c)"))q"), "a");
  EXPECT_EQ(prefix(R"q(| regex("a[|](?<x>b)"))q"), "a");
  EXPECT_EQ(prefix(R"q(| regex("[ab](?<x>c)"))q"), "");
  EXPECT_EQ(prefix(R"q(| regex("\d(?<x>c)"))q"), "");
  EXPECT_EQ(prefix(R"q(| regex("a(?<x>b)", flags=i))q"), "");
  EXPECT_EQ(prefix(R"q(| regex("^a(?<x>b)"))q"), "");
  EXPECT_EQ(prefix(R"q(| regex("(?<x>a)b"))q"), "");
}

TEST(ParserFunctionTest, RegexLiteralWithNamedGroupsExtracts) {
  // A /regex/ step with named groups filters (and prunes) and also extracts the groups.
  auto q = MustCompile(R"q(/user=(?<user>\w+)/ | user=bob | count())q");
  ASSERT_TRUE(q);
  // On @rawstring the stage alone filters; its literal joins the leading filter.
  EXPECT_EQ(DebugString(*q->filter), R"q((text "user="))q");
  EXPECT_EQ(
      StagesString(q->stages),
      R"q(regex user=(?P<user>\w+) field=@rawstring groups=[user] | filter (eq "user" "bob") | agg/none {count()})q");
  q = MustCompile(R"q(a | msg=/(\d+)-(?<id>\d+)/i)q");
  ASSERT_TRUE(q);
  EXPECT_EQ(DebugString(*q->filter),
            R"q((and (text "a") (fregex "msg" "(?i)(\\d+)-(?P<id>\\d+)")))q");
  EXPECT_EQ(StagesString(q->stages), R"q(regex (?i)(?:\d+)-(?P<id>\d+) field=msg groups=[id])q");
  // Without named groups a regex only filters; with other filters in its step (ANDed), the
  // step filters and the regex also extracts its groups.
  q = MustCompile(R"q(/a(\d)/ | /(?<x>y)/ z)q");
  ASSERT_TRUE(q);
  EXPECT_EQ(StagesString(q->stages), R"q(regex (?P<x>y) field=@rawstring groups=[x])q");
  EXPECT_EQ(DebugString(*q->filter),
            R"q((and (regex "a(\\d)") (and (regex "(?P<x>y)") (text "z"))))q");
}

TEST(ParserFunctionTest, ParseJsonKvParseSplit) {
  EXPECT_EQ(Stages("| parseJson()"), "parseJson field=@rawstring prefix=");
  EXPECT_EQ(Stages("| parsejson(msg, prefix=\"j.\")"), "parseJson field=msg prefix=j.");
  EXPECT_EQ(Stages("| kvParse()"), "kvParse field=@rawstring");
  EXPECT_EQ(Stages("| kvparse(field=[msg], override=true)"), "kvParse field=msg override");
  EXPECT_EQ(Stages("| split()"), "split _events");
  EXPECT_EQ(Stages("| split(commits, strip=false)"), "split commits");
  EXPECT_EQ(ParseError("| parseJson(exclude=a)"),
            "parameter 'exclude' of parseJson() is not supported at position 12");
  EXPECT_EQ(ParseError("| kvParse(separator=\":\")"),
            "parameter 'separator' of kvParse() is not supported at position 10");
  EXPECT_EQ(ParseError("| kvParse([a, b])"),
            "invalid value '[...]' for parameter 'field' of kvParse(): expected one field at "
            "position 10");
  auto strip = Compile("| split(a, strip=true)");
  ASSERT_TRUE(strip.ok()) << strip.status().ToString();
  EXPECT_TRUE((*strip)->stages[0].strip);
}

TEST(ParserTest, StepsOnSeparateLinesWithoutPipe) {
  // A non-filter function call or an assignment on a new line starts the next step.
  auto q = Compile("method=GET\nselect([status, ms])");
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  ASSERT_EQ((*q)->stages.size(), 1u);
  EXPECT_EQ((*q)->stages[0].kind, Stage::Kind::kSelect);
  ASSERT_NE((*q)->filter, nullptr);
  auto q2 = Compile("head(limit=10)\ngroupBy(loglevel)\nx := _count * 2\n  y := x\nx > 2");
  ASSERT_TRUE(q2.ok()) << q2.status().ToString();
  EXPECT_EQ((*q2)->stages.size(), 5u);
  // Filters on several lines stay one filter (implicit AND), regex() included.
  auto q3 = Compile("a=1\nb=2\nregex(\"x\")\nin(c, values=[1])");
  ASSERT_TRUE(q3.ok()) << q3.status().ToString();
  EXPECT_TRUE((*q3)->stages.empty());
  // On one line it is still an error.
  EXPECT_EQ(ParseError("method=GET select([a])"),
            "select() is not a filter: use it as a pipeline step of its own, after '|' at "
            "position 11");
  EXPECT_EQ(ParseError("head() groupBy(x)"), "unexpected 'g' at position 7");
}

TEST(ParserTest, NumberOnTheLeftOfAComparison) {
  auto q = Compile("400 > status");
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  ASSERT_EQ((*q)->filter->kind, FilterNode::Kind::kFieldCmp);
  EXPECT_EQ((*q)->filter->field, "status");
  EXPECT_EQ((*q)->filter->cmp, FilterNode::Cmp::kLt);
  EXPECT_EQ((*q)->filter->number, 400);
  auto q2 = Compile("1.5 <= x");
  ASSERT_TRUE(q2.ok()) << q2.status().ToString();
  EXPECT_EQ((*q2)->filter->cmp, FilterNode::Cmp::kGe);
  EXPECT_EQ(ParseError("400 > \"status\""),
            "expected a number after '>' but found 'status' at position 6");
  EXPECT_EQ(ParseError("a > b"), "expected a number after '>' but found 'b' at position 4");
}

TEST(ParserFunctionTest, ParenthesizedArgumentValues) {
  // function=( ... ) is the value inside the parentheses.
  EXPECT_EQ(ParseError("groupBy(a, function=([count(x, as=c), max(y)]))"), "OK");
  EXPECT_EQ(ParseError("groupBy(a, function=(selectLast([x, y])), limit=max)"), "OK");
  EXPECT_EQ(ParseError("groupBy(a, function=((count())))"), "OK");
  EXPECT_EQ(ParseError("groupBy(a, function=(count(), max(y)))"),
            "expected ')' closing the '(' at position 20 but found ',' at position 28");
  EXPECT_EQ(ParseError("groupBy(a, function=(count()"),
            "expected ')' closing the '(' at position 20 but found end of query at position 28");
}

TEST(ParserFunctionTest, FormatTimeLowerLength) {
  EXPECT_EQ(Stages("| formatTime(\"%Y-%m-%d %H:%M\", as=day)"),
            "formatTime %Y-%m-%d %H:%M field=@timestamp as=day tz=UTC");
  EXPECT_EQ(Stages("| formattime(format=\"%H\", field=t, as=h, timezone=\"+0230\")"),
            "formatTime %H field=t as=h tz=+02:30");
  EXPECT_EQ(Stages("| formatTime(\"%H\", as=h, timezone=-05:00)"),
            "formatTime %H field=@timestamp as=h tz=-05:00");
  EXPECT_EQ(Stages("| formatTime(\"%H\", as=h, timezone=Z)"),
            "formatTime %H field=@timestamp as=h tz=Z");
  EXPECT_EQ(Stages("| formatTime(\"%H\", as=h, timezone=gmt)"),
            "formatTime %H field=@timestamp as=h tz=UTC");
  EXPECT_EQ(Stages("| formatTime(\"%H\", as=h, timezone=\"+01\")"),
            "formatTime %H field=@timestamp as=h tz=+01:00");
  EXPECT_EQ(ParseError("| formatTime(\"%H\")"),
            "missing required parameter 'as' for formatTime() at position 2");
  EXPECT_EQ(ParseError("| formatTime(as=x)"),
            "missing required parameter 'format' for formatTime() at position 2");
  EXPECT_EQ(Stages("| formatTime(\"%H\", as=h, timezone=Europe/London)"),
            "formatTime %H field=@timestamp as=h tz=Europe/London");
  EXPECT_EQ(Stages("| formatTime(\"%H\", as=h, timezone=PST)"),
            "formatTime %H field=@timestamp as=h tz=PST");
  EXPECT_EQ(ParseError("| formatTime(\"%H\", as=h, timezone=Europe/Atlantis)"),
            "invalid value 'Europe/Atlantis' for parameter 'timezone' of formatTime(): expected "
            "UTC, a fixed offset such as +02:00 or a time zone name such as Europe/Berlin or PST "
            "at position 34");
  EXPECT_EQ(ParseError("| formatTime(\"%H\", as=h, timezone=pst)").substr(0, 21),
            "invalid value 'pst' f");
  EXPECT_EQ(ParseError("| formatTime(\"%H\", as=h, timezone=\"+25:00\")").substr(0, 20),
            "invalid value '+25:0");
  EXPECT_EQ(ParseError("| formatTime(\"%H\", as=h, locale=en)"), "OK");
  EXPECT_EQ(ParseError("| formatTime(\"%H\", as=h, locale=fr_FR)"),
            "invalid value 'fr_FR' for parameter 'locale' of formatTime(): expected an English "
            "locale (en, en_US, en_GB, ...): day and month names are English at position 32");
  EXPECT_EQ(ParseError("| formatTime(\"%H\", as=h, unit=days)"),
            "invalid value 'days' for parameter 'unit' of formatTime(): expected milliseconds or "
            "seconds at position 30");
  EXPECT_EQ(ParseError("| ioc:lookup(ip, type=ip_address)"),
            "ioc:lookup() needs an indicator-of-compromise database, which sediment does not "
            "have at position 2");
  // GeoIP (geo_test.cc): without the databases (none here) ipLocation() is refused naming the
  // server flag; worldMap() over coordinates needs none.
  EXPECT_EQ(ParseError("| ipLocation(ip)"),
            "ipLocation() needs a GeoIP city database: start the server with --geoip-city-db FILE "
            "(a MaxMind DB file) at position 2");
  EXPECT_EQ(ParseError("| worldMap(lat=a, lon=b)"), "OK");

  EXPECT_EQ(Stages("| lower(method)"), "lower method as=_lower");
  EXPECT_EQ(Stages("| lower(field=method, as=method)"), "lower method as=method");
  EXPECT_EQ(Stages("| length(@rawstring)"), "length @rawstring as=_length");
  EXPECT_EQ(Stages("| length(msg, as=n)"), "length msg as=n");
  EXPECT_EQ(ParseError("| lower()"),
            "missing required parameter 'field' for lower() at position 2");
  EXPECT_EQ(ParseError("| length(as=n)"),
            "missing required parameter 'field' for length() at position 2");
  EXPECT_EQ(ParseError("| lower(a, locale=en)"),
            "parameter 'locale' of lower() is not supported at position 11");
}

TEST(ParserFunctionTest, NamesAndParameterSpellings) {
  // Documented camelCase or all lower-case; nothing else.
  EXPECT_EQ(Stages("| groupby(a) | GroupBy(a)"),
            "ERROR: unknown function 'GroupBy' at position 15");
  EXPECT_EQ(Stages("| timechart() | timeChart()"),
            "agg/bucket limit=10 span=0 {count()} | agg/bucket limit=10 span=0 {count()}");
  EXPECT_EQ(Stages("| kvparse() | parsejson() | formattime(x, as=y)"),
            "kvParse field=@rawstring | parseJson field=@rawstring prefix= | formatTime x "
            "field=@timestamp as=y tz=UTC");
  EXPECT_EQ(Parsed("in(f, values=[a], ignorecase=true)"), R"((ieq "f" "a"))");
  EXPECT_EQ(ParseError("| in(f, values=[a], IgnoreCase=true)").substr(0, 35),
            "unknown parameter 'IgnoreCase' for ");
  EXPECT_EQ(ParseError("foo | bar()"), "unknown function 'bar' at position 6");
  EXPECT_EQ(ParseError("| COUNT()"), "unknown function 'COUNT' at position 2");
  // Without parentheses a function name is free text.
  EXPECT_EQ(Parsed("| count"), R"((text "count"))");
}

// ---------- eval and expressions ----------

std::string Assigned(std::string_view q) {
  auto r = Compile(q);
  if (!r.ok()) return "ERROR: " + r.status().message();
  const auto& stages = (*r)->stages;
  if (stages.size() != 1 || stages[0].kind != Stage::Kind::kEval) return "not one eval";
  std::string out;
  for (const auto& [f, e] : stages[0].assignments) {
    out += (out.empty() ? "" : "; ") + f + " = " + ExprString(*e);
  }
  return out;
}

TEST(ParserExprTest, Precedence) {
  EXPECT_EQ(Assigned("x := a * 2"), "x = (* a #2)");
  EXPECT_EQ(Assigned("x := a + b * c - d"), "x = (- (+ a (* b c)) d)");
  EXPECT_EQ(Assigned("x := (a + b) * c"), "x = (* (+ a b) c)");
  EXPECT_EQ(Assigned("x := a / b % c"), "x = (% (/ a b) c)");
  EXPECT_EQ(Assigned("x := -a * -2"), "x = (* (- a) (- #2))");
  EXPECT_EQ(Assigned("x := a - - b"), "x = (- a (- b))");
  EXPECT_EQ(Assigned("x := !a || b && c == d"), "x = (|| (! a) (&& b (== c d)))");
  EXPECT_EQ(Assigned("x := a < b == c >= d"), "x = (== (< a b) (>= c d))");
  EXPECT_EQ(Assigned("x := a != b && c <= d || e > f"), "x = (|| (&& (!= a b) (<= c d)) (> e f))");
  EXPECT_EQ(Assigned("x := a + 1 > b * 2"), "x = (> (+ a #1) (* b #2))");
  EXPECT_EQ(Assigned("x := \"str\" + @timestamp + #repo + a.b"),
            "x = (+ (+ (+ \"str\" @timestamp) #repo) a.b)");
  EXPECT_EQ(Assigned("x := 0.5 + .25 + 1e3"), "x = (+ (+ #0.5 #0.25) #1000)");
  EXPECT_EQ(Assigned("x:=1"), "x = #1");
  EXPECT_EQ(Assigned("#x.y := _a"), "#x.y = _a");

  auto q = MustCompile("x := 2.50 + a");
  ASSERT_TRUE(q);
  const Expr& e = *q->stages[0].assignments[0].second;
  EXPECT_EQ(e.kind, Expr::Kind::kBinary);
  EXPECT_EQ(e.position, 10u);
  EXPECT_EQ(e.args[0]->kind, Expr::Kind::kNumber);
  EXPECT_EQ(e.args[0]->text, "2.50");
  EXPECT_EQ(e.args[0]->number, 2.5);
  EXPECT_EQ(e.args[0]->position, 5u);
  EXPECT_EQ(e.args[1]->kind, Expr::Kind::kField);
  EXPECT_EQ(e.args[1]->position, 12u);
}

TEST(ParserExprTest, Calls) {
  // A lone call of a pipeline function is the step with as= (a quoted argument names a field).
  EXPECT_EQ(Stages("x := lower(y)"), "lower y as=x");
  EXPECT_EQ(Stages("x := upper(\"d\")").rfind("upper", 0), 0u);
  EXPECT_EQ(Assigned("x := lower(\"A\") + \"\""), "x = (+ (lower \"A\") \"\")");
  EXPECT_EQ(Assigned("x := upper(y) + length(\"abc\")"), "x = (+ (upper y) (length \"abc\"))");
  EXPECT_EQ(Assigned("x := concat(a, \"-\", b)"), "x = (concat a \"-\" b)");
  EXPECT_EQ(Assigned("x := concat([a, \"-\", b])"), "x = (concat a \"-\" b)");
  EXPECT_NE(ParseError("| x := concat([a, b)").find("expected ',' or ']'"), std::string::npos);
  EXPECT_EQ(Assigned("x := substr(s, 1) + substr(s, 0, 2)"),
            "x = (+ (substr s #1) (substr s #0 #2))");
  EXPECT_EQ(Assigned("x := trim(a)"), "x = (trim a)");
  EXPECT_EQ(Assigned("x := round(a) + floor(b) + ceil(c) + abs(d)"),
            "x = (+ (+ (+ (round a) (floor b)) (ceil c)) (abs d))");
  EXPECT_EQ(Assigned("x := min(a, b, 3) - max(a, b)"), "x = (- (min a b #3) (max a b))");
  EXPECT_EQ(Assigned("x := if(status >= 500, \"err\", \"ok\")"),
            "x = (if (>= status #500) \"err\" \"ok\")");
  EXPECT_EQ(Assigned("x := if(a, then=1, else=2)"), "x = (if a #1 #2)");
  EXPECT_EQ(Assigned("x := if(a, else=2, then=1)"), "x = (if a #1 #2)");
  EXPECT_EQ(Assigned("x := if(condition=a, then=1, else=2)"), "x = (if a #1 #2)");
  EXPECT_EQ(Assigned("x := tostring(a) + toString(b) + tonumber(c) + toNumber(d)"),
            "x = (+ (+ (+ (tostring a) (tostring b)) (tonumber c)) (tonumber d))");
  EXPECT_EQ(Assigned("x := now() - @timestamp"), "x = (- (now) @timestamp)");
  EXPECT_EQ(Assigned("x := formatTime(\"%H\", @timestamp) + formattime(\"%M\", t)"),
            "x = (+ (formattime \"%H\" @timestamp) (formattime \"%M\" t))");
  EXPECT_EQ(Assigned("x := formatTime(\"%H\", t, \"+02:00\")"),
            "x = (formattime \"%H\" t \"+02:00\")");
  // Not an expression call but a pipeline function with as=: formatTime("%H", as=x).
  EXPECT_EQ(Stages("x := formatTime(\"%H\")"), "formatTime %H field=@timestamp as=x tz=UTC");
  EXPECT_EQ(Stages("x := lower (y)"), "lower y as=x");

  EXPECT_EQ(Assigned("x := foo(y)"), "ERROR: unknown function 'foo' in expression at position 5");
  EXPECT_EQ(Assigned("x := LOWER(y)"),
            "ERROR: unknown function 'LOWER' in expression at position 5");
  EXPECT_EQ(Assigned("x := lower()"),
            "ERROR: wrong number of arguments for lower(): expected 1, got 0 at position 5");
  EXPECT_EQ(Assigned("x := substr(a)"),
            "ERROR: wrong number of arguments for substr(): expected 2 to 3, got 1 at position 5");
  EXPECT_EQ(Stages("x := min(a)"), "agg/none {min(a as x)}");  // the aggregate, as=x
  EXPECT_EQ(Assigned("x := now(1)"),
            "ERROR: wrong number of arguments for now(): expected 0, got 1 at position 5");
  EXPECT_EQ(Stages("x := lower(field=y)"), "lower y as=x");  // lower(field=y, as=x)
  EXPECT_EQ(Assigned("x := lower(field=y"),
            "ERROR: unknown parameter 'field' for lower() at position 11");
  EXPECT_EQ(Assigned("x := if(a, then=1)"),
            "ERROR: if() takes a condition, then= and else= at position 5");
  EXPECT_EQ(Assigned("x := if(a, then=1, then=2)"),
            "ERROR: parameter 'then' of if() given twice at position 19");
  EXPECT_EQ(Assigned("x := lower(a b)"), "ERROR: expected ',' or ')' but found 'b' at position 13");
}

TEST(ParserExprTest, Eval) {
  EXPECT_EQ(Assigned("| eval(x = a + 1)"), "x = (+ a #1)");
  EXPECT_EQ(Assigned("| eval(x = a == 1, \"y z\" = lower(b))"), "x = (== a #1); y z = (lower b)");
  auto q = MustCompile("a | eval(x=1)");
  ASSERT_TRUE(q);
  EXPECT_EQ(q->stages[0].function, "eval");
  EXPECT_EQ(q->stages[0].position, 4u);
  EXPECT_EQ(ParseError("| eval()"),
            "missing required assignment 'field = expression' for eval() at position 7");
  EXPECT_EQ(ParseError("| eval(x)"),
            "expected '=' after 'x' in eval() but found ')' at position 8");
  EXPECT_EQ(ParseError("| eval(x == 1)"),
            "expected '=' after 'x' in eval() but found '=' at position 9");
  EXPECT_EQ(ParseError("| eval(x = 1"), "missing ')' at position 12");
  EXPECT_EQ(ParseError("| eval(= 1)"),
            "expected a field name in eval() but found '=' at position 7");
}

// Per-event pipeline functions inside expressions run as a step on a copy of the event.
TEST(ParserExprTest, PipelineFunctionsInExpressions) {
  EXPECT_EQ(Assigned("i := array:length(\"a[]\") - 1"),
            "i = (- (step array:length -> _expr@5) #1)");
  EXPECT_EQ(Assigned("x := if(regex(\"^5\", field=s), then=1, else=0)"),
            "x = (if (step regex) #1 #0)");
  EXPECT_EQ(Assigned("x := !text:contains(string=s, substring=\"a\")"),
            "x = (! (step text:contains))");
  // Alone, the call stays the step with as=.
  EXPECT_EQ(Stages("x := text:length(m)"), "text:length fields=[x,m]");
  EXPECT_EQ(ParseError("x := count() + 1"),
            "count() needs every event (it aggregates): it cannot be used in an expression at "
            "position 5");
  EXPECT_EQ(ParseError("x := 1 + groupBy(a)"),
            "groupBy() needs every event (it aggregates): it cannot be used in an expression at "
            "position 9");
}

// Type::kExpr parameters are read as expressions.
TEST(ParserExprTest, ExpressionParameters) {
  auto q = MustCompile("setField(target=bar, value=item + 10 * 2)");
  ASSERT_TRUE(q);
  ASSERT_EQ(q->stages.size(), 1u);
  EXPECT_EQ(q->stages[0].function, "setField");
  EXPECT_TRUE(MustCompile("text:substring(m, begin=1, end=text:length(m) - 9)"));
  EXPECT_EQ(ParseError("setField(target=bar, value=item +)"),
            "expected an expression but found ')' at position 33");
  EXPECT_EQ(ParseError("text:substring(m, begin=-1)"),
            "invalid value '-1' for parameter 'begin' of text:substring(): expected a "
            "non-negative integer or an expression at position 24");
}

TEST(ParserExprTest, Errors) {
  EXPECT_EQ(ParseError("x :="), "expected an expression but found end of query at position 4");
  EXPECT_EQ(ParseError("x := a +"), "expected an expression but found end of query at position 8");
  EXPECT_EQ(ParseError("x := (a + b"), "missing ')' for '(' at position 5 at position 11");
  EXPECT_EQ(ParseError("x := a = b"),
            "unexpected '=' in expression (use '==' to compare) at position 7");
  EXPECT_EQ(ParseError("x := 12ab"), "invalid number '12ab' at position 5");
  EXPECT_EQ(ParseError("x := 1.2.3"), "invalid number '1.2.3' at position 5");
  EXPECT_EQ(ParseError("x := \"abc"), "unterminated string at position 5");
  EXPECT_EQ(ParseError("x := a b"), "unexpected 'b' at position 7");
  EXPECT_EQ(ParseError("x := ,"), "expected an expression but found ',' at position 5");
  // `||` is an operator, a single '|' ends the step.
  EXPECT_EQ(Stages("x := a || b | y := 1"), "eval x=(|| a b) | eval y=#1");
}

// ---------- case ----------

TEST(ParserCaseTest, Branches) {
  EXPECT_EQ(Stages("| case { status>=500 | level := \"error\" ; status>=400 | level := \"warn\" "
                   "; * | level := \"ok\" }"),
            R"(case { (cmp "status" >= 500) => eval level="error"; (cmp "status" >= 400) )"
            R"(=> eval level="warn"; true => eval level="ok" })");
  // Conditions are any filters (leading filter steps are ANDed); bodies any per-record stages.
  EXPECT_EQ(Stages("| case { a b=c | in(d, values=[1]) | x := 1 | y=2 | lower(y); }"),
            R"(case { (and (and (text "a") (eq "b" "c")) (eq "d" "1")) => eval x=#1 | )"
            R"(filter (eq "y" "2") | lower y as=_lower })");
  // An empty condition or `*` matches everything; a branch may have no stages.
  EXPECT_EQ(Stages("| case { a ; | x := 1 ; * }"),
            R"(case { (text "a"); true => eval x=#1; true })");
  EXPECT_EQ(Stages("case{a|x:=1}"), R"(case { (text "a") => eval x=#1 })");
  // ';' and '}' end words inside case; nested case.
  EXPECT_EQ(Stages("| case { a;b }"), R"(case { (text "a"); (text "b") })");
  EXPECT_EQ(Stages("| case { a | case { b | x := 1 ; * | x := 2 } ; * }"),
            R"(case { (text "a") => case { (text "b") => eval x=#1; true => eval x=#2 }; true })");
  EXPECT_EQ(
      Stages("| case { /(?<n>\\d+)/ ; * } | count()"),
      R"q(case { (regex "(?P<n>\\d+)") => regex (?P<n>\d+) field=@rawstring groups=[n]; true })q"
      R"( | agg/none {count()})");
  auto q = MustCompile("a | case { b }");
  ASSERT_TRUE(q);
  EXPECT_EQ(q->stages[0].kind, Stage::Kind::kCase);
  EXPECT_EQ(q->stages[0].function, "case");
  EXPECT_EQ(q->stages[0].position, 4u);
  EXPECT_EQ(DebugString(*q->filter), R"((text "a"))");
}

TEST(ParserCaseTest, Errors) {
  EXPECT_EQ(ParseError("| case { a | count() }"),
            "count() cannot be used in a case branch (only per-record functions can) at "
            "position 13");
  EXPECT_EQ(ParseError("| case { a | x := 1 ; * | sort(x) }"),
            "sort() cannot be used in a case branch (only per-record functions can) at position "
            "26");
  EXPECT_EQ(ParseError("| case { }"), "empty case { } at position 9");
  EXPECT_EQ(ParseError("| case { a | x := 1"),
            "missing '}' for 'case {' at position 7 at position 19");
  EXPECT_EQ(ParseError("| case { a | }"),
            "expected a filter or a function but found '}' at position 13");
  EXPECT_EQ(ParseError("| case { ; a }"),
            "expected a filter or a function but found ';' at position 9");
  EXPECT_EQ(ParseError("| case { a } }"), "unexpected '}' at position 13");
  EXPECT_EQ(ParseError("| head(1) ; x"), "unexpected ';' at position 10");
}

// ---------- general errors ----------

TEST(ParserErrorTest, CarryPositions) {
  EXPECT_EQ(ParseError("\"abc"), "unterminated string at position 0");
  EXPECT_EQ(ParseError("x /ab"), "unterminated regular expression at position 2");
  EXPECT_NE(ParseError("f=/(/").find("invalid regular expression"), std::string::npos);
  EXPECT_NE(ParseError("f=/(/").find("at position 2"), std::string::npos);
  EXPECT_EQ(ParseError("/a/q"), "unknown regex flag 'q' at position 3");
  EXPECT_EQ(ParseError("a="), "expected a value after '=' but found end of query at position 2");
  EXPECT_EQ(ParseError("a!= )"), "expected a value after '!=' but found ')' at position 4");
  EXPECT_EQ(ParseError("a b)"), "unexpected ')' at position 3");
  EXPECT_EQ(ParseError("(a"), "missing ')' for '(' at position 0 at position 2");
  EXPECT_EQ(ParseError("(a | b)"), "expected ')' but found '|' at position 3");
  EXPECT_EQ(ParseError("()"), "empty parentheses at position 1");
  EXPECT_EQ(ParseError("a or"), "expected a filter but found end of query at position 4");
  EXPECT_EQ(ParseError("a b OR"), "expected a filter but found end of query at position 6");
  EXPECT_EQ(ParseError("a or or b"), "expected a filter but found 'or' at position 5");
  EXPECT_EQ(ParseError("a AND OR b"), "expected a filter but found 'OR' at position 6");
  EXPECT_EQ(ParseError("and b"), "expected a filter but found 'and' at position 0");
  EXPECT_EQ(ParseError("a OR (b c"), "missing ')' for '(' at position 5 at position 9");
  EXPECT_EQ(ParseError(R"(a OR f="x*)"), "unterminated string at position 7");
  EXPECT_EQ(ParseError("a-b=c"), "invalid character '-' in field name 'a-b' at position 1");
  EXPECT_EQ(ParseError("a <b"), "expected a number after '<' but found 'b' at position 3");
  EXPECT_EQ(ParseError("x | head(1"), "missing ')' at position 10");
  EXPECT_EQ(ParseError("x | head(1 2)"), "expected ',' or ')' but found '2' at position 11");
  EXPECT_EQ(ParseError("x | table([a b])"), "expected ',' or ']' but found 'b' at position 13");
  EXPECT_EQ(ParseError("x | table([a"), "missing ']' at position 12");
  EXPECT_EQ(ParseError("x | head(,)"), "expected a value but found ',' at position 9");
  EXPECT_EQ(ParseError("x | head(limit=)"), "expected a value but found ')' at position 15");
  EXPECT_EQ(ParseError("x | groupBy(a, function={x := 1})"),
            "a subquery in groupBy(function=...) needs an aggregate function such as count() (it "
            "has none) at position 24");
  EXPECT_EQ(ParseError("x | groupBy(a, function={count()"),
            "missing '}' for '{' at position 24 at "
            "position 32");
  EXPECT_EQ(ParseError("x | groupBy(a, function={count() x})"), "unexpected 'x' at position 33");
  EXPECT_EQ(ParseError("x | groupBy(a, function={})"),
            "expected a filter or a function but found '}' at position 25");
  EXPECT_EQ(ParseError("x | groupBy(a, function={nosuch()})"),
            "unknown function 'nosuch' at position 25");
  EXPECT_EQ(ParseError("x | groupBy(a, function=nosuch(b))"),
            "unknown aggregate function 'nosuch' in groupBy(function=...) at position 24");
  EXPECT_EQ(ParseError("x | head(limit={count()})"),
            "invalid value '{...}' for parameter 'limit' of head(): expected a non-negative "
            "integer up to 200000 or max at position 15");
  EXPECT_EQ(ParseError("x | head(\"5)"), "unterminated string at position 9");
  EXPECT_EQ(ParseError("x | "),
            "expected a filter or a function but found end of query at position 4");
  EXPECT_EQ(ParseError("x || y"), "expected a filter or a function but found '|' at position 3");
  EXPECT_EQ(ParseError("|"),
            "expected a filter or a function but found end of query at position 1");
  EXPECT_EQ(ParseError("| head(1) x"), "unexpected 'x' at position 10");
  EXPECT_EQ(ParseError("| stats(x)"),
            "expected an aggregate function such as count() in stats(function=...) but found 'x' "
            "at position 8");
}

// The examples of FUNCTIONS.md compile.
TEST(ParserDocTest, ExamplesCompile) {
  for (const char* q : {
           "a | b=c | status>=500",
           "x := a * 2 | x > 10",
           "in(a, values=[x]) or b=c",
           "/user=(?<user>\\w+)/ | groupBy(user)",
           "in(status, values=[200, \"30*\"])",
           "wildcard(\"*timeout*\", ignoreCase=true)",
           "wildcard(pattern=horse, field=animal)",
           "count(user, distinct=true, as=users)",
           "stats([count(), avg(latency)])",
           "[count(), avg(latency)]",
           "groupBy([method, status], function=[count(), avg(bytes)])",
           "bucket(1h, field=host)",
           "rename(badName, as=goodName)",
           "rename([[src_ip, source], [dst_ip, destination]])",
           "eval(kb = bytes / 1024, slow = latency > 1)",
           "regex(\"user=(?<user>\\\\w+) took (?<ms>\\\\d+)ms\") | groupBy(user, function=avg(ms))",
           "formatTime(\"%Y-%m-%d %H:%M\", as=minute)",
           "case { a | x := 1 ; | x := 2 }",
           "case { status >= 500 | level := \"error\" ;\n status >= 400 | level := \"warn\" ;\n"
           " * | level := \"ok\" }\n| groupBy(level)",
       }) {
    EXPECT_TRUE(Compile(q).ok()) << q << ": " << Compile(q).status().ToString();
  }
}

// ---------- LogScale syntax: comments, like, parameters, namespaced names, :=, =~, arrays ----

TEST(ParserSyntaxTest, Comments) {
  // `//` runs to the end of the line; before, it was read as an empty regex plus free text.
  EXPECT_EQ(Parsed("method=GET // only gets | count()"), R"((eq "method" "GET"))");
  EXPECT_EQ(Stages("method=GET // only gets\n| count()"), "agg/none {count()}");
  EXPECT_EQ(Parsed("// first line\na"), R"((text "a"))");
  EXPECT_EQ(Parsed("a /* b\nc */ d"), R"((and (text "a") (text "d")))");
  EXPECT_EQ(Parsed("/* only */"), "true");
  EXPECT_EQ(Parsed("// only"), "true");
  EXPECT_EQ(Stages("a\n| // a comment between steps\ncount()"), "agg/none {count()}");
  EXPECT_EQ(Stages("a | groupBy(x, /* c */ function=count() // d\n)"),
            "agg/groupBy [x] limit=20000 {count()}");
  EXPECT_EQ(Stages("x := a /* c */ + 1 // d"), "eval x=(+ a #1)");
  EXPECT_EQ(Stages("x := a / b"), "eval x=(/ a b)");
  // Inside words, strings and regexes they are text (LogScale's `repo.name=docker/*`).
  EXPECT_EQ(Parsed("f=docker/*"), R"((glob "f" "docker/*"))");
  EXPECT_EQ(Parsed("\"a // b\""), R"((text "a // b"))");
  EXPECT_EQ(Parsed("/a\\/\\/b/"), R"((regex "a//b"))");
  EXPECT_EQ(ParseError("a /* no end"), "unterminated comment '/*' at position 2");
}

TEST(ParserSyntaxTest, Like) {
  // LogScale's `field like "x"`: the value occurs in the field, case-sensitively.
  EXPECT_EQ(Parsed("a like \"x\""), R"((glob "a" "*x*"))");
  EXPECT_EQ(Parsed("a LIKE x*y"), R"((glob "a" "*x*y*"))");
  EXPECT_EQ(Parsed("like=1"), R"((eq "like" "1"))");
  EXPECT_EQ(ParseError("a like"),
            "expected a value after 'like' but found end of query at position 6");
}

TEST(ParserSyntaxTest, UnknownSyntaxIsAnError) {
  EXPECT_EQ(ParseError("a | $my:query(x=1)"),
            "saved query call '$my:query()' here: saved queries are expanded by a repository's "
            "query API (ExpandSavedQueries) at position 4");
  EXPECT_EQ(ParseError("$| x"),
            "expected a saved query name after '$' but found '|' at position 0");
  EXPECT_EQ(ParseError("a status match { 200 => * }"),
            "a match statement (field match { ... }) must be a pipeline step of its own: put '|' "
            "before it at position 9");
  EXPECT_EQ(ParseError("a ?"),
            "expected a query parameter (?name or ?{name=default}) after '?' at position 2");
  EXPECT_EQ(
      ParseError("`a b`"),
      "expected a comparison after the field name `a b` but found end of query at position 5");
  EXPECT_EQ(ParseError("a | /x(?<n>y)/ or b"),
            "a regex with named groups under 'or' or 'not' does not extract fields: use (?:...) "
            "groups there, or extract with regex() in a step of its own at position 4");
  EXPECT_EQ(ParseError("/(?<n>y)/g"), "OK");
  EXPECT_EQ(Parsed("/y/g"), R"((regex "y"))");
  EXPECT_EQ(ParseError("f !=~ in(values=[a])"),
            "'!=~' is not supported: write not (field =~ f(...)) at position 2");
  EXPECT_EQ(Parsed("not (f =~ in(values=[a]))"), R"((not (eq "f" "a")))");
  EXPECT_EQ(ParseError("a.id <=> b.id"),
            "'<=>' field links are only allowed in the named subqueries of correlate() (name: { "
            "... | field <=> other.field }) at position 5");
}

TEST(ParserSyntaxTest, CorrelateNamedSubqueriesAndFieldLinks) {
  EXPECT_EQ(ParseError("| correlate(A: { x=1 } include: [u, v], B: { y=2 | u <=> A.u } include: w, "
                       "within=5m, sequence=true, root=B, maxPerRoot=3)"),
            "OK");
  EXPECT_EQ(ParseError("| correlate(A: {x=1}, B: {y=2 | u <=> A.u}, C: {z <=> B.z AND w <=> A.w})"),
            "OK");
  // Links are recorded per subquery; a nested subquery inside one is not a correlate() query.
  EXPECT_EQ(
      ParseError("| correlate(A: {x=1}, B: {y=2 | groupBy(x, function={u <=> A.u | count()})})"),
      "'<=>' field links are only allowed in the named subqueries of correlate() (name: { ... | "
      "field <=> other.field }) at position 55");
  EXPECT_EQ(ParseError("| groupBy(x, A: {count()})"),
            "a named subquery (name: { ... }) is only an argument of correlate() at position 13");
  EXPECT_EQ(ParseError("| correlate(A: {x=1}, B: {u <=> A.u or y=2})"),
            "a '<=>' field link cannot be under OR at position 26");
  EXPECT_EQ(ParseError("| correlate(A: {x=1}, B: {not u <=> A.u})"),
            "a '<=>' field link cannot be under NOT at position 30");
  EXPECT_EQ(ParseError("| correlate(A: {x=1}, B: {u <=> A})"),
            "expected query.field after '<=>' but found 'A' at position 32");
  EXPECT_EQ(ParseError("| correlate(A: {x=1}, B: {u <=> C.u})"),
            "correlate(): '<=>' links B to unknown query 'C' at position 26");
  EXPECT_EQ(ParseError("| correlate(A: {x=1}, B: {u <=> B.u})"),
            "correlate(): '<=>' links B to itself at position 26");
  EXPECT_EQ(ParseError("| correlate(A: {x=1}, A: {u <=> A.u})"),
            "correlate(): query 'A' is defined twice at position 22");
  EXPECT_EQ(ParseError("| correlate(A: {x=1}, B: {y=1})"),
            "correlate(): query 'B' is not linked to 'A': link it with field <=> query.field or "
            "globalConstraints=[...] at position 2");
  EXPECT_EQ(ParseError("| correlate(A: {x=1}, B: {y=1}, globalConstraints=[u])"), "OK");
  EXPECT_NE(ParseError("| correlate(A: {x=1})").find("2 to 16 named subqueries"),
            std::string::npos);
  EXPECT_EQ(ParseError("| correlate(A: {x=1 | count()}, B: {u <=> A.u})"),
            "correlate(): the query 'A' cannot hold the collecting function count() at position "
            "22");
  EXPECT_NE(ParseError("| correlate(A: {x=1}, B: {u <=> A.u}, root=C)")
                .find("the name of one of the queries"),
            std::string::npos);
}

TEST(ParserSyntaxTest, Parameters) {
  EXPECT_EQ(ParseError("?x"),
            "query parameter ?x has no value (give it in the request's \"arguments\", or a "
            "default: ?{x=value}) at position 0");
  EXPECT_EQ(ParseError("a | status=?code"),
            "query parameter ?code has no value (give it in the request's \"arguments\", or a "
            "default: ?{code=value}) at position 11");
  EXPECT_EQ(Parsed("status=?{code=200}"), R"((eq "status" "200"))");
  EXPECT_EQ(Parsed("?{s=\"*\"}"), "true");
  EXPECT_EQ(Parsed("status >= ?{min = 400 }"), R"((cmp "status" >= 400))");
  EXPECT_EQ(Stages("x := ?{p=\"a b\"}"), "eval x=\"a b\"");
  EXPECT_EQ(ParseError("?{x=1"), "missing '}' for '?{' at position 0 at position 5");

  auto bound = BindParameters("a=?x | b=?{y=2} | c := ?x", {{"x", "q\"\\"}});
  ASSERT_TRUE(bound.ok()) << bound.status().ToString();
  EXPECT_EQ(*bound, R"(a="q\"\\" | b="2" | c := "q\"\\")");
  EXPECT_EQ(Parsed(*bound), R"((and (eq "a" "q\"\\") (eq "b" "2")))");
  EXPECT_EQ(*BindParameters("in(f, values=[?v, b])", {{"v", "a"}}), R"(in(f, values=["a", b]))");
  EXPECT_EQ(*BindParameters("x // ?y\n", {}), "x // ?y\n");
  auto missing = BindParameters("a | b=?y", {{"x", "1"}});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("query parameter ?y has no value"), std::string::npos);
  EXPECT_NE(missing.status().message().find("at position 6"), std::string::npos);
}

TEST(ParserSyntaxTest, NamespacedFunctionNames) {
  // One name, colon included: an unknown one is named whole (before: "unexpected ','").
  EXPECT_EQ(ParseError("text:foo(a, b)"), "unknown function 'text:foo' at position 0");
  EXPECT_EQ(ParseError("a | text:foo(a, b)"), "unknown function 'text:foo' at position 4");
  EXPECT_EQ(ParseError("a or array:nosuch(\"a[]\", value=x)"),
            "unknown function 'array:nosuch' at position 5");
  EXPECT_EQ(ParseError("a or array:contains(\"a[]\", value=x)"),
            "array:contains() is not a filter: use it as a pipeline step of its own, after '|' at "
            "position 5");
  EXPECT_EQ(ParseError("x := math:nosuch(y)"),
            "unknown function 'math:nosuch' in expression at position 5");
  EXPECT_EQ(ParseError("x := math:abs(y)"), "OK");  // the step math:abs(y, as=x)
  // In an expression the call's value is its result: an as= written in it is overridden.
  EXPECT_EQ(ParseError("x := text:length(s, as=y) + 1"), "OK");
  EXPECT_EQ(ParseError("x := text:length(s, as=y)"),
            "parameter 'as' of text:length() given twice at position 0");
  EXPECT_EQ(ParseError("groupBy(a, function=time:hour(b))"),
            "unknown aggregate function 'time:hour' in groupBy(function=...) at position 20");
  EXPECT_EQ(ParseError("f =~ text:foo(x)"), "unknown function 'text:foo' at position 5");
  // `field =~ f(...)` for a filtering step with a field parameter (match(), cidr()): f with
  // field=field; other steps are refused by name.
  EXPECT_EQ(ParseError("ip =~ cidr(subnet=\"10.0.0.0/8\")"), "OK");
  EXPECT_EQ(ParseError("ip =~ cidr(subnet=\"10.0.0.0/8\", field=x)"),
            "parameter 'field' of cidr() given twice at position 0");
  EXPECT_EQ(ParseError("ip =~ cidr(subnet=\"10.0.0.0/99\")"),
            "invalid value '10.0.0.0/99' for parameter 'subnet' of cidr(): expected an IPv4 or "
            "IPv6 subnet such as 192.0.2.0/24 or 2001:db8::/32 at position 18");
  EXPECT_EQ(ParseError("ip =~ subnet(bits=8)"),
            "expected a filter function such as in(), wildcard() or regex() after '=~' but found "
            "'subnet' at position 6");
  // An expression function where a pipeline function or a filter is expected.
  EXPECT_EQ(ParseError("a | trim(b)"),
            "trim() is an expression function: use it in an expression (x := trim(...), "
            "eval(), if()) at position 4");
  // concat() is also a step (a list of fields): two positional arguments bind `field` twice.
  EXPECT_EQ(ParseError("a | concat([a, b], as=x)"), "OK");
  EXPECT_EQ(ParseError("a | concat(a, b)"),
            "parameter 'field' of concat() given twice at position 14");
  EXPECT_EQ(ParseError("a or toNumber(b)"),
            "toNumber() is an expression function: use it in an expression (x := toNumber(...), "
            "eval(), if()) at position 5");
  // Without '(' a colon is text.
  EXPECT_EQ(Parsed("text:foo"), R"((text "text:foo"))");
}

TEST(ParserSyntaxTest, NegatedFilteringSteps) {
  // `!f(...)` as a step: f's stage, negated.
  auto q = MustCompile("a | !text:startsWith(string=p, substring=\"x\")");
  ASSERT_EQ(q->stages.size(), 1u);
  EXPECT_TRUE(q->stages[0].negate);
  EXPECT_EQ(q->stages[0].position, 4u);
  q = MustCompile("! array:contains(\"a[]\", value=x) | count()");
  ASSERT_EQ(q->stages.size(), 2u);
  EXPECT_TRUE(q->stages[0].negate);
  EXPECT_FALSE(q->stages[1].negate);
  EXPECT_FALSE(MustCompile("array:contains(\"a[]\", value=x)")->stages[0].negate);
  // Negated filters stay filters.
  EXPECT_EQ(Parsed("!in(f, values=[a])"), R"((not (eq "f" "a")))");
  EXPECT_EQ(ParseError("a | !lowercase(x)"),
            "lowercase() cannot be negated with '!': it is not a function that filters at "
            "position 4");
  EXPECT_EQ(ParseError("!text:contains(string=p, substring=x) b"),
            "a negated function call '!text:contains(...)' must be a step of its own: expected "
            "'|' but found 'b' at position 38");
}

TEST(ParserSyntaxTest, StartAndEndBindTheTimeRange) {
  EXPECT_TRUE(UsesTimeRange(*MustCompile("x := end() - @timestamp")));
  EXPECT_TRUE(UsesTimeRange(*MustCompile("test(@timestamp > start())")));
  EXPECT_FALSE(UsesTimeRange(*MustCompile("x := \"end()\" | y := now()")));
  const TimeRange range{1000, 5000};
  EXPECT_EQ(*BindTimeRange("x := end() - @timestamp | y := start ( ) | z := \"end()\"", range),
            "x := 5000 - @timestamp | y := 1000 | z := \"end()\"");
  EXPECT_EQ(*BindTimeRange("isOld := (end()-@timestamp) > 1000", range),
            "isOld := (5000-@timestamp) > 1000");
  // A name that is both an expression and a pipeline function is bound where it parsed as the
  // expression; the bound text compiles without start()/end().
  auto bound = BindTimeRange("e := end() | test(end() > start())", range);
  ASSERT_TRUE(bound.ok());
  EXPECT_EQ(*bound, "e := 5000 | test(5000 > 1000)");
  EXPECT_FALSE(UsesTimeRange(*MustCompile(*bound)));
  EXPECT_FALSE(BindTimeRange("x := end(", range).ok());
  EXPECT_EQ(ParseError("x := end(1)"),
            "wrong number of arguments for end(): expected 0, got 1 at position 5");
}

TEST(ParserSyntaxTest, SetTimeIntervalIsTheQuerysRange) {
  auto q = MustCompile("setTimeInterval(start=7d, end=1d) | a | count()");
  ASSERT_TRUE(QueryTimeInterval(*q).has_value());
  EXPECT_EQ(*QueryTimeInterval(*q), std::make_pair(std::string("7d"), std::string("1d")));
  ASSERT_EQ(q->stages.size(), 1u);  // no stage of its own; `a` is the leading filter
  EXPECT_EQ(*QueryTimeInterval(*MustCompile("setTimeInterval(1h)")),
            std::make_pair(std::string("1h"), std::string("now")));
  EXPECT_FALSE(QueryTimeInterval(*MustCompile("a | count()")).has_value());
  EXPECT_EQ(ParseError("a | setTimeInterval(1h)"),
            "setTimeInterval() must be the first step of the query at position 4");
  EXPECT_EQ(ParseError("setTimeInterval(1h) | setTimeInterval(2h)"),
            "setTimeInterval() must be the first step of the query at position 22");
  EXPECT_EQ(ParseError("groupBy(a, function={setTimeInterval(1h) | count()})")
                .find("setTimeInterval() must be the first step of the query"),
            0u);
}

TEST(ParserSyntaxTest, AssignAggregates) {
  // `name := f(...)` is f(..., as=name) for aggregates and functions with as=.
  EXPECT_EQ(Stages("c := count()"), "agg/none {count( as c)}");
  EXPECT_EQ(Stages("m := max(x)"), "agg/none {max(x as m)}");
  EXPECT_EQ(Stages("[a := min(x), b := max(x)]"), "agg/none {min(x as a),max(x as b)}");
  EXPECT_EQ(Stages("[a:=min(x), count()]"), "agg/none {min(x as a),count()}");
  EXPECT_EQ(Stages("groupBy(x, function=[n := count(), s := sum(y)])"),
            "agg/groupBy [x] limit=20000 {count( as n),sum(y as s)}");
  EXPECT_EQ(Stages("groupBy(x, function=n := count())"),
            "agg/groupBy [x] limit=20000 {count( as n)}");
  EXPECT_EQ(Stages("\"my count\" := count()"), "agg/none {count( as my count)}");
  EXPECT_EQ(Stages("l := lower(x)"), "lower x as=l");       // the step when it takes the arguments,
  EXPECT_EQ(Stages("m := max(a, b)"), "eval m=(max a b)");  // else the expression function
  EXPECT_EQ(Stages("t := formatTime(\"%H\")"), "formatTime %H field=@timestamp as=t tz=UTC");
  EXPECT_EQ(ParseError("c := count(as=d)"), "parameter 'as' of count() given twice at position 0");
  EXPECT_EQ(ParseError("c := head(1)"),
            "head() has no 'as' parameter: its output cannot be named with ':=' at position 0");
  EXPECT_EQ(ParseError("c := in(a, values=[b])"),
            "in() is a filter: it has no value to assign at position 5");
  EXPECT_EQ(ParseError("[a := x]"),
            "expected a function call after ':=' but found 'x' at position 6");
}

TEST(ParserSyntaxTest, MatchOperatorAndRegexFilter) {
  EXPECT_EQ(Parsed("f =~ in(values=[a, b*])"), R"((or (eq "f" "a") (glob "f" "b*")))");
  EXPECT_EQ(Parsed("f=~wildcard(\"x*\", ignoreCase=true)"), R"((iglob "f" "x*"))");
  EXPECT_EQ(Parsed("f =~ regex(\"a.c\")"), R"((fregex "f" "(?m)a.c"))");
  EXPECT_EQ(Parsed("`my f` =~ regex(\"x\", flags=i)"), R"((fregex "my f" "(?i)x"))");
  EXPECT_EQ(Parsed("not regex(\"a\") b"), R"((and (not (regex "(?m)a")) (text "b")))");
  EXPECT_EQ(Parsed("regex(\"a\") or b"), R"((or (regex "(?m)a") (text "b")))");
  EXPECT_EQ(Stages("regex(\"(?<n>a)\")"), "regex (?m)(?P<n>a) field=@rawstring groups=[n]");
  EXPECT_EQ(ParseError("f =~ in(g, values=[a])"),
            "parameter 'field' of in() given twice at position 0");
  EXPECT_EQ(ParseError("f =~ count()"),
            "expected a filter function such as in(), wildcard() or regex() after '=~' but found "
            "'count' at position 5");
  EXPECT_EQ(ParseError("f =~ x"),
            "expected a filter function such as in(), wildcard() or regex() after '=~' but found "
            "'x' at position 5");
  EXPECT_EQ(ParseError("regex(\"a\", strict=false) or b"),
            "regex(strict=false) keeps every event: it cannot be a filter at position 0");
}

TEST(ParserSyntaxTest, Match) {
  // field match { pattern => stages ; ... }: a case { } on the field's value.
  EXPECT_EQ(
      Stages("status match { 200 => x := 1 ; \"4*\" => x := 2 ; * => x := 3 }"),
      R"(case { (eq "status" "200") => eval x=#1; (glob "status" "4*") => eval x=#2; true => eval x=#3 })");
  EXPECT_EQ(
      Stages("m MATCH { in(values=[GET, PUT]) => a := 1 | b := 2 ; /^P(?<rest>.*)/ => a := 3 }"),
      R"q(case { (or (eq "m" "GET") (eq "m" "PUT")) => eval a=#1 | eval b=#2; (fregex "m" "^P(?P<rest>.*)") => regex ^P(?P<rest>.*) field=m groups=[rest] | eval a=#3 })q");
  // Filters after '=>' filter the branch (no fall-through); an empty branch keeps the record.
  EXPECT_EQ(
      Stages("`a b` match { x => y=1 | z := 1 ; wildcard(\"q*\") => ; regex(\"r\") => }"),
      R"q(case { (eq "a b" "x") => filter (eq "y" "1") | eval z=#1; (glob "a b" "q*"); (fregex "a b" "(?m)r") })q");
  EXPECT_EQ(Stages("a match { x => b := 1 } | count()"),
            R"(case { (eq "a" "x") => eval b=#1 } | agg/none {count()})");
  EXPECT_EQ(
      ParseError("a match { x => count() }"),
      "count() cannot be used in a match branch (only per-record functions can) at position 15");
  EXPECT_EQ(ParseError("a match { x y }"),
            "expected '=>' after the match pattern but found 'y' at position 12");
  EXPECT_EQ(ParseError("a match { }"), "empty match { } at position 10");
  EXPECT_EQ(ParseError("a match { x => b := 1"),
            "missing '}' for 'match {' at position 8 at position 21");
  EXPECT_EQ(ParseError("a match { head() => b := 1 }"),
            "head() is not a filter: it cannot be a match pattern at position 10");
  // `match` not followed by '{' is free text.
  EXPECT_EQ(Parsed("a match b"), R"((and (and (text "a") (text "match")) (text "b")))");
}

TEST(ParserSyntaxTest, RegexInCaseIsACondition) {
  // A record regex() rejects tries the next branch (as with /re/), instead of being dropped.
  EXPECT_EQ(Stages("case { regex(\"x\") | a := 1 ; * | a := 2 }"),
            R"q(case { (regex "(?m)x") => eval a=#1; true => eval a=#2 })q");
  EXPECT_EQ(
      Stages("case { regex(\"(?<n>x)\", field=f) | a := 1 ; * }"),
      R"q(case { (fregex "f" "(?m)(?P<n>x)") => regex (?m)(?P<n>x) field=f groups=[n] | eval a=#1; true })q");
  // After another stage it filters the branch, as any filter there.
  EXPECT_EQ(Stages("case { a := 1 | regex(\"x\") ; * }"),
            R"q(case { true => eval a=#1 | regex (?m)x field=@rawstring groups=[]; true })q");
}

TEST(ParserSyntaxTest, FieldNames) {
  EXPECT_EQ(Parsed("`a b`=x"), R"((eq "a b" "x"))");
  EXPECT_EQ(Parsed("a[0]=x"), R"((eq "a[0]" "x"))");
  EXPECT_EQ(Parsed("a[0].b[12] != x"), R"((not (eq "a[0].b[12]" "x")))");
  EXPECT_EQ(Parsed("a[1] > 3"), R"((cmp "a[1]" > 3))");
  EXPECT_EQ(Parsed("a[x]"), "ERROR: unexpected '[' at position 1");
  EXPECT_EQ(Stages("x := a[1]"), "eval x=a[1]");
  EXPECT_EQ(Stages("\"a[0]\" := x"), "eval a[0]=x");
  EXPECT_EQ(Stages("`a b` := `c d` + 1"), "eval a b=(+ c d #1)");
  EXPECT_EQ(Stages("eval(`a b` = 1)"), "eval a b=#1");
  EXPECT_EQ(Stages("groupBy(a[0])"), "agg/groupBy [a[0]] limit=20000 {count()}");
  EXPECT_EQ(Stages("groupBy(`a b`)"), "agg/groupBy [a b] limit=20000 {count()}");
}

TEST(ParserErrorTest, NestingIsBounded) {
  auto repeat = [](const std::string& s, int n) {
    std::string out;
    for (int i = 0; i < n; ++i) out += s;
    return out;
  };
  // Deep but reasonable nesting parses.
  EXPECT_EQ(Parsed(repeat("(", 50) + "a" + repeat(")", 50)), R"((text "a"))");
  EXPECT_EQ(Parsed(repeat("!", 40) + "a").substr(0, 10), "(not (not ");
  // Hostile nesting is an error, not a stack overflow.
  constexpr int kDeep = 100000;
  for (const std::string& q :
       {repeat("(", kDeep) + "a", repeat("!", kDeep) + "a", "| head(" + repeat("[", kDeep),
        "| groupBy(a, function=" + repeat("count(", kDeep), "x := " + repeat("(", kDeep) + "1",
        "x := " + repeat("-", kDeep) + "1", "x := " + repeat("abs(", kDeep) + "1",
        repeat("case { a | ", kDeep)}) {
    std::string err = ParseError(q);
    EXPECT_EQ(err.substr(0, 24), "query nested too deeply ") << q.substr(0, 20);
  }
}

// ---------- subqueries ----------

TEST(ParserSubqueryTest, ArgumentsCompileToSubqueryMetrics) {
  // A subquery of one ungrouped aggregate is its metrics.
  auto q = MustCompile("groupBy(a, function={[count(), sum(x)]})");
  ASSERT_NE(q, nullptr);
  ASSERT_EQ(q->stages[0].metrics.size(), 2u);
  EXPECT_EQ(q->stages[0].metrics[0].kind, Metric::Kind::kCount);
  EXPECT_EQ(q->stages[0].metrics[1].kind, Metric::Kind::kSum);

  // Filter, steps before the aggregate, the aggregate, steps after it.
  q = MustCompile("groupBy(a, function=[count(), {b=1 | y := x * 2 | sum(y) | z := _sum}])");
  ASSERT_NE(q, nullptr);
  ASSERT_EQ(q->stages[0].metrics.size(), 2u);
  const Metric& m = q->stages[0].metrics[1];
  ASSERT_EQ(m.kind, Metric::Kind::kSubquery);
  ASSERT_NE(m.subquery, nullptr);
  const Subquery& sq = *m.subquery;
  ASSERT_EQ(sq.stages.size(), 4u);
  EXPECT_EQ(sq.stages[0].kind, Stage::Kind::kFilter);
  EXPECT_EQ(DebugString(*sq.stages[0].filter), R"((eq "b" "1"))");
  EXPECT_EQ(sq.stages[1].kind, Stage::Kind::kEval);
  EXPECT_EQ(sq.collect, 2u);
  EXPECT_EQ(sq.stages[2].kind, Stage::Kind::kAggregate);
  EXPECT_EQ(sq.stages[3].kind, Stage::Kind::kEval);
  EXPECT_EQ(sq.position, 30u);

  // Collecting functions nested in function= are subqueries of one stage.
  for (const char* text : {"groupBy(a, function=groupBy(b))", "groupBy(a, function=tail(2))",
                           "timeChart(function=top(b))", "stats([head(1), count()])"}) {
    q = MustCompile(text);
    ASSERT_NE(q, nullptr) << text;
    ASSERT_EQ(q->stages[0].metrics[0].kind, Metric::Kind::kSubquery) << text;
    EXPECT_EQ(q->stages[0].metrics[0].subquery->collect, 0u) << text;
  }
  // The stats shorthand at the top level, with `;`-free case inside a subquery.
  q = MustCompile("[{a=1 | count(as=n)}, {case {b=1 | c := 1; * | c := 2} | max(c)}]");
  ASSERT_NE(q, nullptr);
  ASSERT_EQ(q->stages[0].metrics.size(), 2u);
  EXPECT_EQ(q->stages[0].metrics[1].subquery->stages[0].kind, Stage::Kind::kCase);
  // Comments and line breaks inside.
  EXPECT_NE(MustCompile("groupBy(a, function={ // per a\n count() /* n */ | n := _count })"),
            nullptr);
}

// ---------- saved query calls ----------

class MapSavedQueries final : public SavedQueries {
 public:
  explicit MapSavedQueries(std::map<std::string, std::string> m) : m_(std::move(m)) {}
  std::optional<std::string> Find(std::string_view name) const override {
    auto it = m_.find(std::string(name));
    if (it == m_.end()) return std::nullopt;
    return it->second;
  }

 private:
  std::map<std::string, std::string> m_;
};

std::string Expanded(std::string_view q, const SavedQueries& saved,
                     const std::map<std::string, std::string>& args = {},
                     std::string_view self = {}) {
  auto r = ExpandSavedQueries(q, saved, args, self);
  return r.ok() ? *r : "ERROR: " + r.status().message();
}

TEST(ParserSavedQueryTest, CallsAreExpandedInPlace) {
  MapSavedQueries saved({{"errs", "status >= ?{min=500}"},
                         {"my q", "$errs(min=400) | count() // note"},
                         {"req", "x = ?v"},
                         {"a", "$b()"},
                         {"b", "$a()"}});
  EXPECT_EQ(Expanded("a | b", saved), "a | b");  // no call: unchanged
  EXPECT_EQ(Expanded("kvParse() | $errs() | c", saved), "kvParse() | status >= \"500\" | c");
  EXPECT_EQ(Expanded("$errs(min=404)", saved), "status >= \"404\"");
  // Nested calls; a saved text ending in a comment gets a newline so it swallows nothing.
  EXPECT_EQ(Expanded("$\"my q\"() | y", saved), "status >= \"400\" | count() // note\n | y");
  // Parameters without a call argument come from the request's arguments.
  EXPECT_EQ(Expanded("$req()", saved, {{"v", "7"}}), "x = \"7\"");
  EXPECT_EQ(Expanded("$req()", saved),
            "ERROR: in saved query 'req' called at position 0: query parameter ?v has no value "
            "(give it in the request's \"arguments\", or a default: ?{v=value}) at position 4");
  EXPECT_EQ(Expanded("a | $nope()", saved),
            "ERROR: unknown saved query 'nope' (the repository has no saved search of that "
            "name) at position 4");
  EXPECT_EQ(Expanded("$a()", saved),
            "ERROR: saved query 'a' calls itself (a -> b -> a) at position 0");
  EXPECT_EQ(Expanded("$b()", saved, {}, "a"),
            "ERROR: saved query 'a' calls itself (a -> b -> a) at position 0");
  EXPECT_EQ(Expanded("$errs(x)", saved).rfind("ERROR: the arguments of saved query 'errs'", 0), 0u);
  // Compile never runs a call that was not expanded.
  EXPECT_EQ(ParseError("$errs()"),
            "saved query call '$errs()' here: saved queries are expanded by a repository's query "
            "API (ExpandSavedQueries) at position 0");
  EXPECT_EQ(ParseError("groupBy(x, function=$errs())"),
            "saved query call '$errs' cannot be an argument value: call it as a step of its own "
            "at position 20");
}

}  // namespace
}  // namespace sediment::query
