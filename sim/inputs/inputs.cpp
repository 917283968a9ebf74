#include "sim/inputs/inputs.h"

#include <algorithm>
#include <filesystem>
#include <ostream>

#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/core/paths.h"
#include "sim/core/presets.h"
#include "sim/workload/importers/importers.h"
#include "sim/workload/trace_io.h"
#include "sim/workload/workload.h"
#include "sim/core/suggest.h"

namespace memsim {
std::vector<std::string> split_dots(const std::string& key) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    auto dot = key.find('.', start);
    parts.push_back(key.substr(start, dot - start));
    if (dot == std::string::npos) return parts;
    start = dot + 1;
  }
}

namespace {

std::string join(const std::vector<std::string>& xs) {
  std::string out;
  for (const auto& x : xs) out += (out.empty() ? "" : ", ") + x;
  return out;
}

}  // namespace

Override parse_override(const std::string& text) {
  auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    throw UsageError(fmt::format("--set expects KEY=VALUE, got '{}'", text));
  Override o;
  std::string key = text.substr(0, eq);
  o.value = text.substr(eq + 1);
  o.origin = "--set " + text;
  auto dot = key.find('.');
  std::string head = key.substr(0, dot);
  if ((head == "workload" || head == "policy" || head == "platform") && dot != std::string::npos) {
    o.target = head;
    o.key = key.substr(dot + 1);
  } else if (head == "parallel" && dot != std::string::npos) {
    o.target = "workload";  // the workload's parallel: section
    o.key = key;
  } else {
    o.target = "platform";  // gpu0.hbm.capacity, pcie0.bandwidth
    o.key = key;
  }
  if (o.key.empty() || o.key.back() == '.' || o.key.find("..") != std::string::npos)
    throw UsageError(fmt::format("--set: malformed key '{}'", key));
  return o;
}

ConfigNode open_input(const InputArg& input, const std::string& folder) {
  if (input.text) return ConfigNode::parse_text(*input.text, input.name);
  const std::string& arg = input.name;
  if (path_exists(arg)) return ConfigNode::parse_file(arg);
  if (const Preset* p = find_preset(folder, arg))
    return ConfigNode::parse_text(p->text, p->path + " (built in)");
  const auto names = preset_names(folder);
  throw InputError(fmt::format("{}: no such file, and no built-in preset of that name{} (presets: {})", arg,
                               did_you_mean(arg, {names.begin(), names.end()}), join(names)));
}

PlatformSpec load_platform_arg(const InputArg& arg, const std::vector<Override>& overrides) {
  return load_platform(platform_document_arg(arg, overrides));
}

ConfigNode platform_document_arg(const InputArg& arg, const std::vector<Override>& overrides) {
  ConfigNode root = open_input(arg, "configs/devices");
  for (const auto& o : overrides) {
    if (o.target != "platform") continue;
    // "gpu*.hbm.capacity": the key at every device the glob matches.
    const auto devices = platform_document_devices(root);
    const auto keys = expand_device_glob(o.key, devices);
    if (keys.empty())
      throw InputError(fmt::format("{}: '{}' matches no device of platform {} (devices: {})", o.origin,
                                   o.key.substr(0, o.key.find('.')), root.file(), join(devices)));
    for (const auto& key : keys) {
      if (auto why = platform_override_problem(root, key)) throw InputError(fmt::format("{}: {}", o.origin, *why));
      auto path = platform_override_path(root, key);
      if (!path)
        throw InputError(fmt::format(
            "{}: '{}' names nothing in platform {} (use DEVICE.TIER.KEY like gpu0.hbm.capacity, "
            "gpu*.hbm.capacity for every GPU, DEVICE.KEY, or LINK.KEY)",
            o.origin, key, root.file()));
      root.override_value(*path, o.value, o.origin);
    }
  }
  return root;
}

