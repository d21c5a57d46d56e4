#include "query/regex_prefilter.h"

#include <gtest/gtest.h>
#include <re2/re2.h>

#include <random>
#include <string>
#include <vector>

#include "query/compiled.h"
#include "query/query.h"

namespace sediment::query {
namespace {

std::string Show(const RegexLiterals& l) {
  std::string out;
  for (const auto& c : l.clauses) {
    out += '{';
    for (size_t i = 0; i < c.size(); ++i) out += (i ? "|" : "") + c[i];
    out += '}';
  }
  return out;
}

std::string Lits(const std::string& pattern) {
  RE2 re(pattern);
  EXPECT_TRUE(re.ok()) << pattern;
  return Show(AnalyzeRegex(re));
}

TEST(RegexLiteralsTest, Shapes) {
  EXPECT_EQ(Lits("abc"), "{abc}");
  EXPECT_EQ(Lits("ABC"), "{abc}");  // kept lower-cased, found case-insensitively
  EXPECT_EQ(Lits("(?i)abc"), "{abc}");
  EXPECT_EQ(Lits("foo.*bar"), "{bar}{foo}");
  EXPECT_EQ(Lits("error|warn"), "{error|warn}");
  EXPECT_EQ(Lits("a(b|c)d"), "{abd|acd}");
  EXPECT_EQ(Lits("(error|warn).*(disk|net)"), "{disk|net}{error|warn}");
  EXPECT_EQ(Lits("user=(?P<user>\\w+)"), "{user=}");
  EXPECT_EQ(Lits("\" (?P<status>\\d{3}) "), "{ }{\" }");
  EXPECT_EQ(Lits("^abc$"), "{abc}");
  EXPECT_EQ(Lits("(?m)^abc\\b"), "{abc}");
  EXPECT_EQ(Lits("(abc)+x"), "{abc}{x}");
  EXPECT_EQ(Lits("[Ee]rror"), "{error}");
  EXPECT_EQ(Lits("[a-z]+@example"), "{@example}");
  EXPECT_EQ(Lits("\\Qa.b\\E"), "{a.b}");
  EXPECT_EQ(Lits("\\x41\\x{42}c"), "{abc}");
  EXPECT_EQ(Lits("caf\xc3\xa9"), "{caf\xc3\xa9}");  // case-sensitive: exact bytes
  EXPECT_EQ(Lits("\\x{212A}b"),
            "{\xe2\x84\xaa"
            "b}");
  EXPECT_EQ(Lits("a(?i)b|c"), "{ab|c}");
  EXPECT_EQ(Lits("(?i:x)y"), "{xy}");
  // Nothing certain: empty, optional, starred, a branch that may match anything.
  EXPECT_EQ(Lits(""), "");
  EXPECT_EQ(Lits("a?"), "");
  EXPECT_EQ(Lits("(abc)*"), "");
  EXPECT_EQ(Lits("abc|"), "");
  EXPECT_EQ(Lits("abc|.*"), "");
  EXPECT_EQ(Lits("x{0,3}"), "");
  EXPECT_EQ(Lits("\\d+"), "");
  // Under (?i), k and s also match U+212A and U+017F, and non-ASCII letters fold to other
  // bytes: they end literals.
  EXPECT_EQ(Lits("(?i)kasse"), "{a}{e}");
  EXPECT_EQ(Lits("(?i)caf\xc3\xa9"), "{caf}");
  EXPECT_EQ(Lits("(?i)[Kk]ey"), "{ey}");
  // Not RE2 defaults: nothing.
  RE2::Options ci;
  ci.set_case_sensitive(false);
  EXPECT_EQ(Show(AnalyzeRegex(RE2("abc", ci))), "");
}

TEST(RegexLiteralsTest, TermsAndPrefilter) {
  RegexLiterals l = AnalyzeRegex(RE2("(error|warn).*disk full"));
  EXPECT_EQ(RequiredRegexTerms(l), std::vector<std::string>{"disk full"});
  std::vector<CiSearcher> p = RegexPrefilter(l);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].needle(), "disk full");
  EXPECT_TRUE(PrefilterAdmits(p, "x DISK FULL"));
  EXPECT_FALSE(PrefilterAdmits(p, "disk is full"));
  l = AnalyzeRegex(RE2("error|warn"));
  EXPECT_TRUE(RequiredRegexTerms(l).empty());
  EXPECT_EQ(RegexPrefilter(l).size(), 2u);
  EXPECT_TRUE(PrefilterAdmits({}, "anything"));
}

