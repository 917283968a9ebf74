// summary.json's throughput, asked as a user comparing layouts asks it: the samples and
// tokens a step trains on over every data-parallel replica, the FLOPs of every GPU (a
// simulated rank counted once for each peer it speaks for), MFU and HFU.
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "cli.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string temp_dir(const std::string& name) {
  fs::path p = fs::path(::testing::TempDir()) / ("memsim_tput_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p.string();
}

json run_json(const std::string& args, const std::string& name) {
  const std::string out = temp_dir(name);
  const CliResult r = run_memsim("run " + args + " --no-advice --out " + out);
  EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.err;
  json j = json::parse(slurp(out + "/summary.json"));
  fs::remove_all(out);
  return j;
}

// Llama 7B cut to 4 layers at 1,024 tokens: a step of seconds.
const std::string kLlama = "dgx-h100 llama-7b --set workload.layers=4 --set workload.seq_len=1024";

}  // namespace

// The rates are the step's counts over its time, and MFU is the model's FLOPs over what the
// GPUs could have done in it.
TEST(Throughput, RatesAreTheStepsCountsOverItsTime) {
  const json s = run_json("a100-80gb gpt2-small --set workload.batch=4", "gpt2");
  const json& t = s["throughput"];
  const double step = s["iteration_time_s"].get<double>();
  EXPECT_EQ(t["gpus"], 1);
  EXPECT_EQ(t["samples_per_step"], 4);
  EXPECT_EQ(t["tokens_per_step"], 4 * 1024);
  EXPECT_NEAR(t["tokens_per_s"].get<double>() * step, 4096, 1e-6);
  EXPECT_NEAR(t["samples_per_s"].get<double>() * step, 4, 1e-9);
  EXPECT_EQ(t["peak_dtype"], "fp16");
  EXPECT_DOUBLE_EQ(t["peak_flops_per_gpu"].get<double>(), 312e12);
  EXPECT_NEAR(t["mfu"].get<double>(), t["model_flops_per_step"].get<double>() / (312e12 * step), 1e-12);
  EXPECT_DOUBLE_EQ(t["mfu"].get<double>(), t["hfu"].get<double>());  // nothing recomputed
  EXPECT_NEAR(t["gpu_hours_per_1e9_tokens"].get<double>(), step / 3600 * 1e9 / 4096, 1e-9);
  // Forward and backward: 6 FLOPs per parameter and token, and the attention's scores on
  // top (GPT-2 small: 124M parameters, of which 38.6M the tied embedding, whose lookup costs
  // no multiply). Between 6 N T for the layers alone and twice that.
  const double n = s["throughput"]["model_flops_per_step"].get<double>();
  EXPECT_GT(n, 6 * 85e6 * 4096);
  EXPECT_LT(n, 12 * 124e6 * 4096);
}

// The same global batch of the same model on 8 GPUs laid out three ways: the model's FLOPs
// per sample do not depend on how the ranks split them (a simulated rank stands for its
// peers, a pipeline's stages each for theirs).
TEST(Throughput, ModelFlopsPerSampleDoNotDependOnTheLayout) {
  const json dp = run_json(kLlama + " --set parallel.dp=8 --set parallel.micro_batches=2", "dp8");
  const json pp = run_json(kLlama + " --set parallel.tp=2 --set parallel.pp=2 --set parallel.dp=2 "
                                    "--set parallel.micro_batches=8",
                           "tp2pp2dp2");
  const json cp = run_json(kLlama + " --set parallel.tp=4 --set parallel.cp=2 --set parallel.micro_batches=16", "tp4cp2");
  for (const json* s : {&dp, &pp, &cp}) {
    const json& t = (*s)["throughput"];
    EXPECT_EQ(t["gpus"], 8);
    EXPECT_EQ(t["samples_per_step"], 16);
    EXPECT_EQ(t["tokens_per_step"], 16 * 1024);
  }
  const double per_sample = dp["throughput"]["model_flops_per_step"].get<double>() / 16;
  for (const json* s : {&pp, &cp}) {
    // Tensor-parallel ranks each run the norms and elementwise ops of their whole
    // activations: a little more than the model's.
    const double other = (*s)["throughput"]["model_flops_per_step"].get<double>() / 16;
    EXPECT_GE(other, per_sample * 0.999);
    EXPECT_LT(other, per_sample * 1.01);
  }
}

// Full recomputation runs each layer's forward again: HFU counts it, MFU does not. With
// the forward a third of the step's FLOPs, HFU / MFU is about 4 / 3.
TEST(Throughput, HfuCountsTheRecomputationMfuDoesNot) {
  const json none = run_json(kLlama + " --set parallel.dp=8", "none");
  const json full = run_json(kLlama + " --set parallel.dp=8 --set workload.recompute=full", "full");
  EXPECT_DOUBLE_EQ(full["throughput"]["model_flops_per_step"].get<double>(),
                   none["throughput"]["model_flops_per_step"].get<double>());
  const double ratio = full["throughput"]["hfu"].get<double>() / full["throughput"]["mfu"].get<double>();
  EXPECT_GT(ratio, 1.25);
  EXPECT_LT(ratio, 4.0 / 3.0);  // the head and the loss are not run again
  EXPECT_NEAR(full["throughput"]["hardware_flops_per_step"].get<double>() -
                  full["throughput"]["model_flops_per_step"].get<double>(),
              8 * full["recompute_flops"].get<double>(), 1e-6 * full["recompute_flops"].get<double>());
}

// A CNN has samples and no tokens; replicas on each device of a node train their own; a
// step that does not fit has no throughput.
TEST(Throughput, SamplesWithoutTokensAndNoneForAnOom) {
  const json cnn = run_json("dgx-h100 resnet18 --set workload.batch=16", "cnn");
  EXPECT_EQ(cnn["throughput"]["gpus"], 8);
  EXPECT_EQ(cnn["throughput"]["samples_per_step"], 8 * 16);
  EXPECT_TRUE(cnn["throughput"]["tokens_per_s"].is_null());
  EXPECT_TRUE(cnn["throughput"]["gpu_hours_per_1e9_tokens"].is_null());
  EXPECT_GT(cnn["throughput"]["mfu"].get<double>(), 0);
  const json oom = run_json("a100-40gb gpt2-xl --set workload.batch=64", "oom");
  ASSERT_EQ(oom["status"], "oom");
  EXPECT_TRUE(oom["throughput"].is_null());
}
