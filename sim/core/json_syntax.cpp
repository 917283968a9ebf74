#include "sim/core/json_syntax.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace memsim {

bool names_json_file(std::string_view source) {
  auto ends_with = [&](std::string_view tail) {
    return source.size() >= tail.size() && source.substr(source.size() - tail.size()) == tail;
  };
  return ends_with(".json") || ends_with(".json.gz");
}

std::optional<std::string> json_syntax_error(std::string_view text, const std::string& source) {
  // Only the first error matters, so nothing is built: a sink that accepts every value.
  struct Sink : nlohmann::json_sax<nlohmann::json> {
    bool null() override { return true; }
    bool boolean(bool) override { return true; }
    bool number_integer(number_integer_t) override { return true; }
    bool number_unsigned(number_unsigned_t) override { return true; }
    bool number_float(number_float_t, const string_t&) override { return true; }
    bool string(string_t&) override { return true; }
    bool binary(binary_t&) override { return true; }
    bool start_object(std::size_t) override { return true; }
    bool key(string_t&) override { return true; }
    bool end_object() override { return true; }
    bool start_array(std::size_t) override { return true; }
    bool end_array() override { return true; }
    bool parse_error(std::size_t at, const std::string&, const nlohmann::detail::exception& e) override {
      byte = at;
      what = e.what();
      return false;
    }
    std::size_t byte = 0;
    std::string what;
  } sink;
  nlohmann::json::sax_parse(text.begin(), text.end(), &sink);
  if (sink.what.empty()) return std::nullopt;

  // The parser reports the byte after what it read last; a number with a leading zero
  // ("064") it reads as two numbers, so the error is found at the start of that number.
  std::size_t at = std::min<std::size_t>(sink.byte > 0 ? sink.byte - 1 : 0, text.size());
  std::string why = sink.what;
  if (auto p = why.find("column "); p != std::string::npos)
    if (auto c = why.find(": ", p); c != std::string::npos) why = why.substr(c + 2);
  auto number_char = [&](std::size_t i) {
    const char c = text[i];
    return std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-';
  };
  if (at < text.size() && number_char(at)) {
    std::size_t start = at, end = at;
    while (start > 0 && number_char(start - 1)) --start;
    while (end < text.size() && number_char(end)) ++end;
    const std::size_t digits = start + (text[start] == '-' ? 1 : 0);
    if (digits + 1 < end && text[digits] == '0' && std::isdigit(static_cast<unsigned char>(text[digits + 1]))) {
      at = start;
      why = fmt::format("the number {} starts with a 0: JSON has no leading zeros", text.substr(start, end - start));
    }
  }
  std::size_t line = 1, col = 1;
  for (std::size_t i = 0; i < at; ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  const bool truncated = sink.byte >= text.size();
  return fmt::format("{}:{}:{}: {} JSON: {}", source, line, col, truncated ? "truncated" : "malformed", why);
}

}  // namespace memsim
