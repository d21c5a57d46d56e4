// The math:* family: math:abs(field, as=_abs), math:ceil, math:floor, ... (one numeric field into
// one field), math:pow(field, exponent, as=_pow) (the exponent a number or a field) and
// math:arctan2(x, y, as=_arctan2), math:mod(field, divisor, as=_mod). Per-record stages, registered
// with their namespaced names.
//
// Choices where LogScale's documentation leaves room: a missing or non-numeric input, or a result
// that is not a finite number (math:sqrt(-1), math:log(0)), sets nothing; abs/ceil/floor of an
// integer, and ceil/floor results, are integers, every other result a double.
#include <cmath>
#include <limits>
#include <numbers>
#include <string>

#include "query/functions/list.h"
#include "query/functions/transforms.h"

namespace sediment::query::functions {
namespace {

double Abs(double x) { return std::fabs(x); }
double Deg2Rad(double x) { return x * std::numbers::pi / 180.0; }
double Rad2Deg(double x) { return x * 180.0 / std::numbers::pi; }

// Sets `as` to `d` when it is finite; integral results of integral functions as int64.
void SetNumber(Record& r, const std::string& as, double d, bool integral) {
  if (!std::isfinite(d)) return;
  if (integral && FitsInt64(d)) {
    r.Set(as, Value(static_cast<int64_t>(d)));
  } else {
    r.Set(as, Value(d));
  }
}

std::optional<Value> Numeric(const Record& r, const std::string& field) {
  std::optional<Value> v = r.GetValue(field);
  if (!v) return std::nullopt;
  if (const auto* s = std::get_if<std::string>(&*v)) {
    if (std::optional<int64_t> i = ParseInt(*s)) return Value(*i);
    if (std::optional<double> d = ParseNumber(*s)) return Value(*d);
    return std::nullopt;
  }
  return v;
}

double AsDouble(const Value& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  return std::get<double>(v);
}

// F(x); kIntegral: the result of an integral argument is the argument's own kind (abs, ceil,
// floor).
template <double (*F)(double), bool kIntegral>
bool BuildUnary(Call& c, Stage* st) {
  std::string field = c.String("field");
  std::string as = c.String("as");
  std::vector<std::string> touched = {field, as};
  SetRecordFunction(
      st,
      [field, as](Record& r) {
        std::optional<Value> v = Numeric(r, field);
        if (!v) return true;
        if (const auto* i = std::get_if<int64_t>(&*v); i != nullptr && kIntegral) {
          if (F == &Abs) {
            if (*i == std::numeric_limits<int64_t>::min()) return true;
            r.Set(as, Value(*i < 0 ? -*i : *i));
          } else {
            r.Set(as, Value(*i));
          }
          return true;
        }
        SetNumber(r, as, F(AsDouble(*v)), kIntegral);
        return true;
      },
      std::move(touched));
  return true;
}

bool BuildPow(Call& c, Stage* st) {
  // The exponent: a number, or the name of a field holding one (math:pow(x, exponent=exp)).
  const std::string& exponent = c.String("exponent");
  std::optional<double> fixed = ParseNumber(exponent);
  std::string exponent_field = fixed ? std::string() : exponent;
  std::string field = c.String("field");
  std::string as = c.String("as");
  std::vector<std::string> touched = {field, as};
  if (!fixed) touched.push_back(exponent_field);
  SetRecordFunction(
      st,
      [field, as, fixed, exponent_field](Record& r) {
        std::optional<Value> v = Numeric(r, field);
        if (!v) return true;
        double e = 0;
        if (fixed) {
          e = *fixed;
        } else {
          std::optional<Value> ev = Numeric(r, exponent_field);
          if (!ev) return true;
          e = AsDouble(*ev);
        }
        const double d = std::pow(AsDouble(*v), e);
        SetNumber(r, as, d, std::holds_alternative<int64_t>(*v) && e >= 0 && e == std::trunc(e));
        return true;
      },
      std::move(touched));
  return true;
}

bool BuildArctan2(Call& c, Stage* st) {
  std::string x = c.String("x"), y = c.String("y"), as = c.String("as");
  std::vector<std::string> touched = {x, y, as};
  SetRecordFunction(
      st,
      [x, y, as](Record& r) {
        std::optional<Value> vx = Numeric(r, x), vy = Numeric(r, y);
        if (vx && vy) SetNumber(r, as, std::atan2(AsDouble(*vy), AsDouble(*vx)), false);
        return true;
      },
      std::move(touched));
  return true;
}

// math:mod: the floor modulus of floor(field) and floor(divisor) (the result has the divisor's
// sign: -7 mod 3 is 2), an integer. The divisor is a number, not 0 after flooring.
bool BuildMod(Call& c, Stage* st) {
  std::optional<double> d = ParseNumber(c.String("divisor"));
  if (!d || !FitsInt64(std::floor(*d)) || std::floor(*d) == 0) {
    c.BadParam("divisor", "a number whose floor is a non-zero integer");
    return false;
  }
  const int64_t divisor = static_cast<int64_t>(std::floor(*d));
  std::string field = c.String("field");
  std::string as = c.String("as");
  std::vector<std::string> touched = {field, as};
  SetRecordFunction(
      st,
      [field, as, divisor](Record& r) {
        std::optional<Value> v = Numeric(r, field);
        if (!v) return true;
        const double x = std::floor(AsDouble(*v));
        if (!FitsInt64(x)) return true;
        const int64_t xi = static_cast<int64_t>(x);
        if (divisor == -1) {
          r.Set(as, Value(int64_t{0}));
          return true;
        }
        int64_t m = xi % divisor;
        if (m != 0 && ((m < 0) != (divisor < 0))) m += divisor;
        r.Set(as, Value(m));
        return true;
      },
      std::move(touched));
  return true;
}

constexpr Param kModParams[] = {
    {.name = "field", .type = Type::kField, .unnamed = true, .required = true},
    {.name = "divisor", .type = Type::kField, .required = true},
    {.name = "as", .type = Type::kField, .default_value = "_mod"},
};
constexpr Param kPowParams[] = {
    {.name = "field", .type = Type::kField, .unnamed = true, .required = true},
    {.name = "exponent", .type = Type::kField, .required = true},
    {.name = "as", .type = Type::kField, .default_value = "_pow"},
};
constexpr Param kArctan2Params[] = {
    {.name = "x", .type = Type::kField, .required = true},
    {.name = "y", .type = Type::kField, .required = true},
    {.name = "as", .type = Type::kField, .default_value = "_arctan2"},
};

}  // namespace

#define SEDIMENT_MATH_UNARY(var, fname, out, fn, integral, text)                  \
  namespace {                                                                     \
  constexpr Param var##Params[] = {                                               \
      {.name = "field", .type = Type::kField, .unnamed = true, .required = true}, \
      {.name = "as", .type = Type::kField, .default_value = out},                 \
  };                                                                              \
  }                                                                               \
  const Function var = {                                                          \
      .name = fname,                                                              \
      .kind = Kind::kTransform,                                                   \
      .params = var##Params,                                                      \
      .doc = text,                                                                \
      .stage = &BuildUnary<fn, integral>,                                         \
  };

