#pragma once
// What an aten operator costs and does, from its name and argument shapes: the FLOPs and
// bytes of the roofline, the memsim op kind, which arguments it writes in place, and
// whether it is a kernel (counted as one op with everything it calls) or a pure view.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sim/workload/trace.h"

namespace memsim {

/// One tensor as an Execution Trace records it.
struct EtTensor {
  std::int64_t tensor = 0;
  std::int64_t storage = 0;
  std::uint64_t numel = 0;
  int itemsize = 0;
  std::uint64_t bytes = 0;         // numel x itemsize
  std::uint64_t extent_bytes = 0;  // storage bytes the view reaches, from its offset (and strides)
  std::vector<std::int64_t> shape;
  std::string type;                // "Tensor(float)", "GenericList[Tensor(float),...]"
  std::string device;              // "cpu", "cuda:0"
};

struct AtenCost {
  std::string kind = "other";  // one of known_op_kinds()
  DType dtype = DType::fp32;
  double flops = 0;
  double bytes = 0;  // read + written
};

/// `name` without "aten::". Arguments are per position; a non-tensor argument is empty.
AtenCost aten_cost(std::string_view name, const std::vector<std::vector<const EtTensor*>>& inputs,
                   const std::vector<std::vector<const EtTensor*>>& outputs);

/// An Inductor/Triton kernel (`triton_poi_fused_add_0`, `triton_red_...`): all its tensors are
/// arguments; elementwise work over the largest, a reduction for `red`/`per` kernels.
AtenCost triton_cost(std::string_view name, const std::vector<std::vector<const EtTensor*>>& inputs);

/// Kernels whose cost is estimated as a whole: their children are how they do it (the foreach
/// and fused optimizer kernels among them: their children are per-tensor fallbacks).
bool is_cost_kernel(std::string_view name);
/// Ops that only make another view of their input's storage.
bool is_view_op(std::string_view name);
/// Ops that only allocate (empty, empty_strided, ...).
bool is_allocation_op(std::string_view name);
/// Which of `count` inputs the op writes in place: the `(a!)` arguments of its schema, or
/// the first one of an unschema'd name ending in '_'.
std::vector<bool> mutated_arguments(const std::string& op_schema, std::string_view name, std::size_t count);
/// The argument names of an op schema, per position ("aten::add.Tensor(Tensor self, Tensor
/// other, *, Scalar alpha=1)" -> self, other, alpha); empty without a schema.
std::vector<std::string> argument_names(const std::string& op_schema);
/// "Tensor(c10::Half)" -> fp16; fp32 for anything unrecognised.
DType dtype_from_tensor_type(std::string_view type);

}  // namespace memsim
