#include "sim/sweep/sweep.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "sim/core/checked.h"
#include "sim/core/error.h"
#include "sim/core/limits.h"
#include "sim/core/files.h"
#include "sim/core/paths.h"
#include "sim/core/presets.h"
#include "sim/core/registry.h"
#include "sim/policy/policy.h"
#include "sim/report/writers.h"
#include "sim/workload/models/models.h"
#include "sim/workload/parallel.h"
#include "sim/workload/workload.h"

namespace memsim {
namespace {

namespace fs = std::filesystem;

std::string join(const std::vector<std::string>& xs, const char* sep = ", ") {
  std::string out;
  for (const auto& x : xs) out += (out.empty() ? "" : sep) + x;
  return out;
}

std::vector<ConfigNode> nonempty_list(const ConfigNode& node) {
  auto items = node.items();
  if (items.empty()) node.fail("expected a non-empty list, got an empty list");
  return items;
}

// A value as --set takes it: scalars as written, lists and maps in flow style.
// An axis value as the text of a --set. Aliases inside it are written out in full, so its
// length is bounded: a few aliases of aliases (a "billion laughs") would otherwise make
// gigabytes of text from a few lines.
constexpr std::size_t kMostValueText = 1 << 16;

void append_value_text(const ConfigNode& n, std::string& out, const ConfigNode& top) {
  if (out.size() > kMostValueText)
    top.fail(fmt::format("this value is over {} characters written out (YAML aliases repeated inside "
                         "aliases?); an axis value is a number, a size or a short list",
                         kMostValueText));
  if (n.is_scalar()) {
    out += n.as_string();
    return;
  }
  if (n.is_sequence()) {
    out += '[';
    bool first = true;
    for (const auto& item : n.items()) {
      if (!first) out += ", ";
      first = false;
      append_value_text(item, out, top);
    }
    out += ']';
    return;
  }
  if (n.is_map()) {
    out += '{';
    bool first = true;
    for (const auto& [k, v] : n.entries()) {
      if (!first) out += ", ";
      first = false;
      out += k + ": ";
      append_value_text(v, out, top);
    }
    out += '}';
    return;
  }
  n.fail_expected("a value");
}

std::string value_text(const ConfigNode& n) {
  std::string out;
  append_value_text(n, out, n);
  return out;
}

// A file path relative to the sweep file's folder, or a built-in preset of that name.
std::string input_arg(const ConfigNode& item, const fs::path& base, const char* folder,
                      const char* what) {
  const std::string name = item.as_string();
  const fs::path path = (base / name).lexically_normal();
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return path.string();
  if (find_preset(folder, name)) return name;
  item.fail(fmt::format("no such file '{}' (paths are relative to the sweep file), and no built-in "
                        "{} of that name (`memsim list` shows them)",
                        path.string(), what));
}

ConfigNode open_arg(const std::string& arg, const char* folder) {
  if (const Preset* p = find_preset(folder, arg); p && !path_exists(arg))
    return ConfigNode::parse_text(p->text, p->path + " (built in)");
  return ConfigNode::parse_file(arg);
}

std::vector<std::string> policy_names() { return names_of(builtin_policies()); }

// The part of a message after its "where: " prefix, when it starts with `origin`.
std::string after_origin(const std::string& message, const std::string& origin) {
  if (message.starts_with(origin + ": ")) return message.substr(origin.size() + 2);
  return message;
}

struct Loader {
  SweepSpec spec;
  fs::path base;
  std::vector<ConfigNode> device_docs;
  std::vector<std::optional<std::vector<std::string>>> workload_params;  // nullopt: a trace
  std::vector<const PolicyInfo*> policy_infos;
  std::map<std::string, std::string> axis_where;  // key -> where it was given

  void read_devices(const ConfigNode& list) {
    for (const auto& item : nonempty_list(list)) {
      SweepInput in{item.as_string(), input_arg(item, base, "configs/devices", "device")};
      ConfigNode doc = open_arg(in.arg, "configs/devices");
      if (classify(doc) != InputKind::platform)
        item.fail(fmt::format("expected a platform file (with devices:), got '{}'", in.arg));
      spec.devices.push_back(std::move(in));
      device_docs.push_back(std::move(doc));
    }
  }

  void read_workloads(const ConfigNode& list) {
    for (const auto& item : nonempty_list(list)) {
      SweepInput in{item.as_string(), input_arg(item, base, "workloads", "workload")};
      std::optional<std::vector<std::string>> params;
      const Preset* preset = path_exists(in.arg) ? nullptr : find_preset("workloads", in.arg);
      // A trace has no parameters; avoid parsing a large one here.
      bool trace = false;
      if (!preset) {
        const std::string head = read_input_head(in.arg, 4096);
        std::error_code ec;
        trace = head.find("memsim-trace") != std::string::npos || fs::file_size(in.arg, ec) > (1u << 20);
      }
      if (!trace) {
        ConfigNode doc = open_arg(in.arg, "workloads");
        if (is_workload_spec(doc)) {
          params.emplace(std::vector<std::string>{"model", "name"});
          if (const ModelInfo* m = find_model(doc.at("model").as_string()))
            for (const auto& p : m->params) params->push_back(p.name);
        }
      }
      spec.workloads.push_back(std::move(in));
      workload_params.push_back(std::move(params));
    }
  }

