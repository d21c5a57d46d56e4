// The XML tokenizer (xml.h).
#include "query/functions/xml.h"

#include <cstdint>

#include "common/coding.h"

namespace sediment::query::functions::xml {
namespace {

Node MakeNode(Node::Kind kind, std::string text, std::string name = {},
              std::vector<std::pair<std::string, std::string>> attributes = {}) {
  Node n;
  n.kind = kind;
  n.text = std::move(text);
  n.name = std::move(name);
  n.attributes = std::move(attributes);
  return n;
}

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
        out->push_back(MakeNode(Node::Kind::kText, std::string(text)));
        continue;
      }
      if (Starts("<?")) {
        if (!Until("?>", out)) return false;
      } else if (Starts("<!--")) {
        if (!Until("-->", out)) return false;
      } else if (Starts("<![CDATA[")) {
        if (open.empty() || !Until("]]>", out)) return false;
        out->back().kind = Node::Kind::kCdata;
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
        out->push_back(MakeNode(Node::Kind::kClose, "</" + name + ">", name));
      } else {
        if (open.empty() && seen_root) return false;  // a second root element
        ++pos_;
        std::string name = Name();
        if (name.empty()) return false;
        std::string tag = "<" + name;
        std::vector<std::pair<std::string, std::string>> attrs;
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
          for (const auto& a : attrs) {
            if (a.first == attr) return false;
          }
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
          attrs.emplace_back(std::move(attr), std::string(value.substr(1, value.size() - 2)));
        }
        seen_root = true;
        if (empty) {
          out->push_back(MakeNode(Node::Kind::kEmpty, tag + "/>", name, std::move(attrs)));
        } else {
          if (open.size() >= kMaxDepth) return false;
          open.push_back(name);
          out->push_back(MakeNode(Node::Kind::kOpen, tag + ">", name, std::move(attrs)));
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
    out->push_back(
        MakeNode(Node::Kind::kOther, std::string(in_.substr(pos_, close + end.size() - pos_))));
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
        out->push_back(MakeNode(Node::Kind::kOther, std::string(in_.substr(start, pos_ - start))));
        return true;
      }
    }
    return false;
  }

  std::string_view in_;
  size_t pos_ = 0;
};

// The code point of a character reference's body ("#65", "#x41"), or 0 when it is not one.
uint32_t CharRef(std::string_view body) {
  if (body.size() < 2 || body[0] != '#') return 0;
  const bool hex = body[1] == 'x' || body[1] == 'X';
  std::string_view digits = body.substr(hex ? 2 : 1);
  if (digits.empty() || digits.size() > 8) return 0;
  uint32_t cp = 0;
  for (char ch : digits) {
    uint32_t d;
    if (ch >= '0' && ch <= '9') {
      d = static_cast<uint32_t>(ch - '0');
    } else if (hex && ch >= 'a' && ch <= 'f') {
      d = static_cast<uint32_t>(ch - 'a' + 10);
    } else if (hex && ch >= 'A' && ch <= 'F') {
      d = static_cast<uint32_t>(ch - 'A' + 10);
    } else {
      return 0;
    }
    cp = cp * (hex ? 16 : 10) + d;
  }
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return cp;
}

}  // namespace

bool Tokenize(std::string_view in, std::vector<Node>* out) { return Parser(in).Run(out); }

std::string DecodeEntities(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const size_t amp = s.find('&', i);
    if (amp == std::string_view::npos) {
      out.append(s.substr(i));
      break;
    }
    out.append(s.substr(i, amp - i));
    const size_t semi = s.find(';', amp + 1);
    std::string_view body =
        semi == std::string_view::npos ? std::string_view() : s.substr(amp + 1, semi - amp - 1);
    const char* named = nullptr;
    if (body == "lt") named = "<";
    if (body == "gt") named = ">";
    if (body == "amp") named = "&";
    if (body == "quot") named = "\"";
    if (body == "apos") named = "'";
    if (named != nullptr) {
      out.append(named);
      i = semi + 1;
    } else if (uint32_t cp = CharRef(body); cp != 0) {
      AppendUtf8(cp, &out);
      i = semi + 1;
    } else {
      out.push_back('&');
      i = amp + 1;
    }
  }
  return out;
}

std::string_view CdataContent(const Node& n) {
  std::string_view t = n.text;
  constexpr std::string_view kOpen = "<![CDATA[";
  if (t.size() < kOpen.size() + 3) return {};
  return t.substr(kOpen.size(), t.size() - kOpen.size() - 3);
}

}  // namespace sediment::query::functions::xml
