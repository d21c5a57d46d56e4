// The registry's own consistency, and FUNCTIONS.md checked against it: a function registered
// without its section (or a parameter without its row), or documented without being registered,
// fails here.
#include "query/functions/registry.h"

#include <gtest/gtest.h>

#include <cctype>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "query/text_util.h"

namespace sediment::query::functions {
namespace {

#ifndef SEDIMENT_QUERY_FUNCTIONS_MD
#error "SEDIMENT_QUERY_FUNCTIONS_MD must name src/query/FUNCTIONS.md"
#endif

std::string ReadFunctionsMd() {
  std::ifstream in(SEDIMENT_QUERY_FUNCTIONS_MD);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Also ':' for the namespaced names (math:abs).
bool IsIdentChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':';
}

// The functions a `### ` heading documents: the identifiers directly followed by '(' outside
// parentheses and backquotes ("sum(field, as=_sum), avg(field, as=_avg)" -> sum, avg;
// "stats(function=[count()]) and `[f1(), f2()]`" -> stats).
std::vector<std::string> HeadingFunctions(const std::string& heading) {
  std::vector<std::string> out;
  int depth = 0;
  bool quoted = false;
  for (size_t i = 0; i < heading.size(); ++i) {
    char c = heading[i];
    if (c == '`') quoted = !quoted;
    if (quoted) continue;
    if (c == '(') {
      if (depth == 0) {
        size_t b = i;
        while (b > 0 && IsIdentChar(heading[b - 1])) --b;
        if (b < i) out.push_back(heading.substr(b, i - b));
      }
      ++depth;
    } else if (c == ')') {
      --depth;
    }
  }
  return out;
}

struct Doc {
  // Function name -> the text of every `###` section documenting it (heading included).
  std::map<std::string, std::string> sections;
  std::string expressions;  // the "## Expressions" section
};

Doc ParseDoc(const std::string& md) {
  Doc doc;
  std::istringstream in(md);
  std::string line;
  std::vector<std::string> current;  // functions of the open ### section
  bool in_expressions = false;
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) {
      current.clear();
      in_expressions = line == "## Expressions";
    } else if (line.rfind("### ", 0) == 0) {
      current = HeadingFunctions(line.substr(4));
    }
    for (const std::string& f : current) doc.sections[f] += line + "\n";
    if (in_expressions) doc.expressions += line + "\n";
  }
  return doc;
}

// The line of `section` describing parameter `name`: its table row ("| `name` ..."), else a line
// starting with it ("`fields` (*unnamed*, required): ..."), else the first line naming it in
// backquotes ("Not supported: `type`."); "" when none does.
std::string ParamLine(const std::string& section, const std::string& name) {
  const std::string quoted = "`" + name + "`";
  for (const std::string& start : {"| " + quoted, quoted, std::string()}) {
    std::istringstream in(section);
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("### ", 0) == 0) continue;
      if (start.empty() ? line.find(quoted) != std::string::npos : line.rfind(start, 0) == 0) {
        return line;
      }
    }
  }
  return "";
}

// The expression functions the Expressions table lists: `name(` at the start of a backquoted
// span in the first column of its rows.
std::set<std::string> ExpressionFunctions(const std::string& section) {
  std::set<std::string> out;
  std::istringstream in(section);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("| `", 0) != 0) continue;
    std::string cell = line.substr(1, line.find('|', 1) - 1);
    for (size_t i = cell.find('`'); i != std::string::npos; i = cell.find('`', i + 1)) {
      size_t e = i + 1;
      while (e < cell.size() && IsIdentChar(cell[e])) ++e;
      if (e < cell.size() && cell[e] == '(' && e > i + 1) out.insert(cell.substr(i + 1, e - i - 1));
      i = cell.find('`', i + 1);  // skip the closing quote
      if (i == std::string::npos) break;
    }
  }
  return out;
}

