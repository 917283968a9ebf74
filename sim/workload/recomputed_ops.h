#pragma once
// How a generated step marks the forward ops it runs again itself, by name (an Op carries no
// flag for it): full recomputation (`recompute: full`, ModelBuilder::end_recompute) appends
// "@recompute" to each re-run op's name ("h.3.mlp.fc1@recompute", "@recompute@mb2" in a
// micro-batch), and selective recomputation of the attention core tags its re-run ops
// ".recompute." ("h.3.attn.recompute.qk"). The time and FLOPs of these ops are the
// workload's recomputation, counted with a policy's (summary.json recompute_time_s).
#include <string_view>

namespace memsim {

/// Appended to the name of an op that a full recomputation runs again.
inline constexpr std::string_view kRecomputedOpSuffix = "@recompute";
/// Put after the layer's name (before the op's own) in the ops selective recomputation
/// runs again: NAME + kRecomputedOpTag + ".qk".
inline constexpr std::string_view kRecomputedOpTag = ".recompute";

/// Whether `op_name` is a forward op the workload runs again in its backward (either mark).
bool is_recomputed_op(std::string_view op_name);

}  // namespace memsim
