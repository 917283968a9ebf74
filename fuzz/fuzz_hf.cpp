// `model: hf` workloads: a Hugging Face config.json and the workload around it. The input is
// the workload's own keys (seq_len, batch, parallel, ...), a line `---`, then the config;
// without the line it is all config, under a default workload. Both are written to files (the
// config is named relative to the workload) and the step generated and replayed as the
// parallel harness does. The seeds (fuzz/seeds/hf/) are tests/data/hf's models.
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "fuzz/bounded_step.h"
#include "fuzz/fuzz.h"

namespace {

void write(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string dir = [] {
    const std::string d = "/tmp/memsim-fuzz-hf-" + std::to_string(::getpid());
    std::filesystem::create_directories(d);
    return d;
  }();
  return memsim::fuzz::run(data, size, [](const std::string& text) {
    std::string head = "seq_len: 128\nbatch: 1\n", config = text;
    if (const auto cut = text.find("\n---\n"); cut != std::string::npos) {
      head = text.substr(0, cut);
      config = text.substr(cut + 5);
    }
    // The harness names the model and the config: a spec that names them again would read
    // another file (or be refused for the repeated key).
    if (head.find("model") != std::string::npos || head.find("config") != std::string::npos) return;
    write(dir + "/config.json", config);
    write(dir + "/workload.yaml", "model: hf\nconfig: config.json\n" + head + "\n");
    memsim::fuzz::generate_and_replay(memsim::ConfigNode::parse_file(dir + "/workload.yaml"));
  });
}