  void read_policies(const std::optional<ConfigNode>& list) {
    if (!list) {
      spec.policies.push_back({"none", "none"});
      policy_infos.push_back(find_policy("none"));
      return;
    }
    for (const auto& item : nonempty_list(*list)) {
      const std::string name = item.as_string();
      const fs::path path = (base / name).lexically_normal();
      std::error_code ec;
      if (fs::is_regular_file(path, ec)) {
        ConfigNode doc = ConfigNode::parse_file(path.string());
        const ConfigNode policy = doc.at("policy");
        const PolicyInfo* info = find_policy(policy.as_string());
        if (!info) policy.fail_expected("a policy name (" + join(policy_names()) + ")");
        spec.policies.push_back({name, path.string()});
        policy_infos.push_back(info);
      } else if (const PolicyInfo* info = find_policy(name)) {
        spec.policies.push_back({name, name});
        policy_infos.push_back(info);
      } else {
        item.fail(fmt::format("no such policy '{}', and no such file '{}' (`memsim list` shows "
                              "the policies)",
                              name, path.string()));
      }
    }
  }

  SweepAxis read_axis(const std::string& key, const ConfigNode& key_node, const ConfigNode& list) {
    if (auto seen = axis_where.find(key); seen != axis_where.end())
      key_node.fail(fmt::format("axis '{}' is already given at {}", key, seen->second));
    axis_where.emplace(key, key_node.where());
    SweepAxis axis;
    axis.key = key;
    try {
      axis.target = parse_override(key + "=");
    } catch (const UsageError&) {
      key_node.fail(fmt::format("unknown axis: '{}' is not a key like workload.batch, "
                                "policy.budget or gpu0.hbm.capacity",
                                key));
    }
    for (const auto& v : nonempty_list(list)) {
      axis.values.push_back(value_text(v));
      axis.origins.push_back(fmt::format("{} ({}={})", v.where(), key, axis.values.back()));
    }
    axis.on_device.assign(spec.devices.size(), false);
    axis.on_workload.assign(spec.workloads.size(), false);
    axis.on_policy.assign(spec.policies.size(), false);
    const std::string& k = axis.target.key;
    bool any = false;
    if (axis.target.target == "platform") {
      for (std::size_t d = 0; d < spec.devices.size(); ++d) {
        const auto keys = expand_device_glob(k, platform_document_devices(device_docs[d]));
        if (keys.empty() || !platform_override_path(device_docs[d], keys.front())) continue;
        // The path exists; a last key the platform does not know is caught by loading it.
        Override o = axis.target;
        o.value = axis.values[0];
        o.origin = axis.origins[0];
        try {
          load_platform_arg(spec.devices[d].arg, {o});
        } catch (const InputError& e) {
          const std::string what = e.what();
          if (what.find("unknown key") != std::string::npos)
            key_node.fail(fmt::format("unknown axis: in device {}: {}", spec.devices[d].name,
                                      after_origin(what, o.origin)));
        }
        axis.on_device[d] = any = true;
      }
      if (!any) {
        std::vector<std::string> names;
        for (const auto& d : spec.devices) names.push_back(d.name);
        key_node.fail(fmt::format("unknown axis: '{}' names nothing in any device of this sweep "
                                  "({}); use DEVICE.TIER.KEY like gpu0.hbm.capacity, DEVICE.KEY, "
                                  "or LINK.KEY",
                                  k, join(names)));
      }
    } else if (axis.target.target == "workload") {
      const std::string param = k.substr(0, k.find('.'));
      if (param == "parallel") {
        // The parallel: section every model spec takes (parallel.dp, parallel.zero, ...).
        const std::string sub = k.find('.') == std::string::npos ? "" : k.substr(k.find('.') + 1);
        std::vector<std::string> names;
        for (const auto& ps : parallel_param_specs()) names.push_back(ps.name);
        if (std::find(names.begin(), names.end(), sub) == names.end())
          key_node.fail(fmt::format("unknown axis: '{}': parallel takes {}", k, join(names)));
      }
      for (std::size_t w = 0; w < spec.workloads.size(); ++w) {
        if (!workload_params[w]) continue;
        const auto& ps = *workload_params[w];
        if (param == "parallel" || std::find(ps.begin(), ps.end(), param) != ps.end())
          axis.on_workload[w] = any = true;
      }
      if (!any)
        key_node.fail(fmt::format("unknown axis: no workload of this sweep has a parameter '{}' "
                                  "(`memsim list` shows each model's parameters)",
                                  param));
    } else {
      std::set<std::string> known;
      for (std::size_t p = 0; p < spec.policies.size(); ++p) {
        for (const auto& ps : policy_infos[p]->params) {
          known.insert(ps.name);
          if (ps.name == k) axis.on_policy[p] = any = true;
        }
      }
      if (!any)
        key_node.fail(fmt::format(
            "unknown axis: no policy of this sweep ({}) takes a parameter '{}'{}", join([&] {
              std::vector<std::string> names;
              for (const auto& p : spec.policies) names.push_back(p.name);
              return names;
            }()),
            k, known.empty() ? "" : " (they take: " + join({known.begin(), known.end()}) + ")"));
    }
    return axis;
  }

