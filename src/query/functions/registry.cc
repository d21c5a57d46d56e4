// The registry's lookups and the generic binding of a call's arguments (see registry.h).
#include "query/functions/registry.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "query/functions/util.h"
#include "query/record.h"
#include "query/text_util.h"

namespace sediment::query::functions {
namespace {

// Whether `given` spells `name` (as documented or all lower-case).
bool Spells(std::string_view given, const char* name) {
  return given == name || given == Lower(name);
}

std::string LimitExpectation(const Param& p) {
  std::string expected = "a non-negative integer";
  if (p.max != kNoMax) expected += " up to " + std::to_string(p.max);
  if (p.max_alias) expected += " or max";
  return expected;
}

}  // namespace

// ---- lookups ----

const Function* FindPipelineFunction(std::string_view name) {
  for (const Function* f : All()) {
    if (f->kind != Kind::kExpression && Spells(name, f->name)) return f;
  }
  return nullptr;
}

const Function* FindAggregate(std::string_view name) {
  for (const Function* f : All()) {
    if (f->metric != nullptr && Spells(name, f->name)) return f;
  }
  return nullptr;
}

const Function* FindExpressionFunction(std::string_view name) {
  for (const Function* f : All()) {
    if (f->kind == Kind::kExpression &&
        (name == f->name || (f->camel != nullptr && name == f->camel))) {
      return f;
    }
  }
  return nullptr;
}

// ---- values ----

std::string ValueText(const ArgValue& v) {
  switch (v.kind) {
    case ArgValue::Kind::kScalar:
      return v.text;
    case ArgValue::Kind::kList:
      return "[...]";
    case ArgValue::Kind::kCall:
      return v.text + "()";
    case ArgValue::Kind::kSubquery:
      return "{...}";
    case ArgValue::Kind::kExpr:
      return v.text;
  }
  return "";
}

std::vector<const ArgValue*> ItemsOf(const ArgValue& v) {
  std::vector<const ArgValue*> items;
  if (v.kind == ArgValue::Kind::kList) {
    for (const ArgValue& item : v.list) items.push_back(&item);
  } else {
    items.push_back(&v);
  }
  return items;
}

void RecordError(Status* err, size_t at, const std::string& msg) {
  if (err->ok()) *err = Status::InvalidArgument(msg + " at position " + std::to_string(at));
}

namespace {

// Sets the position of `v` and everything in it to `at` (defaults point at the function name).
void PlaceAt(ArgValue* v, size_t at) {
  v->position = at;
  for (ArgValue& item : v->list) PlaceAt(&item, at);
  for (Arg& a : v->args) {
    a.position = at;
    PlaceAt(&a.value, at);
  }
}

}  // namespace

// ---- Call ----

Call::Call(const Function& fn, size_t position, Status* err)
    : fn_(&fn), name_(fn.name), position_(position), err_(err) {
  bound_.resize(fn.params.size());
  for (size_t i = 0; i < fn.params.size(); ++i) bound_[i].param = &fn.params[i];
  defaults_.reserve(fn.params.size());
}

void Call::Error(size_t at, const std::string& msg) { RecordError(err_, at, msg); }

void Call::BadValue(std::string_view param, const ArgValue& v, const std::string& expected) {
  Error(v.position, "invalid value '" + ValueText(v) + "' for parameter '" + std::string(param) +
                        "' of " + name_ + "(): expected " + expected);
}

void Call::BadParam(std::string_view param, const std::string& expected) {
  BadValue(param, *Find(param)->value, expected);
}

Call::Bound* Call::Find(std::string_view param) {
  for (Bound& b : bound_) {
    if (param == b.param->name) return &b;
  }
  // A factory asking for a parameter its table lacks: a programming error, never data.
  std::fprintf(stderr, "query function %s() has no parameter '%.*s'\n", name_.c_str(),
               static_cast<int>(param.size()), param.data());
  std::abort();
}
const Call::Bound* Call::Find(std::string_view param) const {
  return const_cast<Call*>(this)->Find(param);
}

bool Call::Given(std::string_view param) const { return Find(param)->arg != nullptr; }
const Arg* Call::GivenArg(std::string_view param) const { return Find(param)->arg; }
const ArgValue* Call::Value(std::string_view param) const { return Find(param)->value; }
ExprPtr Call::Expression(std::string_view param) const { return Find(param)->expr; }
const std::vector<ExprPtr>& Call::Expressions(std::string_view param) const {
  return Find(param)->exprs;
}
const std::string& Call::String(std::string_view param) const { return Find(param)->text; }
const std::vector<std::string>& Call::Fields(std::string_view param) const {
  return Find(param)->fields;
}
bool Call::Bool(std::string_view param) const { return Find(param)->flag; }
int64_t Call::Limit(std::string_view param) const { return Find(param)->number; }
const std::vector<double>& Call::Percentiles(std::string_view param) const {
  return Find(param)->percentiles;
}
std::vector<Metric> Call::TakeMetrics(std::string_view param) {
  return std::move(Find(param)->metrics);
}

bool Call::Bind(const std::vector<functions::Arg>& args) {
  for (const functions::Arg& a : args) {
    Bound* b = nullptr;
    if (a.name.empty()) {
      for (Bound& x : bound_) {
        if (x.param->unnamed) b = &x;
      }
      if (b == nullptr) {
        Error(a.position, name_ + "() takes no unnamed argument");
        return false;
      }
    } else {
      for (Bound& x : bound_) {
        if (x.param->type != Type::kUnsupported && Spells(a.name, x.param->name)) b = &x;
      }
      if (b == nullptr) {
        for (const Bound& x : bound_) {
          if (x.param->type == Type::kUnsupported && Spells(a.name, x.param->name)) {
            Error(a.position, "parameter '" + std::string(x.param->name) + "' of " + name_ +
                                  "() is not supported");
            return false;
          }
        }
        Error(a.position, "unknown parameter '" + a.name + "' for " + name_ + "()");
        return false;
      }
    }
    if (b->arg != nullptr && a.name.empty() && b->arg->name.empty() &&
        b->param->type == Type::kFields) {
      // Several positional values of a list parameter make one list, as LogScale reads
      // `groupBy(a, b)` and `readFile("x", "y")`.
      if (combined_.empty() || b->value != &combined_.back()) {
        ArgValue list;
        list.kind = ArgValue::Kind::kList;
        list.position = b->value->position;
        for (const ArgValue* v : ItemsOf(*b->value)) list.list.push_back(*v);
        combined_.push_back(std::move(list));
        b->value = &combined_.back();
      }
      for (const ArgValue* v : ItemsOf(a.value)) combined_.back().list.push_back(*v);
      continue;
    }
    if (b->arg != nullptr) {
      Error(a.position,
            "parameter '" + std::string(b->param->name) + "' of " + name_ + "() given twice");
      return false;
    }
    b->arg = &a;
    b->value = &a.value;
  }
  for (const Bound& b : bound_) {
    if (b.param->required && b.arg == nullptr) {
      Error(position_,
            "missing required parameter '" + std::string(b.param->name) + "' for " + name_ + "()");
      return false;
    }
  }
  for (Bound& b : bound_) {
    if (b.arg == nullptr && b.param->default_value != nullptr) {
      ArgValue v;
      if (!ParseArgumentValue(b.param->default_value, &v)) {
        Error(position_, "internal error: bad default of parameter '" + std::string(b.param->name) +
                             "' of " + name_ + "()");
        return false;
      }
      PlaceAt(&v, position_);
      defaults_.push_back(std::move(v));
      b.value = &defaults_.back();
    }
    if (b.value != nullptr && !Convert(&b)) return false;
  }
  return true;
}

bool Call::ConvertBool(std::string_view param, bool* out) {
  const ArgValue* v = Value(param);
  if (v == nullptr) return true;
  std::string s = Lower(v->text);
  if (v->kind == ArgValue::Kind::kScalar && (s == "true" || s == "false")) {
    *out = s == "true";
    return true;
  }
  BadParam(param, "true or false");
  return false;
}

bool Call::ConvertField(std::string_view param, std::string* out) {
  const ArgValue* v = Value(param);
  if (v == nullptr) return true;
  if (v->kind != ArgValue::Kind::kScalar || v->text.empty()) {
    BadParam(param, "a field name");
    return false;
  }
  *out = v->text;
  return true;
}

bool Call::ConvertFields(std::string_view param, std::vector<std::string>* out) {
  const ArgValue* v = Value(param);
  if (v == nullptr) return true;
  std::vector<std::string> fields;
  if (v->kind == ArgValue::Kind::kScalar && !v->text.empty()) {
    fields.push_back(v->text);
  } else if (v->kind == ArgValue::Kind::kList && !v->list.empty()) {
    for (const ArgValue& item : v->list) {
      if (item.kind != ArgValue::Kind::kScalar || item.text.empty()) {
        BadValue(param, item, "a field name");
        return false;
      }
      fields.push_back(item.text);
    }
  } else {
    BadParam(param, "a field name or a list of field names");
    return false;
  }
  *out = std::move(fields);
  return true;
}

// The expression a kExpr value stands for: the one the parser read, or a literal or field
// written as a plain value (a default, or a value the parser read before knowing the function);
// null for any other value.
ExprPtr ExpressionOf(const ArgValue& v) {
  if (v.kind == ArgValue::Kind::kExpr) return v.expr;
  if (v.kind != ArgValue::Kind::kScalar) return nullptr;
  auto e = std::make_shared<Expr>();
  e->text = v.text;
  e->position = v.position;
  if (v.quoted) {
    e->kind = Expr::Kind::kString;
  } else if (std::optional<double> n = ParseNumber(v.text)) {
    e->kind = Expr::Kind::kNumber;
    e->number = *n;
  } else {
    e->kind = Expr::Kind::kField;
  }
  return e;
}

// Converts b->value (not null) by b->param->type.
bool Call::Convert(Bound* b) {
  const ArgValue& v = *b->value;
  const Param& p = *b->param;
  switch (p.type) {
    case Type::kString:
      if (v.kind != ArgValue::Kind::kScalar) {
        BadParam(p.name, "a string");
        return false;
      }
      b->text = v.text;
      return true;
    case Type::kField:
      return ConvertField(p.name, &b->text);
    case Type::kFields:
      return ConvertFields(p.name, &b->fields);
    case Type::kBool:
      return ConvertBool(p.name, &b->flag);
    case Type::kLimit: {
      if (v.kind == ArgValue::Kind::kScalar) {
        if (p.max_alias && EqualsIgnoreCase(v.text, "max")) {
          b->number = p.max;
          return true;
        }
        int64_t n = 0;
        const char* begin = v.text.data();
        const char* end = begin + v.text.size();
        auto [ptr, ec] = std::from_chars(begin, end, n);
        if (ec == std::errc() && ptr == end && n >= 0 && n <= p.max) {
          b->number = n;
          return true;
        }
      }
      BadParam(p.name, LimitExpectation(p));
      return false;
    }
    case Type::kSpan:
      if (v.kind == ArgValue::Kind::kScalar) {
        if (EqualsIgnoreCase(v.text, "auto")) {
          b->number = 0;
          return true;
        }
        if (std::optional<int64_t> ms = ParseSpan(v.text)) {
          b->number = *ms;
          return true;
        }
      }
      BadParam(p.name, "a time span such as 1m, 5min, 1h, 30s, 1d, 100ms, or auto");
      return false;
    case Type::kPercentiles: {
      std::vector<const ArgValue*> items = ItemsOf(v);
      if (items.empty()) {
        BadParam(p.name, "a list of percentiles between 0 and 100");
        return false;
      }
      std::vector<double> values;
      for (const ArgValue* item : items) {
        std::optional<double> x;
        if (item->kind == ArgValue::Kind::kScalar) x = ParseNumber(item->text);
        if (!x || *x < 0 || *x > 100) {
          BadValue(p.name, *item, "a number between 0 and 100");
          return false;
        }
        values.push_back(*x);
      }
      b->percentiles = std::move(values);
      return true;
    }
    case Type::kMetrics:
      return MetricsFrom(v, name_ + "(" + p.name + "=...)", err_, &b->metrics);
    case Type::kExpr:
      b->expr = ExpressionOf(v);
      if (!b->expr) BadParam(p.name, "an expression");
      return b->expr != nullptr;
    case Type::kExprs:
      b->exprs.clear();
      for (const ArgValue* item : ItemsOf(v)) {
        ExprPtr e = ExpressionOf(*item);
        if (!e) {
          BadValue(p.name, *item, "an expression");
          return false;
        }
        b->exprs.push_back(std::move(e));
      }
      return true;
    case Type::kRaw:
    case Type::kUnsupported:
      return true;
  }
  return true;
}

// ---- metrics ----

namespace {

// The metric(s) of a subquery in `context`: the plain metrics when it is one ungrouped aggregate
// (`{count()}`, `{[sum(x), avg(y)]}`), else one kSubquery metric. False (error recorded) when it
// has no collecting stage.
bool SubqueryMetrics(const std::shared_ptr<const Subquery>& sq, size_t position,
                     const std::string& context, Status* err, std::vector<Metric>* out) {
  if (sq->collect >= sq->stages.size()) {
    RecordError(
        err, position,
        "a subquery in " + context + " needs an aggregate function such as count() (it has none)");
    return false;
  }
  const Stage& first = sq->stages[sq->collect];
  if (sq->stages.size() == 1 && first.kind == Stage::Kind::kAggregate &&
      first.grouping == Stage::Grouping::kNone) {
    out->insert(out->end(), first.metrics.begin(), first.metrics.end());
    return true;
  }
  Metric m;
  m.kind = Metric::Kind::kSubquery;
  m.position = position;
  m.subquery = sq;
  out->push_back(std::move(m));
  return true;
}

}  // namespace

bool MetricsFrom(const ArgValue& v, const std::string& context, Status* err,
                 std::vector<Metric>* metrics) {
  std::vector<Metric> out;
  for (const ArgValue* c : ItemsOf(v)) {
    if (c->kind == ArgValue::Kind::kSubquery) {
      if (!SubqueryMetrics(c->subquery, c->position, context, err, &out)) return false;
      continue;
    }
    if (c->kind != ArgValue::Kind::kCall) {
      RecordError(err, c->position,
                  "expected an aggregate function such as count() in " + context + " but found '" +
                      ValueText(*c) + "'");
      return false;
    }
    const Function* f = FindAggregate(c->text);
    if (f == nullptr) {
      // A collecting function (groupBy, head, tail, sort, table, top, timeChart, ...) nested in
      // function=: the subquery `{ f(...) }`.
      const Function* pf = FindPipelineFunction(c->text);
      if (pf != nullptr && pf->kind == Kind::kCollector && pf->stage != nullptr) {
        Call call(*pf, c->position, err);
        if (std::string_view(pf->name) == "window") {
          // window(): its metrics (marked Metric::window_*) join the enclosing aggregate's.
          Stage st;
          if (!call.Bind(c->args) || !pf->stage(call, &st)) return false;
          for (Metric& m : st.metrics) out.push_back(std::move(m));
          continue;
        }
        auto sq = std::make_shared<Subquery>();
        sq->position = c->position;
        Stage st;
        st.position = c->position;
        st.function = pf->name;
        if (!call.Bind(c->args) || !pf->stage(call, &st)) return false;
        sq->collect = st.IsTransform() ? 1 : 0;
        sq->stages.push_back(std::move(st));
        if (!SubqueryMetrics(sq, c->position, context, err, &out)) return false;
        continue;
      }
      RecordError(err, c->position, "unknown aggregate function '" + c->text + "' in " + context);
      return false;
    }
    Call call(*f, c->position, err);
    Metric m;
    m.position = c->position;
    if (!call.Bind(c->args) || !f->metric(call, &m)) return false;
    out.push_back(std::move(m));
  }
  *metrics = std::move(out);
  return true;
}

bool CheckMetricNames(const std::vector<Metric>& metrics, const std::string& fn, Status* err) {
  std::vector<std::string> seen;
  for (const Metric& m : metrics) {
    for (const std::string& n : MetricOutputNames(m)) {
      if (std::find(seen.begin(), seen.end(), n) != seen.end()) {
        RecordError(
            err, m.position,
            "duplicate output field '" + n + "' in " + fn + "() (use as= to name the results)");
        return false;
      }
      seen.push_back(n);
    }
  }
  return true;
}

Metric CountMetric(size_t position) {
  Metric m;
  m.kind = Metric::Kind::kCount;
  m.position = position;
  return m;
}

bool MetricAsStage(Call& c, Stage* st) {
  st->kind = Stage::Kind::kAggregate;
  st->grouping = Stage::Grouping::kNone;
  Metric m;
  m.position = c.position();
  if (!c.fn().metric(c, &m)) return false;
  st->metrics = {std::move(m)};
  return true;
}

bool SetMetrics(Call& c, std::string_view param, Stage* st) {
  st->metrics = c.TakeMetrics(param);
  if (st->metrics.empty()) st->metrics = {CountMetric(c.position())};
  return CheckMetricNames(st->metrics, c.name(), c.err());
}

}  // namespace sediment::query::functions
