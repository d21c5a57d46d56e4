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
#include "query/functions/xml.h"

namespace sediment::query::functions {
namespace {

using xml::Node;

constexpr Param kParams[] = {
    {.name = "field", .type = Type::kField, .unnamed = true, .default_value = "@rawstring"},
    {.name = "as", .type = Type::kField},
    {.name = "step", .type = Type::kLimit, .default_value = "2"},
    {.name = "strict", .type = Type::kBool, .default_value = "false"},
    {.name = "width", .type = Type::kLimit, .default_value = "80"},
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
        if (xml::Tokenize(*text, &nodes)) {
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
