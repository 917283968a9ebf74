#pragma once
// The benchmark of DTR's own simulator: a linear network of N unit-cost, unit-size layers.
//
//   forward   f_i: t_i = f(t_{i-1}),            i = 1..N   (t_0, the input, is resident)
//   backward  b_i: g_i = b(t_i, g_{i+1}),       i = N..1   (b_N reads t_N alone)
//
// Every op costs one unit (1 GFLOP, "matmul") and every buffer is one unit (1 MiB), so the
// step computes 2N units, and with liveness-based freeing its peak is N + 1 units (t_1..t_N
// and the first gradient). Budgets are fractions of that peak; "total compute over the
// baseline" is (2N + recomputed units) / 2N.
#include <cstddef>
#include <cstdint>
#include <span>

#include "sim/platform/platform.h"
#include "sim/workload/trace.h"

namespace memsim {

inline constexpr std::uint64_t kDtrUnitBytes = 1 << 20;
inline constexpr double kDtrUnitFlops = 1e9;

Trace dtr_unit_chain(std::size_t layers);

/// The same benchmark as the DTR authors' simulator (simrd, uniform_linear/run.py) builds
/// it, for comparing with its figures like for like: n forward ops, the first from nothing;
/// n backward ops, the first from nothing too, b_i reading t_{i-1} and g_{i+1} (b_0 reads g_1
/// alone), so t_{n-2} and t_{n-1} are never read again. Every buffer is one unit and every op
/// costs one; the baseline computes 2n units and peaks at n (t_0..t_{n-1}).
///
///   forward   f_0: t_0 = f(),  f_i: t_i = f(t_{i-1})                  i = 1..n-1
///   backward  b_{n-1}: g_{n-1} = b(),  b_i: g_i = b(t_{i-1}, g_{i+1})   i = n-2..1
///             b_0: g_0 = b(g_1)
Trace dtr_simrd_chain(std::size_t layers);

/// simrd's own figures on dtr_simrd_chain(layers): its DTR (h = (c + e*) / (m s), e* by
/// equivalence classes) at `units` of budget, as simrd counts it: every resident tensor,
/// activations and gradients alike. Compute over its baseline is (2 layers + recomputed) /
/// 2 layers. Measured once (provenance in dtr_chain.cpp): simrd is not available here.
struct SimrdFigure {
  std::size_t layers;
  const char* budget;  // "0.5" (of the baseline peak, n units), "2 sqrt(N)" (rounded up), ...
  std::uint64_t units;
  std::uint64_t recomputed;
  bool published;      // one of the figures the DTR paper states (0.5, 0.25, 2 sqrt(N))
};
std::span<const SimrdFigure> simrd_figures();

/// One GPU at 1 TFLOPS with no launch overhead (an op of the chain takes exactly 1 ms) and a
/// compute tier of `capacity_bytes`, ideal allocator; a host DRAM over a 10 GB/s link.
PlatformSpec dtr_unit_platform(std::uint64_t capacity_bytes);

}  // namespace memsim
