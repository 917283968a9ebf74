#include "sim/sweep/resolve.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "sim/core/error.h"
#include "sim/core/files.h"
#include "sim/core/paths.h"
#include "sim/core/presets.h"
#include "sim/inputs/policy_args.h"
#include "sim/platform/platform.h"

namespace memsim {
namespace {

using Edit = std::pair<std::vector<std::string>, std::string>;  // key path, value text


std::string set_text(const Override& o) {
  return (o.target == "platform" ? o.key : o.target + "." + o.key) + "=" + o.value;
}

// The document after the edits, as canonical YAML: what the id hashes. Comments, quoting
// and layout of the file do not count; key order does (it is the file's). When the text is
// not YAML or an edit cannot be applied, the loader will refuse the inputs anyway; the raw
// text and the edits then stand in for the resolved text.
std::string emit_with(const std::string& text, const std::vector<Edit>& edits) {
  try {
    YAML::Node root = YAML::Load(text);
    for (const auto& [path, value] : edits) {
      // yaml-cpp nodes are handles: assigning one to another copies content, so walk with a
      // chain of fresh handles (as ConfigNode::override_value does).
      std::vector<YAML::Node> chain{root};
      for (std::size_t i = 0; i < path.size(); ++i) {
        YAML::Node here = chain.back();
        if (here.IsDefined() && !here.IsNull() && !here.IsMap()) throw std::runtime_error("not a map");
        if (i + 1 == path.size())
          here[path[i]] = YAML::Load(value);
        else
          chain.push_back(here[path[i]]);
      }
    }
    YAML::Emitter out;
    out << root;
    return std::string(out.c_str()) + "\n";
  } catch (const std::exception&) {
    std::string s = text + "\n# unresolved edits\n";
    for (const auto& [path, value] : edits) {
      for (const auto& p : path) s += p + ".";
      s += "=" + value + "\n";
    }
    return s;
  }
}

}  // namespace

std::vector<std::string> RunRequest::run_args() const {
  std::vector<std::string> args{"run", device, workload, "--policy", policy};
  for (const auto& o : overrides) {
    args.push_back("--set");
    args.push_back(set_text(o));
  }
  return args;
}

std::string hash_hex(const std::string& text) {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return fmt::format("{:016x}", h);
}

const std::string& Resolver::raw_text(const std::string& arg, const std::string& folder) {
  const std::string key = folder + '\n' + arg;
  if (auto it = raw_.find(key); it != raw_.end()) return it->second;
  std::string text;
  std::error_code ec;
  if (std::filesystem::is_regular_file(arg, ec)) {
    text = read_input_file(arg);
  } else if (const Preset* p = find_preset(folder, arg)) {
    text = p->text;
  }
  return raw_.emplace(key, std::move(text)).first->second;
}

std::string Resolver::device_text(const RunRequest& r) {
  const std::string& raw = raw_text(r.device, "configs/devices");
  std::vector<Edit> edits;
  std::optional<ConfigNode> root;
  for (const auto& o : r.overrides) {
    if (o.target != "platform") continue;
    try {
      if (!root) root = ConfigNode::parse_text(raw, r.device);
      std::vector<std::vector<std::string>> paths;
      for (const auto& key : expand_device_glob(o.key, platform_document_devices(*root)))
        if (auto path = platform_override_path(*root, key)) paths.push_back(std::move(*path));
      if (!paths.empty()) {
        for (auto& path : paths) edits.emplace_back(std::move(path), o.value);
        continue;
      }
    } catch (const InputError&) {
    }
    edits.emplace_back(std::vector<std::string>{"?", o.key}, o.value);  // names nothing: kept for the hash
  }
  return emit_with(raw, edits);
}

std::string Resolver::workload_text(const RunRequest& r) {
  const std::string& raw = raw_text(r.workload, "workloads");
  std::vector<Edit> edits;
  for (const auto& o : r.overrides)
    if (o.target == "workload") edits.emplace_back(split_dots(o.key), o.value);
  // A trace takes no overrides and may be large: its own text is its resolved text.
  if (edits.empty() && raw.find("memsim-trace") != std::string::npos) return raw;
  return emit_with(raw, edits);
}

std::string Resolver::policy_text(const RunRequest& r) {
  const bool is_file = r.policy.ends_with(".yaml") || r.policy.ends_with(".yml") ||
                       path_exists(r.policy);
  const std::string raw = is_file ? raw_text(r.policy, "") : "policy: " + r.policy + "\n";
  std::vector<Edit> edits;
  for (const auto& o : r.overrides)
    if (o.target == "policy") edits.emplace_back(std::vector<std::string>{o.key}, o.value);
  return emit_with(raw, edits);
}

std::string Resolver::resolved_text(const RunRequest& r) {
  std::lock_guard lock(mutex_);
  return fmt::format("memsim {}\n--- device\n{}--- workload\n{}--- policy\n{}", MEMSIM_VERSION,
                     device_text(r), workload_text(r), policy_text(r));
}

ResolvedRun Resolver::resolve(const RunRequest& r) {
  std::lock_guard lock(mutex_);
  ResolvedRun out;
  out.request = r;
  const std::string dev = device_text(r), work = workload_text(r), pol = policy_text(r);
  out.id = hash_hex(fmt::format("memsim {}\n--- device\n{}--- workload\n{}--- policy\n{}",
                                MEMSIM_VERSION, dev, work, pol));
  // Messages about an overridden value name its origin, so the origins are part of the key.
  auto key_of = [&](const char* kind, const std::string& arg, const std::string& text,
                    const char* target) {
    std::string key = std::string(kind) + '\n' + arg + '\n' + text;
    for (const auto& o : r.overrides)
      if (o.target == target) key += '\n' + o.origin;
    return key;
  };
  auto check = [&](const std::string& key, auto load) -> const Loaded& {
    if (auto it = loaded_.find(key); it != loaded_.end()) return it->second;
    Loaded l;
    try {
      load(l);
    } catch (const InputError& e) {
      l.error = e.what();
    } catch (const UsageError& e) {
      l.error = e.what();
    } catch (const std::exception& e) {
      l.error = fmt::format("cannot load the inputs: {}", e.what());
    }
    return loaded_.emplace(key, std::move(l)).first->second;
  };
  const Loaded& p = check(key_of("platform", r.device, dev, "platform"), [&](Loaded& l) {
    PlatformSpec spec = load_platform_arg(r.device, r.overrides);
    for (std::size_t d : spec.compute_devices())
      l.compute_tiers.push_back(spec.tiers[*spec.devices[d].compute_tier].name);
  });
  const Loaded& w = check(key_of("workload", r.workload, work, "workload"),
                          [&](Loaded&) { load_workload_arg(r.workload, r.overrides); });
  const Loaded& q = check(key_of("policy", r.policy, pol, "policy"),
                          [&](Loaded&) { make_policy_arg(r.policy, r.overrides); });
  out.error = !p.error.empty() ? p.error : !w.error.empty() ? w.error : q.error;
  if (out.error.empty()) out.compute_tiers = p.compute_tiers;
  return out;
}

}  // namespace memsim
