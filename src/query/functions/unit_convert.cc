// unit:convert(field, as, from, to, unit, binary=false, keepUnit=false): a value with a unit
// converted to another prefix of that unit ("514 ms" to 0.514 seconds, 4 KiB to 4096 bytes). A
// per-record stage.
//
// The value is a number (optional sign, decimals, exponent), optional white space, and a unit
// text. The unit text splits into a prefix and a base unit: with `unit` given, the text must end
// with `unit` and what precedes it is the prefix; otherwise a leading prefix is taken off when
// something follows it (`ms` is milli + `s`, `KiB` is kibi + `B`, `s` is just `s`; `min` is milli
// + `in`, as in LogScale, which is why `unit=min` exists). Prefixes: k/K, M, G, T, P, E, Z, Y
// (powers of 1000, or of 1024 with binary=true), the IEC Ki, Mi, Gi, Ti, Pi, Ei, Zi, Yi (always
// powers of 1024), m, u/µ/μ, n (10^-3, 10^-6, 10^-9). A value without a unit text takes its unit
// from `from` (split the same way; a lone prefix such as `k` is a prefix). `to` is the target: a
// prefix, a prefix followed by the base unit, or the base unit (no prefix); without `to` the
// value is normalized to no prefix. The result is a number (shortest text that reads back), with
// keepUnit=true followed by the target prefix and the base unit (`0.514s`). The output goes to
// `as`, by default the field itself. A missing field, a value that is no number, a unit text
// that does not end with `unit`, or a `to` naming another base unit sets nothing.
#include <cmath>
#include <optional>
#include <string>
#include <string_view>

#include "query/functions/list.h"
#include "query/functions/transforms.h"
#include "query/functions/util.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "field", .type = Type::kField, .unnamed = true, .required = true},
    {.name = "as", .type = Type::kField},
    {.name = "from", .type = Type::kString},
    {.name = "to", .type = Type::kString},
    {.name = "unit", .type = Type::kString},
    {.name = "binary", .type = Type::kBool, .default_value = "false"},
    {.name = "keepUnit", .type = Type::kBool, .default_value = "false"},
};

// A prefix as powers: value * 10^decimal * 2^binary.
struct Scale {
  int decimal = 0;
  int binary = 0;
};

// The byte length of the prefix at the start of `s` and its scale, or 0 when there is none.
size_t PrefixAt(std::string_view s, bool binary, Scale* scale) {
  static constexpr std::string_view kLarge = "kMGTPEZY";
  if (s.empty()) return 0;
  char c = s[0];
  if (c == 'K') c = 'k';
  if (size_t i = kLarge.find(c); i != std::string_view::npos) {
    const int n = static_cast<int>(i) + 1;
    if (s.size() >= 2 && s[1] == 'i') {
      *scale = {0, 10 * n};
      return 2;
    }
    *scale = binary ? Scale{0, 10 * n} : Scale{3 * n, 0};
    return 1;
  }
  if (c == 'm') {
    *scale = {-3, 0};
    return 1;
  }
  if (c == 'u') {
    *scale = {-6, 0};
    return 1;
  }
  if (s.starts_with("\xC2\xB5") || s.starts_with("\xCE\xBC")) {  // µ (micro sign), μ (mu)
    *scale = {-6, 0};
    return 2;
  }
  if (c == 'n') {
    *scale = {-9, 0};
    return 1;
  }
  return 0;
}

// `text` split into a prefix scale, its spelling and a base unit; nullopt when `unit` is given
// and `text` does not end with it, or the rest is not one prefix. `lone_prefix`: a text that is
// exactly a prefix is that prefix (from=, to=), else it is a unit (`m` meters in a value).
struct Unit {
  Scale scale;
  std::string prefix;
  std::string base;
};
std::optional<Unit> Split(std::string_view text, const std::string& unit, bool binary,
                          bool lone_prefix) {
  Unit u;
  if (!unit.empty()) {
    if (!text.ends_with(unit)) return std::nullopt;
    std::string_view p = text.substr(0, text.size() - unit.size());
    while (!p.empty() && (p.back() == ' ' || p.back() == '\t')) p.remove_suffix(1);
    u.base = unit;
    if (p.empty()) return u;
    if (PrefixAt(p, binary, &u.scale) != p.size()) return std::nullopt;
    u.prefix = std::string(p);
    return u;
  }
  const size_t n = PrefixAt(text, binary, &u.scale);
  if (n > 0 && (n < text.size() || lone_prefix)) {
    u.prefix = std::string(text.substr(0, n));
    u.base = std::string(text.substr(n));
  } else {
    u.scale = {};
    u.base = std::string(text);
  }
  return u;
}

