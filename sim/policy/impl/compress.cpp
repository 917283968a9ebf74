// Gist (Jain et al., ISCA 2018): activations kept for the backward pass are stashed in a
// smaller encoding between their last forward use and their first backward use.
//
// rewrite() changes the trace: after a stashed buffer's last forward use an `encode` op
// writes the encoded buffer and the original dies; before its first backward use a `decode`
// op writes a full-size copy, which the backward ops then read. Encodings, first that
// applies:
//   binarize  a ReLU output whose backward readers are all relu_backward, which needs only
//             the sign: 1 bit per element (Gist's Binarize)
//   sparse    any other ReLU output: the non-zeros in CSR with 1-byte column indices (Gist's
//             Sparse Storage Dense Compute), (1 - sparsity) x elements x (element bytes + 1)
//   fp16/fp8  any other stashed buffer wider than that: 2 or 1 bytes per element (Delayed
//             Precision Reduction; lossy — memsim does not model the accuracy)
// A buffer is encoded only when the encoding is smaller and at least one op runs between
// its last forward use and its first backward use. Encode and decode move the original and
// the encoded bytes (a memory-bound kernel: the roofline's bytes term).
#include <algorithm>
#include <cmath>
#include <memory>

#include <fmt/format.h>

#include "sim/core/units.h"
#include "sim/policy/policy.h"

namespace memsim {
namespace {

constexpr unsigned kBinarize = 1, kSparse = 2, kFp16 = 4, kFp8 = 8;

struct Stats {
  std::size_t binarized = 0, sparse = 0, reduced = 0;
  std::uint64_t stashed_bytes = 0, encoded_bytes = 0;
};

class CompressPolicy final : public Policy {
 public:
  CompressPolicy(unsigned modes, std::string mode_text, double sparsity)
      : modes_(modes), mode_text_(std::move(mode_text)), sparsity_(sparsity) {}

  std::optional<Rewritten> rewrite(const Trace& in, const PlatformSpec&) const override;
  PlanResult plan(const PlanningContext& ctx) const override {
    return {plan_free_at_last_use(ctx.trace, ctx.liveness), label(nullptr), {}, {}, {}};
  }
  std::string label(const Stats* stats) const {
    std::string s = fmt::format("compress(mode={}, sparsity={}", mode_text_, sparsity_);
    if (stats)
      s += fmt::format(": {} binarized, {} sparse, {} reduced; {} stashed as {}", stats->binarized,
                       stats->sparse, stats->reduced,
                       format_bytes(static_cast<double>(stats->stashed_bytes)),
                       format_bytes(static_cast<double>(stats->encoded_bytes)));
    return s + ")";
  }

