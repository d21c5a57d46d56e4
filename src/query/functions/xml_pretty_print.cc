// xml:prettyPrint(field=@rawstring, as, step=2, strict=false, width=80): the XML text of a field
// re-indented for reading. A per-record stage.
//
// The text must be one well-formed document: an optional prolog (<?xml ...?>, comments,
// <!DOCTYPE ...>), one root element, and after it only comments, processing instructions and
// white space; tags nest and match, attribute values are quoted and names are not repeated in a
// tag. Output: every tag, comment, processing instruction, CDATA section and text run on its own
// line, indented `step` spaces per level of nesting; an element holding only text (no child
// nodes) goes on one line `<a>text</a>` when that line fits in `width` characters, else the text
// goes on its own line one level deeper; an element without content is written `<a/>`; text is
// trimmed of surrounding white space and white-space-only text is dropped; a tag is written with
// single spaces between its name and attributes (`<a x="1" y='2'>`, values copied as written);
// entity references are copied as written. Text that is not well-formed XML is copied to the
// output unchanged, or with strict=true sets nothing. The output goes to `as`, by default the
// field itself; a missing field sets nothing. Nesting deeper than 512 levels counts as invalid.
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
    {.name = "width", .type = Type::kLimit, .default_value = "80"},
};

constexpr size_t kMaxDepth = 512;