// The number at the start of `s` (sign, digits, decimals, an exponent only when digits follow
// its 'e'); its length in *len, 0 when there is none.
std::optional<double> LeadingNumber(std::string_view s, size_t* len) {
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  size_t digits = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i, ++digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i, ++digits;
  }
  if (digits == 0) return std::nullopt;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    size_t j = i + 1;
    if (j < s.size() && (s[j] == '+' || s[j] == '-')) ++j;
    if (j < s.size() && s[j] >= '0' && s[j] <= '9') {
      while (j < s.size() && s[j] >= '0' && s[j] <= '9') ++j;
      i = j;
    }
  }
  std::optional<double> d = ParseNumber(s.substr(0, i));
  if (d) *len = i;
  return d;
}

// v * 10^decimal * 2^binary, multiplying or dividing by exact powers of ten.
double Rescale(double v, int decimal, int binary) {
  v = std::ldexp(v, binary);
  const double p = std::pow(10.0, std::abs(decimal));
  return decimal >= 0 ? v * p : v / p;
}

std::string_view TrimSpace(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

struct Options {
  std::string field, as, from, to, unit;
  bool has_from = false, has_to = false, binary = false, keep_unit = false;
};

void Convert(const Options& o, Record& r) {
  std::string scratch;
  std::optional<std::string_view> text = r.Get(o.field, &scratch);
  if (!text) return;
  std::string_view s = TrimSpace(*text);
  size_t len = 0;
  std::optional<double> value = LeadingNumber(s, &len);
  if (!value) return;
  std::string_view rest = TrimSpace(s.substr(len));
  std::optional<Unit> source;
  if (rest.empty()) {
    if (o.has_from) {
      source = Split(o.from, o.unit, o.binary, true);
    } else {
      source = Unit();
      source->base = o.unit;
    }
  } else {
    source = Split(rest, o.unit, o.binary, false);
  }
  if (!source) return;
  Unit target;
  target.base = source->base;
  if (o.has_to) {
    std::optional<Unit> t;
    if (!source->base.empty() && std::string_view(o.to).ends_with(source->base)) {
      t = Split(o.to, source->base, o.binary, true);
    } else {
      t = Split(o.to, "", o.binary, true);
      // `to` must be a prefix alone (of the source's base unit) or the base unit itself.
      if (t && !t->base.empty() && t->base != source->base) return;
      if (t && t->base.empty()) t->base = source->base;
    }
    if (!t) return;
    target = *t;
  }
  const double result = Rescale(*value, source->scale.decimal - target.scale.decimal,
                                source->scale.binary - target.scale.binary);
  if (!std::isfinite(result)) return;
  if (o.keep_unit) {
    r.Set(o.as, Value(FormatNumber(result) + target.prefix + target.base));
  } else if (FitsInt64(result)) {
    r.Set(o.as, Value(static_cast<int64_t>(result)));
  } else {
    r.Set(o.as, Value(result));
  }
}

bool Build(Call& c, Stage* st) {
  Options o;
  o.field = c.String("field");
  o.as = c.Given("as") ? c.String("as") : o.field;
  o.from = c.String("from");
  o.has_from = c.Given("from");
  o.to = c.String("to");
  o.has_to = c.Given("to");
  o.unit = c.String("unit");
  o.binary = c.Bool("binary");
  o.keep_unit = c.Bool("keepUnit");
  if (o.has_to && o.to.empty()) {
    c.BadParam("to", "a unit or a unit prefix");
    return false;
  }
  if (o.has_from && o.from.empty()) {
    c.BadParam("from", "a unit or a unit prefix");
    return false;
  }
  std::vector<std::string> touched = {o.field, o.as};
  SetRecordFunction(
      st,
      [o](Record& r) {
        Convert(o, r);
        return true;
      },
      std::move(touched));
  return true;
}

}  // namespace

const Function kUnitConvert = {
    .name = "unit:convert",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "a value with a unit converted to another prefix of the unit",
    .stage = &Build,
};

}  // namespace sediment::query::functions