TEST(FunctionsMdTest, EveryRegisteredFunctionAndParameterIsDocumented) {
  std::string md = ReadFunctionsMd();
  ASSERT_FALSE(md.empty()) << SEDIMENT_QUERY_FUNCTIONS_MD;
  Doc doc = ParseDoc(md);
  std::set<std::string> expressions = ExpressionFunctions(doc.expressions);
  for (const Function* f : All()) {
    if (f->kind == Kind::kExpression) {
      EXPECT_TRUE(expressions.count(f->name)) << f->name << "() missing from ## Expressions";
      if (f->camel != nullptr) {
        EXPECT_NE(doc.expressions.find(std::string("`") + f->camel + "`"), std::string::npos)
            << f->camel;
      }
      continue;
    }
    auto it = doc.sections.find(f->name);
    if (it == doc.sections.end()) {
      ADD_FAILURE() << f->name << "() has no ### section in FUNCTIONS.md";
      continue;
    }
    for (const Param& p : f->params) {
      std::string line = ParamLine(it->second, p.name);
      if (line.empty()) {
        ADD_FAILURE() << "parameter `" << p.name << "` of " << f->name
                      << "() is not in its FUNCTIONS.md section";
        continue;
      }
      if (p.unnamed) {
        EXPECT_NE(line.find(std::string("`") + p.name + "` (*unnamed*"), std::string::npos)
            << f->name << "(" << p.name << "): not marked (*unnamed*): " << line;
      }
      if (p.required) {
        EXPECT_NE(line.find("required"), std::string::npos)
            << f->name << "(" << p.name << "): not marked required: " << line;
      }
      if (p.default_value != nullptr) {
        EXPECT_NE(line.find(std::string("`") + p.default_value + "`"), std::string::npos)
            << f->name << "(" << p.name << "): default `" << p.default_value
            << "` not documented: " << line;
      }
    }
  }
}

TEST(FunctionsMdTest, EveryDocumentedFunctionIsRegistered) {
  Doc doc = ParseDoc(ReadFunctionsMd());
  ASSERT_FALSE(doc.sections.empty());
  for (const auto& [name, section] : doc.sections) {
    const Function* f = FindPipelineFunction(name);
    EXPECT_TRUE(f != nullptr && name == f->name)
        << name << "() is documented in FUNCTIONS.md but not registered (functions/list.h)";
  }
  std::set<std::string> expressions = ExpressionFunctions(doc.expressions);
  ASSERT_FALSE(expressions.empty());
  for (const std::string& name : expressions) {
    const Function* f = FindExpressionFunction(name);
    EXPECT_TRUE(f != nullptr && name == f->name)
        << name << "() is in FUNCTIONS.md's Expressions but not registered";
  }
}

TEST(FunctionsMdTest, HeadingFunctions) {
  EXPECT_EQ(HeadingFunctions("sum(field, as=_sum), avg(field, as=_avg)"),
            (std::vector<std::string>{"sum", "avg"}));
  EXPECT_EQ(HeadingFunctions("stats(function=[count()]) and `[f1(), f2()]`"),
            (std::vector<std::string>{"stats"}));
  EXPECT_EQ(HeadingFunctions("math:abs(field, as=_abs), text:length(string)"),
            (std::vector<std::string>{"math:abs", "text:length"}));
  EXPECT_EQ(HeadingFunctions("case { condition | stages ; ... ; * | stages }"),
            (std::vector<std::string>{}));
}

TEST(RegistryTest, TablesAreConsistent) {
  std::set<std::string> pipeline, expression;
  for (const Function* f : All()) {
    ASSERT_NE(f->name, nullptr);
    EXPECT_NE(std::string(f->doc), "") << f->name;
    std::set<std::string>& names = f->kind == Kind::kExpression ? expression : pipeline;
    EXPECT_TRUE(names.insert(Lower(f->name)).second) << "registered twice: " << f->name;
    switch (f->kind) {
      case Kind::kFilter:
        EXPECT_NE(f->filter, nullptr) << f->name;
        break;
      case Kind::kAggregate:
        EXPECT_NE(f->metric, nullptr) << f->name;
        EXPECT_NE(f->stage, nullptr) << f->name;
        break;
      case Kind::kTransform:
      case Kind::kCollector:
        EXPECT_NE(f->stage, nullptr) << f->name;
        break;
      case Kind::kExpression:
        EXPECT_TRUE(f->max_args < 0 || f->max_args >= f->min_args) << f->name;
        break;
    }
    int unnamed = 0;
    std::set<std::string> params;
    for (const Param& p : f->params) {
      unnamed += p.unnamed ? 1 : 0;
      EXPECT_TRUE(params.insert(Lower(p.name)).second) << f->name << "(" << p.name << ")";
      EXPECT_FALSE(p.required && p.default_value != nullptr) << f->name << "(" << p.name << ")";
      if (p.default_value != nullptr) {
        ArgValue v;
        EXPECT_TRUE(ParseArgumentValue(p.default_value, &v)) << f->name << "(" << p.name << ")";
      }
    }
    EXPECT_LE(unnamed, 1) << f->name;
  }
}

