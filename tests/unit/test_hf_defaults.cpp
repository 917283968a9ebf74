// `model: hf` trains as a Hugging Face fine-tuning run does by default (Trainer(bf16=True),
// its default optimizer AdamW): bf16 weights and gradients over fp32 master weights and
// fp32 Adam moments, 2 + 2 + 4 + 8 = 16 bytes per parameter. Keys in the workload win.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "tests/model_helpers.h"

using namespace memsim;
using namespace memsim::test;

namespace {

struct Bytes {
  std::uint64_t weight = 0, master = 0, state = 0;
};

Bytes persistent_bytes(const Trace& t) {
  Bytes b;
  auto ends_with = [](const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
  };
  for (const Buffer& buf : t.buffers) {
    if (buf.category == Category::weight) (ends_with(buf.name, ".master") ? b.master : b.weight) += buf.bytes;
    if (buf.category == Category::optimizer_state) b.state += buf.bytes;
  }
  return b;
}

// Bytes of the gradient of one weight (the first MLP's, 768 x 3072), and of the weight.
std::pair<std::uint64_t, std::uint64_t> fc_grad_and_weight(const Trace& t) {
  const Buffer* grad = find_buffer(t, "transformer.h.0.mlp.c_fc.weight.grad");
  const Buffer* weight = find_buffer(t, "transformer.h.0.mlp.c_fc.weight");
  return {grad ? grad->bytes : 0, weight ? weight->bytes : 0};
}

const std::string kGpt2 = "model: hf\nconfig: " + std::string(MEMSIM_SOURCE_DIR) +
                          "/tests/data/hf/gpt2.json\nseq_len: 64\nbatch: 1\n";

TEST(HfDefaults, Bf16MixedPrecisionWithAdamW) {
  const Trace t = workload(kGpt2);
  const std::uint64_t p = t.parameters;
  ASSERT_EQ(p, 124'439'808u);
  const Bytes b = persistent_bytes(t);
  EXPECT_EQ(b.weight, 2 * p);   // bf16 weights
  EXPECT_EQ(b.master, 4 * p);   // fp32 master copies
  EXPECT_EQ(b.state, 8 * p);    // exp_avg and exp_avg_sq in fp32
  const std::pair<std::uint64_t, std::uint64_t> bf16_fc{2 * 768 * 3072, 2 * 768 * 3072};
  EXPECT_EQ(fc_grad_and_weight(t), bf16_fc);  // bf16 weight, bf16 .grad
  EXPECT_NE(t.description.find("bf16 mixed, adamw"), std::string::npos) << t.description;
  // Spelling the defaults out changes nothing.
  const Trace spelled = workload(kGpt2 + "dtype: bf16\nmixed_precision: true\noptimizer: adamw\n");
  EXPECT_EQ(spelled.description, t.description);
  EXPECT_EQ(spelled.buffers.size(), t.buffers.size());
}

TEST(HfDefaults, KeysInTheWorkloadWin) {
  const Trace t = workload(kGpt2 + "dtype: fp32\nmixed_precision: false\noptimizer: momentum\n");
  const std::uint64_t p = t.parameters;
  const Bytes b = persistent_bytes(t);
  EXPECT_EQ(b.weight, 4 * p);
  EXPECT_EQ(b.master, 0u);
  EXPECT_EQ(b.state, 4 * p);
  const std::pair<std::uint64_t, std::uint64_t> fp32_fc{4 * 768 * 3072, 4 * 768 * 3072};
  EXPECT_EQ(fc_grad_and_weight(t), fp32_fc);
  // Only the optimizer given: bf16 mixed stays, SGD keeps no state.
  const Bytes sgd = persistent_bytes(workload(kGpt2 + "optimizer: sgd\n"));
  EXPECT_EQ(sgd.weight, 2 * p);
  EXPECT_EQ(sgd.master, 4 * p);
  EXPECT_EQ(sgd.state, 0u);
  // fp32 given alone: mixed precision has nothing to mix, so it is off; AdamW stays.
  const Bytes fp32 = persistent_bytes(workload(kGpt2 + "dtype: fp32\n"));
  EXPECT_EQ(fp32.weight, 4 * p);
  EXPECT_EQ(fp32.master, 0u);
  EXPECT_EQ(fp32.state, 8 * p);
  // Both given, and at odds: the error is at the key.
  EXPECT_NE(workload_error(kGpt2 + "dtype: fp32\nmixed_precision: true\n").find(
                "mixed_precision: needs dtype fp16 or bf16, got fp32"),
            std::string::npos);
}

TEST(HfDefaults, TheListingSaysWhichFrameworkDefault) {
  const ModelInfo* hf = find_model("hf");
  ASSERT_NE(hf, nullptr);
  for (const ParamSpec& s : hf->params) {
    if (s.name == "dtype") {
      EXPECT_EQ(s.default_value, "bf16");
      EXPECT_NE(s.description.find("Trainer(bf16=True)"), std::string::npos);
    }
    if (s.name == "optimizer") {
      EXPECT_EQ(s.default_value, "adamw");
      EXPECT_NE(s.description.find("adamw_torch"), std::string::npos);
    }
  }
  // The native models keep theirs.
  for (const ParamSpec& s : find_model("gpt2")->params)
    if (s.name == "optimizer") EXPECT_EQ(s.default_value, "momentum");
}

}  // namespace