  void read_set(const ConfigNode& set) {
    for (const auto& [key, list] : set.entries()) {
      spec.dimensions.push_back({spec.axes.size()});
      spec.axes.push_back(read_axis(key, set.key_node(key), list));
    }
  }

  void read_zip(const ConfigNode& zip) {
    std::vector<ConfigNode> groups = zip.is_map() ? std::vector<ConfigNode>{zip} : nonempty_list(zip);
    for (const auto& group : groups) {
      const auto entries = group.entries();
      if (entries.empty()) group.fail("expected a map of axes that vary together, got an empty map");
      std::vector<std::size_t> dim;
      for (const auto& [key, list] : entries) {
        SweepAxis axis = read_axis(key, group.key_node(key), list);
        const SweepAxis* first = dim.empty() ? nullptr : &spec.axes[dim.front()];
        if (first && axis.values.size() != first->values.size())
          list.fail(fmt::format("expected {} values, as {} has (zipped axes vary together), got {}",
                                first->values.size(), first->key, axis.values.size()));
        dim.push_back(spec.axes.size());
        spec.axes.push_back(std::move(axis));
      }
      spec.dimensions.push_back(std::move(dim));
    }
  }

  void read_fit(const ConfigNode& node) {
    node.allow_only({"axis", "slowdown", "min", "max"});
    FitSpec fit;
    const auto axis = node.find("axis");
    if (axis) fit.axis = axis->as_string();
    bool any = false;
    for (const auto& ps : workload_params) {
      const bool has = ps && std::find(ps->begin() + 2, ps->end(), fit.axis) != ps->end();
      fit.on_workload.push_back(has);
      any = any || has;
    }
    if (!any)
      (axis ? *axis : node).fail(fmt::format("no workload of this sweep has a parameter '{}'", fit.axis));
    if (auto s = node.find("slowdown")) {
      fit.slowdown = s->is_scalar() ? s->as_double() : 0;
      if (fit.slowdown < 1) s->fail_expected("a factor >= 1, like 1.25");
    }
    if (auto m = node.find("min")) fit.min = m->as_int_in(1, INT64_MAX / 4);
    if (auto m = node.find("max")) {
      fit.max = m->as_int_in(1, INT64_MAX / 4);
      if (fit.max < fit.min) m->fail_expected(fmt::format("an integer >= min ({})", fit.min));
    }
    spec.fit = fit;
  }
};

}  // namespace

SweepSpec load_sweep(const std::string& path) {
  Loader l;
  ConfigNode root = ConfigNode::parse_file(path);
  if (!root.is_map())
    root.fail_expected("a sweep: a map with devices, workloads and optionally policies, set, zip, fit");
  root.allow_only({"description", "devices", "workloads", "policies", "set", "zip", "fit", "outputs"});
  l.spec.file = path;
  l.base = fs::path(path).parent_path();
  l.read_devices(root.at("devices"));
  l.read_workloads(root.at("workloads"));
  l.read_policies(root.find("policies"));
  if (auto set = root.find("set")) l.read_set(*set);
  if (auto zip = root.find("zip")) l.read_zip(*zip);
  if (auto fit = root.find("fit")) l.read_fit(*fit);
  if (auto outputs = root.find("outputs")) {
    // A list or one comma-separated string of memsim run's output names.
    std::vector<std::string> chosen;
    auto take = [&](const ConfigNode& n) {
      const std::string v = n.as_string();
      std::stringstream in(v);
      for (std::string name; std::getline(in, name, ',');) {
        if (!is_output_name(name))
          n.fail(fmt::format("expected output names from {}; got '{}'", output_names_text(), name));
        chosen.push_back(name);
      }
    };
    if (outputs->is_sequence())
      for (const ConfigNode& item : outputs->items()) take(item);
    else
      take(*outputs);
    if (chosen.empty()) outputs->fail_expected("one or more output names (summary, memory, ..., all)");
    if (std::find(chosen.begin(), chosen.end(), "summary") == chosen.end() &&
        std::find(chosen.begin(), chosen.end(), "all") == chosen.end())
      chosen.insert(chosen.begin(), "summary");  // what results.csv is made of
    l.spec.outputs = fmt::format("{}", fmt::join(chosen, ","));
  }
  return std::move(l.spec);
}

std::string shape_text(const SweepSpec& spec) {
  auto n = [](std::size_t k, const char* one, const char* many) {
    return fmt::format("{} {}", k, k == 1 ? one : many);
  };
  std::string s = n(spec.devices.size(), "device", "devices") + " x " +
                  n(spec.workloads.size(), "workload", "workloads") + " x " +
                  n(spec.policies.size(), "policy", "policies");
  for (const auto& dim : spec.dimensions) {
    std::string keys;
    for (std::size_t a : dim) keys += (keys.empty() ? "" : "+") + spec.axes[a].key;
    s += fmt::format(" x {} {}", spec.axes[dim.front()].values.size(), keys);
  }
  return s;
}

std::optional<std::uint64_t> sweep_point_count(const SweepSpec& spec) {
  std::optional<std::uint64_t> count =
      checked_mul(spec.devices.size(), checked_mul(spec.workloads.size(), spec.policies.size()).value_or(UINT64_MAX));
  for (const auto& dim : spec.dimensions)
    if (count) count = checked_mul(*count, spec.axes[dim.front()].values.size());
  return count;
}

std::vector<SweepPoint> expand_sweep(const SweepSpec& spec, Resolver& resolver,
                                     std::size_t* dropped) {
  // Counted before anything is made: a sweep of a million points is a mistake (an axis of
  // an axis), and listing it would take the machine's memory.
  const std::optional<std::uint64_t> count = sweep_point_count(spec);
  if (!count || *count > point_limit())
    throw InputError(fmt::format("{}: {} points ({}), more than the {} a sweep may list or run; split it into "
                                 "several sweeps, or raise the limit with --max-points N (or MEMSIM_MAX_POINTS=N)",
                                 spec.file, count ? std::to_string(*count) : std::string("over 2^64"),
                                 shape_text(spec), format_limit(point_limit())));
  std::vector<SweepPoint> points;
  std::set<std::string> seen;
  std::size_t repeats = 0;
  std::vector<std::size_t> at(spec.dimensions.size(), 0);
  auto dim_size = [&](std::size_t d) { return spec.axes[spec.dimensions[d].front()].values.size(); };
  for (std::size_t d = 0; d < spec.devices.size(); ++d)
    for (std::size_t w = 0; w < spec.workloads.size(); ++w)
      for (std::size_t p = 0; p < spec.policies.size(); ++p) {
        std::fill(at.begin(), at.end(), 0);
        while (true) {
          SweepPoint pt;
          pt.device = d;
          pt.workload = w;
          pt.policy = p;
          pt.values.assign(spec.axes.size(), std::nullopt);
          RunRequest req{spec.devices[d].arg, spec.workloads[w].arg, spec.policies[p].arg, {}};
          for (std::size_t k = 0; k < spec.dimensions.size(); ++k)
            for (std::size_t a : spec.dimensions[k]) {
              const SweepAxis& axis = spec.axes[a];
              if (!axis.on_device[d] && !axis.on_workload[w] && !axis.on_policy[p]) continue;
              Override o = axis.target;
              o.value = axis.values[at[k]];
              o.origin = axis.origins[at[k]];
              req.overrides.push_back(o);
              pt.values[a] = o.value;
            }
          if (spec.fit && spec.fit->on_workload[w]) {
            RunRequest base = req;
            std::erase_if(base.overrides, [&](const Override& o) {
              return o.target == "workload" &&
                     (o.key == spec.fit->axis || o.key.starts_with(spec.fit->axis + "."));
            });
            pt.fit_base = std::move(base);
          }
          pt.run = resolver.resolve(req);
          if (seen.insert(pt.run.id).second) {
            pt.index = points.size();
            points.push_back(std::move(pt));
          } else {
            ++repeats;
          }
          // Odometer over the dimensions, the last fastest.
          std::size_t k = spec.dimensions.size();
          while (k > 0) {
            if (++at[k - 1] < dim_size(k - 1)) break;
            at[k - 1] = 0;
            --k;
          }
          if (k == 0) break;
        }
      }
  if (dropped) *dropped = repeats;
  return points;
}

std::vector<const SweepPoint*> shard_points(const std::vector<SweepPoint>& points, int shard,
                                            int shards) {
  std::vector<const SweepPoint*> out;
  for (const auto& p : points)
    if (static_cast<int>(p.index % shards) == shard - 1) out.push_back(&p);
  return out;
}

}  // namespace memsim