// ---- the analysis never rules out a text RE2 matches ----

class RegexGen {
 public:
  explicit RegexGen(uint32_t seed) : rng_(seed) {}

  std::string Regex(int depth = 0) {
    std::string out;
    const int branches = 1 + (Pick(4) == 0 ? 1 + Pick(2) : 0);
    for (int b = 0; b < branches; ++b) {
      if (b > 0) out += '|';
      if (Pick(8) == 0) out += Pick(2) ? "(?i)" : "(?-i)";
      const int n = Pick(5);
      for (int k = 0; k < n; ++k) out += Piece(depth);
    }
    return out;
  }

  std::string Text() {
    static const char* const kTokens[] = {"a",
                                          "b",
                                          "k",
                                          "K",
                                          "s",
                                          "S",
                                          "E",
                                          "e",
                                          "x",
                                          "1",
                                          "22",
                                          " ",
                                          "\n",
                                          "-",
                                          "=",
                                          "\"",
                                          ".",
                                          "ab",
                                          "AB",
                                          "kE",
                                          "\xc3\xa9",
                                          "\xc3\x89",
                                          "\xe2\x84\xaa",
                                          "\xc5\xbf",
                                          "\xff"};
    std::string t;
    const int n = Pick(14);
    for (int i = 0; i < n; ++i) t += kTokens[Pick(sizeof(kTokens) / sizeof(kTokens[0]))];
    return t;
  }

  int Pick(int n) { return static_cast<int>(rng_() % static_cast<uint32_t>(n)); }

 private:
  std::string Piece(int depth) {
    static const char* const kAtoms[] = {"a",
                                         "b",
                                         "k",
                                         "K",
                                         "s",
                                         "S",
                                         "E",
                                         "e",
                                         "x",
                                         "1",
                                         " ",
                                         "-",
                                         "=",
                                         "\"",
                                         "ab",
                                         "kE",
                                         ".",
                                         "\\d",
                                         "\\w",
                                         "\\s",
                                         "\\b",
                                         "^",
                                         "$",
                                         "\\.",
                                         "\\n",
                                         "[ab]",
                                         "[Kk]",
                                         "[^a]",
                                         "[a-c]",
                                         "[eE]",
                                         "\\pL",
                                         "\\x{212A}",
                                         "\\x41",
                                         "\\Qa.k\\E",
                                         "\xc3\xa9",
                                         "\xc3\x89",
                                         "\xe2\x84\xaa",
                                         "\xc5\xbf",
                                         "\\A",
                                         "\\z",
                                         "[[:alpha:]]",
                                         "\\C",
                                         "\\x{e9}"};
    static const char* const kQuant[] = {"",  "",    "",      "",     "?",  "*",
                                         "+", "{2}", "{0,2}", "{1,}", "??", "+?"};
    std::string atom;
    const int kind = depth < 3 ? Pick(10) : 9;
    if (kind == 0) {
      atom = "(" + Regex(depth + 1) + ")";
    } else if (kind == 1) {
      atom = "(?:" + Regex(depth + 1) + ")";
    } else if (kind == 2) {
      atom = "(?i:" + Regex(depth + 1) + ")";
    } else if (kind == 3) {
      atom = "(?P<g" + std::to_string(group_++) + ">" + Regex(depth + 1) + ")";
    } else {
      atom = kAtoms[Pick(sizeof(kAtoms) / sizeof(kAtoms[0]))];
    }
    return atom + kQuant[Pick(sizeof(kQuant) / sizeof(kQuant[0]))];
  }

  std::mt19937 rng_;
  int group_ = 0;
};

