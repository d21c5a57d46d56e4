// parseUrl(field) and parseCsv(field=@rawstring, columns, delimiter=",", excludeEmpty=false,
// trim=false): a URL's components, or a CSV line's values, become fields. Per-record stages.
//
// parseUrl follows java.net.URI, as LogScale documents: [scheme:][//[user[:password]@]host
// [:port]][path][?query][#fragment]; the components present are set as <field>.scheme,
// <field>.username, <field>.password, <field>.host, <field>.port, <field>.path, <field>.query,
// <field>.fragment. A scheme is letters, digits, + - . after a first letter (so "example.com:80/x"
// reads scheme "example.com", as in Java). A value with a space or a control character is not
// a URI and sets nothing.
// parseCsv: one line; a value may be quoted with "..." ("" inside is a quote); with trim,
// white space around values (and before an opening quote) is dropped. Columns beyond the values
// are not set; values beyond the columns are ignored; excludeEmpty skips empty values.
#include <string>
#include <vector>

#include "query/functions/list.h"
#include "query/functions/transforms.h"

namespace sediment::query::functions {
namespace {

bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

std::vector<std::pair<std::string, std::string>> UrlParts(std::string_view s) {
  std::vector<std::pair<std::string, std::string>> out;
  for (char c : s) {
    if (static_cast<unsigned char>(c) <= ' ') return out;
  }
  size_t i = 0;
  // scheme
  if (!s.empty() && IsAlpha(s[0])) {
    size_t k = 1;
    while (k < s.size() &&
           (IsAlpha(s[k]) || IsDigit(s[k]) || s[k] == '+' || s[k] == '-' || s[k] == '.')) {
      ++k;
    }
    if (k < s.size() && s[k] == ':') {
      out.emplace_back("scheme", std::string(s.substr(0, k)));
      i = k + 1;
    }
  }
  std::string_view rest = s.substr(i);
  const size_t hash = rest.find('#');
  if (hash != std::string_view::npos) {
    out.emplace_back("fragment", std::string(rest.substr(hash + 1)));
    rest = rest.substr(0, hash);
  }
  const size_t q = rest.find('?');
  std::string_view query;
  bool has_query = false;
  if (q != std::string_view::npos) {
    query = rest.substr(q + 1);
    has_query = true;
    rest = rest.substr(0, q);
  }
  if (rest.starts_with("//")) {
    rest.remove_prefix(2);
    const size_t slash = rest.find('/');
    std::string_view auth = rest.substr(0, slash);
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
    const size_t at = auth.rfind('@');
    if (at != std::string_view::npos) {
      std::string_view user = auth.substr(0, at);
      const size_t colon = user.find(':');
      out.emplace_back("username", std::string(user.substr(0, colon)));
      if (colon != std::string_view::npos) {
        out.emplace_back("password", std::string(user.substr(colon + 1)));
      }
      auth = auth.substr(at + 1);
    }
    std::string_view host = auth, port;
    const size_t close = auth.rfind(']');
    const size_t colon = auth.rfind(':');
    if (colon != std::string_view::npos && (close == std::string_view::npos || colon > close)) {
      host = auth.substr(0, colon);
      port = auth.substr(colon + 1);
    }
    if (!host.empty()) out.emplace_back("host", std::string(host));
    if (!port.empty()) out.emplace_back("port", std::string(port));
  }
  if (!rest.empty()) out.emplace_back("path", std::string(rest));
  if (has_query) out.emplace_back("query", std::string(query));
  return out;
}

constexpr Param kUrlParams[] = {
    {.name = "field", .type = Type::kField, .unnamed = true, .required = true},
};

bool BuildUrl(Call& c, Stage* st) {
  std::string field = c.String("field");
  std::vector<std::string> touched = {field};
  for (const char* part :
       {"scheme", "username", "password", "host", "port", "path", "query", "fragment"}) {
    touched.push_back(field + "." + part);
  }
  SetRecordFunction(
      st,
      [field](Record& r) {
        std::string scratch;
        std::optional<std::string_view> v = r.Get(field, &scratch);
        if (!v) return true;
        for (auto& [part, value] : UrlParts(*v)) r.Set(field + "." + part, Value(std::move(value)));
        return true;
      },
      std::move(touched));
  return true;
}

// parseUri(field, defaultBase, prefix=field): the components of a URI reference as fields
// <prefix>.scheme, .username, .password, .host, .port, .path, .query, .fragment. A value without
// an authority ("//host") is left as it is; with `defaultBase` ("//" or "scheme://") a value
// without a scheme and authority ("www.example.com/a") is read after that base.
constexpr Param kUriParams[] = {
    {.name = "field", .type = Type::kField, .unnamed = true, .required = true},
    {.name = "defaultBase", .type = Type::kString},
    {.name = "prefix", .type = Type::kString},
};

bool BuildUri(Call& c, Stage* st) {
  std::string field = c.String("field");
  std::string base = c.String("defaultBase");
  if (c.Given("defaultBase") && !base.ends_with("//")) {
    c.BadParam("defaultBase", "// or scheme://");
    return false;
  }
  if (c.Given("prefix") && c.String("prefix").empty()) {
    c.BadParam("prefix", "a non-empty prefix");
    return false;
  }
  std::string prefix = c.Given("prefix") ? c.String("prefix") : field;
  std::vector<std::string> touched = {field};
  for (const char* part :
       {"scheme", "username", "password", "host", "port", "path", "query", "fragment"}) {
    touched.push_back(prefix + "." + part);
  }
  SetRecordFunction(
      st,
      [field, base, prefix](Record& r) {
        std::string scratch;
        std::optional<std::string_view> v = r.Get(field, &scratch);
        if (!v) return true;
        std::string text(*v);
        const bool has_authority = text.starts_with("//") || text.find("://") != std::string::npos;
        if (!has_authority) {
          if (base.empty()) return true;
          text = base + text;
        }
        std::vector<std::pair<std::string, std::string>> parts = UrlParts(text);
        bool host = false;
        for (const auto& p : parts) host = host || p.first == "host";
        if (!host) return true;
        for (auto& [part, value] : parts) r.Set(prefix + "." + part, Value(std::move(value)));
        return true;
      },
      std::move(touched));
  return true;
}

bool IsBlank(char c) { return c == ' ' || c == '\t'; }

std::vector<std::string> CsvValues(std::string_view s, char delim, bool trim) {
  std::vector<std::string> out;
  size_t i = 0;
  while (true) {
    if (trim) {
      while (i < s.size() && IsBlank(s[i]) && s[i] != delim) ++i;
    }
    std::string v;
    if (i < s.size() && s[i] == '"') {
      size_t k = i + 1;
      bool closed = false;
      for (; k < s.size(); ++k) {
        if (s[k] == '"') {
          if (k + 1 < s.size() && s[k + 1] == '"') {
            v.push_back('"');
            ++k;
            continue;
          }
          closed = true;
          ++k;
          break;
        }
        v.push_back(s[k]);
      }
      if (!closed) {  // an unclosed quote: the rest of the line, as it is
        v = std::string(s.substr(i));
        out.push_back(std::move(v));
        return out;
      }
      i = k;
      // Anything between the closing quote and the delimiter is kept (trimmed with trim).
      const size_t end = s.find(delim, i);
      std::string_view tail = s.substr(i, end == std::string_view::npos ? s.npos : end - i);
      if (trim) {
        while (!tail.empty() && IsBlank(tail.back())) tail.remove_suffix(1);
      }
      v += tail;
      i = end == std::string_view::npos ? s.size() : end;
    } else {
      const size_t end = s.find(delim, i);
      std::string_view raw = s.substr(i, end == std::string_view::npos ? s.npos : end - i);
      if (trim) {
        while (!raw.empty() && IsBlank(raw.back())) raw.remove_suffix(1);
      }
      v = std::string(raw);
      i = end == std::string_view::npos ? s.size() : end;
    }
    out.push_back(std::move(v));
    if (i >= s.size()) return out;
    ++i;  // the delimiter
  }
}

constexpr Param kCsvParams[] = {
    {.name = "field", .type = Type::kField, .unnamed = true, .default_value = "@rawstring"},
    {.name = "columns", .type = Type::kFields, .required = true},
    {.name = "delimiter", .type = Type::kString, .default_value = "\",\""},
    {.name = "excludeEmpty", .type = Type::kBool, .default_value = "false"},
    {.name = "trim", .type = Type::kBool, .default_value = "false"},
};

bool BuildCsv(Call& c, Stage* st) {
  const std::string& d = c.String("delimiter");
  if (d.size() != 1 || d[0] == '"') {
    c.BadParam("delimiter", "one character other than '\"'");
    return false;
  }
  std::string field = c.String("field");
  std::vector<std::string> columns = c.Fields("columns");
  std::vector<std::string> touched = columns;
  touched.push_back(field);
  SetRecordFunction(
      st,
      [field, columns, delim = d[0], exclude = c.Bool("excludeEmpty"),
       trim = c.Bool("trim")](Record& r) {
        std::string scratch;
        std::optional<std::string_view> v = r.Get(field, &scratch);
        if (!v) return true;
        std::vector<std::string> values = CsvValues(*v, delim, trim);
        for (size_t k = 0; k < columns.size() && k < values.size(); ++k) {
          if (exclude && values[k].empty()) continue;
          r.Set(columns[k], Value(std::move(values[k])));
        }
        return true;
      },
      std::move(touched));
  return true;
}

}  // namespace

const Function kParseUrl = {
    .name = "parseUrl",
    .kind = Kind::kTransform,
    .params = kUrlParams,
    .doc = "the components of a URL as fields",
    .stage = &BuildUrl,
};
const Function kParseUri = {
    .name = "parseUri",
    .kind = Kind::kTransform,
    .params = kUriParams,
    .doc = "the components of a URI reference as fields",
    .stage = &BuildUri,
};
const Function kParseCsv = {
    .name = "parseCsv",
    .kind = Kind::kTransform,
    .params = kCsvParams,
    .doc = "the values of a CSV line as fields",
    .stage = &BuildCsv,
};

}  // namespace sediment::query::functions
