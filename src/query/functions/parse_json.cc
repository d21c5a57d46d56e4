// parseJson(field=@rawstring, prefix=""): a JSON object's members become fields (flattened with
// '.', arrays as name[i]). A per-record stage.
//
// Choices where LogScale's documentation leaves room: numbers keep their JSON spelling; a root
// that is not an object or an array, or text that is not one complete JSON value, leaves the
// record as it was.
#include <string>
#include <utility>
#include <vector>

#include "common/coding.h"
#include "query/functions/list.h"
#include "query/functions/transforms.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "field", .type = Type::kField, .unnamed = true, .default_value = "@rawstring"},
    {.name = "prefix", .type = Type::kString, .default_value = "\"\""},
    {.name = "exclude", .type = Type::kUnsupported},
    {.name = "include", .type = Type::kUnsupported},
    {.name = "excludeEmpty", .type = Type::kUnsupported},
    {.name = "handleNull", .type = Type::kUnsupported},
    {.name = "removePrefixes", .type = Type::kUnsupported},
};

bool Build(Call& c, Stage* st) {
  st->kind = Stage::Kind::kParseJson;
  st->field = c.String("field");
  st->prefix = c.String("prefix");
  return true;
}

}  // namespace

const Function kParseJson = {
    .name = "parseJson",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "extracts the members of a JSON object as fields",
    .stage = &Build,
};

// ---- per-record implementation ----

namespace {

// Flattens one JSON text into (name, value) pairs; strict RFC 8259 grammar.
class JsonFlattener {
 public:
  JsonFlattener(std::string_view in, std::vector<std::pair<std::string, std::string>>* out)
      : in_(in), out_(out) {}

  // False (with `out` in an unspecified state) unless `in` is one object or array.
  bool Run(const std::string& prefix) {
    SkipWs();
    if (p_ >= in_.size() || (in_[p_] != '{' && in_[p_] != '[')) return false;
    std::string path = prefix;
    if (!ParseValue(&path, /*root=*/true, 0)) return false;
    SkipWs();
    return p_ == in_.size();
  }

 private:
  static constexpr int kMaxDepth = 128;

  void SkipWs() {
    while (p_ < in_.size() &&
           (in_[p_] == ' ' || in_[p_] == '\t' || in_[p_] == '\n' || in_[p_] == '\r')) {
      ++p_;
    }
  }

  bool Literal(std::string_view word) {
    if (in_.substr(p_, word.size()) != word) return false;
    p_ += word.size();
    return true;
  }

  static int Hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  bool Hex4(uint32_t* v) {
    if (p_ + 4 > in_.size()) return false;
    uint32_t x = 0;
    for (int k = 0; k < 4; ++k) {
      const int h = Hex(in_[p_ + k]);
      if (h < 0) return false;
      x = x << 4 | static_cast<uint32_t>(h);
    }
    p_ += 4;
    *v = x;
    return true;
  }

  // At the opening quote; appends the unescaped string to *s.
  bool String(std::string* s) {
    ++p_;
    while (p_ < in_.size()) {
      const size_t run = p_;
      while (p_ < in_.size() && in_[p_] != '"' && in_[p_] != '\\' &&
             static_cast<unsigned char>(in_[p_]) >= 0x20) {
        ++p_;
      }
      s->append(in_.data() + run, p_ - run);
      if (p_ >= in_.size()) return false;
      const char c = in_[p_];
      if (c == '"') {
        ++p_;
        return true;
      }
      if (c != '\\') return false;  // control character
      if (++p_ >= in_.size()) return false;
      const char esc = in_[p_++];
      switch (esc) {
        case '"':
        case '\\':
        case '/':
          s->push_back(esc);
          break;
        case 'b':
          s->push_back('\b');
          break;
        case 'f':
          s->push_back('\f');
          break;
        case 'n':
          s->push_back('\n');
          break;
        case 'r':
          s->push_back('\r');
          break;
        case 't':
          s->push_back('\t');
          break;
        case 'u': {
          uint32_t cp = 0;
          if (!Hex4(&cp)) return false;
          if (cp >= 0xD800 && cp < 0xDC00) {
            uint32_t lo = 0;
            if (p_ + 1 < in_.size() && in_[p_] == '\\' && in_[p_ + 1] == 'u') {
              const size_t save = p_;
              p_ += 2;
              if (Hex4(&lo) && lo >= 0xDC00 && lo < 0xE000) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
              } else {
                p_ = save;
                cp = 0xFFFD;
              }
            } else {
              cp = 0xFFFD;
            }
          } else if (cp >= 0xDC00 && cp < 0xE000) {
            cp = 0xFFFD;
          }
          AppendUtf8(cp, s);
          break;
        }
        default:
          return false;
      }
    }
    return false;
  }

