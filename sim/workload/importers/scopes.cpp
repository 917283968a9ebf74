#include "sim/workload/importers/scopes.h"

#include <fmt/format.h>

namespace memsim {

bool is_scope_label(std::string_view name) {
  auto starts = [&](std::string_view p) { return name.substr(0, p.size()) == p; };
  if (name.empty() || starts("[pytorch|profiler|") || starts("ProfilerStep#") || starts("autograd::engine::") ||
      starts("torch::autograd::"))
    return false;
  // Autograd's backward functions (AddmmBackward0, CppNode<...>) sit under the engine's
  // wrapper; the caller knows the nesting, the name says the rest.
  const auto b = name.rfind("Backward");
  if (b != std::string_view::npos && name.find_first_not_of("0123456789", b + 8) == std::string_view::npos)
    return false;
  return true;
}

std::string_view scope_name(std::string_view label) {
  if (label.substr(0, kModuleLabel.size()) == kModuleLabel) label.remove_prefix(kModuleLabel.size());
  return label;
}

std::string scoped_op_name(std::string_view scope, std::string_view base) {
  if (scope.empty()) return std::string(base);
  return fmt::format("{}/{}", scope, base);
}

std::string output_buffer_name(std::string_view op_name, std::size_t k, std::size_t n) {
  return n == 1 ? fmt::format("{}:out", op_name) : fmt::format("{}:out{}", op_name, k);
}

}  // namespace memsim