 private:
  unsigned modes_;
  std::string mode_text_;
  double sparsity_;
};

bool is_relu_kind(const std::string& kind) { return kind == "relu" || kind == "relu6"; }

std::optional<Rewritten> CompressPolicy::rewrite(const Trace& in, const PlatformSpec&) const {
  const std::size_t n = in.buffers.size();
  // Per buffer: its last use before the first backward use, and that first backward use.
  std::vector<OpId> last_fwd(n, kNoOp), first_bwd(n, kNoOp);
  std::vector<std::uint8_t> relu_out(n, 0), only_relu_backward(n, 1);
  for (const Buffer& b : in.buffers)
    if (b.producer != kNoOp) {
      last_fwd[b.id] = b.producer;
      relu_out[b.id] = is_relu_kind(in.ops[b.producer].kind);
    }
  for (const Op& op : in.ops) {
    for (const auto* list : {&op.inputs, &op.updates})
      for (BufferId b : *list) {
        if (first_bwd[b] != kNoOp) {
          if (list == &op.updates || op.kind != "relu_backward") only_relu_backward[b] = 0;
          continue;
        }
        if (op.phase == Phase::backward) {
          first_bwd[b] = op.id;
          if (list == &op.updates || op.kind != "relu_backward") only_relu_backward[b] = 0;
        } else {
          last_fwd[b] = op.id;
          // An in-place ReLU (relu_) leaves a ReLU output in the buffer it updates.
          if (list == &op.updates && is_relu_kind(op.kind)) relu_out[b] = 1;
          else if (list == &op.updates) relu_out[b] = 0;
        }
      }
  }

  // What each stashed buffer becomes: encoded bytes, or 0 to keep it as it is.
  Stats stats;
  std::vector<std::uint64_t> encoded(n, 0);
  std::vector<const char*> how(n, nullptr);
  for (const Buffer& b : in.buffers) {
    if (b.persistent || b.producer == kNoOp || first_bwd[b.id] == kNoOp) continue;
    if (in.ops[b.producer].phase != Phase::forward || first_bwd[b.id] <= last_fwd[b.id] + 1) continue;
    const int element = dtype_bytes(in.ops[b.producer].dtype);
    const auto elements = static_cast<double>(b.bytes / static_cast<std::uint64_t>(element));
    std::uint64_t bytes = b.bytes;
    const char* kind = nullptr;
    if ((modes_ & kBinarize) && relu_out[b.id] && only_relu_backward[b.id]) {
      bytes = static_cast<std::uint64_t>(std::ceil(elements / 8));
      kind = "binarize";
    } else if ((modes_ & kSparse) && relu_out[b.id]) {
      bytes = static_cast<std::uint64_t>(std::ceil((1 - sparsity_) * elements * (element + 1)));
      kind = "sparse";
    } else if ((modes_ & (kFp16 | kFp8)) && element > ((modes_ & kFp8) ? 1 : 2)) {
      bytes = static_cast<std::uint64_t>(elements) * ((modes_ & kFp8) ? 1u : 2u);
      kind = "reduce";
    }
    if (!kind || bytes >= b.bytes) continue;
    encoded[b.id] = std::max<std::uint64_t>(bytes, 1);
    how[b.id] = kind;
    stats.stashed_bytes += b.bytes;
    stats.encoded_bytes += encoded[b.id];
    if (kind[0] == 'b') ++stats.binarized;
    else if (kind[0] == 's') ++stats.sparse;
    else ++stats.reduced;
  }
  // Nothing to stash: the trace as it is, under a label that says so.
  if (stats.stashed_bytes == 0) return Rewritten{in, label(&stats), {}};

  Trace out = in.without_ops();
  std::vector<BufferId> enc(n, 0), dec(n, 0);
  std::vector<std::vector<BufferId>> encode_after(in.ops.size()), decode_before(in.ops.size());
  for (const Buffer& b : in.buffers) {
    if (!encoded[b.id]) continue;
    enc[b.id] = out.add_buffer(b.name + ".encoded", encoded[b.id], b.category);
    dec[b.id] = out.add_buffer(b.name + ".decoded", b.bytes, b.category);
    out.buffers[enc[b.id]].device = out.buffers[dec[b.id]].device = b.device;
    encode_after[last_fwd[b.id]].push_back(b.id);
    decode_before[first_bwd[b.id]].push_back(b.id);
  }
  out.ops.reserve(in.ops.size() + 2 * (stats.binarized + stats.sparse + stats.reduced));
  auto codec = [&](const Op& like, BufferId b, bool encode) {
    Op op;
    op.name = in.buffers[b].name + (encode ? ".encode" : ".decode");
    op.kind = encode ? "encode" : "decode";
    op.phase = like.phase;
    op.device = like.device;
    op.stream = like.stream;
    op.inputs = {encode ? b : enc[b]};
    op.outputs = {encode ? enc[b] : dec[b]};
    op.bytes_moved = static_cast<double>(in.buffers[b].bytes + encoded[b]);
    op.dtype = in.ops[in.buffers[b].producer].dtype;
    out.add_op(std::move(op));
  };
  for (const Op& op : in.ops) {
    for (BufferId b : decode_before[op.id]) codec(op, b, false);
    Op copy = op;
    for (auto* list : {&copy.inputs, &copy.updates})
      for (BufferId& b : *list)
        if (encoded[b] && op.id >= first_bwd[b]) b = dec[b];
    out.add_op(std::move(copy));
    for (BufferId b : encode_after[op.id]) codec(op, b, true);
  }
  return Rewritten{std::move(out), label(&stats), {}};
}

}  // namespace

PolicyInfo compress_policy() {
  return {"compress",
          "Gist-style encoding (Jain et al. 2018) of activations kept for backward: binarized "
          "ReLU masks, sparse ReLU outputs, lossy fp16/fp8 stashing; encode/decode ops added",
          {{"mode",
            "encodings to use, joined by '+': binarize, sparse (Gist's lossless pair), fp16 or fp8 "
            "(lossy)",
            "binarize+sparse"},
           {"sparsity", "fraction of zeros in a ReLU output, for the sparse encoding", "0.5"}},
          [](const Params& params) -> std::unique_ptr<Policy> {
            const ConfigNode m = params.get("mode");
            const std::string text = m.as_string();
            unsigned modes = 0;
            std::size_t start = 0;
            while (start <= text.size()) {
              const std::size_t end = std::min(text.find('+', start), text.size());
              const std::string part = text.substr(start, end - start);
              const unsigned bit = part == "binarize" ? kBinarize
                                   : part == "sparse" ? kSparse
                                   : part == "fp16"   ? kFp16
                                   : part == "fp8"    ? kFp8
                                                      : 0u;
              if (!bit || (modes & bit))
                m.fail_expected("encodings joined by '+' from binarize, sparse, fp16, fp8 (each once)");
              modes |= bit;
              start = end + 1;
            }
            if ((modes & kFp16) && (modes & kFp8)) m.fail_expected("fp16 or fp8, not both");
            const ConfigNode s = params.get("sparsity");
            const double sparsity = s.as_double();
            if (!(sparsity >= 0 && sparsity < 1)) s.fail_expected("a fraction of zeros in [0, 1)");
            return std::make_unique<CompressPolicy>(modes, text, sparsity);
          }};
}

}  // namespace memsim
