// The workload's `parallel:` section (tp, sp, dp, ep, pp, zero, micro_batches, global_batch,
// schedule, virtual_stages, prefetch, ...): a workload spec generated with it — each rank's
// step as parallelize() and the pipeline make it — and replayed in zero time. The seeds
// (fuzz/seeds/parallel/) are layouts users ask for, hostile ones among them.
#include "fuzz/bounded_step.h"
#include "fuzz/fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return memsim::fuzz::run(data, size, [](const std::string& text) {
    memsim::fuzz::generate_and_replay(memsim::ConfigNode::parse_text(text, "fuzz.yaml"));
  });
}
