#pragma once
// What the model and policy tests share: a trace from a model spec written as YAML, the
// error a bad spec gives, and an op or buffer looked up by name.
#include <stdexcept>
#include <string>

#include "sim/core/config.h"
#include "sim/core/error.h"
#include "sim/core/params.h"
#include "sim/workload/models/models.h"
#include "sim/workload/analysis.h"
#include "sim/workload/trace.h"
#include "sim/workload/workload.h"

namespace memsim::test {

/// The trace of `yaml`'s `model` (a `name` key is allowed and ignored).
inline Trace generate(const std::string& yaml) {
  auto node = ConfigNode::parse_text(yaml, "t.yaml");
  const std::string model = node.at("model").as_string();
  const ModelInfo* info = find_model(model);
  if (info == nullptr) throw std::logic_error("no model " + model);
  Params params(node, info->params, "model " + model, {"model", "name"});
  return info->generate(params);
}

/// The trace of a whole workload spec, its `parallel:` section included (generate_workload).
inline Trace workload(const std::string& yaml) { return generate_workload(ConfigNode::parse_text(yaml, "w.yaml")); }

/// The message of the InputError that `workload(yaml)` throws, or "(no error)".
inline std::string workload_error(const std::string& yaml) {
  try {
    workload(yaml);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

/// The message of the InputError that generating `yaml` throws, or "(no error)".
inline std::string error_of(const std::string& yaml) {
  try {
    generate(yaml);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

inline const Op& op_named(const Trace& t, const std::string& name) {
  for (const Op& op : t.ops)
    if (op.name == name) return op;
  throw std::logic_error("no op " + name);
}

inline const Buffer* find_buffer(const Trace& t, const std::string& name) {
  for (const Buffer& b : t.buffers)
    if (b.name == name) return &b;
  return nullptr;
}

inline const Buffer& buffer_named(const Trace& t, const std::string& name) {
  if (const Buffer* b = find_buffer(t, name)) return *b;
  throw std::logic_error("no buffer " + name);
}

// Bytes of forward activations still live when the forward pass ends: what autograd saved.
inline std::uint64_t saved_activation_bytes(const Trace& t) {
  const Liveness l = compute_liveness(t);
  OpId end = 0;
  for (const Op& op : t.ops)
    if (op.phase == Phase::forward) end = op.id;
  std::uint64_t sum = 0;
  for (const Buffer& b : t.buffers)
    if (b.category == Category::activation && b.producer != kNoOp && b.producer <= end &&
        l.last_use[b.id] != kNoOp && l.last_use[b.id] > end)
      sum += b.bytes;
  return sum;
}

}  // namespace memsim::test
