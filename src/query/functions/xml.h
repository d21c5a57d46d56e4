// The XML tokenizer shared by xml:prettyPrint() (xml_pretty_print.cc) and parseXml()
// (parse_xml.cc). Internal to sediment_query; pure functions, safe from any thread.
//
// Accepted: one well-formed document: an optional prolog (<?xml ...?>, comments, <!DOCTYPE ...>
// with an optional internal subset), one root element, and after it only comments, processing
// instructions and white space; tags nest and match, attribute values are quoted and names are
// not repeated in a tag; text and CDATA only inside the root. Not checked: that entity references
// are defined, namespaces, the characters allowed in text. Nesting deeper than kMaxDepth levels
// counts as not well-formed.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sediment::query::functions::xml {

inline constexpr size_t kMaxDepth = 512;

// One node of the document, in document order.
struct Node {
  enum class Kind { kOpen, kClose, kEmpty, kText, kCdata, kOther } kind;
  // The node as written out: a tag normalized (`<a x="1" y='2'>`: single spaces, values with their
  // quotes as written), text trimmed of surrounding white space (white-space-only text is not a
  // node), CDATA sections, comments, processing instructions and DOCTYPE verbatim.
  std::string text;
  std::string name;  // kOpen, kClose, kEmpty: the element's name
  // kOpen, kEmpty: the attributes in order, each value as written between its quotes (entity
  // references not decoded).
  std::vector<std::pair<std::string, std::string>> attributes;
};

// Tokenizes and checks `in`; false (with *out partly filled) when it is not one well-formed
// document.
[[nodiscard]] bool Tokenize(std::string_view in, std::vector<Node>* out);

// `s` with the predefined entity references (&lt; &gt; &amp; &quot; &apos;) and character
// references (&#N; &#xN;, written as UTF-8) replaced; any other `&` is copied as written.
std::string DecodeEntities(std::string_view s);

// The content of a kCdata node (between `<![CDATA[` and `]]>`).
std::string_view CdataContent(const Node& n);

}  // namespace sediment::query::functions::xml
