// math:spherical2cartesian(azimuth, polar, radius=1.0, as=_spherical2cartesian): the cartesian
// coordinates of a point given in spherical coordinates (degrees), written to as.x, as.y and
// as.z. A per-record stage.
//
// z is the up axis; the azimuth is measured from the x axis in the xy plane and the polar angle
// from the xy plane (so a geographic longitude and latitude): x = r cos(polar) cos(azimuth),
// y = r cos(polar) sin(azimuth), z = r sin(polar). Polar 90 gives (0, 0, 1); both angles 0 give
// (1, 0, 0): multiples of 90 degrees have exact sines and cosines. Each of azimuth, polar and
// radius is a number or the name of a field holding one. Choices where LogScale's documentation
// leaves room: a missing or non-numeric input sets nothing.
#include <cmath>
#include <numbers>
#include <optional>
#include <string>
#include <vector>

#include "query/functions/list.h"
#include "query/functions/transforms.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "azimuth", .type = Type::kString, .required = true},
    {.name = "polar", .type = Type::kString, .required = true},
    {.name = "radius", .type = Type::kString, .default_value = "1.0"},
    {.name = "as", .type = Type::kField, .default_value = "_spherical2cartesian"},
};

// A number written in the query, or a field read per record.
struct Operand {
  std::optional<double> constant;
  std::string field;
  std::optional<double> Read(const Record& r) const {
    return constant ? constant : r.GetNumber(field);
  }
};

bool OperandOf(Call& c, std::string_view param, Operand* out) {
  const std::string& text = c.String(param);
  if (text.empty()) {
    c.BadParam(param, "a number or a field name");
    return false;
  }
  const ArgValue* v = c.Value(param);
  out->constant = v != nullptr && v->quoted ? std::nullopt : ParseNumber(text);
  if (!out->constant) out->field = text;
  return true;
}

// sin and cos of `deg` degrees, exact at multiples of 90.
void SinCosDegrees(double deg, double* s, double* c) {
  const double reduced = std::fmod(deg, 360.0);
  if (reduced == std::trunc(reduced / 90.0) * 90.0) {
    static constexpr double kSin[] = {0, 1, 0, -1};
    const int quarter = (static_cast<int>(reduced / 90.0) % 4 + 4) % 4;
    *s = kSin[quarter];
    *c = kSin[(quarter + 1) % 4];
    return;
  }
  const double rad = deg * std::numbers::pi / 180.0;
  *s = std::sin(rad);
  *c = std::cos(rad);
}

bool Build(Call& c, Stage* st) {
  Operand azimuth, polar, radius;
  if (!OperandOf(c, "azimuth", &azimuth) || !OperandOf(c, "polar", &polar) ||
      !OperandOf(c, "radius", &radius)) {
    return false;
  }
  const std::string as = c.String("as");
  std::vector<std::string> touched = {as + ".x", as + ".y", as + ".z"};
  for (const Operand* o : {&azimuth, &polar, &radius}) {
    if (!o->constant) touched.push_back(o->field);
  }
  SetRecordFunction(
      st,
      [azimuth, polar, radius, as](Record& r) {
        std::optional<double> a = azimuth.Read(r), p = polar.Read(r), rad = radius.Read(r);
        if (!a || !p || !rad) return true;
        double sin_a, cos_a, sin_p, cos_p;
        SinCosDegrees(*a, &sin_a, &cos_a);
        SinCosDegrees(*p, &sin_p, &cos_p);
        const double x = *rad * cos_p * cos_a, y = *rad * cos_p * sin_a, z = *rad * sin_p;
        if (!std::isfinite(x) || !std::isfinite(y) || !std::isfinite(z)) return true;
        r.Set(as + ".x", Value(x));
        r.Set(as + ".y", Value(y));
        r.Set(as + ".z", Value(z));
        return true;
      },
      std::move(touched));
  return true;
}

}  // namespace

const Function kMathSpherical2Cartesian = {
    .name = "math:spherical2cartesian",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "the cartesian coordinates of a point in spherical coordinates",
    .stage = &Build,
};

}  // namespace sediment::query::functions
