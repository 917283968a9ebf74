// Pipelines whose first and last stages share a weight (GPT's token embedding, read again by
// the LM head), run on the engine across one to four 8-GPU nodes, against counts worked out
// by hand.
//
// The model: a GPT of L = p v layers (hidden h = 64, seq s = 32, batch b = 1, fp16 with
// mixed-precision Adam, vocabulary V = 1000) on p stages of v chunks each. Per micro-batch
// the residual stream crosses each of the p v - 1 chunk boundaries once forward and its
// gradient once backward: 2 (p v - 1) sends of b s h x 2 bytes = 4 KiB (and as many
// receives). The tied embedding's gradient is never sent: the first stage (the embedding's
// part) and the last (the head's part) each accumulate their own over the m micro-batches,
// then all-reduce it once per step over the two of them, V h x 2 bytes = 125 KiB each, before
// their optimizer steps (Megatron's embedding group). With symmetric ranks the trace holds
// one rank per stage, whatever dp is.
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include <fmt/format.h>

#include "sim/core/config.h"
#include "sim/core/presets.h"
#include "sim/platform/platform.h"
#include "sim/policy/policy.h"
#include "sim/run/run.h"
#include "sim/workload/parallel.h"
#include "tests/model_helpers.h"

using namespace memsim;
using namespace memsim::test;

namespace {

constexpr std::uint64_t kHidden = 64, kSeq = 32, kVocab = 1000;
constexpr std::uint64_t kMessage = kSeq * kHidden * 2;       // b s h, fp16
constexpr std::uint64_t kEmbeddingGrad = kVocab * kHidden * 2;  // V h, fp16

// A DGX H100 SuperPOD of `nodes` nodes (8 GPUs each, NVSwitch inside, InfiniBand between).
PlatformSpec superpod(std::uint32_t nodes) {
  std::string text = find_preset("configs/devices", "dgx-h100-superpod")->text;
  const std::size_t at = text.find("\nnodes: 32\n");
  EXPECT_NE(at, std::string::npos);
  text.replace(at, 11, fmt::format("\nnodes: {}\n", nodes));
  return load_platform(ConfigNode::parse_text(text, "superpod.yaml"));
}

std::string gpt(std::uint32_t pp, std::uint32_t v, std::uint32_t dp, std::uint32_t m, const std::string& schedule) {
  return fmt::format(
      "model: gpt\nlayers: {}\nhidden: {}\nheads: 4\nvocab: {}\nseq_len: {}\nmax_positions: {}\nbatch: 1\n"
      "dtype: fp16\nmixed_precision: true\noptimizer: adam\n"
      "parallel: {{pp: {}, dp: {}, micro_batches: {}, schedule: {}, virtual_stages: {}}}\n",
      pp * v, kHidden, kVocab, kSeq, kSeq, pp, dp, m, schedule, v);
}

RunResult simulate_on(const PlatformSpec& platform, Trace step) {
  RunInputs in;
  in.platform = platform;
  in.workloads = {std::move(step)};
  const PolicyInfo* none = find_policy("none");
  auto policy = none->create(Params(ConfigNode::parse_text("{}", "p.yaml"), none->params, "none"));
  in.policy = policy.get();
  return run(in);
}

struct Counts {
  std::size_t sends = 0, recvs = 0, embedding_sends = 0, embedding_reduces = 0;
  std::uint64_t send_bytes = 0, reduce_bytes = 0;
};

Counts count(const Trace& t) {
  Counts c;
  for (const Op& op : t.ops) {
    const bool embedding = op.name.find("wte.weight.grad") != std::string::npos;
    if (op.kind == "send") {
      ++c.sends;
      c.send_bytes += op.message_bytes;
      c.embedding_sends += embedding;
    }
    c.recvs += op.kind == "recv";
    if (op.kind == "all_reduce" && embedding) {
      ++c.embedding_reduces;
      c.reduce_bytes += op.message_bytes;
    }
  }
  return c;
}

// stages, chunks per stage, dp, micro-batches, schedule, nodes
using Layout = std::tuple<std::uint32_t, std::uint32_t, std::uint32_t, std::uint32_t, std::string, std::uint32_t>;

class TiedPipeline : public ::testing::TestWithParam<Layout> {};

std::string layout_name(const ::testing::TestParamInfo<Layout>& info) {
  const auto& [pp, v, dp, m, schedule, nodes] = info.param;
  return fmt::format("pp{}v{}dp{}m{}{}nodes{}", pp, v, dp, m, schedule == "1f1b" ? "onefoneb" : schedule, nodes);
}

}  // namespace

TEST_P(TiedPipeline, SendsTheResidualStreamOnlyAndReducesTheEmbeddingOncePerStep) {
  const auto& [pp, v, dp, m, schedule, nodes] = GetParam();
  ASSERT_LE(pp * dp, nodes * 8);
  const Trace step = workload(gpt(pp, v, dp, m, schedule));
  const Counts c = count(step);
  const std::size_t sends = 2ull * (pp * v - 1) * m;
  EXPECT_EQ(c.sends, sends);
  EXPECT_EQ(c.recvs, sends);
  EXPECT_EQ(c.send_bytes, sends * kMessage);
  EXPECT_EQ(c.embedding_sends, 0u);
  EXPECT_EQ(c.embedding_reduces, 2u);  // the first stage's and the last's
  EXPECT_EQ(c.reduce_bytes, 2 * kEmbeddingGrad);

  const RunResult r = simulate_on(superpod(nodes), step);
  ASSERT_EQ(r.summary.status, "ok");
  EXPECT_GT(r.summary.iteration_time_s, 0.0);
  ASSERT_EQ(r.summary.pipeline.size(), pp);
  // Every send and the two reductions ran: a comm event for each.
  std::size_t sent = 0, reduced = 0;
  for (const Event& e : r.recorder.events()) {
    if (e.kind != EventKind::comm) continue;
    const Op& op = r.trace.ops[e.op];
    sent += op.kind == "send";
    reduced += op.kind == "all_reduce" && op.name.find("wte.weight.grad") != std::string::npos;
  }
  EXPECT_EQ(sent, sends);
  EXPECT_EQ(reduced, 2u);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, TiedPipeline,
    ::testing::Values(
        // The repro: dp 8 on each of two stages, each stage a node of its own.
        Layout{2, 1, 8, 2, "1f1b", 2}, Layout{2, 1, 1, 1, "1f1b", 1}, Layout{2, 1, 2, 32, "gpipe", 1},
        // Data parallelism across nodes: 16 ranks a stage.
        Layout{2, 1, 16, 4, "1f1b", 4}, Layout{2, 1, 16, 3, "gpipe", 4},
        Layout{4, 1, 2, 8, "1f1b", 1}, Layout{4, 1, 1, 5, "gpipe", 1}, Layout{4, 2, 2, 8, "interleaved", 1},
        Layout{4, 1, 8, 16, "1f1b", 4}, Layout{4, 2, 4, 4, "interleaved", 2},
        // The deep repro: 8 stages with 8 micro-batches on one node.
        Layout{8, 1, 1, 8, "1f1b", 1}, Layout{8, 1, 1, 1, "gpipe", 1}, Layout{8, 2, 1, 16, "interleaved", 1},
        Layout{8, 1, 4, 32, "1f1b", 4}, Layout{8, 1, 2, 7, "gpipe", 2},
        Layout{16, 1, 1, 16, "1f1b", 2}, Layout{16, 1, 2, 32, "1f1b", 4}, Layout{16, 2, 2, 16, "interleaved", 4},
        Layout{16, 1, 1, 3, "gpipe", 2}),
    layout_name);
