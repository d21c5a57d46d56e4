// kvParse's scanner (kv_parse.cc) against a reference: the character-at-a-time scanner it
// replaced (which copied every quoted run, key or not), kept here verbatim in behaviour. Both must
// give the same pairs for any text, and KvParseFindsPairs must say whether there is one.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "query/functions/registry.h"
#include "query/transform.h"

namespace sediment::query::functions {
namespace {

using Pairs = std::vector<std::pair<std::string, std::string>>;

bool RefDelimiter(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' || c == ',';
}

bool RefQuoted(std::string_view s, size_t* i, std::string* out) {
  const char q = s[*i];
  std::string v;
  for (size_t k = *i + 1; k < s.size(); ++k) {
    const char c = s[k];
    if (c == '\\' && k + 1 < s.size() && (s[k + 1] == q || s[k + 1] == '\\')) {
      v.push_back(s[++k]);
    } else if (c == q) {
      *i = k + 1;
      *out = std::move(v);
      return true;
    } else {
      v.push_back(c);
    }
  }
  return false;
}

Pairs RefPairs(std::string_view s) {
  Pairs out;
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    while (i < n && RefDelimiter(s[i])) ++i;
    if (i >= n) break;
    std::string key;
    if (s[i] == '"' || s[i] == '\'') {
      size_t k = i;
      const bool closed = RefQuoted(s, &k, &key);
      if (!closed || k >= n || s[k] != '=') {
        i = closed ? k : i + 1;
        continue;
      }
      i = k;
    } else {
      const size_t start = i;
      while (i < n && s[i] != '=' && !RefDelimiter(s[i])) ++i;
      if (i >= n || s[i] != '=') continue;
      key.assign(s.substr(start, i - start));
    }
    ++i;
    std::string value;
    if (i < n && (s[i] == '"' || s[i] == '\'') && RefQuoted(s, &i, &value)) {
    } else {
      const size_t start = i;
      while (i < n && !RefDelimiter(s[i])) ++i;
      value.assign(s.substr(start, i - start));
    }
    if (!key.empty()) out.emplace_back(std::move(key), std::move(value));
  }
  return out;
}

// kvParse(override=true) on a record holding only @rawstring = text: its fields after the parse.
Row RunKvParse(std::string_view text) {
  const Function* fn = FindPipelineFunction("kvParse");
  EXPECT_NE(fn, nullptr);
  Status err;
  Call call(*fn, 0, &err);
  Arg a;
  a.name = "override";
  EXPECT_TRUE(ParseArgumentValue("true", &a.value));
  Stage st;
  EXPECT_TRUE(call.Bind({a}) && fn->stage(call, &st)) << err.ToString();
  std::vector<Record> out;
  ApplyTransform(st, Record::FromRow({{"@rawstring", Value(std::string(text))}}, RecordKey{}),
                 &out);
  EXPECT_EQ(out.size(), 1u);
  return out.empty() ? Row{} : out[0].ToRow();
}

// What the reference pairs make of the same record (override=true: every pair is set, the last
// of a repeated key wins).
Row Expected(std::string_view text) {
  Record r = Record::FromRow({{"@rawstring", Value(std::string(text))}}, RecordKey{});
  for (auto& [k, v] : RefPairs(text)) r.Set(k, Value(v));
  return r.ToRow();
}

TEST(KvParse, ScannerGivesTheReferencePairs) {
  const std::vector<std::string> cases = {
      "",
      "a=1 b=2",
      "a=1,b=2 , c=",
      "=x a==b",
      "\"k\"=v 'q k'='v w' x",
      "\"\"=empty ''=x",
      "k=\"unclosed value",
      "\"unclosed key=v",
      "k=\"esc \\\" q\" j='a\\'b\\\\c\\d'",
      "127.0.0.1 - - [10/Oct/2000:13:55:36 -0700] \"GET /a?b=c HTTP/1.0\" 200 2326 \"-\" \"UA\"",
      "x \"a\"=\"b\"=c",
      "a=b\tc=d\ne=f\rg=h\fi=j\vk=l",
      "k='\\'",
      "k=\"a\\\\\" m=n",
  };
  for (const std::string& s : cases) {
    EXPECT_EQ(RunKvParse(s), Expected(s)) << s;
    EXPECT_EQ(KvParseFindsPairs(s), !RefPairs(s).empty()) << s;
  }
}

TEST(KvParse, ScannerMatchesTheReferenceOnRandomText) {
  // Short strings over the characters the scanner treats specially.
  const std::string alphabet = "ab=\"'\\ ,\t";
  std::mt19937 rng(16);
  int with_pairs = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string s(rng() % 14, ' ');
    for (char& c : s) c = alphabet[rng() % alphabet.size()];
    const Pairs ref = RefPairs(s);
    with_pairs += ref.empty() ? 0 : 1;
    ASSERT_EQ(KvParseFindsPairs(s), !ref.empty()) << s;
    ASSERT_EQ(RunKvParse(s), Expected(s)) << s;
  }
  // Both outcomes are exercised.
  EXPECT_GT(with_pairs, 2000);
  EXPECT_LT(with_pairs, 18000);
}

}  // namespace
}  // namespace sediment::query::functions
