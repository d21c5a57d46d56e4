// stripAnsiCodes(field=@rawstring, as): a field's text without its ANSI escape sequences (colors,
// cursor movement). A per-record stage.
//
// Removed: CSI sequences (ESC `[`, parameter bytes 0x30-0x3F, intermediate bytes 0x20-0x2F, one
// final byte 0x40-0x7E, e.g. `ESC[93;41m`), OSC sequences (ESC `]` up to BEL or ESC `\`), and the
// other escapes (ESC, intermediate bytes 0x20-0x2F, one final byte 0x30-0x7E, e.g. `ESC(B`,
// `ESC7`). An ESC that starts none of these is removed alone; an unterminated sequence is
// removed to the end. The output goes to `as`, by default the field itself (LogScale's example
// `stripAnsiCodes(message)` cleans `message`); a missing field sets nothing.
#include <string>
#include <string_view>
#include <vector>

#include "query/functions/list.h"
#include "query/functions/transforms.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "field", .type = Type::kField, .unnamed = true, .default_value = "@rawstring"},
    {.name = "as", .type = Type::kField},
};

constexpr char kEsc = '\x1b';

bool In(char c, int lo, int hi) {
  const int u = static_cast<unsigned char>(c);
  return u >= lo && u <= hi;
}

std::string Strip(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] != kEsc) {
      out.push_back(s[i++]);
      continue;
    }
    ++i;  // ESC
    if (i >= s.size()) break;
    if (s[i] == '[') {
      ++i;
      while (i < s.size() && In(s[i], 0x30, 0x3F)) ++i;
      while (i < s.size() && In(s[i], 0x20, 0x2F)) ++i;
      if (i < s.size() && In(s[i], 0x40, 0x7E)) ++i;
    } else if (s[i] == ']') {
      ++i;
      while (i < s.size() && s[i] != '\x07' &&
             !(s[i] == kEsc && i + 1 < s.size() && s[i + 1] == '\\')) {
        ++i;
      }
      if (i < s.size()) i += s[i] == '\x07' ? 1 : 2;
    } else {
      while (i < s.size() && In(s[i], 0x20, 0x2F)) ++i;
      if (i < s.size() && In(s[i], 0x30, 0x7E)) ++i;
    }
  }
  return out;
}

bool Build(Call& c, Stage* st) {
  std::string field = c.String("field");
  std::string as = c.Given("as") ? c.String("as") : field;
  std::vector<std::string> touched = {field, as};
  SetRecordFunction(
      st,
      [field, as](Record& r) {
        std::string scratch;
        if (std::optional<std::string_view> v = r.Get(field, &scratch)) r.Set(as, Value(Strip(*v)));
        return true;
      },
      std::move(touched));
  return true;
}

}  // namespace

const Function kStripAnsiCodes = {
    .name = "stripAnsiCodes",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "a field's text without ANSI escape sequences",
    .stage = &Build,
};

}  // namespace sediment::query::functions
