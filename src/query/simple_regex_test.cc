#include "query/simple_regex.h"

#include <gtest/gtest.h>
#include <re2/re2.h>

#include <random>
#include <string>
#include <vector>

namespace sediment::query {
namespace {

// RE2's answer for `re` in `text` from `at` (anchored or not), as spans.
bool Re2Match(const re2::RE2& re, std::string_view text, size_t at, bool anchored,
              std::vector<SimpleRegex::Span>* out) {
  const int n = re.NumberOfCapturingGroups() + 1;
  std::vector<re2::StringPiece> sub(static_cast<size_t>(n));
  const re2::StringPiece input(text.data(), text.size());
  if (!re.Match(input, at, text.size(), anchored ? re2::RE2::ANCHOR_START : re2::RE2::UNANCHORED,
                sub.data(), n)) {
    return false;
  }
  out->assign(static_cast<size_t>(n), SimpleRegex::Span{});
  for (int k = 0; k < n; ++k) {
    if (sub[k].data() == nullptr) continue;
    (*out)[k].begin = sub[k].data() - text.data();
    (*out)[k].end = (*out)[k].begin + static_cast<int64_t>(sub[k].size());
  }
  return true;
}

std::string Spans(const std::vector<SimpleRegex::Span>& v) {
  std::string s;
  for (const auto& x : v) s += "[" + std::to_string(x.begin) + "," + std::to_string(x.end) + ")";
  return s;
}

// Compares SimpleRegex with RE2 for `pattern` over `text`: Search from 0 and MatchAt at every
// position. Returns how many of the answers were not kUnknown.
int Compare(const re2::RE2& re, const SimpleRegex& s, std::string_view text) {
  int known = 0;
  const size_t n = static_cast<size_t>(s.captures()) + 1;
  std::vector<SimpleRegex::Span> caps(n), want;
  for (int mode = 0; mode < 2; ++mode) {
    for (size_t at = 0; at <= text.size(); ++at) {
      if (mode == 0 && at > 0) break;
      const bool anchored = mode == 1;
      const SimpleRegex::Outcome o =
          anchored ? s.MatchAt(text, at, caps.data()) : s.Search(text, at, caps.data());
      if (o == SimpleRegex::Outcome::kUnknown) continue;
      ++known;
      const bool matched = Re2Match(re, text, at, anchored, &want);
      EXPECT_EQ(o == SimpleRegex::Outcome::kMatch, matched)
          << "pattern " << re.pattern() << " text '" << text << "' at " << at
          << (anchored ? " anchored" : " search");
      if (matched && o == SimpleRegex::Outcome::kMatch) {
        EXPECT_EQ(Spans(caps), Spans(want)) << "pattern " << re.pattern() << " text '" << text
                                            << "' at " << at << (anchored ? " anchored" : "");
      }
    }
  }
  return known;
}

TEST(SimpleRegexTest, ExtractionPatternsAreInTheSubsetAndAgreeWithRe2) {
  const std::vector<std::string> patterns = {
      R"re((?m)" (?P<status>\d{3}) )re",
      R"re((?m)(?P<ip>\d+\.\d+\.\d+\.\d+) - (?P<user>\S+))re",
      R"re(user=(?P<user>\w+))re",
      R"re((?P<method>[A-Z]+) (?P<path>[^ "]*) HTTP/(?P<v>[0-9.]+))re",
      R"re((?s)a.*?b(?P<x>c?))re",
      R"re((?:ab)(?P<x>x*)y)re",
      R"re((?P<a>a*)(?P<b>a*)a)re",
      R"re(x(?P<a>\s+|))re",  // alternation: not in the subset
  };
  const std::vector<std::string> texts = {
      R"re(127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] "GET /a.gif HTTP/1.0" 200 2326)re",
      R"re(10.1.2.3 - - "POST /x HTTP/1.1" 500 0 user=bob)re",
      "aaa",
      "",
      "abxcy",
      "a\nb c",
      "abxxy",
      "\"\" 12 \" 123 ",
  };
  int compiled = 0;
  for (const std::string& p : patterns) {
    re2::RE2 re(p);
    ASSERT_TRUE(re.ok()) << p;
    auto s = SimpleRegex::Compile(re);
    if (p.find('|') != std::string::npos) {
      EXPECT_EQ(s, nullptr) << p;
      continue;
    }
    ASSERT_NE(s, nullptr) << p;
    ++compiled;
    // Only the status code's pattern takes a fixed number of bytes after its leading literals.
    EXPECT_EQ(s->fixed(), p.find("status") != std::string::npos) << p;
    for (const std::string& t : texts) {
      const int known = Compare(re, *s, t);
      EXPECT_GT(known, 0) << p << " on ASCII text '" << t << "' was never decided";
    }
  }
  EXPECT_EQ(compiled, 7);
}

TEST(SimpleRegexTest, OutsideTheSubsetIsNull) {
  for (const char* p : {"^a", "a$", "a|b", "(?i)a", "\\bword", "(ab)+", "(?:ab)*", "[[:alpha:]]",
                        "\\pL", "é", "a{", "\\x41", "(?U)a*", "[\\D]"}) {
    re2::RE2 re(p);
    if (!re.ok()) continue;
    EXPECT_EQ(SimpleRegex::Compile(re), nullptr) << p;
  }
  re2::RE2::Options latin1;
  latin1.set_encoding(re2::RE2::Options::EncodingLatin1);
  EXPECT_EQ(SimpleRegex::Compile(re2::RE2("a", latin1)), nullptr);
  re2::RE2::Options longest;
  longest.set_longest_match(true);
  EXPECT_EQ(SimpleRegex::Compile(re2::RE2("a*", longest)), nullptr);
}

