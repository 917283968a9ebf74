// The `finetune` key of the transformer generators: which weights are frozen and the LoRA
// adapters beside them (FineTune in builder.h). What a key means for a given model (how
// many layers it has, which projections it names) is checked where the model is built
// (transformer.cpp); here the section's own shape.
#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sim/workload/models/builder.h"

namespace memsim {
namespace {

const std::vector<std::string> kTargets{"q", "k", "v", "qkv", "o", "gate", "up", "gate_up", "down"};

FineTune::Freeze read_freeze(const ConfigNode& node, FineTune& f) {
  if (node.is_map()) {
    node.allow_only({"first_layers"});
    const ConfigNode n = node.at("first_layers");
    f.first_layers = n.as_int_in(1, 10'000);
    return FineTune::Freeze::first_layers;
  }
  if (!node.is_scalar())
    node.fail_expected("all, embeddings, all_but_head, or a map {first_layers: N}");
  const std::string what = node.as_choice({"all", "embeddings", "all_but_head"});
  return what == "all"          ? FineTune::Freeze::all
         : what == "embeddings" ? FineTune::Freeze::embeddings
                                : FineTune::Freeze::all_but_head;
}

void read_lora(const ConfigNode& node, FineTune& f) {
  if (!node.is_map()) node.fail_expected("a map of LoRA settings (rank, alpha, dropout, targets)");
  node.allow_only({"rank", "alpha", "dropout", "targets"});
  f.lora_rank = node.at("rank").as_int_in(1, 1 << 16);
  f.lora_alpha = static_cast<double>(f.lora_rank);
  if (auto alpha = node.find("alpha")) {
    f.lora_alpha = alpha->as_double();
    if (!(f.lora_alpha > 0 && f.lora_alpha <= 1e9)) alpha->fail_expected("a number above 0");
  }
  if (auto p = node.find("dropout")) f.lora_dropout = p->as_fraction();
  if (auto targets = node.find("targets")) {
    const std::vector<ConfigNode> items = targets->items();
    if (items.empty()) targets->fail_expected(fmt::format("a list of projections from {}", fmt::join(kTargets, ", ")));
    for (const ConfigNode& item : items) {
      std::string t = item.as_choice(kTargets);
      if (std::find(f.lora_targets.begin(), f.lora_targets.end(), t) != f.lora_targets.end())
        item.fail(fmt::format("'{}' is given twice", t));
      f.lora_targets.push_back(std::move(t));
    }
  }
}

}  // namespace

ParamSpec finetune_param_spec() {
  return {"finetune",
          "none, or a map: freeze (all, embeddings, all_but_head, or {first_layers: N}: the embeddings and the "
          "first N layers) and lora {rank, alpha (default: rank), dropout (default 0), targets (of q, k, v, qkv, "
          "o, gate, up, gate_up, down; default q and v, or qkv where q, k and v are one projection)}; with lora "
          "freeze defaults to all. Frozen weights have no gradient or optimizer state",
          "none"};
}

FineTune read_finetune(const ConfigNode& node) {
  FineTune f;
  if (node.is_scalar() && node.as_string() == "none") return f;
  if (!node.is_map()) node.fail_expected("none, or a map with freeze and/or lora");
  node.allow_only({"freeze", "lora"});
  f.node = node;
  if (auto lora = node.find("lora")) read_lora(*lora, f);
  if (auto freeze = node.find("freeze"))
    f.freeze = read_freeze(*freeze, f);
  else if (f.lora())
    f.freeze = FineTune::Freeze::all;  // PEFT's get_peft_model: the base model frozen
  else
    node.fail_expected("freeze or lora (or both)");
  return f;
}

bool FineTune::targets(std::string_view projection) const {
  return std::find(lora_targets.begin(), lora_targets.end(), projection) != lora_targets.end();
}

std::string FineTune::summary() const {
  std::string frozen;
  switch (freeze) {
    case Freeze::none: break;
    case Freeze::embeddings: frozen = "embeddings frozen"; break;
    case Freeze::first_layers:
      frozen = first_layers == 1 ? "embeddings and first layer frozen"
                                 : fmt::format("embeddings and first {} layers frozen", first_layers);
      break;
    case Freeze::all_but_head: frozen = "all but the head frozen"; break;
    case Freeze::all: frozen = "base frozen"; break;
  }
  if (!lora()) return frozen;
  std::string s = fmt::format("lora r{} on {}", lora_rank, fmt::join(lora_targets, ", "));
  if (lora_alpha != static_cast<double>(lora_rank)) s += fmt::format(" (alpha {})", lora_alpha);
  if (lora_dropout > 0) s += fmt::format(" (dropout {})", lora_dropout);
  return frozen.empty() ? s : s + ", " + frozen;
}

}  // namespace memsim