bool IsSpace(char ch) { return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r'; }
bool IsNameStart(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' || ch == ':' ||
         static_cast<unsigned char>(ch) >= 0x80;
}
bool IsNameChar(char ch) {
  return IsNameStart(ch) || (ch >= '0' && ch <= '9') || ch == '-' || ch == '.';
}
std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

// One node of the document, in document order.
struct Node {
  enum class Kind { kOpen, kClose, kEmpty, kText, kOther } kind;
  std::string text;  // the node as written out (a tag normalized, text trimmed)
};

// Tokenizes and checks `in`; false when it is not one well-formed document.
class Parser {
 public:
  explicit Parser(std::string_view in) : in_(in) {}

  bool Run(std::vector<Node>* out) {
    std::vector<std::string> open;
    bool seen_root = false;
    while (pos_ < in_.size()) {
      if (in_[pos_] != '<') {
        size_t end = in_.find('<', pos_);
        if (end == std::string_view::npos) end = in_.size();
        std::string_view text = Trim(in_.substr(pos_, end - pos_));
        pos_ = end;
        if (text.empty()) continue;
        if (open.empty()) return false;  // text outside the root element
        out->push_back({Node::Kind::kText, std::string(text)});
        continue;
      }
      if (Starts("<?")) {
        if (!Until("?>", out)) return false;
      } else if (Starts("<!--")) {
        if (!Until("-->", out)) return false;
      } else if (Starts("<![CDATA[")) {
        if (open.empty() || !Until("]]>", out)) return false;
      } else if (Starts("<!DOCTYPE")) {
        if (seen_root || !Doctype(out)) return false;
      } else if (Starts("</")) {
        pos_ += 2;
        std::string name = Name();
        SkipSpace();
        if (name.empty() || pos_ >= in_.size() || in_[pos_] != '>') return false;
        ++pos_;
        if (open.empty() || open.back() != name) return false;
        open.pop_back();
        out->push_back({Node::Kind::kClose, "</" + name + ">"});
      } else {
        if (open.empty() && seen_root) return false;  // a second root element
        ++pos_;
        std::string name = Name();
        if (name.empty()) return false;
        std::string tag = "<" + name;
        std::vector<std::string> attrs;
        bool empty = false;
        for (;;) {
          const size_t before = pos_;
          SkipSpace();
          if (pos_ >= in_.size()) return false;
          if (in_[pos_] == '>') {
            ++pos_;
            break;
          }
          if (Starts("/>")) {
            pos_ += 2;
            empty = true;
            break;
          }
          if (pos_ == before) return false;  // attributes need white space before them
          std::string attr = Name();
          if (attr.empty()) return false;
          for (const std::string& a : attrs) {
            if (a == attr) return false;
          }
          attrs.push_back(attr);
          SkipSpace();
          if (pos_ >= in_.size() || in_[pos_] != '=') return false;
          ++pos_;
          SkipSpace();
          if (pos_ >= in_.size() || (in_[pos_] != '"' && in_[pos_] != '\'')) return false;
          const char quote = in_[pos_];
          const size_t close = in_.find(quote, pos_ + 1);
          if (close == std::string_view::npos) return false;
          std::string_view value = in_.substr(pos_, close + 1 - pos_);
          if (value.find('<') != std::string_view::npos) return false;
          pos_ = close + 1;
          tag += " " + attr + "=" + std::string(value);
        }
        seen_root = true;
        if (empty) {
          out->push_back({Node::Kind::kEmpty, tag + "/>"});
        } else {
          if (open.size() >= kMaxDepth) return false;
          open.push_back(name);
          out->push_back({Node::Kind::kOpen, tag + ">"});
        }
      }
    }
    return seen_root && open.empty();
  }

 private:
  bool Starts(std::string_view s) const { return in_.substr(pos_, s.size()) == s; }
  void SkipSpace() {
    while (pos_ < in_.size() && IsSpace(in_[pos_])) ++pos_;
  }
  std::string Name() {
    const size_t start = pos_;
    if (pos_ < in_.size() && IsNameStart(in_[pos_])) {
      ++pos_;
      while (pos_ < in_.size() && IsNameChar(in_[pos_])) ++pos_;
    }
    return std::string(in_.substr(start, pos_ - start));
  }
  // A node from pos_ through the terminator `end`, copied as written.
  bool Until(std::string_view end, std::vector<Node>* out) {
    const size_t close = in_.find(end, pos_ + 2);
    if (close == std::string_view::npos) return false;
    out->push_back({Node::Kind::kOther, std::string(in_.substr(pos_, close + end.size() - pos_))});
    pos_ = close + end.size();
    return true;
  }
  // <!DOCTYPE ...> with an optional internal subset [ ... ].
  bool Doctype(std::vector<Node>* out) {
    const size_t start = pos_;
    int brackets = 0;
    for (; pos_ < in_.size(); ++pos_) {
      const char ch = in_[pos_];
      if (ch == '[') ++brackets;
      if (ch == ']') --brackets;
      if (ch == '>' && brackets == 0) {
        ++pos_;
        out->push_back({Node::Kind::kOther, std::string(in_.substr(start, pos_ - start))});
        return true;
      }
    }
    return false;
  }

  std::string_view in_;
  size_t pos_ = 0;
};

std::string Print(const std::vector<Node>& nodes, size_t step, size_t width) {
  std::string out;
  size_t depth = 0;
  auto line = [&](size_t level, std::string_view text) {
    if (!out.empty()) out.push_back('\n');
    out.append(level * step, ' ');
    out.append(text);
  };
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    switch (n.kind) {
      case Node::Kind::kOpen: {
        // <a></a> and <a>text</a>: one line when it fits.
        if (i + 1 < nodes.size() && nodes[i + 1].kind == Node::Kind::kClose) {
          line(depth, n.text.substr(0, n.text.size() - 1) + "/>");
          ++i;
          break;
        }
        if (i + 2 < nodes.size() && nodes[i + 1].kind == Node::Kind::kText &&
            nodes[i + 2].kind == Node::Kind::kClose) {
          std::string one = n.text + nodes[i + 1].text + nodes[i + 2].text;
          if (depth * step + one.size() <= width) {
            line(depth, one);
          } else {
            line(depth, n.text);
            line(depth + 1, nodes[i + 1].text);
            line(depth, nodes[i + 2].text);
          }
          i += 2;
          break;
        }
        line(depth, n.text);
        ++depth;
        break;
      }
      case Node::Kind::kClose:
        --depth;
        line(depth, n.text);
        break;
      default:
        line(depth, n.text);
        break;
    }
  }
  return out;
}

bool Build(Call& c, Stage* st) {
  const int64_t step = c.Limit("step");
  if (step > 64) {
    c.BadParam("step", "an indentation from 0 to 64 spaces");
    return false;
  }
  const int64_t width = c.Limit("width");
  if (width < 1 || width > 100000) {
    c.BadParam("width", "a line width from 1 to 100000 characters");
    return false;
  }
  std::string field = c.String("field");
  std::string as = c.Given("as") ? c.String("as") : field;
  const bool strict = c.Bool("strict");
  SetRecordFunction(
      st,
      [field, as, step, width, strict](Record& r) {
        std::string scratch;
        std::optional<std::string_view> text = r.Get(field, &scratch);
        if (!text) return true;
        std::vector<Node> nodes;
        if (Parser(*text).Run(&nodes)) {
          r.Set(as, Value(Print(nodes, static_cast<size_t>(step), static_cast<size_t>(width))));
        } else if (!strict) {
          r.Set(as, Value(std::string(*text)));
        }
        return true;
      },
      std::vector<std::string>{field, as});
  return true;
}

}  // namespace

const Function kXmlPrettyPrint = {
    .name = "xml:prettyPrint",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "XML text re-indented for reading",
    .stage = &Build,
};

}  // namespace sediment::query::functions