// Every default converts to its parameter's type (a function without required parameters binds
// with no arguments at all).
TEST(RegistryTest, DefaultsBind) {
  for (const Function* f : All()) {
    if (f->kind == Kind::kExpression || f->syntax != Syntax::kArguments) continue;
    bool any_required = false;
    for (const Param& p : f->params) any_required |= p.required;
    if (any_required) continue;
    Status err;
    Call call(*f, 0, &err);
    EXPECT_TRUE(call.Bind({})) << f->name << ": " << err.ToString();
  }
}

// ---- Call::Bind: the generic checks, on a function of every parameter type ----

constexpr Param kProbeParams[] = {
    {.name = "field", .type = Type::kField, .unnamed = true, .required = true},
    {.name = "fields", .type = Type::kFields, .default_value = "[a, b]"},
    {.name = "flag", .type = Type::kBool, .default_value = "true"},
    {.name = "limit", .type = Type::kLimit, .default_value = "7", .max = 100, .max_alias = true},
    {.name = "span", .type = Type::kSpan, .default_value = "auto"},
    {.name = "percentiles", .type = Type::kPercentiles, .default_value = "[50, 99.9]"},
    {.name = "function", .type = Type::kMetrics, .default_value = "count()"},
    {.name = "camelName", .type = Type::kString},
    {.name = "raw", .type = Type::kRaw},
    {.name = "legacy", .type = Type::kUnsupported},
};
bool ProbeStage(Call&, Stage*) { return true; }
const Function kProbe = {
    .name = "probe",
    .kind = Kind::kTransform,
    .params = kProbeParams,
    .doc = "test",
    .stage = &ProbeStage,
};

// Binds the arguments of `call_text` (e.g. "x, limit=3") to kProbe at position 0; the error
// message ("" when it binds) and the bound call.
struct Bound {
  Status err;
  std::vector<Arg> args;
  std::unique_ptr<Call> call;
  bool ok = false;
};
std::unique_ptr<Bound> BindProbe(const std::string& call_text) {
  auto b = std::make_unique<Bound>();
  ArgValue v;
  EXPECT_TRUE(ParseArgumentValue("probe(" + call_text + ")", &v)) << call_text;
  b->args = std::move(v.args);
  b->call = std::make_unique<Call>(kProbe, 0, &b->err);
  b->ok = b->call->Bind(b->args);
  EXPECT_EQ(b->ok, b->err.ok());
  return b;
}
std::string BindError(const std::string& call_text) { return BindProbe(call_text)->err.message(); }

TEST(RegistryTest, BindConvertsGivenValuesAndDefaults) {
  auto b = BindProbe("x, limit=max, span=5min, camelname=\"q\"");
  ASSERT_TRUE(b->ok) << b->err.ToString();
  Call& c = *b->call;
  EXPECT_EQ(c.String("field"), "x");
  EXPECT_TRUE(c.Given("field"));
  EXPECT_EQ(c.Fields("fields"), (std::vector<std::string>{"a", "b"}));
  EXPECT_FALSE(c.Given("fields"));
  EXPECT_TRUE(c.Bool("flag"));
  EXPECT_EQ(c.Limit("limit"), 100);
  EXPECT_EQ(c.Limit("span"), 5 * 60 * 1000);
  EXPECT_EQ(c.Percentiles("percentiles"), (std::vector<double>{50, 99.9}));
  std::vector<Metric> metrics = c.TakeMetrics("function");
  ASSERT_EQ(metrics.size(), 1u);
  EXPECT_EQ(metrics[0].kind, Metric::Kind::kCount);
  EXPECT_EQ(c.String("camelName"), "q");
  EXPECT_EQ(c.Value("raw"), nullptr);
}

