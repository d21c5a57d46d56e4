// json:prettyPrint(field=@rawstring, as, step=2, strict=false): the JSON text of a field
// re-indented for reading. A per-record stage.
//
// Each member of an object and each element of an array goes on its own line, indented `step`
// spaces per level; `"key": value`; an empty object or array stays `{}` / `[]`; strings and numbers
// are copied as written. Text that is not one complete JSON value is copied to the output
// unchanged, or with strict=true sets nothing. The output goes to `as`, by default the field
// itself. Choices where LogScale's documentation leaves room: a scalar root (`42`, `"x"`) is valid
// JSON and printed as it is; nesting deeper than 512 levels counts as invalid; a missing field sets
// nothing.
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
    {.name = "step", .type = Type::kLimit, .default_value = "2"},
    {.name = "strict", .type = Type::kBool, .default_value = "false"},
};

constexpr int kMaxDepth = 512;

// A validating reformatter over one text.
class Printer {
 public:
  Printer(std::string_view in, int64_t step) : in_(in), step_(step) {}

  // The formatted text, or false when `in` is not one complete JSON value.
  bool Run(std::string* out) {
    SkipWs();
    if (!Value(0)) return false;
    SkipWs();
    if (pos_ != in_.size()) return false;
    *out = std::move(out_);
    return true;
  }

 private:
  void SkipWs() {
    while (pos_ < in_.size() &&
           (in_[pos_] == ' ' || in_[pos_] == '\t' || in_[pos_] == '\n' || in_[pos_] == '\r')) {
      ++pos_;
    }
  }
  void Newline(int depth) {
    out_.push_back('\n');
    out_.append(static_cast<size_t>(depth * step_), ' ');
  }
  bool Literal(std::string_view word) {
    if (in_.substr(pos_, word.size()) != word) return false;
    out_.append(word);
    pos_ += word.size();
    return true;
  }
  static bool IsDigit(char c) { return c >= '0' && c <= '9'; }
  static bool IsHex(char c) {
    return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
  }
  bool String() {
    const size_t start = pos_++;  // '"'
    while (pos_ < in_.size() && in_[pos_] != '"') {
      const unsigned char c = static_cast<unsigned char>(in_[pos_]);
      if (c < 0x20) return false;
      if (c == '\\') {
        if (++pos_ >= in_.size()) return false;
        const char e = in_[pos_];
        if (e == 'u') {
          for (int i = 1; i <= 4; ++i) {
            if (pos_ + i >= in_.size() || !IsHex(in_[pos_ + i])) return false;
          }
          pos_ += 4;
        } else if (std::string_view("\"\\/bfnrt").find(e) == std::string_view::npos) {
          return false;
        }
      }
      ++pos_;
    }
    if (pos_ >= in_.size()) return false;
    ++pos_;
    out_.append(in_.substr(start, pos_ - start));
    return true;
  }
  bool Number() {
    const size_t start = pos_;
    if (in_[pos_] == '-') ++pos_;
    if (pos_ >= in_.size() || !IsDigit(in_[pos_])) return false;
    if (in_[pos_] == '0') {
      ++pos_;
    } else {
      while (pos_ < in_.size() && IsDigit(in_[pos_])) ++pos_;
    }
    if (pos_ < in_.size() && in_[pos_] == '.') {
      ++pos_;
      if (pos_ >= in_.size() || !IsDigit(in_[pos_])) return false;
      while (pos_ < in_.size() && IsDigit(in_[pos_])) ++pos_;
    }
    if (pos_ < in_.size() && (in_[pos_] == 'e' || in_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < in_.size() && (in_[pos_] == '+' || in_[pos_] == '-')) ++pos_;
      if (pos_ >= in_.size() || !IsDigit(in_[pos_])) return false;
      while (pos_ < in_.size() && IsDigit(in_[pos_])) ++pos_;
    }
    out_.append(in_.substr(start, pos_ - start));
    return true;
  }
  // An object or array at nesting `depth`; pos_ at its opening bracket.
  bool Container(int depth) {
    if (depth >= kMaxDepth) return false;
    const bool object = in_[pos_] == '{';
    const char close = object ? '}' : ']';
    out_.push_back(in_[pos_++]);
    SkipWs();
    if (pos_ < in_.size() && in_[pos_] == close) {
      out_.push_back(close);
      ++pos_;
      return true;
    }
    while (true) {
      Newline(depth + 1);
      if (object) {
        if (pos_ >= in_.size() || in_[pos_] != '"' || !String()) return false;
        SkipWs();
        if (pos_ >= in_.size() || in_[pos_] != ':') return false;
        ++pos_;
        out_.append(": ");
        SkipWs();
      }
      if (!Value(depth + 1)) return false;
      SkipWs();
      if (pos_ >= in_.size()) return false;
      if (in_[pos_] == ',') {
        out_.push_back(',');
        ++pos_;
        SkipWs();
        continue;
      }
      if (in_[pos_] != close) return false;
      ++pos_;
      Newline(depth);
      out_.push_back(close);
      return true;
    }
  }
  bool Value(int depth) {
    if (pos_ >= in_.size()) return false;
    switch (in_[pos_]) {
      case '{':
      case '[':
        return Container(depth);
      case '"':
        return String();
      case 't':
        return Literal("true");
      case 'f':
        return Literal("false");
      case 'n':
        return Literal("null");
      default:
        return Number();
    }
  }

  std::string_view in_;
  int64_t step_;
  size_t pos_ = 0;
  std::string out_;
};

bool Build(Call& c, Stage* st) {
  const int64_t step = c.Limit("step");
  if (step < 2 || step > 64) {
    c.BadParam("step", "an indentation from 2 to 64 spaces");
    return false;
  }
  std::string field = c.String("field");
  std::string as = c.Given("as") ? c.String("as") : field;
  const bool strict = c.Bool("strict");
  SetRecordFunction(
      st,
      [field, as, step, strict](Record& r) {
        std::string scratch;
        std::optional<std::string_view> text = r.Get(field, &scratch);
        if (!text) return true;
        std::string out;
        if (Printer(*text, step).Run(&out)) {
          r.Set(as, Value(std::move(out)));
        } else if (!strict) {
          r.Set(as, Value(std::string(*text)));
        }
        return true;
      },
      std::vector<std::string>{field, as});
  return true;
}

}  // namespace

const Function kJsonPrettyPrint = {
    .name = "json:prettyPrint",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "JSON text re-indented for reading",
    .stage = &Build,
};

}  // namespace sediment::query::functions
