#include "sim/app/plan_cli.h"

#include <string>

#include <fmt/format.h>

#include "sim/app/sweep_cli.h"
#include "sim/core/error.h"
#include "sim/plan/plan.h"
#include "sim/sweep/runner.h"

namespace memsim {
namespace {

// A whole number from `least` to `most`, as CLI11 checks an option.
CLI::Validator count(const char* what, long least, long most) {
  return CLI::Validator(
      [=](std::string& v) {
        const bool digits = !v.empty() && v.size() < 12 && v.find_first_not_of("0123456789") == std::string::npos;
        return digits && std::stol(v) >= least && std::stol(v) <= most
                   ? std::string()
                   : fmt::format("expected {} from {} to {}, got '{}'", what, least, most, v);
      },
      fmt::format("N from {} to {}", least, most));
}

class Command : public PlanCommand {
 public:
  explicit Command(CLI::App& app) {
    cmd_ = app.add_subcommand("plan", "the fastest layouts (TP, PP, DP, micro-batch, ZeRO, recomputation) that fit "
                                      "on N GPUs, by branch and bound over simulated runs (docs/plan.md)");
    cmd_->add_option("platform", o_.platform, "PLATFORM (file or built-in preset)")->required();
    cmd_->add_option("workload", o_.workload, "MODEL: a transformer workload (file or built-in preset)")->required();
    cmd_->add_option("--gpus", o_.gpus, "GPUs to lay the model out on (default: all of the platform's)")
        ->check(count("a number of GPUs", 1, 1 << 20));
    cmd_->add_option("--global-batch", o_.global_batch, "samples per optimizer step (default: one per GPU)")
        ->check(count("a global batch", 1, 1L << 40));
    cmd_->add_option("--seq-len", o_.seq_len, "tokens per sample (default: the workload's)")
        ->check(count("a sequence length", 1, 1 << 24));
    cmd_->add_option("--max-tp", o_.max_tp, "the largest tensor-parallel size (default: the GPUs of one node)")
        ->check(count("a tensor-parallel size", 1, 1024));
    cmd_->add_option("--max-pp", o_.max_pp, "the most pipeline stages (default: as many as divide the layers)")
        ->check(count("a number of stages", 1, 1024));
    cmd_->add_option("--max-micro-batch", o_.max_micro_batch, "the largest micro-batch tried (default 16)")
        ->check(count("a micro-batch", 1, 1 << 20));
    cmd_->add_option("--zero", o_.zero, "ZeRO stages to try, separated by commas (default 0,1,2,3)");
    cmd_->add_option("--recompute", o_.recompute,
                     "recomputation to try: none, selective, full, separated by commas (default all three)");
    cmd_->add_option("--virtual-stages", o_.virtual_stages,
                     "model chunks per device tried with the interleaved schedule (default 2)");
    cmd_->add_flag("--offload", o_.offload,
                   "also try each layout with the optimizer offloaded to the host (policy zero-offload)");
    cmd_->add_flag("--hsdp", o_.hsdp,
                   "also try each zero 3 layout whose data-parallel ranks span nodes sharded within each node "
                   "instead (parallel.hsdp: FSDP's HYBRID_SHARD)");
    cmd_->add_option("--top", o_.top, "layouts to show and to prove by simulation (default 10)")
        ->check(count("a number of layouts", 1, 10000));
    cmd_->add_option("-j,--jobs", o_.jobs, "layouts simulated at once (default: one per CPU)")
        ->check(count("a number of workers", 1, 4096));
    cmd_->add_option("--shard", shard_, "I/N: simulate every N-th layout from the I-th (Slurm arrays: as for sweep)");
    cmd_->add_option("-o,--out", o_.out_dir, "output folder: results.csv and the runs (default out/plan)");
    cmd_->add_option("--set", o_.sets, "override a value, as for run (not the keys each layout sets)");
    cmd_->add_flag("--exhaustive", o_.exhaustive, "simulate every valid layout, pruning nothing");
    cmd_->add_flag("--force", o_.force, "rerun layouts already simulated");
  }

  std::optional<int> dispatch() override {
    if (!cmd_->parsed()) return std::nullopt;
    PlanOptions o = o_;
    if (!shard_.empty()) {
      parse_shard(shard_, &o.shard, &o.shards);
    } else {
      std::string origin;
      shard_from_slurm(&o.shard, &o.shards, &origin);
    }
    o.memsim = memsim_executable();
    return plan_command(o);
  }

 private:
  CLI::App* cmd_ = nullptr;
  PlanOptions o_;
  std::string shard_;
};

}  // namespace

std::unique_ptr<PlanCommand> add_plan_command(CLI::App& app) { return std::make_unique<Command>(app); }

}  // namespace memsim
