#pragma once
// The op kinds memsim knows. A trace may carry any kind string, but a device's `efficiency`
// and `memory_efficiency` tables may name only these, so a typo in a platform file is an
// error rather than an efficiency silently never applied. Generators and importers add their
// kinds here.
#include <string>
#include <vector>

namespace memsim {

/// In a fixed order: forward kinds, their backward kinds, optimizer steps, data movement.
const std::vector<std::string>& known_op_kinds();
bool is_known_op_kind(const std::string& kind);

}  // namespace memsim