namespace {
double Ceil(double x) { return std::ceil(x); }
double Floor(double x) { return std::floor(x); }
double Sqrt(double x) { return std::sqrt(x); }
double Cbrt(double x) { return std::cbrt(x); }
double Exp(double x) { return std::exp(x); }
double Expm1(double x) { return std::expm1(x); }
double Log(double x) { return std::log(x); }
double Log10(double x) { return std::log10(x); }
double Log2(double x) { return std::log2(x); }
double Log1p(double x) { return std::log1p(x); }
double Sin(double x) { return std::sin(x); }
double Cos(double x) { return std::cos(x); }
double Tan(double x) { return std::tan(x); }
double Asin(double x) { return std::asin(x); }
double Acos(double x) { return std::acos(x); }
double Atan(double x) { return std::atan(x); }
double Sinh(double x) { return std::sinh(x); }
double Cosh(double x) { return std::cosh(x); }
double Tanh(double x) { return std::tanh(x); }
}  // namespace

SEDIMENT_MATH_UNARY(kMathAbs, "math:abs", "_abs", Abs, true, "the absolute value")
SEDIMENT_MATH_UNARY(kMathCeil, "math:ceil", "_ceil", Ceil, true, "rounded up")
SEDIMENT_MATH_UNARY(kMathFloor, "math:floor", "_floor", Floor, true, "rounded down")
SEDIMENT_MATH_UNARY(kMathSqrt, "math:sqrt", "_sqrt", Sqrt, false, "the square root")
SEDIMENT_MATH_UNARY(kMathCbrt, "math:cbrt", "_cbrt", Cbrt, false, "the cube root")
SEDIMENT_MATH_UNARY(kMathExp, "math:exp", "_exp", Exp, false, "e to the power of a field")
SEDIMENT_MATH_UNARY(kMathExpm1, "math:expm1", "_expm1", Expm1, false, "e to a power, minus 1")
SEDIMENT_MATH_UNARY(kMathLog, "math:log", "_log", Log, false, "the natural logarithm")
SEDIMENT_MATH_UNARY(kMathLog10, "math:log10", "_log10", Log10, false, "the base-10 logarithm")
SEDIMENT_MATH_UNARY(kMathLog2, "math:log2", "_log2", Log2, false, "the base-2 logarithm")
SEDIMENT_MATH_UNARY(kMathLog1p, "math:log1p", "_log1p", Log1p, false, "the logarithm of 1 + x")
SEDIMENT_MATH_UNARY(kMathSin, "math:sin", "_sin", Sin, false, "the sine")
SEDIMENT_MATH_UNARY(kMathCos, "math:cos", "_cos", Cos, false, "the cosine")
SEDIMENT_MATH_UNARY(kMathTan, "math:tan", "_tan", Tan, false, "the tangent")
SEDIMENT_MATH_UNARY(kMathArcsin, "math:arcsin", "_arcsin", Asin, false, "the arc sine")
SEDIMENT_MATH_UNARY(kMathArccos, "math:arccos", "_arccos", Acos, false, "the arc cosine")
SEDIMENT_MATH_UNARY(kMathArctan, "math:arctan", "_arctan", Atan, false, "the arc tangent")
SEDIMENT_MATH_UNARY(kMathSinh, "math:sinh", "_sinh", Sinh, false, "the hyperbolic sine")
SEDIMENT_MATH_UNARY(kMathCosh, "math:cosh", "_cosh", Cosh, false, "the hyperbolic cosine")
SEDIMENT_MATH_UNARY(kMathTanh, "math:tanh", "_tanh", Tanh, false, "the hyperbolic tangent")
SEDIMENT_MATH_UNARY(kMathDeg2Rad, "math:deg2rad", "_deg2rad", Deg2Rad, false, "degrees to radians")
SEDIMENT_MATH_UNARY(kMathRad2Deg, "math:rad2deg", "_rad2deg", Rad2Deg, false, "radians to degrees")

#undef SEDIMENT_MATH_UNARY

const Function kMathPow = {
    .name = "math:pow",
    .kind = Kind::kTransform,
    .params = kPowParams,
    .doc = "a field raised to a power",
    .stage = &BuildPow,
};
const Function kMathMod = {
    .name = "math:mod",
    .kind = Kind::kTransform,
    .params = kModParams,
    .doc = "the floor modulus of a field and a divisor",
    .stage = &BuildMod,
};
const Function kMathArctan2 = {
    .name = "math:arctan2",
    .kind = Kind::kTransform,
    .params = kArctan2Params,
    .doc = "the angle of the point (x, y)",
    .stage = &BuildArctan2,
};

}  // namespace sediment::query::functions
