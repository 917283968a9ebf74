#pragma once
// Text outputs without per-value formatting overhead: numbers go through std::to_chars into
// one buffer, which is handed to an OutputFile whenever it holds a mebibyte, so a writer's
// memory does not grow with its output. Into a string instead (what the tests compare),
// the whole text stays in memory.
//
// Doubles are printed as fmt's "{}" prints them — the shortest text that reads back to the
// same value, fixed notation for decimal exponents -4 to 15 and scientific otherwise — so a
// file is the same byte for byte whichever of the two wrote it.
#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>

#include "sim/core/files.h"

namespace memsim {

/// Appends `v` to `out` as fmt::format("{}", v) would.
void append_double(std::string& out, double v);

class TextOut {
 public:
  /// Buffered writes to `file`; call finish() once everything is written.
  explicit TextOut(OutputFile& file) : file_(&file) { buffer_.reserve(kFlushBytes + 4096); }
  /// Everything into `text`.
  explicit TextOut(std::string& text) : text_(&text) {}
  TextOut(const TextOut&) = delete;
  TextOut& operator=(const TextOut&) = delete;

  TextOut& put(std::string_view s) {
    if (file_ && s.size() >= kFlushBytes) {  // a large piece goes straight to the file
      flush();
      file_->write(s);
      return *this;
    }
    out().append(s);
    return spill();
  }
  TextOut& put(char c) {
    out().push_back(c);
    return spill();
  }
  TextOut& put(std::uint64_t v) { return put_integer(v); }
  TextOut& put(std::uint32_t v) { return put_integer(v); }
  TextOut& put(std::int64_t v) { return put_integer(v); }
  TextOut& put(int v) { return put_integer(v); }
  TextOut& put(double v) {
    append_double(out(), v);
    return spill();
  }
  /// A CSV field: as it is, or quoted (quotes doubled) when it holds a comma, quote or newline.
  TextOut& put_csv(std::string_view s);
  /// Writes what is still buffered (a file) and commits the file.
  void finish();

 private:
  static constexpr std::size_t kFlushBytes = std::size_t{1} << 20;
  std::string& out() { return text_ ? *text_ : buffer_; }
  template <typename T>
  TextOut& put_integer(T v) {
    char digits[24];
    const auto r = std::to_chars(digits, digits + sizeof digits, v);
    out().append(digits, r.ptr);
    return spill();
  }
  TextOut& spill() {
    if (file_ && buffer_.size() >= kFlushBytes) flush();
    return *this;
  }
  void flush();

  OutputFile* file_ = nullptr;
  std::string* text_ = nullptr;
  std::string buffer_;
};

}  // namespace memsim