TEST(SimpleRegexTest, NonAsciiWhereANegatedClassCouldTakeItIsLeftToRe2) {
  re2::RE2 re("(?P<x>[^ ]{2}) ");
  auto s = SimpleRegex::Compile(re);
  ASSERT_NE(s, nullptr);
  SimpleRegex::Span caps[2];
  // RE2 takes "é" (two bytes) as one character of [^ ]{2}: only RE2 may answer.
  EXPECT_EQ(s->Search("aé b", 0, caps), SimpleRegex::Outcome::kUnknown);
  // A positive class never takes such bytes: decided.
  re2::RE2 digits("(?P<d>\\d+)");
  auto d = SimpleRegex::Compile(digits);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->Search("é12", 0, caps), SimpleRegex::Outcome::kMatch);
  EXPECT_EQ(caps[1].begin, 2);
  EXPECT_EQ(caps[1].end, 4);
}

TEST(SimpleRegexTest, TooMuchBacktrackingIsUnknown) {
  re2::RE2 re("(?P<a>a*)(?P<b>a*)(?P<c>a*)(?P<d>a*)b");
  auto s = SimpleRegex::Compile(re);
  ASSERT_NE(s, nullptr);
  SimpleRegex::Span caps[5];
  EXPECT_EQ(s->MatchAt(std::string(200, 'a'), 0, caps), SimpleRegex::Outcome::kUnknown);
}

// Random patterns of the subset (and around it) against random texts over a small alphabet, with
// RE2 as the reference.
// A fixed match of up to 64 bytes is checked with a table of allowed bytes per offset; a longer
// one byte by byte. Both sides of that line, with a wrong byte at every offset, agree with RE2.
TEST(SimpleRegexTest, LongFixedPatternsAgreeWithRe2) {
  for (int digits : {61, 62, 63, 70}) {
    const std::string p = "x(?P<a>\\d{" + std::to_string(digits) + "})(?P<b>[a-c]) ";
    re2::RE2 re(p);
    ASSERT_TRUE(re.ok());
    auto s = SimpleRegex::Compile(re);
    ASSERT_NE(s, nullptr);
    ASSERT_TRUE(s->fixed()) << p;
    const std::string good = "x" + std::string(static_cast<size_t>(digits), '7') + "b ";
    int matches = 0;
    for (size_t wrong = 0; wrong <= good.size(); ++wrong) {
      std::string text = "zz" + good + "q";
      if (wrong < good.size()) text[2 + wrong] = wrong == good.size() - 1 ? 'y' : '$';
      Compare(re, *s, text);
      std::vector<SimpleRegex::Span> caps(3);
      matches += s->MatchFixedAt(text, 2, caps.data()) == SimpleRegex::Outcome::kMatch;
    }
    EXPECT_EQ(matches, 1) << p;  // the text without a wrong byte only
  }
}

TEST(SimpleRegexTest, RandomPatternsAgreeWithRe2) {
  std::mt19937 rng(42);
  const std::vector<std::string> atoms = {"a",    "b",    "\\d",    "\\w",   "\\s",  ".",
                                          "[ab]", "[^a]", "[a-c]",  "\\.",   "\\\"", " ",
                                          "\\S",  "\\D",  "[0-9x]", "[^ \"]"};
  const std::vector<std::string> quants = {"",      "",     "",   "*",  "+",  "?",     "{2}",
                                           "{1,3}", "{0,}", "*?", "+?", "??", "{1,2}?"};
  const std::string alphabet = "ab1 \".\nxc";
  int compiled = 0, known = 0, fixed = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string p;
    if (rng() % 4 == 0) p += "(?s)";
    int open = 0;
    const int len = 1 + static_cast<int>(rng() % 6);
    for (int k = 0; k < len; ++k) {
      const unsigned r = rng() % 10;
      if (r == 0) {
        p += rng() % 2 ? "(?P<g" + std::to_string(k) + ">" : "(?:";
        ++open;
        continue;
      }
      if (r == 1 && open > 0) {
        p += ")";
        --open;
        continue;
      }
      p += atoms[rng() % atoms.size()] + quants[rng() % quants.size()];
    }
    for (; open > 0; --open) p += ")";
    re2::RE2 re(p, re2::RE2::Quiet);
    if (!re.ok()) continue;
    auto s = SimpleRegex::Compile(re);
    if (s == nullptr) continue;
    ++compiled;
    fixed += s->fixed() ? 1 : 0;
    for (int t = 0; t < 4; ++t) {
      std::string text;
      const int tl = static_cast<int>(rng() % 12);
      for (int c = 0; c < tl; ++c) text += alphabet[rng() % alphabet.size()];
      if (t == 3) text += "\xc3\xa9z";  // a two-byte character
      known += Compare(re, *s, text);
    }
    if (HasFailure()) break;
  }
  EXPECT_GT(compiled, 1500);
  EXPECT_GT(known, 20000);
  EXPECT_GT(fixed, 150);  // patterns decided by the one-pass path (SimpleRegex::MatchFixedAt)
}

}  // namespace
}  // namespace sediment::query
