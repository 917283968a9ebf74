// Hugging Face workloads as a new user meets them: a bare config.json given as the workload
// is refused with the `model: hf` YAML that wraps it, and the wrapper it suggests runs.
#include <gtest/gtest.h>

#include <filesystem>

#include "cli.h"

namespace fs = std::filesystem;

namespace {

const char* kWrapHint =
    ".\nIt is a Hugging Face config.json (LlamaForCausalLM); memsim reads one through a workload "
    "that wraps it. Write this to llama3-8b.yaml beside it (config: is relative to that file) "
    "and give that file instead:\n"
    "  model: hf\n"
    "  config: llama3-8b.json\n"
    "  seq_len: 2048\n"
    "  batch: 1\n"
    "(`memsim list models` shows hf's other keys: dtype, optimizer, attention_impl, ...)\n";

TEST(HfConfig, BareConfigAsAWorkloadSaysHowToWrapIt) {
  const CliResult r = run_memsim("run a100-80gb tests/data/hf/llama3-8b.json --out /dev/null");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, std::string("tests/data/hf/llama3-8b.json: not a workload: expected a workload spec (a map "
                               "with 'model') or a memsim trace (\"format\": \"memsim-trace\")") +
                       kWrapHint);
  EXPECT_EQ(r.out, "");
}

TEST(HfConfig, ValidateSaysHowToWrapIt) {
  const CliResult r = run_memsim("validate tests/data/hf/llama3-8b.json");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, std::string("tests/data/hf/llama3-8b.json: not a memsim input: expected a platform "
                               "(devices:), a workload spec (model:) or a memsim trace") +
                       kWrapHint);
}

TEST(HfConfig, TheSuggestedWrapperRuns) {
  // The YAML of the message, written beside the config as it says, is a workload that runs.
  const fs::path dir = fs::path(::testing::TempDir()) / "hf_wrap";
  fs::create_directories(dir);
  fs::copy_file(fs::path(MEMSIM_SOURCE_DIR) / "tests/data/hf/gpt2.json", dir / "gpt2.json",
                fs::copy_options::overwrite_existing);
  const CliResult refused = run_memsim("run a100-80gb '" + (dir / "gpt2.json").string() + "' --out /dev/null");
  ASSERT_EQ(refused.exit_code, 1);
  const std::size_t yaml = refused.err.find("  model: hf\n");
  ASSERT_NE(yaml, std::string::npos) << refused.err;
  std::string text;
  for (std::size_t at = yaml; refused.err.compare(at, 2, "  ") == 0;) {
    const std::size_t end = refused.err.find('\n', at);
    text += refused.err.substr(at + 2, end + 1 - at - 2);
    at = end + 1;
  }
  {
    std::ofstream f(dir / "gpt2.yaml");
    f << text;
  }
  const CliResult ran = run_memsim("run a100-80gb '" + (dir / "gpt2.yaml").string() + "' --json --out '" +
                                   (dir / "out").string() + "'");
  EXPECT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_NE(ran.out.find("\"status\": \"ok\""), std::string::npos);
}

TEST(HfConfig, OtherUnknownDocumentsGetNoHfHint) {
  const CliResult r = run_memsim("run a100-80gb tests/data/et/../hf/bad/falcon.yaml --out /dev/null");
  EXPECT_EQ(r.err.find("Hugging Face config.json ("), std::string::npos) << r.err;
}

}  // namespace
