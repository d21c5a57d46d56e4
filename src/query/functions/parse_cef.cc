// parseCEF(field=@rawstring, prefix="cef.ext.", headerprefix="cef."): a Common Event Format
// (version 0) message becomes fields. A per-record stage.
//
// Any text before the marker `CEF:` is skipped. The seven header values (`\|` and `\\` escaped)
// become <headerprefix>version, device.vendor, device.product, device.version, event_class_id,
// name, severity (LogScale does not list its names; these follow the CEF specification's). The
// extension's key=value pairs (separated by spaces or tabs; a value runs up to the next
// ` key=`; `\=`, `\\`, `\n`, `\r` unescaped; trailing blanks dropped) become <prefix><key>.
// A text without the marker or with fewer than seven header values is left as it is.
#include <string>
#include <vector>

#include "query/functions/list.h"
#include "query/functions/transforms.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "field", .type = Type::kField, .unnamed = true, .default_value = "@rawstring"},
    {.name = "prefix", .type = Type::kString, .default_value = "\"cef.ext.\""},
    {.name = "headerprefix", .type = Type::kString, .default_value = "\"cef.\""},
    {.name = "keeplabels", .type = Type::kUnsupported},
    {.name = "labelprefix", .type = Type::kUnsupported},
};

constexpr const char* kHeader[] = {"version",        "device.vendor",  "device.product",
                                   "device.version", "event_class_id", "name",
                                   "severity"};

bool IsKeyChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '[' || c == ']' || c == '-';
}
bool IsBlank(char c) { return c == ' ' || c == '\t'; }

// Whether a key followed by '=' starts at s[i].
bool KeyAt(std::string_view s, size_t i) {
  size_t k = i;
  while (k < s.size() && IsKeyChar(s[k])) ++k;
  return k > i && k < s.size() && s[k] == '=';
}

bool ParseCef(std::string_view s, std::vector<std::pair<std::string, std::string>>* header,
              std::vector<std::pair<std::string, std::string>>* ext) {
  const size_t at = s.find("CEF:");
  if (at == std::string_view::npos) return false;
  size_t i = at + 4;
  std::string cur;
  std::vector<std::string> values;
  for (; i < s.size() && values.size() < 7; ++i) {
    const char c = s[i];
    if (c == '\\' && i + 1 < s.size() && (s[i + 1] == '|' || s[i + 1] == '\\')) {
      cur.push_back(s[++i]);
    } else if (c == '|') {
      values.push_back(std::move(cur));
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  if (values.size() < 7) return false;
  for (size_t k = 0; k < 7; ++k) {
    std::string_view v = values[k];
    while (!v.empty() && IsBlank(v.front())) v.remove_prefix(1);
    while (!v.empty() && IsBlank(v.back())) v.remove_suffix(1);
    header->emplace_back(kHeader[k], std::string(v));
  }
  // Extension.
  while (i < s.size()) {
    while (i < s.size() && IsBlank(s[i])) ++i;
    if (!KeyAt(s, i)) {
      // Not a key: skip the word.
      while (i < s.size() && !IsBlank(s[i])) ++i;
      continue;
    }
    const size_t eq = s.find('=', i);
    std::string key(s.substr(i, eq - i));
    i = eq + 1;
    std::string value;
    while (i < s.size()) {
      if (IsBlank(s[i])) {
        size_t k = i;
        while (k < s.size() && IsBlank(s[k])) ++k;
        if (k >= s.size() || KeyAt(s, k)) break;
        value.append(s.substr(i, k - i));
        i = k;
        continue;
      }
      if (s[i] == '\\' && i + 1 < s.size()) {
        const char e = s[i + 1];
        if (e == '=' || e == '\\') {
          value.push_back(e);
        } else if (e == 'n') {
          value.push_back('\n');
        } else if (e == 'r') {
          value.push_back('\r');
        } else {
          value.push_back('\\');
          value.push_back(e);
        }
        i += 2;
        continue;
      }
      value.push_back(s[i++]);
    }
    ext->emplace_back(std::move(key), std::move(value));
  }
  return true;
}

bool Build(Call& c, Stage* st) {
  std::string field = c.String("field");
  std::string prefix = c.String("prefix");
  std::string headerprefix = c.String("headerprefix");
  std::vector<std::string> touched = {field};
  for (const char* h : kHeader) touched.push_back(headerprefix + h);
  SetRecordFunction(
      st,
      [field, prefix, headerprefix](Record& r) {
        std::string scratch;
        std::optional<std::string_view> v = r.Get(field, &scratch);
        if (!v) return true;
        std::vector<std::pair<std::string, std::string>> header, ext;
        if (!ParseCef(*v, &header, &ext)) return true;
        for (auto& [k, val] : header) r.Set(headerprefix + k, Value(std::move(val)));
        for (auto& [k, val] : ext) r.Set(prefix + k, Value(std::move(val)));
        return true;
      },
      std::move(touched), /*reads_all=*/true);  // the extension's keys are known only at run time
  return true;
}

}  // namespace

const Function kParseCEF = {
    .name = "parseCEF",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "a Common Event Format message as fields",
    .stage = &Build,
};

}  // namespace sediment::query::functions
