#pragma once
// What every harness shares: the input as text, and the rule that bad input must end in an
// InputError or a UsageError (a located message). Anything else escaping is a finding:
// libFuzzer reports a crash, a sanitizer error, an uncaught exception, a hang (-timeout) or
// runaway memory (-rss_limit_mb).
#include <cstddef>
#include <cstdint>
#include <string>

#include "sim/core/error.h"
#include "sim/core/limits.h"

namespace memsim::fuzz {

/// The most ops a harness lets one input make. The default op limit (10^7) is what a run on a
/// large machine may hold, and a spec under it (Mixtral's shape with 65,536 experts: 3.9
/// million ops) takes 20 s to generate under the sanitizers, which libFuzzer counts as a hang;
/// 109,000 ops (a mutated DeepSeekMoE of 83 layers) took 3-8 s.
/// The generator refuses a step past the limit as it grows (StepTooLarge), so with a lower
/// limit such a spec ends in its located message within a fraction of a second.
inline constexpr std::uint64_t kMostOps = 50'000;

template <class Body>
int run(const std::uint8_t* data, std::size_t size, Body&& body) {
  // Bytes past the end: simdjson reads up to 64 of them (its padding), so reserve them.
  std::string text;
  text.reserve(size + 64);
  text.assign(reinterpret_cast<const char*>(data), size);
  static const bool limited = (set_op_limit(kMostOps), true);
  (void)limited;
  try {
    body(text);
  } catch (const InputError&) {
  } catch (const UsageError&) {
  }
  return 0;
}

}  // namespace memsim::fuzz
