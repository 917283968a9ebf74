#pragma once
// A string kept once per process: an op's kind ("matmul", "conv2d_backward") and process
// group ("dp") repeat across a million ops, so each op holds a pointer (8 bytes) to the one
// copy instead of its own string (32 bytes, and a heap block when longer than 15 chars).
// Reads like a const std::string; compares with strings by value.
#include <compare>
#include <ostream>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace memsim {

class Interned {
 public:
  Interned() : s_(&empty_string()) {}
  Interned(std::string_view s) : s_(&intern(s)) {}  // NOLINT: implicit, as a string is
  Interned(const std::string& s) : s_(&intern(s)) {}  // NOLINT
  Interned(const char* s) : s_(&intern(s)) {}  // NOLINT

  const std::string& str() const { return *s_; }
  operator const std::string&() const { return *s_; }  // NOLINT
  operator std::string_view() const { return *s_; }  // NOLINT
  const char* c_str() const { return s_->c_str(); }
  bool empty() const { return s_->empty(); }
  std::size_t size() const { return s_->size(); }
  bool starts_with(std::string_view p) const { return s_->starts_with(p); }
  bool ends_with(std::string_view p) const { return s_->ends_with(p); }
  std::size_t find(std::string_view p, std::size_t at = 0) const { return s_->find(p, at); }
  std::size_t find(char c, std::size_t at = 0) const { return s_->find(c, at); }
  std::string substr(std::size_t at, std::size_t n = std::string::npos) const { return s_->substr(at, n); }
  void clear() { s_ = &empty_string(); }

  friend bool operator==(const Interned& a, const Interned& b) { return a.s_ == b.s_; }
  friend bool operator==(const Interned& a, std::string_view b) { return *a.s_ == b; }
  friend bool operator==(const Interned& a, const std::string& b) { return *a.s_ == b; }
  friend bool operator==(const Interned& a, const char* b) { return *a.s_ == b; }
  friend std::strong_ordering operator<=>(const Interned& a, const Interned& b) { return *a.s_ <=> *b.s_; }
  friend std::string operator+(const Interned& a, std::string_view b) { return std::string(*a.s_).append(b); }
  friend std::string operator+(std::string_view a, const Interned& b) { return std::string(a).append(*b.s_); }
  friend std::string operator+(const std::string& a, const Interned& b) { return a + *b.s_; }
  friend std::string operator+(const char* a, const Interned& b) { return a + *b.s_; }
  friend std::ostream& operator<<(std::ostream& out, const Interned& s) { return out << *s.s_; }

 private:
  static const std::string& empty_string();
  static const std::string& intern(std::string_view s);
  const std::string* s_;
};

}  // namespace memsim

template <>
struct fmt::formatter<memsim::Interned> : fmt::formatter<std::string_view> {
  template <typename Context>
  auto format(const memsim::Interned& s, Context& ctx) const {
    return fmt::formatter<std::string_view>::format(std::string_view(s.str()), ctx);
  }
};

template <>
struct std::hash<memsim::Interned> {
  std::size_t operator()(const memsim::Interned& s) const { return std::hash<std::string>()(s.str()); }
};
