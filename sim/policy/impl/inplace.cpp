// inplace: MXNet's two memory optimisations of the training graph (Chen et al. 2015/2016,
// "in-place" and "memory sharing"). A planning pass rewrites the trace so an elementwise op
// (an activation, an addition, dropout, and their backward ops) writes its result over an
// input that dies at that op and has the result's size: the output buffer disappears, the op
// updates the input in place, and later readers read the input's buffer. Buffers whose
// lifetimes do not overlap then share memory through liveness, as `none` frees them.
//
// On stderr it reports the planned peak (ideal allocator) against `none` and `keep-all`.
#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "sim/exec/replay.h"
#include "sim/policy/policy.h"

namespace memsim {
namespace {

// Elementwise kinds whose result can overwrite an input of its size.
const std::set<std::string, std::less<>> kElementwise{
    "relu",          "relu6",          "dropout",        "add",           "mul",
    "gelu",          "silu",           "tanh",           "sigmoid",       "softmax",
    "log_softmax",   "relu_backward",  "relu6_backward", "dropout_backward",
    "gelu_backward", "silu_backward",  "tanh_backward",  "sigmoid_backward",
    "softmax_backward", "log_softmax_backward"};

struct InPlace {
  Trace trace;
  std::size_t ops_in_place = 0;
  std::uint64_t bytes_merged = 0;
};

InPlace rewrite_in_place(const Trace& in) {
  const Liveness l = compute_liveness(in);
  std::vector<OpId> last(l.last_use);
  std::vector<BufferId> alias(in.buffers.size());  // buffer -> the buffer holding it now
  for (BufferId b = 0; b < alias.size(); ++b) alias[b] = b;
  std::vector<std::uint8_t> gone(in.buffers.size(), 0);
  std::vector<Op> ops = in.ops;
  InPlace out;
  for (Op& op : ops) {
    for (auto* list : {&op.inputs, &op.updates})
      for (BufferId& b : *list) b = alias[b];
    if (!kElementwise.contains(op.kind)) continue;
    bool done = false;
    for (std::size_t k = 0; k < op.outputs.size() && !done; ++k) {
      const BufferId o = op.outputs[k];
      const Buffer& ob = in.buffers[o];
      for (BufferId i : op.inputs) {
        const Buffer& ib = in.buffers[i];
        if (ib.persistent || ib.producer == kNoOp || ib.bytes != ob.bytes ||
            ib.category != ob.category || last[i] != op.id ||
            std::count(op.inputs.begin(), op.inputs.end(), i) != 1)
          continue;
        // o becomes i: the op updates i, and i lives as long as o did.
        op.outputs.erase(op.outputs.begin() + static_cast<std::ptrdiff_t>(k));
        op.updates.push_back(i);
        alias[o] = i;
        gone[o] = 1;
        last[i] = l.last_use[o] == kNoOp ? op.id : std::max(op.id, l.last_use[o]);
        ++out.ops_in_place;
        out.bytes_merged += ob.bytes;
        done = true;
        break;
      }
    }
  }
  // Renumber the buffers that remain.
  Trace& t = out.trace;
  t.name = in.name;
  t.description = in.description;
  t.measured_on = in.measured_on;
  t.parameters = in.parameters;
  std::vector<BufferId> id(in.buffers.size(), kNoOp);
  for (const Buffer& b : in.buffers) {
    if (gone[b.id]) continue;
    id[b.id] = t.add_buffer(b.name, b.bytes, b.category, b.persistent);
    t.buffers.back().device = b.device;
  }
  for (Op& op : ops) {
    for (auto* list : {&op.inputs, &op.outputs, &op.updates})
      for (BufferId& b : *list) b = id[b];
    t.add_op(std::move(op));
  }
  return out;
}

class InplacePolicy final : public Policy {
 public:
  std::optional<Rewritten> rewrite(const Trace& trace, const PlatformSpec&) const override {
    InPlace r = rewrite_in_place(trace);
    const std::uint64_t none = exec::baseline_peak_bytes(trace);
    const std::uint64_t keep_all = exec::keep_all_peak_bytes(trace);
    const std::uint64_t peak = exec::baseline_peak_bytes(r.trace);
    auto saved = [&](std::uint64_t ref) {
      return fmt::format("{} less than {} ({:.1f}%)", format_bytes(static_cast<double>(ref - std::min(ref, peak))),
                         format_bytes(static_cast<double>(ref)),
                         ref ? 100.0 * static_cast<double>(ref - std::min(ref, peak)) / static_cast<double>(ref) : 0.0);
    };
    std::string note = fmt::format("inplace: {} ops write over a dying input ({} of buffers gone); "
                                   "planned peak {}: {} under none, {} under keep-all",
                                   r.ops_in_place, format_bytes(static_cast<double>(r.bytes_merged)),
                                   format_bytes(static_cast<double>(peak)), saved(none), saved(keep_all));
    return Rewritten{std::move(r.trace), fmt::format("inplace({} ops in place)", r.ops_in_place),
                     {std::move(note)}};
  }

  PlanResult plan(const PlanningContext& ctx) const override {
    return {plan_free_at_last_use(ctx.trace, ctx.liveness), "inplace", {}, {}, {}};
  }
};

}  // namespace

PolicyInfo inplace_policy() {
  return {"inplace",
          "in-place elementwise ops over inputs that die there, and memory sharing by liveness "
          "(MXNet's planning); reports the saving against none and keep-all",
          {},
          [](const Params&) { return std::make_unique<InplacePolicy>(); }};
}

}  // namespace memsim