  bool Number(std::string* s) {
    const size_t start = p_;
    auto digits = [&] {
      const size_t b = p_;
      while (p_ < in_.size() && in_[p_] >= '0' && in_[p_] <= '9') ++p_;
      return p_ > b;
    };
    if (p_ < in_.size() && in_[p_] == '-') ++p_;
    if (p_ < in_.size() && in_[p_] == '0') {
      ++p_;
    } else if (!digits()) {
      return false;
    }
    if (p_ < in_.size() && in_[p_] == '.') {
      ++p_;
      if (!digits()) return false;
    }
    if (p_ < in_.size() && (in_[p_] == 'e' || in_[p_] == 'E')) {
      ++p_;
      if (p_ < in_.size() && (in_[p_] == '+' || in_[p_] == '-')) ++p_;
      if (!digits()) return false;
    }
    s->assign(in_.substr(start, p_ - start));
    return true;
  }

  void Emit(const std::string& path, std::string value) {
    out_->emplace_back(path, std::move(value));
  }

  // One value named *path (objects extend it with ".key", or "key" at the root; arrays with
  // "[i]").
  bool ParseValue(std::string* path, bool root, int depth) {
    if (depth > kMaxDepth) return false;
    SkipWs();
    if (p_ >= in_.size()) return false;
    const char c = in_[p_];
    if (c == '{' || c == '[') {
      const bool object = c == '{';
      ++p_;
      SkipWs();
      if (p_ < in_.size() && in_[p_] == (object ? '}' : ']')) {
        ++p_;
        if (!root) Emit(*path, object ? "{}" : "[]");
        return true;
      }
      const size_t base = path->size();
      for (size_t index = 0;; ++index) {
        if (object) {
          SkipWs();
          if (p_ >= in_.size() || in_[p_] != '"') return false;
          if (!root) path->push_back('.');
          if (!String(path)) return false;
          SkipWs();
          if (p_ >= in_.size() || in_[p_] != ':') return false;
          ++p_;
        } else {
          char buf[24];
          path->push_back('[');
          path->append(buf, std::to_chars(buf, buf + sizeof(buf), index).ptr);
          path->push_back(']');
        }
        if (!ParseValue(path, false, depth + 1)) return false;
        path->resize(base);
        SkipWs();
        if (p_ >= in_.size()) return false;
        if (in_[p_] == ',') {
          ++p_;
          continue;
        }
        if (in_[p_] == (object ? '}' : ']')) {
          ++p_;
          return true;
        }
        return false;
      }
    }
    std::string v;
    if (c == '"') {
      if (!String(&v)) return false;
    } else if (c == 't' || c == 'f' || c == 'n') {
      const std::string_view word = c == 't' ? "true" : c == 'f' ? "false" : "null";
      if (!Literal(word)) return false;
      v.assign(word);
    } else if (!Number(&v)) {
      return false;
    }
    Emit(*path, std::move(v));
    return true;
  }

  std::string_view in_;
  size_t p_ = 0;
  std::vector<std::pair<std::string, std::string>>* out_;
};

}  // namespace

void ApplyParseJson(const Stage& st, Record& r) {
  std::string scratch;
  std::optional<std::string_view> text = r.Get(FieldOr(st.field, kRawstringField), &scratch);
  if (!text) return;
  std::vector<std::pair<std::string, std::string>> fields;
  JsonFlattener f(*text, &fields);
  if (!f.Run(st.prefix)) return;
  for (auto& [k, v] : fields) r.Set(k, Value(std::move(v)));
}

}  // namespace sediment::query::functions