TEST(RegexLiteralsTest, NeverRulesOutAMatch) {
  RegexGen gen(20240611);
  RE2::Options quiet;
  quiet.set_log_errors(false);
  int matched_with_clauses = 0, rejected = 0;
  for (int iter = 0; iter < 2500; ++iter) {
    const std::string pattern = gen.Regex();
    RE2 re(pattern, quiet);
    if (!re.ok()) continue;
    const RegexLiterals lits = AnalyzeRegex(re);
    const std::vector<std::string> terms = RequiredRegexTerms(lits);
    const std::vector<CiSearcher> prefilter = RegexPrefilter(lits);
    for (int t = 0; t < 40; ++t) {
      const std::string text = gen.Text();
      const bool admitted = PrefilterAdmits(prefilter, text);
      if (!admitted) ++rejected;
      if (!RE2::PartialMatch(text, re)) continue;
      if (!lits.clauses.empty()) ++matched_with_clauses;
      ASSERT_TRUE(admitted) << "pattern /" << pattern << "/ text '" << text << "' " << Show(lits);
      for (const auto& clause : lits.clauses) {
        bool found = false;
        for (const std::string& l : clause) found = found || CiSearcher(l).Contains(text);
        ASSERT_TRUE(found) << "pattern /" << pattern << "/ text '" << text << "' " << Show(lits);
      }
      for (const std::string& term : terms) {
        ASSERT_TRUE(CiSearcher(term).Contains(text))
            << "pattern /" << pattern << "/ term " << term << " text '" << text << "'";
      }
    }
  }
  // The property was exercised: matches with literals, and texts the prefilter turned away.
  EXPECT_GT(matched_with_clauses, 1000);
  EXPECT_GT(rejected, 1000);
}

// ---- queries: the prefiltered paths give plain RE2's answers ----

PositionedEvent Ev(int64_t ts, std::string raw, std::string f) {
  PositionedEvent pe;
  pe.pos = Position{Offset(ts), 0};
  pe.event.timestamp_ms = ts;
  pe.event.ingest_ms = ts;
  pe.event.raw = std::move(raw);
  pe.event.fields = {Field{"f", std::move(f)}};
  return pe;
}

std::string Quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

TEST(RegexPrefilterQueryTest, SameAnswersAsPlainRe2) {
  RegexGen gen(99);
  auto events = std::make_shared<std::vector<PositionedEvent>>();
  for (int i = 0; i < 400; ++i) {
    // Multi-line raws, so that ^ and $ under (?m) see lines inside one event.
    std::string raw = gen.Text() + (gen.Pick(3) == 0 ? "\n" : "") + gen.Text();
    if (gen.Pick(5) == 0) raw += " user=u" + std::to_string(i % 7) + " ";
    events->push_back(Ev(1000 + i, raw, gen.Text()));
  }
  ScanInput in;
  in.buffered.push_back(BufferedSource{Datasource{"r", {}}, PartitionId(0), events});
  const TimeRange range{0, 1'000'000};

  std::vector<std::string> patterns = {
      "ab",           "AB",    "a|k",       "kE",          "(?i)ke", "(?i)ab|s", "e?x",
      "^ab",          "ab$",   "^$",        "\\bab",       "[Kk]",   "\xc3\xa9", "(?i)\xc3\xa9",
      "\xe2\x84\xaa", "(?i)k", "\\x{212A}", "user=u[0-3]", "a.*b",   "",         "x{2}|1"};
  for (int i = 0; i < 100; ++i) patterns.push_back(gen.Regex());

  RE2::Options quiet;
  quiet.set_log_errors(false);
  int nonempty = 0;
  for (const std::string& p : patterns) {
    if (p.find('/') != std::string::npos) continue;
    for (const std::string& flags : {std::string(""), std::string("i"), std::string("m")}) {
      const std::string prefix = flags == "i" ? "(?i)" : flags == "m" ? "(?m)" : "";
      RE2 re(prefix + p, quiet);
      if (!re.ok()) continue;
      // Filters on @rawstring and on a field.
      for (const bool on_field : {false, true}) {
        // An empty regex literal cannot be written: `//` starts a comment (as in LogScale).
        const std::string literal = p.empty() ? "(?:)" : p;
        const std::string q = (on_field ? "f=/" : "/") + literal + "/" + flags;
        auto c = Compile(q);
        ASSERT_TRUE(c.ok()) << q << ": " << c.status().ToString();
        auto r = Execute(Env::Default(), **c, range, in, ExecOptions{});
        ASSERT_TRUE(r.ok()) << q;
        std::vector<int64_t> want, got;
        for (const PositionedEvent& e : *events) {
          const std::string& text = on_field ? e.event.fields[0].value : e.event.raw;
          if (RE2::PartialMatch(text, re)) want.push_back(e.event.timestamp_ms);
        }
        for (const Row& row : r->rows) {
          for (const auto& [k, v] : row) {
            if (k == "@timestamp") got.push_back(std::get<int64_t>(v));
          }
        }
        std::sort(got.begin(), got.end());
        ASSERT_EQ(got, want) << q;
        nonempty += !want.empty();
      }
    }
    // Extraction: regex() with a named group around the whole pattern (strict, hoisted
    // literals, prefix search): the events and their groups as RE2 gives them.
    const std::string q = "regex(" + Quoted("(?<g>" + p + ")") + ") | select([@timestamp, g])";
    auto c = Compile(q);
    if (!c.ok()) continue;
    const RE2& stage_re = *(*c)->stages[0].re;
    auto r = Execute(Env::Default(), **c, range, in, ExecOptions{});
    ASSERT_TRUE(r.ok()) << q;
    std::vector<std::pair<int64_t, std::string>> want, got;
    const int g = stage_re.NamedCapturingGroups().at("g");
    for (const PositionedEvent& e : *events) {
      std::vector<re2::StringPiece> sub(static_cast<size_t>(g + 1));
      if (stage_re.Match(e.event.raw, 0, e.event.raw.size(), RE2::UNANCHORED, sub.data(), g + 1)) {
        want.emplace_back(e.event.timestamp_ms, std::string(sub[g].data(), sub[g].size()));
      }
    }
    for (const Row& row : r->rows) {
      std::pair<int64_t, std::string> x;
      for (const auto& [k, v] : row) {
        if (k == "@timestamp") x.first = std::get<int64_t>(v);
        if (k == "g") x.second = std::get<std::string>(v);
      }
      got.push_back(x);
    }
    std::sort(got.begin(), got.end());
    ASSERT_EQ(got, want) << q;
  }
  EXPECT_GT(nonempty, 100);
}