Trace load_workload_arg(const InputArg& input, const std::vector<Override>& overrides,
                        const ImportOptions& import) {
  const std::string& arg = input.name;
  std::vector<const Override*> mine;
  for (const auto& o : overrides)
    if (o.target == "workload") mine.push_back(&o);
  // Traces from other tools are told by their first bytes, before any YAML parsing (an
  // Execution Trace can be large).
  if (const ForeignTrace foreign = input.text ? nullptr : sniff_foreign_trace(arg)) {
    if (!mine.empty())
      throw InputError(fmt::format("{}: {} is a trace, which has no parameters to set",
                                   mine.front()->origin, arg));
    return import_foreign_trace(arg, foreign, import);
  }
  if (import.step || !import.kineto.empty())
    throw UsageError(fmt::format("{} {}: only a PyTorch Execution Trace has ProfilerSteps and Kineto times; {} is none",
                                 import.step ? "--step" : "--kineto",
                                 import.step ? std::to_string(*import.step) : import.kineto, arg));
  ConfigNode root = open_input(input, "workloads");
  const InputKind kind = classify(root);
  if (kind == InputKind::trace) {
    if (!mine.empty())
      throw InputError(fmt::format("{}: {} is a trace, which has no parameters to set",
                                   mine.front()->origin, root.file()));
    return read_trace(root);
  }
  if (kind != InputKind::workload_spec)
    throw InputError(fmt::format(
        "{}: not a workload: expected a workload spec (a map with 'model') or a memsim trace "
        "(\"format\": \"memsim-trace\"){}",
        root.file(), hf_config_hint(root)));
  for (const auto* o : mine) root.override_value(split_dots(o->key), o->value, o->origin);
  return generate_workload(root);
}

void print_import_notes(const Trace& trace, std::ostream& out) {
  if (trace.import_notes.empty()) return;
  out << fmt::format("memsim: importing {}: {} note{}\n", trace.name, trace.import_notes.size(),
                     trace.import_notes.size() == 1 ? "" : "s");
  for (const auto& n : trace.import_notes) out << "  - " << n << "\n";
}

std::string hf_config_hint(const ConfigNode& root) {
  if (!root.is_map() || root.has("model") || !(root.has("architectures") || root.has("model_type")))
    return {};
  std::string arch = "a Hugging Face model";
  if (const auto archs = root.find("architectures");
      archs && archs->is_sequence() && !archs->items().empty() && archs->items()[0].is_scalar())
    arch = archs->items()[0].as_string();
  // A sequence the model takes: 2048, or its position limit when that is less (GPT-2: 1024).
  std::int64_t seq = 2048;
  for (const char* key : {"n_positions", "max_position_embeddings"})
    if (const auto n = root.find(key); n && n->is_scalar()) {
      const std::string text = n->as_string();  // a hint only: a malformed limit is not ours to report
      if (!text.empty() && text.size() < 10 && text.find_first_not_of("0123456789") == std::string::npos)
        seq = std::min<std::int64_t>(seq, std::max<std::int64_t>(1, std::stoll(text)));
    }
  const std::filesystem::path file(root.file());
  const std::string name = file.filename().string();
  const std::string wrapper = file.stem().string() + ".yaml";
  return fmt::format(
      ".\nIt is a Hugging Face config.json ({}); memsim reads one through a workload that wraps "
      "it. Write this to {} beside it (config: is relative to that file) and give that file "
      "instead:\n"
      "  model: hf\n"
      "  config: {}\n"
      "  seq_len: {}\n"
      "  batch: 1\n"
      "(`memsim list models` shows hf's other keys: dtype, optimizer, attention_impl, ...)",
      arch, wrapper, name, seq);
}

InputKind classify(const ConfigNode& root) {
  if (!root.is_map()) return InputKind::unknown;
  if (is_native_trace(root)) return InputKind::trace;
  if (is_workload_spec(root)) return InputKind::workload_spec;
  if (root.has("devices")) return InputKind::platform;
  return InputKind::unknown;
}

}  // namespace memsim
