// ModelBuilder::recurrent: one layer of nn.RNN / nn.LSTM / nn.GRU, unrolled per time step as
// PyTorch's native (non-cuDNN) CUDA path runs it (aten/src/ATen/native/RNN.cpp: FullLayer
// calling a cell per step). Per step t, with x_t a view of the layer input:
//
//   LSTM  ig = x_t W_ih^T, hg = h_{t-1} W_hh^T            (mm: save x_t, h_{t-1})
//         h_t, c_t, ws_t = _thnn_fused_lstm_cell(ig, hg, c_{t-1}, b_ih, b_hh)
//                                                          (saves c_{t-1}, c_t, ws_t: 4 gates)
//   GRU   ig, hg as above (3 gates); h_t, ws_t = _thnn_fused_gru_cell(ig, hg, h_{t-1}, ...)
//                                                          (saves ws_t: 5 x hidden)
//   RNN   h_t = tanh(linear_hh(h_{t-1}).add_(linear_ih(x_t)))   (tanh saves h_t)
//
// and the outputs are stacked into `seq x batch x hidden` (a copy, which the next layer's
// per-step views keep alive). The gate pre-activations ig, hg die within the step.
//
// Why per step and not cuDNN's reserve space (PyTorch's default on NVIDIA GPUs, one opaque
// buffer per layer that cudnnGetRNNTrainingReserveSize sizes): the per-step tensors are
// what backpropagation through time reasons about (Gruslys et al. store or recompute
// hidden and internal states step by step), and a memory policy can only drop, swap or
// recompute what is a separate buffer. The bytes kept are of the same order either way.
//
// Backward runs through time in reverse step order, as autograd's engine orders it: the
// cell, then the hh product (whose input gradient is the next step's h gradient), then the
// ih product. Gradients reaching h_t from the stacked output (a view) and from step t+1 are
// summed in place into step t+1's fresh buffer (InputBuffer's rule when the first is a
// view). Weight gradients of every step are summed into one .grad (AccumulateGrad).
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "sim/workload/models/builder.h"

