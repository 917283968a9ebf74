#include "sim/workload/recomputed_ops.h"

namespace memsim {

namespace {

// Whether `mark` occurs in `name` followed by one of `next` (or by the end, when `at_end`).
bool marked(std::string_view name, std::string_view mark, char next, bool at_end) {
  for (auto at = name.find(mark); at != std::string_view::npos; at = name.find(mark, at + 1)) {
    const auto after = at + mark.size();
    if (after == name.size() ? at_end : name[after] == next) return true;
  }
  return false;
}

}  // namespace

bool is_recomputed_op(std::string_view name) {
  // "@recompute" at the end, or before a micro-batch's "@mb2" (not "@recomputed"); the
  // selective tag with the op's own name after it (".recompute.qk").
  return marked(name, kRecomputedOpSuffix, '@', true) || marked(name, kRecomputedOpTag, '.', false);
}

}  // namespace memsim
