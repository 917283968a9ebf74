#pragma once
// "Did you mean": the known name closest to a mistyped one, for the messages about unknown
// commands, presets, policies, models and keys.
#include <string>
#include <string_view>
#include <vector>

namespace memsim {

/// The candidate within a small edit distance of `name` (a third of its length, at least
/// 1, at most 3; case ignored; a candidate that starts with `name` counts too), the closest
/// first; "" when none is close, or when `name` is a number.
std::string closest_name(std::string_view name, const std::vector<std::string>& candidates);

/// "; did you mean 'x'?" for the closest candidate (at the end of a message), or "".
std::string did_you_mean(std::string_view name, const std::vector<std::string>& candidates);
/// " (did you mean 'x'?)" for the closest candidate (within a message), or "".
std::string did_you_mean_aside(std::string_view name, const std::vector<std::string>& candidates);

}  // namespace memsim
