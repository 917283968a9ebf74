// The question of issue 30 as a user asks it: does Llama 3 8B fine-tune on one A100 80GB
// with LoRA, or with its first layers frozen, and how long is a step? The numbers of
// docs/workloads.md's fine-tuning example.
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "cli.h"

namespace fs = std::filesystem;

namespace {

std::string temp_dir(const std::string& name) {
  fs::path p = fs::path(::testing::TempDir()) / ("memsim_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

nlohmann::json run_json(const std::string& name, const std::string& sets) {
  const std::string out = temp_dir("finetune_" + name);
  const CliResult r = run_memsim("run a100-80gb llama3-8b " + sets + " --json --no-advice --outputs summary --out " + out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return nlohmann::json::parse(r.out);
}

}  // namespace

TEST(FineTuneRuns, Llama3OnOneA100WithLoraOrFrozenLayers) {
  const auto full = run_json("full", "");
  EXPECT_EQ(full["status"], "oom");
  const auto lora =
      run_json("lora", "--set workload.finetune.lora.rank=16 --set 'workload.finetune.lora.targets=[q, k, v, o]'");
  ASSERT_EQ(lora["status"], "ok");
  // 8,030,261,248 frozen bf16 weights; adapters of rank 16 on q, o (4096 -> 4096) and k, v
  // (4096 -> 1024) in 32 layers: 32 x (2 x 16 x 8192 + 2 x 16 x 5120) = 13,631,488
  // parameters, each a bf16 weight and an fp32 master (6 B) and two fp32 moments (8 B),
  // all live at the peak; their bf16 gradients are freed by then.
  const auto& at_peak = lora["tiers"]["gpu0.hbm"]["peak_by_category"];
  const std::uint64_t adapters = 13'631'488;
  EXPECT_EQ(at_peak["weight"].get<std::uint64_t>(), 2 * 8'030'261'248u + 6 * adapters);
  EXPECT_EQ(at_peak["optimizer_state"].get<std::uint64_t>(), 8 * adapters);
  EXPECT_EQ(at_peak["gradient"].get<std::uint64_t>(), 0u);
  // Freezing the embeddings and 20 of the 32 layers fits too, and its step is shorter than
  // LoRA's: nothing runs backward below layer 20, where LoRA's adapters in layer 0 need
  // the input gradient of every layer above.
  const auto frozen = run_json("frozen", "--set workload.finetune.freeze.first_layers=20");
  ASSERT_EQ(frozen["status"], "ok");
  EXPECT_LT(frozen["iteration_time_s"].get<double>(), lora["iteration_time_s"].get<double>());
}
