// The functions of issue 17 through the registry and the compiled stage (functions/*.cc), for
// the logic that is intricate (parseTimestamp patterns, format conversions, splitString's Java
// semantics) and for the namespaced math:*, text:*, time:* functions, which the parser cannot
// call yet (their corpus cases are in tests/query/cases/namespaced.test).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numbers>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "query/functions/registry.h"
#include "query/time_zone.h"
#include "query/transform.h"

namespace sediment::query::functions {
namespace {

struct Outcome {
  Status status;
  std::vector<Record> records;
};

// Compiles one call of the registered function `name` with `args` ({parameter or "" for the
// unnamed one, value in query syntax}) and applies the stage to a row holding `row`.
Outcome RunCall(std::string_view name, const std::vector<std::pair<std::string, std::string>>& args,
                Row row) {
  Outcome out;
  const Function* fn = FindPipelineFunction(name);
  if (fn == nullptr) {
    out.status = Status::NotFound(std::string(name));
    return out;
  }
  std::vector<Arg> bound;
  for (const auto& [param, text] : args) {
    Arg a;
    a.name = param;
    if (!ParseArgumentValue(text, &a.value)) {
      out.status = Status::InvalidArgument("bad value " + text);
      return out;
    }
    bound.push_back(std::move(a));
  }
  Status err;
  Call call(*fn, 0, &err);
  Stage st;
  if (!call.Bind(bound) || !fn->stage(call, &st)) {
    out.status = err;
    return out;
  }
  ApplyTransform(st, Record::FromRow(std::move(row), RecordKey{}), &out.records);
  return out;
}

// The value of `field` after running, or nullopt (also when the record was dropped).
std::optional<Value> Get(std::string_view name,
                         const std::vector<std::pair<std::string, std::string>>& args, Row row,
                         std::string_view field) {
  Outcome o = RunCall(name, args, std::move(row));
  EXPECT_TRUE(o.status.ok()) << o.status.ToString();
  if (o.records.size() != 1) return std::nullopt;
  return o.records[0].GetValue(field);
}

Value I(int64_t v) { return Value(v); }
Value D(double v) { return Value(v); }
Value S(std::string v) { return Value(std::move(v)); }

constexpr int64_t kMonday = 1704071520250;  // 2024-01-01T01:12:00.250Z, a Monday

TEST(ParseTimestampTest, PatternsAndOffsets) {
  auto parse = [](std::string format, std::string text, std::string tz = "") {
    std::vector<std::pair<std::string, std::string>> args = {
        {"", "\"" + format + "\""}, {"field", "t"}, {"as", "out"}};
    if (!tz.empty()) args.push_back({"timezone", "\"" + tz + "\""});
    return Get("parseTimestamp", args, Row{{"t", S(std::move(text))}}, "out");
  };
  const int64_t base = 1704071520000;  // 2024-01-01T01:12:00Z
  EXPECT_EQ(parse("yyyy-MM-dd'T'HH:mm:ss[.SSSSSSSSS]XXXXX", "2024-01-01T01:12:00Z"), I(base));
  EXPECT_EQ(parse("yyyy-MM-dd'T'HH:mm:ss[.SSSSSSSSS]XXXXX", "2024-01-01T01:12:00.25Z"),
            I(base + 250));
  EXPECT_EQ(parse("yyyy-MM-dd'T'HH:mm:ss[.SSSSSSSSS]XXXXX", "2024-01-01T06:42:00.123456789+05:30"),
            I(base + 123));
  EXPECT_EQ(parse("EEE, dd MMM yyyy hh:mm:ss a X", "Mon, 01 Jan 2024 01:12:00 PM Z"),
            I(base + 12 * 3600000));
  EXPECT_EQ(parse("dd MMMM yy HH:mm", "01 January 24 01:12", "-01:00"), I(base + 3600000));
  EXPECT_EQ(parse("yyyy D HH:mm", "2024 1 01:12", "UTC"), I(base));
  EXPECT_EQ(parse("yyyy-MM-dd HH:mm", "2024-02-29 00:00", "Z"), I(1709164800000));
  // No offset and no timezone; trailing text; an impossible date; case.
  EXPECT_EQ(parse("yyyy-MM-dd HH:mm", "2024-01-01 01:12"), std::nullopt);
  EXPECT_EQ(parse("yyyy-MM-dd HH:mm", "2024-01-01 01:12 x", "UTC"), std::nullopt);
  EXPECT_EQ(parse("yyyy-MM-dd HH:mm", "2023-02-29 00:00", "UTC"), std::nullopt);
  EXPECT_EQ(parse("dd MMM yyyy HH:mm X", "01 jan 2024 01:12 Z"), std::nullopt);
  EXPECT_EQ(Get("parseTimestamp",
                {{"", "\"dd MMM yyyy HH:mm X\""}, {"field", "t"}, {"caseSensitive", "false"}},
                Row{{"t", S("01 jan 2024 01:12 Z")}}, "@timestamp"),
            I(base));
  EXPECT_EQ(parse("seconds", "1704071520.25"), I(base + 250));
  EXPECT_EQ(parse("NANOS", "1704071520000000000"), I(base));
  EXPECT_EQ(parse("unixTimeMillis", "-5"), I(-5));
}

TEST(ParseTimestampTest, ErrorsAndBadPatterns) {
  Outcome o = RunCall("parseTimestamp", {{"", "millis"}, {"field", "t"}}, Row{{"t", S("x")}});
  ASSERT_TRUE(o.status.ok());
  ASSERT_EQ(o.records.size(), 1u);
  EXPECT_EQ(o.records[0].GetValue("@error"), S("true"));
  EXPECT_TRUE(o.records[0].Has("@error_msg"));
  o = RunCall("parseTimestamp", {{"", "\"yyyy-MM-dd [HH\""}, {"field", "t"}}, Row{});
  EXPECT_EQ(o.status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(o.status.message().find("parameter 'format' of parseTimestamp()"), std::string::npos)
      << o.status.ToString();
  o = RunCall("parseTimestamp", {{"field", "t"}, {"timezoneAs", "x"}}, Row{});
  EXPECT_NE(o.status.message().find("not supported"), std::string::npos);
}

TEST(FormatTest, Conversions) {
  auto fmt = [](std::string format, std::string fields, Row row) {
    return Get("format", {{"", "\"" + format + "\""}, {"field", fields}}, std::move(row),
               "_format");
  };
  Row row = {{"a", S("x")}, {"b", I(-1)}, {"c", D(2.5)}, {"d", I(65)}, {"t", I(kMonday)}};
  EXPECT_EQ(fmt("%2$s-%1$s|%S", "[a, b]", row), S("-1-x|X"));
  EXPECT_EQ(fmt("[%-4d][%4d][%+d]", "[b, b, d]", row), S("[-1  ][  -1][+65]"));
  EXPECT_EQ(fmt("%x %X %o %#x", "[b, d, d, d]", row), S("ffffffffffffffff 41 101 0x41"));
  EXPECT_EQ(fmt("%c%b%b%%%n", "[d, a, b]", row), S("Atruetrue%\n"));
  EXPECT_EQ(fmt("%.3e|%08.2f|%.1s", "[c, c, a]", row), S("2.500e+00|00002.50|x"));
  EXPECT_EQ(fmt("%tA %tB %te %tL %TB", "[t, t, t, t, t]", row), S("Monday January 1 250 JANUARY"));
  // %d of a fraction, a missing value: nothing is set.
  EXPECT_EQ(fmt("%d", "c", row), std::nullopt);
  EXPECT_EQ(fmt("%s", "nosuch", row), std::nullopt);
  for (const char* bad : {"%", "%y", "%tq", "%.f", "%3$s"}) {
    Outcome o =
        RunCall("format", {{"", std::string("\"") + bad + "\""}, {"field", "[a, b]"}}, Row{});
    EXPECT_EQ(o.status.code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(SplitStringTest, JavaSplitSemantics) {
  Outcome o = RunCall("splitString", {{"", "s"}, {"by", "\",\""}}, Row{{"s", S(",a,,b,,")}});
  ASSERT_EQ(o.records.size(), 1u);
  const Record& r = o.records[0];
  EXPECT_EQ(r.GetValue("_splitstring[0]"), S(""));
  EXPECT_EQ(r.GetValue("_splitstring[1]"), S("a"));
  EXPECT_EQ(r.GetValue("_splitstring[2]"), S(""));
  EXPECT_EQ(r.GetValue("_splitstring[3]"), S("b"));
  EXPECT_FALSE(r.Has("_splitstring[4]"));  // trailing empty elements are dropped
  // An empty match splits between characters, not before the first.
  EXPECT_EQ(Get("splitString", {{"", "s"}, {"by", "\"\""}, {"index", "0"}}, Row{{"s", S("ab")}},
                "_splitstring"),
            S("a"));
  EXPECT_EQ(Get("splitString", {{"", "s"}, {"by", "\"x\""}, {"index", "-3"}}, Row{{"s", S("axb")}},
                "_splitstring"),
            std::nullopt);
}

TEST(ParseCefTest, EscapesAndPrefixes) {
  Outcome o = RunCall("parseCEF", {{"", "m"}, {"prefix", "\"x.\""}, {"headerprefix", "\"h.\""}},
                      Row{{"m", S("CEF:0|v\\|x|p|1|id|a\\\\b|5|k=a\\=b c\tj=1 2\\n  ")}});
  ASSERT_EQ(o.records.size(), 1u);
  const Record& r = o.records[0];
  EXPECT_EQ(r.GetValue("h.device.vendor"), S("v|x"));
  EXPECT_EQ(r.GetValue("h.name"), S("a\\b"));
  EXPECT_EQ(r.GetValue("h.severity"), S("5"));
  EXPECT_EQ(r.GetValue("x.k"), S("a=b c"));
  EXPECT_EQ(r.GetValue("x.j"), S("1 2\n"));
  // Fewer than seven header values: nothing is set.
  o = RunCall("parseCEF", {{"", "m"}}, Row{{"m", S("CEF:0|a|b|c")}});
  ASSERT_EQ(o.records.size(), 1u);
  EXPECT_FALSE(o.records[0].Has("cef.version"));
}

TEST(NamespacedTest, RegisteredUnderTheirNames) {
  for (const char* name : {"math:abs", "math:pow", "math:arctan2", "text:length", "text:contains",
                           "time:dayOfWeek", "time:dayofweek", "time:weekOfYear"}) {
    EXPECT_NE(FindPipelineFunction(name), nullptr) << name;
  }
  EXPECT_EQ(FindPipelineFunction("abs"), nullptr);
}

TEST(NamespacedTest, Math) {
  EXPECT_EQ(Get("math:abs", {{"", "x"}}, Row{{"x", I(-3)}}, "_abs"), I(3));
  EXPECT_EQ(Get("math:abs", {{"", "x"}, {"as", "y"}}, Row{{"x", S("-3.5")}}, "y"), D(3.5));
  EXPECT_EQ(Get("math:abs", {{"", "x"}}, Row{{"x", S("abc")}}, "_abs"), std::nullopt);
  EXPECT_EQ(Get("math:ceil", {{"", "x"}}, Row{{"x", D(2.1)}}, "_ceil"), I(3));
  EXPECT_EQ(Get("math:floor", {{"", "x"}}, Row{{"x", D(-2.1)}}, "_floor"), I(-3));
  EXPECT_EQ(Get("math:sqrt", {{"", "x"}}, Row{{"x", I(16)}}, "_sqrt"), D(4));
  EXPECT_EQ(Get("math:sqrt", {{"", "x"}}, Row{{"x", I(-1)}}, "_sqrt"), std::nullopt);
  EXPECT_EQ(Get("math:log", {{"", "x"}}, Row{{"x", I(0)}}, "_log"), std::nullopt);
  EXPECT_EQ(Get("math:log10", {{"", "x"}}, Row{{"x", I(1000)}}, "_log10"), D(3));
  EXPECT_EQ(Get("math:log2", {{"", "x"}}, Row{{"x", I(8)}}, "_log2"), D(3));
  EXPECT_EQ(Get("math:exp", {{"", "x"}}, Row{{"x", I(0)}}, "_exp"), D(1));
  EXPECT_EQ(Get("math:rad2deg", {{"", "x"}}, Row{{"x", D(std::numbers::pi)}}, "_rad2deg"), D(180));
  EXPECT_EQ(Get("math:pow", {{"", "x"}, {"exponent", "3"}}, Row{{"x", I(2)}}, "_pow"), I(8));
  EXPECT_EQ(Get("math:pow", {{"", "x"}, {"exponent", "0.5"}}, Row{{"x", I(9)}}, "_pow"), D(3));
  EXPECT_EQ(
      Get("math:arctan2", {{"x", "x"}, {"y", "y"}}, Row{{"x", I(0)}, {"y", I(1)}}, "_arctan2"),
      D(std::numbers::pi / 2));
  // An exponent that is not a number names a field holding it.
  EXPECT_EQ(
      Get("math:pow", {{"", "x"}, {"exponent", "e"}}, Row{{"x", I(2)}, {"e", S("3")}}, "_pow"),
      I(8));
  EXPECT_EQ(Get("math:pow", {{"", "x"}, {"exponent", "e"}}, Row{{"x", I(2)}}, "_pow"),
            std::nullopt);
  EXPECT_EQ(
      Get("math:pow", {{"", "x"}, {"exponent", "e"}}, Row{{"x", I(2)}, {"e", S("z")}}, "_pow"),
      std::nullopt);
  Outcome o = RunCall("math:pow", {{"", "x"}, {"exponent", "\"\""}}, Row{});
  EXPECT_EQ(o.status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(o.status.message().find("'exponent' of math:pow()"), std::string::npos)
      << o.status.ToString();
}

TEST(NamespacedTest, Text) {
  Row row = {{"s", S("h\xC3\xA9llo")}};
  EXPECT_EQ(Get("text:length", {{"", "s"}}, row, "_length"), I(5));
  EXPECT_EQ(Get("text:length", {{"", "\"abc\""}}, Row{}, "_length"), I(3));
  EXPECT_EQ(Get("text:substring", {{"", "s"}, {"begin", "1"}, {"end", "3"}}, row, "_substring"),
            S("\xC3\xA9l"));
  EXPECT_EQ(Get("text:substring", {{"", "s"}, {"begin", "9"}}, row, "_substring"), S(""));
  EXPECT_EQ(
      RunCall("text:contains", {{"string", "s"}, {"substring", "\"ll\""}}, row).records.size(), 1u);
  EXPECT_EQ(
      RunCall("text:contains", {{"string", "s"}, {"substring", "\"LL\""}}, row).records.size(), 0u);
  EXPECT_EQ(
      RunCall("text:startsWith", {{"string", "s"}, {"substring", "\"h\""}}, row).records.size(),
      1u);
  EXPECT_EQ(RunCall("text:endsWith", {{"string", "s"}, {"substring", "\"h\""}}, row).records.size(),
            0u);
  EXPECT_EQ(
      RunCall("text:endsWith", {{"string", "nosuch"}, {"substring", "\"\""}}, row).records.size(),
      0u);
  EXPECT_EQ(RunCall("text:substring", {{"", "s"}, {"begin", "3"}, {"end", "1"}}, row).status.code(),
            StatusCode::kInvalidArgument);
}

TEST(NamespacedTest, Time) {
  Row row = {{"@timestamp", I(kMonday)}};
  auto part = [&](const char* fn, std::vector<std::pair<std::string, std::string>> args = {}) {
    const Function* f = FindPipelineFunction(fn);
    std::string as;
    for (const Param& p : f->params) {
      if (std::string_view(p.name) == "as") as = p.default_value;
    }
    return Get(fn, args, row, as);
  };
  EXPECT_EQ(part("time:year"), I(2024));
  EXPECT_EQ(part("time:month"), I(1));
  EXPECT_EQ(part("time:dayOfMonth"), I(1));
  EXPECT_EQ(part("time:hour"), I(1));
  EXPECT_EQ(part("time:minute"), I(12));
  EXPECT_EQ(part("time:second"), I(0));
  EXPECT_EQ(part("time:millisecond"), I(250));
  EXPECT_EQ(part("time:dayOfWeek"), I(1));
  EXPECT_EQ(part("time:dayOfWeekName"), S("Monday"));
  EXPECT_EQ(part("time:monthName"), S("January"));
  EXPECT_EQ(part("time:dayOfYear"), I(1));
  EXPECT_EQ(part("time:weekOfYear"), I(1));
  // Two hours west it is Sunday 2023-12-31, in ISO week 52 of 2023.
  const std::vector<std::pair<std::string, std::string>> west = {{"timezone", "\"-02:00\""}};
  EXPECT_EQ(part("time:dayOfWeek", west), I(7));
  EXPECT_EQ(part("time:weekOfYear", west), I(52));
  EXPECT_EQ(part("time:dayOfYear", west), I(365));
  // 2021-01-03 (a Sunday) is in week 53 of 2020.
  EXPECT_EQ(Get("time:weekOfYear", {{"", "t"}}, Row{{"t", I(1609632000000)}}, "_weekOfYear"),
            I(53));
  EXPECT_EQ(RunCall("time:hour", {{"timezone", "\"Europe/Nowhere\""}}, row).status.code(),
            StatusCode::kInvalidArgument);
  // Named zones: Los Angeles is -08:00 in January (PST), New York -04:00 in July (EDT).
  EXPECT_EQ(part("time:hour", {{"timezone", "\"America/Los_Angeles\""}}), I(17));
  EXPECT_EQ(part("time:dayOfMonth", {{"timezone", "PST"}}), I(31));
  EXPECT_EQ(Get("time:hour", {{"", "t"}, {"timezone", "America/New_York"}},
                Row{{"t", I(1719835200000)}}, "_hour"),
            I(8));
  EXPECT_EQ(RunCall("time:hour", {{"timezoneField", "tz"}}, row).status.code(),
            StatusCode::kInvalidArgument);
}

TEST(TimeZoneTest, NamedZonesFollowDaylightSaving) {
  std::optional<TimeZone> berlin = TimeZone::Parse("Europe/Berlin");
  ASSERT_TRUE(berlin.has_value());
  EXPECT_TRUE(berlin->named());
  EXPECT_EQ(berlin->OffsetAt(1704067200), 3600);  // 2024-01-01T00:00Z: CET
  EXPECT_EQ(berlin->OffsetAt(1719835200), 7200);  // 2024-07-01T12:00Z: CEST
  EXPECT_EQ(berlin->Abbreviation(1704067200), "CET");
  EXPECT_EQ(berlin->Abbreviation(1719835200), "CEST");
  // 2024-03-31 02:30 local does not exist (02:00 -> 03:00): the offset before the gap (CET).
  EXPECT_EQ(berlin->OffsetOfLocal(1711843200 + 2 * 3600 + 1800), 3600);
  // 2024-10-27 02:30 local exists twice (03:00 -> 02:00): the earlier offset (CEST).
  EXPECT_EQ(berlin->OffsetOfLocal(1729987200 + 2 * 3600 + 1800), 7200);
  EXPECT_EQ(berlin->OffsetOfLocal(1729987200 + 5 * 3600), 3600);
  // Java short ids: zone names or fixed offsets.
  EXPECT_EQ(TimeZone::Parse("PST")->OffsetAt(1704067200), -8 * 3600);
  EXPECT_EQ(TimeZone::Parse("PST")->Abbreviation(1719835200), "PDT");
  EXPECT_FALSE(TimeZone::Parse("EST")->named());
  EXPECT_EQ(TimeZone::Parse("EST")->OffsetAt(1719835200), -5 * 3600);
  // Fixed offsets.
  EXPECT_EQ(TimeZone::Parse("UTC+05:30")->OffsetAt(0), 19800);
  EXPECT_EQ(TimeZone::Parse("-0200")->Abbreviation(0), "-02:00");
  EXPECT_EQ(TimeZone::Parse("Z")->Abbreviation(0), "UTC");
  for (const char* bad :
       {"pst", "Europe/Nowhere", "+19:00", "UTC+", "../../etc/passwd", "Europe/Berlin\n"}) {
    EXPECT_FALSE(TimeZone::Parse(bad).has_value()) << bad;
  }
}

TEST(FormatTimeTest, NamedZones) {
  EXPECT_EQ(FormatTime("%Y-%m-%d %H:%M %Z %z", 1704067200000, "PST"), "2023-12-31 16:00 PST -0800");
  EXPECT_EQ(FormatTime("%H:%M %Z", 1719835200000, "Europe/Berlin"), "14:00 CEST");
  EXPECT_EQ(FormatTime("%H:%M %Z", 1719835200000, "+02:00"), "14:00 +02:00");
  EXPECT_EQ(FormatTime("%H:%M %Z", 1719835200000, "UTC"), "12:00 UTC");
}

TEST(ParseTimestampTest, NamedZones) {
  auto parse = [](std::string text, std::string tz) {
    return Get("parseTimestamp",
               {{"", "\"yyyy-MM-dd HH:mm\""},
                {"field", "t"},
                {"as", "out"},
                {"timezone", "\"" + tz + "\""}},
               Row{{"t", S(std::move(text))}}, "out");
  };
  EXPECT_EQ(parse("2024-07-01 14:00", "Europe/Berlin"), I(1719835200000));
  EXPECT_EQ(parse("2024-01-01 01:00", "Europe/Berlin"), I(1704067200000));
  EXPECT_EQ(parse("2024-03-31 02:30", "Europe/Berlin"), I(1711848600000));  // skipped hour
  EXPECT_EQ(parse("2024-10-27 02:30", "Europe/Berlin"), I(1729989000000));  // repeated hour
  EXPECT_EQ(parse("2023-12-31 16:00", "PST"), I(1704067200000));
}

TEST(FormatDurationTest, UnitsAndPrecision) {
  auto fmt = [](Value v, std::vector<std::pair<std::string, std::string>> extra = {}) {
    std::vector<std::pair<std::string, std::string>> args = {{"", "d"}};
    for (auto& e : extra) args.push_back(std::move(e));
    return Get("formatDuration", args, Row{{"d", std::move(v)}}, "d");
  };
  EXPECT_EQ(fmt(I(23452553)), S("6h30m52s553ms"));
  EXPECT_EQ(fmt(S("23452553"), {{"precision", "3"}}), S("6h30m52s"));
  EXPECT_EQ(fmt(I(3600005), {{"precision", "2"}}), S("1h"));  // 1h0m: the zero unit is left out
  EXPECT_EQ(fmt(I(90061), {{"from", "s"}}), S("1d1h1m1s"));
  EXPECT_EQ(fmt(I(1500), {{"from", "ns"}}), S("1us500ns"));
  EXPECT_EQ(fmt(I(0)), S("0ms"));
  EXPECT_EQ(fmt(I(-1500)), S("-1s500ms"));
  EXPECT_EQ(fmt(I(std::numeric_limits<int64_t>::min()), {{"from", "ns"}, {"precision", "1"}}),
            S("-106751d"));
  EXPECT_EQ(fmt(D(1.5)), D(1.5));  // not an integer: unchanged
  EXPECT_EQ(Get("formatDuration", {{"", "d"}, {"as", "o"}}, Row{{"d", I(61000)}}, "o"), S("1m1s"));
  EXPECT_EQ(RunCall("formatDuration", {{"", "d"}, {"from", "weeks"}}, Row{}).status.code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(RunCall("formatDuration", {{"", "d"}, {"precision", "8"}}, Row{}).status.code(),
            StatusCode::kInvalidArgument);
}

TEST(SubnetTest, Ipv4Prefixes) {
  auto net = [](std::string ip, std::string bits) {
    return Get("subnet", {{"", "ip"}, {"bits", bits}}, Row{{"ip", S(std::move(ip))}}, "_subnet");
  };
  EXPECT_EQ(net("10.1.3.7", "23"), S("10.1.2.0/23"));
  EXPECT_EQ(net("10.1.3.7", "32"), S("10.1.3.7/32"));
  EXPECT_EQ(net("255.255.255.255", "1"), S("128.0.0.0/1"));
  EXPECT_EQ(net("10.1.3.7", "0"), S("0.0.0.0/0"));
  for (const char* bad :
       {"10.1.3", "10.1.3.7.", "256.1.1.1", "01.1.1.1", "::1", "", "a.b.c.d", "1.2.3.4 "}) {
    EXPECT_EQ(net(bad, "8"), std::nullopt) << bad;
  }
  EXPECT_EQ(RunCall("subnet", {{"", "ip"}, {"bits", "33"}}, Row{}).status.code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(RunCall("subnet", {{"", "ip"}}, Row{}).status.code(), StatusCode::kInvalidArgument);
}

TEST(TokenHashTest, OrderOfTokensDoesNotMatter) {
  auto hash = [](std::string text) {
    return Get("tokenHash", {{"", "t"}}, Row{{"t", S(std::move(text))}}, "_tokenHash");
  };
  // MurmurHash3-x86-32 of "abc", "def", "ghi" (seed 0) summed modulo 2^32.
  EXPECT_EQ(hash("abc def ghi"), S("ea67711c"));
  EXPECT_EQ(hash("ghi  abc def "), S("ea67711c"));
  EXPECT_EQ(hash("abc def"), S("a95711dc"));
  EXPECT_EQ(hash(""), S("00000000"));
  EXPECT_EQ(Get("tokenHash", {{"", "t"}}, Row{}, "_tokenHash"), std::nullopt);
}

TEST(EventSizeTest, RowsAreZero) {
  EXPECT_EQ(Get("eventSize", {}, Row{{"a", S("xyz")}}, "_eventSize"), I(0));
  EXPECT_EQ(Get("eventSize", {{"as", "n"}}, Row{}, "n"), I(0));
}

}  // namespace
}  // namespace sediment::query::functions
