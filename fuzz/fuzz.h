#pragma once
// What every harness shares: the input as text, and the rule that bad input must end in an
// InputError or a UsageError (a located message). Anything else escaping is a finding:
// libFuzzer reports a crash, a sanitizer error, an uncaught exception, a hang (-timeout) or
// runaway memory (-rss_limit_mb).
#include <cstddef>
#include <cstdint>
#include <string>

#include "sim/core/error.h"

namespace memsim::fuzz {

template <class Body>
int run(const std::uint8_t* data, std::size_t size, Body&& body) {
  // Bytes past the end: simdjson reads up to 64 of them (its padding), so reserve them.
  std::string text;
  text.reserve(size + 64);
  text.assign(reinterpret_cast<const char*>(data), size);
  try {
    body(text);
  } catch (const InputError&) {
  } catch (const UsageError&) {
  }
  return 0;
}

}  // namespace memsim::fuzz
