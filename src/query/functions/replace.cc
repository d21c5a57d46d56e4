// replace(regex, with, replacement, field=@rawstring, as, flags=m): every match of a regular
// expression in a field replaced. A per-record stage.
//
// The replacement is Java-style, as LogScale's: `$1` / `${name}` insert a group, `\$` and `\\`
// are a literal `$` and `\`. Without `as` the field is replaced in place. A missing field is
// left alone. `with` and `replacement` are the same parameter (giving both is a 400).
#include <re2/re2.h>

#include <memory>
#include <string>
#include <vector>

#include "query/functions/list.h"
#include "query/functions/transforms.h"
#include "query/functions/util.h"
#include "query/transform.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "regex", .type = Type::kString, .unnamed = true, .required = true},
    {.name = "with", .type = Type::kString},
    {.name = "replacement", .type = Type::kString},
    {.name = "field", .type = Type::kField, .default_value = "@rawstring"},
    {.name = "as", .type = Type::kField},
    {.name = "flags", .type = Type::kString, .default_value = "m"},
};

// The RE2 rewrite string of a Java replacement; "" in *err when it is valid.
std::string Rewrite(std::string_view java, const re2::RE2& re, std::string* err) {
  std::string out;
  for (size_t i = 0; i < java.size(); ++i) {
    const char ch = java[i];
    if (ch == '\\') {
      if (i + 1 >= java.size()) {
        *err = "a '\\' ends the replacement";
        return "";
      }
      const char lit = java[++i];
      if (lit == '\\')
        out += "\\\\";
      else
        out.push_back(lit);
      continue;
    }
    if (ch != '$') {
      out.push_back(ch);
      continue;
    }
    if (i + 1 < java.size() && java[i + 1] == '{') {
      const size_t close = java.find('}', i + 2);
      if (close == std::string_view::npos) {
        *err = "an unclosed '${'";
        return "";
      }
      const std::string name(java.substr(i + 2, close - i - 2));
      auto it = re.NamedCapturingGroups().find(name);
      if (it == re.NamedCapturingGroups().end()) {
        *err = "no group named '" + name + "'";
        return "";
      }
      out += "\\" + std::to_string(it->second);
      i = close;
      continue;
    }
    size_t j = i + 1;
    if (j >= java.size() || java[j] < '0' || java[j] > '9') {
      *err = "a '$' not followed by a group";
      return "";
    }
    // Java reads as many digits as still name a group.
    int group = java[j] - '0';
    ++j;
    while (j < java.size() && java[j] >= '0' && java[j] <= '9' &&
           group * 10 + (java[j] - '0') <= re.NumberOfCapturingGroups()) {
      group = group * 10 + (java[j] - '0');
      ++j;
    }
    if (group > re.NumberOfCapturingGroups()) {
      *err = "no group " + std::to_string(group);
      return "";
    }
    out += "\\" + std::to_string(group);
    i = j - 1;
  }
  return out;
}

bool Build(Call& c, Stage* st) {
  if (c.Given("with") && c.Given("replacement")) {
    c.BadParam("replacement", "either with or replacement, not both");
    return false;
  }
  const std::string& with = c.Given("with") ? c.String("with") : c.String("replacement");
  std::shared_ptr<const re2::RE2> re = RegexWithFlags(c, /*plain_to_noncapturing=*/false);
  if (!re) return false;
  std::string error;
  std::string rewrite = Rewrite(with, *re, &error);
  if (!error.empty()) {
    c.BadParam(c.Given("with") ? "with" : "replacement", "a replacement (" + error + ")");
    return false;
  }
  std::string field = c.String("field");
  std::string as = c.Given("as") ? c.String("as") : field;
  std::vector<std::string> touched = {field, as};
  SetRecordFunction(
      st,
      [re, rewrite = std::move(rewrite), field = std::move(field), as = std::move(as)](Record& r) {
        std::string scratch;
        std::optional<std::string_view> v = r.Get(field, &scratch);
        if (!v) return true;
        std::string text(*v);
        RE2::GlobalReplace(&text, ThreadLocalRegex(re), rewrite);
        r.Set(as, Value(std::move(text)));
        return true;
      },
      std::move(touched));
  return true;
}

}  // namespace

const Function kReplace = {
    .name = "replace",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "replaces every match of a regular expression in a field",
    .stage = &Build,
};

}  // namespace sediment::query::functions
