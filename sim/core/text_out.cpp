#include "sim/core/text_out.h"

#include <cmath>
#include <cstdlib>
#include <cstring>

namespace memsim {

char* format_double(char* out, double v) {
  auto put = [&out](std::string_view s) {
    std::memcpy(out, s.data(), s.size());
    out += s.size();
  };
  if (std::isnan(v)) {
    put(std::signbit(v) ? "-nan" : "nan");
    return out;
  }
  if (std::isinf(v)) {
    put(v < 0 ? "-inf" : "inf");
    return out;
  }
  // The shortest round-trip digits and their exponent, from to_chars' scientific form
  // ("-5.134e-06"); then laid out as fmt lays them out.
  char sci[40];
  const auto r = std::to_chars(sci, sci + sizeof sci, v, std::chars_format::scientific);
  const std::string_view text(sci, static_cast<std::size_t>(r.ptr - sci));
  const std::size_t e = text.find('e');
  std::size_t at = 0;
  if (text[0] == '-') {
    *out++ = '-';
    at = 1;
  }
  char digits[24];
  int n = 0;
  for (std::size_t i = at; i < e; ++i)
    if (text[i] != '.') digits[n++] = text[i];
  int exp = 0;
  std::from_chars(text.data() + e + (text[e + 1] == '+' ? 2 : 1), text.data() + text.size(), exp);
  const std::string_view all(digits, static_cast<std::size_t>(n));
  if (exp < -4 || exp >= 16) {
    *out++ = digits[0];
    if (n > 1) {
      *out++ = '.';
      put(all.substr(1));
    }
    *out++ = 'e';
    *out++ = exp < 0 ? '-' : '+';
    const int a = std::abs(exp);
    if (a < 10) *out++ = '0';
    return std::to_chars(out, out + 8, a).ptr;
  }
  if (exp < 0) {  // 0.000ddd
    put("0.");
    for (int z = 0; z < -exp - 1; ++z) *out++ = '0';
    put(all);
    return out;
  }
  const int whole = exp + 1;  // digits before the point
  if (n <= whole) {
    put(all);
    for (int z = 0; z < whole - n; ++z) *out++ = '0';
    return out;
  }
  put(all.substr(0, static_cast<std::size_t>(whole)));
  *out++ = '.';
  put(all.substr(static_cast<std::size_t>(whole)));
  return out;
}

void append_double(std::string& out, double v) {
  char text[kMaxDoubleChars];
  out.append(text, format_double(text, v));
}

TextOut& TextOut::put_csv(std::string_view s) {
  bool plain = true;
  for (char c : s) plain &= c != ',' && c != '"' && c != '\n';
  if (plain) return put(s);
  put('"');
  for (char c : s) {
    if (c == '"') put('"');
    put(c);
  }
  return put('"');
}

void TextOut::flush() {
  if (!file_ || at_ == buffer_.get()) return;
  file_->write(std::string_view(buffer_.get(), static_cast<std::size_t>(at_ - buffer_.get())));
  at_ = buffer_.get();
}

void TextOut::finish() {
  flush();
  if (file_) file_->commit();
}

}  // namespace memsim
