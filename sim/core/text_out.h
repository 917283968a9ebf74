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
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "sim/core/files.h"

namespace memsim {

/// Writes `v` at `out` as fmt::format("{}", v) would, returning the end; at most
/// kMaxDoubleChars characters.
inline constexpr std::size_t kMaxDoubleChars = 48;
char* format_double(char* out, double v);
/// Appends `v` to `out` as fmt::format("{}", v) would.
void append_double(std::string& out, double v);

/// The text of doubles written lately, found by their bits: where values repeat (a
/// timeline's start is mostly an earlier row's end, on 3-D steps 65% of its times are found
/// here with 1,024 entries) each is formatted once while it stays. Direct-mapped: a value
/// takes the place of the one before it in its slot.
class DoubleTexts {
 public:
  /// Writes `v` at `out` as format_double() does, returning the end; `out` has room for
  /// kMaxDoubleChars characters.
  char* format(char* out, double v) {
    std::uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof bits);
    Entry& e = entries_[(bits * 0x9E3779B97F4A7C15ull) >> (64 - kSlotBits)];
    if (e.size != 0 && e.bits == bits) {
      std::memcpy(out, e.text, sizeof e.text);  // a fixed size: one or two moves
      return out + e.size;
    }
    char* end = format_double(out, v);
    const auto n = static_cast<std::size_t>(end - out);
    if (n <= sizeof e.text) {
      e.bits = bits;
      e.size = static_cast<std::uint8_t>(n);
      std::memcpy(e.text, out, n);
    }
    return end;
  }

 private:
  static constexpr unsigned kSlotBits = 10;
  struct Entry {
    std::uint64_t bits = 0;
    std::uint8_t size = 0;  // 0: empty
    char text[31] = {};     // the longest shortest form of a double is 24 characters
  };
  static_assert(sizeof(Entry::text) <= kMaxDoubleChars);
  std::unique_ptr<Entry[]> entries_{new Entry[std::size_t{1} << kSlotBits]};
};

class TextOut {
 public:
  /// Buffered writes to `file`; call finish() once everything is written.
  explicit TextOut(OutputFile& file)
      : file_(&file), buffer_(new char[kFlushBytes]), at_(buffer_.get()), end_(buffer_.get() + kFlushBytes) {}
  /// Everything into `text`.
  explicit TextOut(std::string& text) : text_(&text) {}
  TextOut(const TextOut&) = delete;
  TextOut& operator=(const TextOut&) = delete;

  TextOut& put(std::string_view s) {
    if (!file_) {
      text_->append(s);
      return *this;
    }
    if (s.size() > static_cast<std::size_t>(end_ - at_)) {
      flush();
      if (s.size() >= kFlushBytes) {  // a large piece goes straight to the file
        file_->write(s);
        return *this;
      }
    }
    std::memcpy(at_, s.data(), s.size());
    at_ += s.size();
    return *this;
  }
  TextOut& put(char c) {
    if (!file_) {
      text_->push_back(c);
      return *this;
    }
    if (at_ == end_) flush();
    *at_++ = c;
    return *this;
  }
  TextOut& put(std::uint64_t v) { return put_integer(v); }
  TextOut& put(std::uint32_t v) { return put_integer(v); }
  TextOut& put(std::int64_t v) { return put_integer(v); }
  TextOut& put(int v) { return put_integer(v); }
  TextOut& put(double v) {
    if (!file_) {
      append_double(*text_, v);
      return *this;
    }
    at_ = format_double(room(kMaxDoubleChars), v);
    return *this;
  }
  /// `v` as put(v) writes it, its text kept in `texts` for the next time it comes.
  TextOut& put(double v, DoubleTexts& texts) {
    if (!file_) {
      append_double(*text_, v);
      return *this;
    }
    at_ = texts.format(room(kMaxDoubleChars), v);
    return *this;
  }
  /// A CSV field: as it is, or quoted (quotes doubled) when it holds a comma, quote or newline.
  TextOut& put_csv(std::string_view s);
  /// Writes what is still buffered (a file) and commits the file.
  void finish();

 private:
  // A file's buffer: written through a cursor, handed to the file when a piece does not fit.
  static constexpr std::size_t kFlushBytes = std::size_t{1} << 20;
  char* room(std::size_t n) {
    if (static_cast<std::size_t>(end_ - at_) < n) flush();
    return at_;
  }
  template <typename T>
  TextOut& put_integer(T v) {
    if (!file_) {
      char digits[24];
      const auto r = std::to_chars(digits, digits + sizeof digits, v);
      text_->append(digits, r.ptr);
      return *this;
    }
    char* p = room(24);
    if (v == 0) {  // a quarter of a 3-D step's memory.csv columns
      *p = '0';
      at_ = p + 1;
      return *this;
    }
    at_ = std::to_chars(p, p + 24, v).ptr;
    return *this;
  }
  void flush();

  OutputFile* file_ = nullptr;
  std::string* text_ = nullptr;
  std::unique_ptr<char[]> buffer_;
  char* at_ = nullptr;
  char* end_ = nullptr;
};

}  // namespace memsim
