#include "sim/core/text_out.h"

#include <cmath>
#include <cstdlib>

namespace memsim {

void append_double(std::string& out, double v) {
  if (std::isnan(v)) {
    out += std::signbit(v) ? "-nan" : "nan";
    return;
  }
  if (std::isinf(v)) {
    out += v < 0 ? "-inf" : "inf";
    return;
  }
  // The shortest round-trip digits and their exponent, from to_chars' scientific form
  // ("-5.134e-06"); then laid out as fmt lays them out.
  char sci[40];
  const auto r = std::to_chars(sci, sci + sizeof sci, v, std::chars_format::scientific);
  const std::string_view text(sci, static_cast<std::size_t>(r.ptr - sci));
  const std::size_t e = text.find('e');
  std::size_t at = 0;
  if (text[0] == '-') {
    out += '-';
    at = 1;
  }
  char digits[24];
  int n = 0;
  for (std::size_t i = at; i < e; ++i)
    if (text[i] != '.') digits[n++] = text[i];
  int exp = 0;
  std::from_chars(text.data() + e + (text[e + 1] == '+' ? 2 : 1), text.data() + text.size(), exp);
  if (exp < -4 || exp >= 16) {
    out += digits[0];
    if (n > 1) {
      out += '.';
      out.append(digits + 1, static_cast<std::size_t>(n - 1));
    }
    out += 'e';
    out += exp < 0 ? '-' : '+';
    const int a = std::abs(exp);
    if (a < 10) out += '0';
    char ed[8];
    const auto er = std::to_chars(ed, ed + sizeof ed, a);
    out.append(ed, er.ptr);
    return;
  }
  if (exp < 0) {  // 0.000ddd
    out += "0.";
    out.append(static_cast<std::size_t>(-exp - 1), '0');
    out.append(digits, static_cast<std::size_t>(n));
    return;
  }
  const int whole = exp + 1;  // digits before the point
  if (n <= whole) {
    out.append(digits, static_cast<std::size_t>(n));
    out.append(static_cast<std::size_t>(whole - n), '0');
    return;
  }
  out.append(digits, static_cast<std::size_t>(whole));
  out += '.';
  out.append(digits + whole, static_cast<std::size_t>(n - whole));
}

TextOut& TextOut::put_csv(std::string_view s) {
  bool plain = true;
  for (char c : s) plain &= c != ',' && c != '"' && c != '\n';
  if (plain) return put(s);
  std::string& o = out();
  o += '"';
  for (char c : s) {
    if (c == '"') o += '"';
    o += c;
  }
  o += '"';
  return spill();
}

void TextOut::flush() {
  if (!file_ || buffer_.empty()) return;
  file_->write(buffer_);
  buffer_.clear();
}

void TextOut::finish() {
  flush();
  if (file_) file_->commit();
}

}  // namespace memsim
