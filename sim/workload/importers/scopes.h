#pragma once
// Names for the ops and buffers of an imported trace, from the scopes that enclose them: a
// `record_function` range of the user's, an nn.Module's forward. An op's name is its scope,
// a slash, and the node it came from ("encoder.layers.3.self_attn/aten::addmm#2452"); what it
// allocates is named after it ("encoder.layers.3.self_attn/aten::addmm#2452:out", ":out0",
// ":out1"... when it makes several). The reports take an op's layer from what precedes the
// last slash (report/peak.h, layer_of). An op that no scope encloses keeps the node's name.
#include <cstddef>
#include <string>
#include <string_view>

namespace memsim {

/// Kineto's label for a module's forward ("nn.Module: Linear_3").
inline constexpr std::string_view kModuleLabel = "nn.Module: ";

/// A scope whose name (modules joined) is longer names nothing: its ops keep their names, and
/// the notes count it. Every op in a scope carries its name, so a megabyte of label over a
/// million ops must not become a terabyte of names.
inline constexpr std::size_t kMaxScopeName = 512;

/// Whether a label node (no operator schema) is a scope that names what runs under it, by
/// its name: not a profiler's thread or step marker (`[pytorch|profiler|...]`,
/// `ProfilerStep#N`), not autograd's wrapper of a backward function.
bool is_scope_label(std::string_view name);

/// A scope's name as a layer: the label without Kineto's module prefix.
std::string_view scope_name(std::string_view label);

/// "SCOPE/BASE", or BASE alone without a scope.
std::string scoped_op_name(std::string_view scope, std::string_view base);

/// Output `k` of the `n` that op `op_name` allocates: "OP:out" when it makes one, else "OP:outK".
std::string output_buffer_name(std::string_view op_name, std::size_t k, std::size_t n);

}  // namespace memsim