// A list parameter that is the unnamed one takes several positional values as one list
// (LogScale's `groupBy(a, b)`, `readFile("x", "y")`), lists among them flattened; a named value
// after positional ones is still given twice.
constexpr Param kListProbeParams[] = {
    {.name = "fields", .type = Type::kFields, .unnamed = true, .required = true},
    {.name = "limit", .type = Type::kLimit},
};
const Function kListProbe = {
    .name = "listprobe",
    .kind = Kind::kTransform,
    .params = kListProbeParams,
    .doc = "test",
    .stage = &ProbeStage,
};

TEST(RegistryTest, PositionalValuesOfAListParameterMakeOneList) {
  auto bind = [](const std::string& text, std::vector<std::string>* fields) {
    ArgValue v;
    EXPECT_TRUE(ParseArgumentValue("listprobe(" + text + ")", &v)) << text;
    Status err;
    Call call(kListProbe, 0, &err);
    if (call.Bind(v.args)) *fields = call.Fields("fields");
    return err.ok() ? std::string() : err.message();
  };
  std::vector<std::string> fields;
  EXPECT_EQ(bind("a, b, \"c d\"", &fields), "");
  EXPECT_EQ(fields, (std::vector<std::string>{"a", "b", "c d"}));
  EXPECT_EQ(bind("[a, b], c, limit=3, [d]", &fields), "");
  EXPECT_EQ(fields, (std::vector<std::string>{"a", "b", "c", "d"}));
  EXPECT_EQ(bind("a", &fields), "");
  EXPECT_EQ(fields, (std::vector<std::string>{"a"}));
  EXPECT_EQ(bind("a, b, fields=c", &fields),
            "parameter 'fields' of listprobe() given twice at position 16");
  EXPECT_EQ(bind("fields=a, b", &fields),
            "parameter 'fields' of listprobe() given twice at position 20");
  EXPECT_EQ(bind("a, \"\"", &fields),
            "invalid value '' for parameter 'fields' of listprobe(): expected a field name at "
            "position 13");
}

TEST(RegistryTest, BindErrors) {
  EXPECT_EQ(BindError("x, y"), "parameter 'field' of probe() given twice at position 9");
  EXPECT_EQ(BindError("x, bogus=1"), "unknown parameter 'bogus' for probe() at position 9");
  EXPECT_EQ(BindError("x, legacy=1"),
            "parameter 'legacy' of probe() is not supported at position 9");
  EXPECT_EQ(BindError("limit=1"), "missing required parameter 'field' for probe() at position 0");
  EXPECT_EQ(BindError("x, limit=101"),
            "invalid value '101' for parameter 'limit' of probe(): expected a non-negative "
            "integer up to 100 or max at position 15");
  // Values are checked in table order, whatever the order of the arguments.
  EXPECT_EQ(BindError("x, limit=-1, flag=maybe"),
            "invalid value 'maybe' for parameter 'flag' of probe(): expected true or false at "
            "position 24");
  EXPECT_EQ(BindError("x, fields=[a, \"\"]"),
            "invalid value '' for parameter 'fields' of probe(): expected a field name at "
            "position 20");
  EXPECT_EQ(BindError("x, function=[count(), nope()]"),
            "unknown aggregate function 'nope' in probe(function=...) at position 28");
  EXPECT_EQ(BindError("x, percentiles=[101]"),
            "invalid value '101' for parameter 'percentiles' of probe(): expected a number "
            "between 0 and 100 at position 22");
  EXPECT_EQ(BindError("x, span=1month"),
            "invalid value '1month' for parameter 'span' of probe(): expected a time span such "
            "as 1m, 5min, 1h, 30s, 1d, 100ms, or auto at position 14");
  EXPECT_EQ(BindError("x, raw=[anything]"), "");  // kRaw: the factory's business
}

}  // namespace
}  // namespace sediment::query::functions
