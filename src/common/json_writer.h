// Minimal streaming JSON writer (output only; parsing uses simdjson). Produces compact JSON.
// Not thread-safe. Strings are written as UTF-8 with control characters and invalid bytes escaped.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sediment {

// Appends `s` as a JSON string literal (with quotes) to *out.
void AppendJsonString(std::string* out, std::string_view s);

class JsonWriter {
 public:
  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  JsonWriter& Key(std::string_view k);
  JsonWriter& String(std::string_view v);
  JsonWriter& Int(int64_t v);
  JsonWriter& Double(double v);
  JsonWriter& Bool(bool v);
  JsonWriter& Null();
  // Inserts already-serialized JSON as one value.
  JsonWriter& Raw(std::string_view json);

  const std::string& str() const { return out_; }
  std::string Take() { return std::move(out_); }

 private:
  void BeforeValue();
  std::string out_;
  // One entry per open container: true when the next element needs a comma.
  std::vector<bool> need_comma_;
  bool after_key_ = false;
};

}  // namespace sediment
