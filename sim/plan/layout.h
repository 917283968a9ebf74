#pragma once
// `memsim plan`'s search space: the layouts a model can train in on N GPUs at a global batch
// (docs/plan.md). A layout is everything `memsim run` is told besides the platform and the
// model: tensor, pipeline and data parallelism, the micro-batch, the pipeline schedule,
// sequence parallelism, the ZeRO stage, recomputation and optimizer offload.
#include <cstdint>
#include <string>
#include <vector>

#include "sim/inputs/inputs.h"

namespace memsim {

enum class Recompute : std::uint8_t { none, selective, full };
std::string_view to_string(Recompute r);

struct Layout {
  std::uint32_t tp = 1, pp = 1, dp = 1;
  std::uint32_t micro_batch = 1;    // samples per micro-batch (workload.batch)
  std::uint32_t micro_batches = 1;  // global batch / (micro_batch x dp)
  std::uint32_t virtual_stages = 1; // > 1: the interleaved schedule; else 1F1B (with pp > 1)
  bool sp = false;
  int zero = 0;
  std::uint32_t hsdp = 0;           // zero 3 sharded within groups of hsdp data-parallel ranks (0: all)
  Recompute recompute = Recompute::none;
  bool offload = false;             // policy zero-offload in place of none

  /// "tp 8 sp, pp 4 1f1b, dp 2, mb 1 x 64, zero 1, recompute full": the layout in words,
  /// also its stable sort key among layouts of equal bounds.
  std::string text() const;
  std::string schedule() const;  // "-" (no pipeline), "1f1b" or "interleaved"
};

/// What the enumeration needs to know about the model and the platform.
struct LayoutSpace {
  std::uint32_t gpus = 1;
  std::int64_t global_batch = 1;
  std::uint32_t layers = 0;          // numbered layers a pipeline splits
  std::uint32_t max_tp = 1, max_pp = 1, max_micro_batch = 16;
  std::vector<std::uint32_t> virtual_stages{2};  // chunks per device tried with interleaving
  std::vector<int> zero{0, 1, 2, 3};
  std::vector<Recompute> recompute{Recompute::none, Recompute::selective, Recompute::full};
  bool offload = false;
  /// Also zero 3 as HSDP: sharded within the data-parallel ranks of one node (gpus_per_node /
  /// tp of them), where dp spans more than one node.
  bool hsdp = false;
  std::uint32_t gpus_per_node = 0;
};

/// Every layout of `space` whose sizes divide as they must: tp x pp x dp = gpus, tp up to
/// max_tp, pp dividing the layers (pp x virtual_stages for interleaving, whose micro-batch
/// count must also be a multiple of pp), the micro-batch dividing global_batch / dp, SP only
/// with tp > 1, ZeRO above 0 only with dp > 1 (one data-parallel rank shards nothing), offload
/// with ZeRO 0 or 3 (what policy zero-offload models); with `hsdp`, each zero 3 layout whose
/// data-parallel ranks span nodes also sharded within a node instead (not offloaded). What the
/// model itself refuses (tp not dividing its heads) is found later, by generating it. In a
/// fixed order.
std::vector<Layout> enumerate_layouts(const LayoutSpace& space);

/// The --set overrides that make `memsim run` run `layout`. `materialized` says the
/// workload's attention is not FlashAttention's, so selective recomputation is
/// attention_impl: selective (otherwise it is what FlashAttention already does).
std::vector<Override> layout_overrides(const Layout& layout, std::int64_t global_batch, bool materialized);

/// "none,full" -> values; UsageError naming the flag otherwise.
std::vector<int> parse_zero_list(const std::string& text);
std::vector<Recompute> parse_recompute_list(const std::string& text);

}  // namespace memsim
