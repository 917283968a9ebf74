#include "sim/workload/recomputed_ops.h"

#include <algorithm>
#include <functional>

namespace memsim {

namespace {

// Whether `mark` occurs in `name` followed by one of `next` (or by the end, when `at_end`).
// Boyer-Moore-Horspool over the name, the mark's table made once: string_view::find compares
// at every occurrence of the mark's first character (the '.' and '@' that every op name has
// many of): 151 M of the 195 M instructions of Llama 3 70B's 64-GPU tally, 50 M now; glibc's
// memmem took 189 M.
template <const std::string_view& mark>
bool marked(std::string_view name, char next, bool at_end) {
  static const std::boyer_moore_horspool_searcher searcher(mark.begin(), mark.end());
  for (auto it = name.begin();;) {
    const auto found = std::search(it, name.end(), searcher);
    if (found == name.end()) return false;
    const auto after = static_cast<std::size_t>(found - name.begin()) + mark.size();
    if (after == name.size() ? at_end : name[after] == next) return true;
    it = found + 1;
  }
}

}  // namespace

bool is_recomputed_op(std::string_view name) {
  // "@recompute" at the end, or before a micro-batch's "@mb2" (not "@recomputed"); the
  // selective tag with the op's own name after it (".recompute.qk").
  return marked<kRecomputedOpSuffix>(name, '@', true) || marked<kRecomputedOpTag>(name, '.', false);
}

}  // namespace memsim
