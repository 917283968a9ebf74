// LoRA adapters (ModelBuilder::lora) as PEFT's lora.Linear runs them:
//   result = base_layer(x) + lora_B(lora_A(dropout(x))) * scaling
// A and B are linears without bias that train while the base layer's weight is frozen;
// lora_A saves its input (x, or the dropout's output), lora_B the rank-wide A output.
#include <fmt/format.h>

#include "sim/workload/models/builder.h"

namespace memsim {

Value ModelBuilder::lora(const std::string& name, Value x, Value y) {
  const FineTune& f = settings_.finetune;
  const bool trainable = set_trainable(true);
  const bool fp8 = set_fp8_linears(false);  // adapters stay in the compute type
  const Value in = f.lora_dropout > 0 ? dropout(name + ".lora_dropout", x) : x;
  const Value a = linear(name + ".lora_A", in, f.lora_rank, false);
  const Value b = linear(name + ".lora_B", a, shape(y)[1], false);
  set_fp8_linears(fp8);
  set_trainable(trainable);
  return add(name + ".lora_add", y, scale(name + ".lora_scale", b));
}

Value ModelBuilder::scale(const std::string& name, Value x) {
  const double elements = static_cast<double>(element_count(shape(x)));
  const bool rg = values_[x.id].requires_grad;
  const Value y = new_value(name + ".out", shape(x), rg);
  emit(name, "mul", {buffer(x)}, {buffer(y)}, {}, elements);
  // A product with a Python number saves nothing (MulBackward1 keeps the number).
  record_backward([=, this] {
    if (!has_grad(y)) return;
    const BufferId g = take_grad(y);
    if (!values_[x.id].requires_grad) return;
    const BufferId gi = grad_buffer(name, x);
    emit(name + ".backward", "mul_backward", {g}, {gi}, {}, elements);
    contribute(x, gi, name);
  });
  return y;
}

}  // namespace memsim
