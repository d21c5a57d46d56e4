#include "common/json_writer.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace sediment {

void AppendJsonString(std::string* out, std::string_view s) {
  static const char* kHex = "0123456789abcdef";
  out->push_back('"');
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(c));
      ++i;
    } else if (c < 0x20) {
      switch (c) {
        case '\n':
          out->append("\\n");
          break;
        case '\r':
          out->append("\\r");
          break;
        case '\t':
          out->append("\\t");
          break;
        default:
          out->append("\\u00");
          out->push_back(kHex[c >> 4]);
          out->push_back(kHex[c & 15]);
      }
      ++i;
    } else if (c < 0x80) {
      out->push_back(static_cast<char>(c));
      ++i;
    } else {
      // Validate one UTF-8 sequence; replace invalid bytes with U+FFFD.
      int len = (c >= 0xF0 && c <= 0xF4) ? 4 : (c >= 0xE0) ? 3 : (c >= 0xC2 && c <= 0xDF) ? 2 : 0;
      bool valid = len > 0 && c < 0xF5 && i + len <= s.size();
      for (int k = 1; valid && k < len; ++k) {
        if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) valid = false;
      }
      if (valid) {
        out->append(s.data() + i, len);
        i += len;
      } else {
        out->append("\xEF\xBF\xBD");
        ++i;
      }
    }
  }
  out->push_back('"');
}

void JsonWriter::BeforeValue() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!need_comma_.empty()) {
    if (need_comma_.back()) out_.push_back(',');
    need_comma_.back() = true;
  }
}

JsonWriter& JsonWriter::BeginObject() {
  BeforeValue();
  out_.push_back('{');
  need_comma_.push_back(false);
  return *this;
}
JsonWriter& JsonWriter::EndObject() {
  out_.push_back('}');
  need_comma_.pop_back();
  return *this;
}
JsonWriter& JsonWriter::BeginArray() {
  BeforeValue();
  out_.push_back('[');
  need_comma_.push_back(false);
  return *this;
}
JsonWriter& JsonWriter::EndArray() {
  out_.push_back(']');
  need_comma_.pop_back();
  return *this;
}
JsonWriter& JsonWriter::Key(std::string_view k) {
  BeforeValue();
  AppendJsonString(&out_, k);
  out_.push_back(':');
  after_key_ = true;
  return *this;
}
JsonWriter& JsonWriter::String(std::string_view v) {
  BeforeValue();
  AppendJsonString(&out_, v);
  return *this;
}
JsonWriter& JsonWriter::Int(int64_t v) {
  BeforeValue();
  out_.append(std::to_string(v));
  return *this;
}
JsonWriter& JsonWriter::Double(double v) {
  BeforeValue();
  if (!std::isfinite(v)) {
    out_.append("null");
    return *this;
  }
  // The shortest text that reads back as `v`, in fixed notation unless scientific is shorter
  // (90 -> "90", 0.5 -> "0.5", 1e21 -> "1e+21"); every form is a JSON number.
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  if (ec != std::errc()) {
    out_.append(buf, static_cast<size_t>(std::snprintf(buf, sizeof buf, "%.17g", v)));
    return *this;
  }
  out_.append(buf, end);
  return *this;
}
JsonWriter& JsonWriter::Bool(bool v) {
  BeforeValue();
  out_.append(v ? "true" : "false");
  return *this;
}
JsonWriter& JsonWriter::Null() {
  BeforeValue();
  out_.append("null");
  return *this;
}
JsonWriter& JsonWriter::Raw(std::string_view json) {
  BeforeValue();
  out_.append(json);
  return *this;
}

}  // namespace sediment
