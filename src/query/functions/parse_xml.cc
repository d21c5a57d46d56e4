// parseXml(field=@rawstring, prefix="", strict=false): the elements and attributes of an XML
// document become fields. A per-record stage.
//
// Names: an element's field is the path of element names from the root, joined with '.'
// (`<log><service>a</service></log>` sets `log.service`), behind `prefix`; an attribute is a
// field under its element's path (`<a id="7"/>` sets `a.id`). Elements repeated among their
// siblings are an array: the i-th one's subtree is under `name[i]` (0-based), and the first one's
// also under `name` (`<o><i>1</i><i>2</i></o>` sets `o.i` = 1, `o.i[0]` = 1, `o.i[1]` = 2, as
// LogScale's example shows). Values: an element's text is its text and CDATA content (each text
// run trimmed of surrounding white space, entity and character references decoded), set for
// every element without child elements (possibly "") and for one with children when it has text;
// attribute values are decoded. Comments, processing instructions and the DOCTYPE are ignored.
// A missing field leaves the record unchanged. A text that is not one well-formed document
// (functions/xml.h) drops the record with strict=true; otherwise the record is kept with
// @error=true and @error_msg naming the problem, as LogScale's parsers flag a failure.
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "query/functions/list.h"
#include "query/functions/transforms.h"
#include "query/functions/xml.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "field", .type = Type::kField, .unnamed = true, .default_value = "@rawstring"},
    {.name = "prefix", .type = Type::kString, .default_value = "\"\""},
    {.name = "strict", .type = Type::kBool, .default_value = "false"},
};

// An element of the document tree built from the tokens.
struct Element {
  std::string name;
  std::vector<std::pair<std::string, std::string>> attributes;  // values decoded
  std::string text;                                             // decoded, runs concatenated
  std::vector<size_t> children;                                 // indexes into the tree
};

// The element tree of a well-formed token stream (Tokenize succeeded); tree[0] is the root.
std::vector<Element> BuildTree(const std::vector<xml::Node>& nodes) {
  std::vector<Element> tree;
  std::vector<size_t> open;
  for (const xml::Node& n : nodes) {
    switch (n.kind) {
      case xml::Node::Kind::kOpen:
      case xml::Node::Kind::kEmpty: {
        const size_t index = tree.size();
        Element e;
        e.name = n.name;
        for (const auto& [name, value] : n.attributes) {
          e.attributes.emplace_back(name, xml::DecodeEntities(value));
        }
        tree.push_back(std::move(e));
        if (!open.empty()) tree[open.back()].children.push_back(index);
        if (n.kind == xml::Node::Kind::kOpen) open.push_back(index);
        break;
      }
      case xml::Node::Kind::kClose:
        open.pop_back();
        break;
      case xml::Node::Kind::kText:
        tree[open.back()].text += xml::DecodeEntities(n.text);
        break;
      case xml::Node::Kind::kCdata:
        tree[open.back()].text += xml::CdataContent(n);
        break;
      case xml::Node::Kind::kOther:
        break;
    }
  }
  return tree;
}

void Emit(const std::vector<Element>& tree, size_t index, const std::string& path, Record& r) {
  const Element& e = tree[index];
  if (e.children.empty() || !e.text.empty()) r.Set(path, Value(e.text));
  for (const auto& [name, value] : e.attributes) r.Set(path + "." + name, Value(value));
  std::map<std::string_view, size_t> count;
  for (size_t child : e.children) ++count[tree[child].name];
  std::map<std::string_view, size_t> seen;
  for (size_t child : e.children) {
    const std::string& name = tree[child].name;
    const std::string base = path + "." + name;
    if (count[name] == 1) {
      Emit(tree, child, base, r);
      continue;
    }
    const size_t i = seen[name]++;
    if (i == 0) Emit(tree, child, base, r);
    Emit(tree, child, base + "[" + std::to_string(i) + "]", r);
  }
}

bool Build(Call& c, Stage* st) {
  std::string field = c.String("field");
  std::string prefix = c.String("prefix");
  const bool strict = c.Bool("strict");
  SetRecordFunction(
      st,
      [field, prefix, strict](Record& r) {
        std::string scratch;
        std::optional<std::string_view> text = r.Get(field, &scratch);
        if (!text) return true;
        std::vector<xml::Node> nodes;
        if (!xml::Tokenize(*text, &nodes)) {
          if (strict) return false;
          r.Set("@error", Value(std::string("true")));
          r.Set("@error_msg", Value(std::string("parseXml(): the text of '") + field +
                                    "' is not a well-formed XML document"));
          return true;
        }
        std::vector<Element> tree = BuildTree(nodes);
        if (tree.empty()) return true;
        Emit(tree, 0, prefix + tree[0].name, r);
        return true;
      },
      std::vector<std::string>{field, "@error", "@error_msg"});
  return true;
}

}  // namespace

const Function kParseXml = {
    .name = "parseXml",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "the elements and attributes of an XML document as fields",
    .stage = &Build,
};

}  // namespace sediment::query::functions