TEST(RegexPrefilterQueryTest, StrictRegexStageLiteralsJoinTheFilter) {
  auto c = Compile(R"q(regex("user=(?<user>\w+)") | groupBy(user))q");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(DebugString(*(*c)->filter), R"q((text "user="))q");
  c = Compile(R"q(error | regex("(?<l>warn|fail)ure.*disk") | count())q");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(DebugString(*(*c)->filter),
            R"q((and (and (text "error") (or (text "failure") (text "warnure"))) (text "disk")))q");
  // Not strict, on another field, or after a stage that may change @rawstring: unchanged.
  for (const char* q :
       {R"q(regex("user=(?<u>\w+)", strict=false))q", R"q(regex("user=(?<u>\w+)", field=msg))q",
        R"q(kvParse() | regex("user=(?<u>\w+)"))q"}) {
    c = Compile(q);
    ASSERT_TRUE(c.ok()) << q;
    EXPECT_EQ(DebugString(*(*c)->filter), "true") << q;
  }
}

}  // namespace
}  // namespace sediment::query

namespace sediment::query {
namespace {

TEST(RegexPrefilterQueryTest, RegexStepWithNamedGroupsFiltersOnceAndKeepsCaseBranches) {
  auto events = std::make_shared<std::vector<PositionedEvent>>();
  for (int i = 0; i < 100; ++i) {
    events->push_back(Ev(1000 + i, i % 3 == 0 ? "id=" + std::to_string(i) : "none", "v"));
  }
  ScanInput in;
  in.buffered.push_back(BufferedSource{Datasource{"r", {}}, PartitionId(0), events});
  auto count = [&](const std::string& q) {
    auto c = Compile(q);
    EXPECT_TRUE(c.ok()) << q;
    if (!c.ok()) return std::string("ERROR");
    auto r = Execute(Env::Default(), **c, TimeRange{0, 1'000'000}, in, ExecOptions{});
    EXPECT_TRUE(r.ok()) << q;
    if (!r.ok() || r->rows.size() != 1) return std::string("ERROR");
    for (const auto& [k, v] : r->rows[0]) {
      if (k == "_count") return std::to_string(std::get<int64_t>(v));
    }
    return std::string("ERROR");
  };
  // A /re/ step with named groups is a strict regex() stage: 34 events hold "id=<digits>".
  auto c = Compile(R"q(/id=(?<n>\d+)/ | count())q");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(DebugString(*(*c)->filter), R"q((text "id="))q");
  EXPECT_EQ(count(R"q(/id=(?<n>\d+)/ | count())q"), "34");
  EXPECT_EQ(count(R"q(/id=(?<n>\d+)/ | n=3 | count())q"), "1");
  // In a case branch the regex stays the branch's condition: the others take the '*' branch.
  EXPECT_EQ(count(R"q(case { /id=(?<n>\d+)/ ; * } | count())q"), "100");
  EXPECT_EQ(count(R"q(case { /id=(?<n>\d+)/ ; * } | n=* | count())q"), "34");
}

}  // namespace
}  // namespace sediment::query