namespace memsim {
namespace {

// Elementwise work of the cells, per gate element (4, 3 or 1 x hidden per sample): adding
// the two products and the biases, the activation, and the state update.
constexpr double kCellForwardFlops = 8;
constexpr double kCellBackwardFlops = 10;
constexpr double kEltwiseFlops = 1;

int gate_count(ModelBuilder::RecurrentCell cell) {
  switch (cell) {
    case ModelBuilder::RecurrentCell::rnn_tanh: return 1;
    case ModelBuilder::RecurrentCell::lstm: return 4;
    case ModelBuilder::RecurrentCell::gru: return 3;
  }
  return 1;
}

// An op that reads only a slice (a view) of `whole` is charged for the slice.
void charge_slice(Trace& t, OpId id, BufferId whole, double slice_bytes) {
  Op& op = t.ops[id];
  for (BufferId b : op.inputs)
    if (b == whole) op.bytes_moved -= static_cast<double>(t.buffers[whole].bytes) - slice_bytes;
}

}  // namespace

Value ModelBuilder::recurrent(const std::string& name, int layer, Value x, RecurrentCell cell,
                              std::int64_t hidden, bool last_only) {
  const Shape in_shape = shape(x);
  if (in_shape.size() != 3)
    throw std::invalid_argument(
        fmt::format("layer '{}' needs a seq x batch x features input", name));
  const std::int64_t steps = in_shape[0], n = in_shape[1], in = in_shape[2];
  const std::int64_t gates = gate_count(cell) * hidden;
  const auto param = [&](const char* what, std::int64_t elements) {
    return parameter(fmt::format("{}.{}_l{}", name, what, layer),
                     static_cast<std::uint64_t>(elements));
  };
  const auto w_ih = param("weight_ih", gates * in);
  const auto w_hh = param("weight_hh", gates * hidden);
  const auto b_ih = param("bias_ih", gates);
  const auto b_hh = param("bias_hh", gates);
  const BufferId W_ih = params_[w_ih].weight, W_hh = params_[w_hh].weight;
  const BufferId B_ih = params_[b_ih].weight, B_hh = params_[b_hh].weight;

  const DType dt = settings_.dtype;
  const auto nh = static_cast<std::uint64_t>(n * hidden);
  const auto ng = static_cast<std::uint64_t>(n * gates);
  const double h_bytes = static_cast<double>(nh * dtype_bytes(dt));
  const double x_step_bytes = static_cast<double>(n * in * dtype_bytes(dt));
  const double g_bytes = static_cast<double>(ng * dtype_bytes(dt));
  const double mm_ih = 2.0 * static_cast<double>(n * in * gates);
  const double mm_hh = 2.0 * static_cast<double>(n * hidden * gates);
  const double cell_fw = kCellForwardFlops * static_cast<double>(ng);
  const double cell_bw = kCellBackwardFlops * static_cast<double>(ng);
  const BufferId X = buffer(x);
  const bool x_rg = values_[x.id].requires_grad;
  const std::string p = fmt::format("{}.l{}", name, layer);

  // Zero initial states (nn.LSTM's torch.zeros when no hx is given); no gradient.
  std::vector<BufferId> h(static_cast<std::size_t>(steps) + 1);
  std::vector<BufferId> c;  // LSTM cell states c_0 .. c_T
  std::vector<BufferId> ws;  // LSTM/GRU per-step workspace
  h[0] = activation_buffer(p + ".h0", nh, dt);
  emit(p + ".h0", "fill", {}, {h[0]}, {}, 0);
  if (cell == RecurrentCell::lstm) {
    c.resize(h.size());
    c[0] = activation_buffer(p + ".c0", nh, dt);
    emit(p + ".c0", "fill", {}, {c[0]}, {}, 0);
  }

  std::string sp;
  for (std::int64_t t = 0; t < steps; ++t) {
    const auto i = static_cast<std::size_t>(t);
    sp = fmt::format("{}.t{}", p, t);
    if (cell == RecurrentCell::rnn_tanh) {
      const BufferId a = activation_buffer(sp + ".ih.out", nh, dt);
      const OpId id = emit(sp + ".ih", "linear", {X, W_ih, B_ih}, {a}, {},
                           mm_ih + static_cast<double>(nh));
      charge_slice(trace_, id, X, x_step_bytes);
      const BufferId pre = activation_buffer(sp + ".hh.out", nh, dt);
      emit(sp + ".hh", "linear", {h[i], W_hh, B_hh}, {pre}, {}, mm_hh + static_cast<double>(nh));
      emit(sp + ".add", "add", {a}, {}, {pre}, kEltwiseFlops * static_cast<double>(nh));
      h[i + 1] = activation_buffer(sp + ".h", nh, dt);
      emit(sp + ".tanh", "tanh", {pre}, {h[i + 1]}, {}, 4.0 * static_cast<double>(nh));
      continue;
    }
    const BufferId ig = activation_buffer(sp + ".ih.out", ng, dt);
    const OpId id = emit(sp + ".ih", "matmul", {X, W_ih}, {ig}, {}, mm_ih);
    charge_slice(trace_, id, X, x_step_bytes);
    const BufferId hg = activation_buffer(sp + ".hh.out", ng, dt);
    emit(sp + ".hh", "matmul", {h[i], W_hh}, {hg}, {}, mm_hh);
    h[i + 1] = activation_buffer(sp + ".h", nh, dt);
    if (cell == RecurrentCell::lstm) {
      c[i + 1] = activation_buffer(sp + ".c", nh, dt);
      ws.push_back(activation_buffer(sp + ".workspace", ng, dt));
      emit(sp + ".cell", "lstm_cell", {ig, hg, c[i], B_ih, B_hh}, {h[i + 1], c[i + 1], ws.back()},
           {}, cell_fw);
    } else {
      // The GRU workspace holds r, z, n, h_{t-1} and the hidden part of n: 5 x hidden.
      ws.push_back(activation_buffer(sp + ".workspace", 5 * nh, dt));
      emit(sp + ".cell", "gru_cell", {ig, hg, h[i], B_ih, B_hh}, {h[i + 1], ws.back()}, {},
           cell_fw);
    }
  }
  Value y;
  if (last_only) {
    // h_T itself is the output; the other steps' states are read only by the backward.
    values_.push_back({h.back(), {n, hidden}, true});
    grad_.push_back(kNoBuffer);
    y = Value{static_cast<std::uint32_t>(values_.size() - 1)};
  } else {
    y = new_value(p + ".out", {steps, n, hidden}, true);
    emit(p + ".stack", "stack", std::vector<BufferId>(h.begin() + 1, h.end()), {buffer(y)}, {},
         0);
  }

  record_backward([=, this, h = std::move(h), c = std::move(c), ws = std::move(ws)] {
    if (!has_grad(y)) return;
    // Its step slices are the outputs' gradients (with last_only, G is h_T's gradient).
    const BufferId G = take_grad(y);
    auto grad = [this](std::string n, double bytes) {
      return trace_.add_buffer(std::move(n), static_cast<std::uint64_t>(bytes),
                               Category::activation_grad);
    };
    // h_{t-1}'s gradient: adds the output slice of G into the buffer step t produced.
    auto add_output_slice = [&](const std::string& sp, BufferId into) {
      if (last_only) return;  // no earlier step's state reached the loss directly
      const OpId id = emit(sp + ".grad_h.accumulate_grad", "accumulate_grad", {G}, {}, {into},
                           kEltwiseFlops * static_cast<double>(nh));
      charge_slice(trace_, id, G, h_bytes);
    };
    // A bias gradient: the .grad the first time (the last step), else summed into it.
    auto bias_grads = [&](const std::string& sp, std::vector<BufferId>& outs, bool shared) {
      std::vector<std::pair<std::uint32_t, BufferId>> parts;
      if (params_[b_ih].grad == kNoBuffer) {
        outs.push_back(parameter_grad(b_ih));
        outs.push_back(parameter_grad(b_hh));
        return parts;
      }
      const BufferId gb_ih = trace_.add_buffer(sp + ".grad_bias_ih",
                                               trace_.buffers[B_ih].bytes, Category::gradient);
      outs.push_back(gb_ih);
      BufferId gb_hh = gb_ih;  // the LSTM cell hands one tensor to both biases
      if (!shared) {
        gb_hh = trace_.add_buffer(sp + ".grad_bias_hh", trace_.buffers[B_hh].bytes,
                                  Category::gradient);
        outs.push_back(gb_hh);
      }
      parts = {{b_ih, gb_ih}, {b_hh, gb_hh}};
      return parts;
    };
    // The weight gradient of product `mm` (ih or hh) for this step.
    auto weight_grad = [&](const std::string& sp, const char* mm, std::uint32_t w,
                           const char* what, BufferId grad_out, BufferId saved, double flops) {
      const BufferId target = param_grad_target(w, fmt::format("{}.{}.grad_part", sp, what));
      const OpId id = emit(fmt::format("{}.{}.backward_weight", sp, mm), "matmul_backward",
                           {grad_out, saved}, {target}, {}, flops);
      if (saved == X) charge_slice(trace_, id, X, x_step_bytes);
      add_param_grad(w, target, fmt::format("{}.{}.accumulate_grad", sp, what));
    };

    std::vector<BufferId> gx(x_rg ? h.size() - 1 : 0);
    BufferId gh = G;          // h_t's gradient; at the last step only G's slice
    BufferId gc = kNoBuffer;  // c_t's gradient (LSTM); none at the last step
    std::string sp;
    for (std::int64_t t = steps - 1; t >= 0; --t) {
      const auto i = static_cast<std::size_t>(t);
      sp = fmt::format("{}.t{}", p, t);
      BufferId gh_prev = kNoBuffer;  // h_{t-1}'s gradient, for step t - 1
      if (cell == RecurrentCell::rnn_tanh) {
        const BufferId gpre = grad(sp + ".tanh.grad_input", h_bytes);
        OpId id = emit(sp + ".tanh.backward", "tanh_backward", {gh, h[i + 1]}, {gpre}, {},
                       2.0 * static_cast<double>(nh));
        if (gh == G) charge_slice(trace_, id, G, h_bytes);
        // add_ passes gpre to both products; each linear backward also makes its bias grad.
        std::vector<BufferId> reads{gpre, h[i]};
        std::vector<BufferId> outs;
        if (t > 0) {
          reads.push_back(W_hh);
          outs.push_back(gh_prev = grad(sp + ".hh.grad_input", h_bytes));
        }
        const BufferId gw_hh = param_grad_target(w_hh, sp + ".weight_hh.grad_part");
        const BufferId gb_hh = param_grad_target(b_hh, sp + ".bias_hh.grad_part");
        outs.push_back(gw_hh);
        outs.push_back(gb_hh);
        emit(sp + ".hh.backward", "linear_backward", std::move(reads), std::move(outs), {},
             mm_hh * (t > 0 ? 2 : 1) + static_cast<double>(nh));
        add_param_grad(w_hh, gw_hh, sp + ".weight_hh.accumulate_grad");
        add_param_grad(b_hh, gb_hh, sp + ".bias_hh.accumulate_grad");
        if (t > 0) add_output_slice(sp, gh_prev);

        reads = {gpre, X};
        outs.clear();
        if (x_rg) {
          reads.push_back(W_ih);
          outs.push_back(gx[i] = grad(sp + ".ih.grad_input", x_step_bytes));
        }
        const BufferId gw_ih = param_grad_target(w_ih, sp + ".weight_ih.grad_part");
        const BufferId gb_ih = param_grad_target(b_ih, sp + ".bias_ih.grad_part");
        outs.push_back(gw_ih);
        outs.push_back(gb_ih);
        id = emit(sp + ".ih.backward", "linear_backward", std::move(reads), std::move(outs), {},
                  mm_ih * (x_rg ? 2 : 1) + static_cast<double>(nh));
        charge_slice(trace_, id, X, x_step_bytes);
        add_param_grad(w_ih, gw_ih, sp + ".weight_ih.accumulate_grad");
        add_param_grad(b_ih, gb_ih, sp + ".bias_ih.accumulate_grad");
        gh = gh_prev;
        continue;
      }

      // The fused cell's backward: gate gradients (LSTM: one tensor for both products;
      // GRU: one per product), the state gradient, and the bias gradients.
      const bool lstm = cell == RecurrentCell::lstm;
      std::vector<BufferId> reads{gh};
      if (lstm) {
        if (gc != kNoBuffer) reads.push_back(gc);
        reads.insert(reads.end(), {c[i], c[i + 1], ws[i]});
      } else {
        reads.push_back(ws[i]);
      }
      std::vector<BufferId> outs;
      const BufferId g_ig = grad(sp + (lstm ? ".grad_gates" : ".grad_input_gates"), g_bytes);
      const BufferId g_hg = lstm ? g_ig : grad(sp + ".grad_hidden_gates", g_bytes);
      outs.push_back(g_ig);
      if (!lstm) outs.push_back(g_hg);
      BufferId gstate = kNoBuffer;  // LSTM: c_{t-1}'s gradient; GRU: h_{t-1}'s direct part
      if (t > 0) outs.push_back(gstate = grad(sp + (lstm ? ".grad_c" : ".grad_h"), h_bytes));
      const auto bias_parts = bias_grads(sp, outs, lstm);
      const OpId id = emit(sp + ".cell.backward", lstm ? "lstm_cell_backward" : "gru_cell_backward",
                           std::move(reads), std::move(outs), {}, cell_bw);
      if (gh == G) charge_slice(trace_, id, G, h_bytes);
      for (const auto& [b, part] : bias_parts)
        add_param_grad(b, part, fmt::format("{}.{}.accumulate_grad", sp,
                                            b == b_ih ? "bias_ih" : "bias_hh"));

      if (t > 0) {
        // GRU: h_{t-1} also fed the cell directly, so three gradients meet in the cell's
        // fresh buffer, in the order they arrive: the output slice, then the product's.
        if (!lstm) add_output_slice(sp, gstate);
        const BufferId g_mm = grad(sp + ".hh.grad_input", h_bytes);
        emit(sp + ".hh.backward_input", "matmul_backward", {g_hg, W_hh}, {g_mm}, {}, mm_hh);
        if (lstm) {
          gh_prev = g_mm;
          add_output_slice(sp, gh_prev);
        } else {
          gh_prev = gstate;
          emit(sp + ".hh.accumulate_grad", "accumulate_grad", {g_mm}, {}, {gh_prev},
               kEltwiseFlops * static_cast<double>(nh));
        }
      }
      weight_grad(sp, "hh", w_hh, "weight_hh", g_hg, h[i], mm_hh);
      if (x_rg) {
        gx[i] = grad(sp + ".ih.grad_input", x_step_bytes);
        emit(sp + ".ih.backward_input", "matmul_backward", {g_ig, W_ih}, {gx[i]}, {}, mm_ih);
      }
      weight_grad(sp, "ih", w_ih, "weight_ih", g_ig, X, mm_ih);
      gh = gh_prev;
      if (lstm) gc = gstate;
    }
    // The per-step views of x (unbind) get their gradients stacked back into one tensor.
    if (!x_rg) return;
    const BufferId gX = grad_buffer(p + ".unbind", x);
    emit(p + ".unbind.backward", "stack", std::move(gx), {gX}, {}, 0);
    contribute(x, gX, p);
  });
  return y;
}

}  // namespace memsim
