#include "sim/run/sanity.h"

#include <cmath>

#include <fmt/format.h>

#include "sim/core/error.h"

namespace memsim {
namespace {

[[noreturn]] void fail(const std::string& what) { throw InternalError("summary check: " + what); }

void time(const std::string& name, double s) {
  if (!std::isfinite(s) || s < 0) fail(fmt::format("{} is {} (expected a finite time >= 0 s)", name, s));
}

void fraction(const std::string& name, double x) {
  if (!(x >= 0 && x <= 1)) fail(fmt::format("{} is {} (expected a fraction from 0 to 1)", name, x));
}

// Sums of the engine's doubles differ from the whole by rounding only.
bool near(double a, double b) { return std::abs(a - b) <= 1e-6 * std::max(std::abs(a), std::abs(b)) + 1e-12; }

}  // namespace

void check_summary(const Summary& s) {
  if (s.status != "ok" && s.status != "oom") fail(fmt::format("status is '{}' (expected ok or oom)", s.status));
  if ((s.status == "oom") != s.oom.has_value())
    fail(fmt::format("status is {} but the run {} an oom report", s.status, s.oom ? "has" : "has no"));
  time("iteration_time_s", s.iteration_time_s);
  const std::pair<const char*, double> times[] = {
      {"compute_time_s", s.compute_time_s},     {"stall_time_s", s.stall_time_s},
      {"recompute_time_s", s.recompute_time_s}, {"host_compute_time_s", s.host_compute_time_s},
      {"exposed_host_time_s", s.exposed_host_time_s}, {"idle_time_s", s.idle_time_s},
      {"transfer_time_s", s.transfer_time_s},   {"comm_time_s", s.comm_time_s},
      {"exposed_comm_time_s", s.exposed_comm_time_s}, {"passes_end_s", s.passes_end_s}};
  for (const auto& [name, v] : times) time(name, v);
  for (std::size_t d = 0; d < s.device_compute_s.size(); ++d) time(fmt::format("device_compute_s[{}]", d), s.device_compute_s[d]);
  for (std::size_t d = 0; d < s.device_exposed_comm_s.size(); ++d)
    time(fmt::format("device_exposed_comm_s[{}]", d), s.device_exposed_comm_s[d]);
  for (const PipelineStageSummary& st : s.pipeline) {
    time(fmt::format("pipeline stage {} compute_s", st.stage), st.compute_s);
    time(fmt::format("pipeline stage {} exposed_comm_s", st.stage), st.exposed_comm_s);
    fraction(fmt::format("pipeline stage {} bubble_fraction", st.stage), st.bubble_fraction);
  }
  if (!std::isfinite(s.recompute_flops) || s.recompute_flops < 0)
    fail(fmt::format("recompute_flops is {} (expected a finite count >= 0)", s.recompute_flops));
  if (const auto& t = s.throughput) {
    if (!std::isfinite(t->model_flops) || t->model_flops < 0 || !std::isfinite(t->hardware_flops) ||
        t->hardware_flops < t->model_flops * (1 - 1e-12))
      fail(fmt::format("throughput counts {} model and {} hardware FLOPs (expected finite counts, the hardware's "
                       "no fewer than the model's)",
                       t->model_flops, t->hardware_flops));
    if (t->gpus == 0) fail("throughput counts 0 GPUs");
  }
  for (const LinkSummary& l : s.links)
    if (!std::isfinite(l.utilisation) || l.utilisation < 0)
      fail(fmt::format("link {} utilisation is {} (expected a finite share >= 0)", l.name, l.utilisation));

  // One stream's compute, stall and recompute are disjoint spans of the iteration.
  const double own = s.compute_time_s + s.stall_time_s + s.recompute_time_s;
  if (own > s.iteration_time_s && !near(own, s.iteration_time_s))
    fail(fmt::format("compute {} + stall {} + recompute {} s is more than the iteration time {} s", s.compute_time_s,
                     s.stall_time_s, s.recompute_time_s, s.iteration_time_s));
  if (s.exposed_comm_time_s > s.comm_time_s && !near(s.exposed_comm_time_s, s.comm_time_s))
    fail(fmt::format("exposed_comm_time_s {} is more than comm_time_s {}", s.exposed_comm_time_s, s.comm_time_s));
  for (const TierSummary& t : s.tiers) {
    time(t.name + " peak_time_s", t.usage.peak_time_s);
    if (s.status != "ok") continue;  // an oom stops at the allocation that did not fit
    const std::uint64_t limit = t.usage.limit_bytes();
    if (t.usage.peak_allocated_bytes > limit)
      fail(fmt::format("{} peak_allocated_bytes {} is more than the {} bytes it may hold, in a run that fit", t.name,
                       t.usage.peak_allocated_bytes, limit));
    if (t.usage.peak_reserved_bytes > limit)
      fail(fmt::format("{} peak_reserved_bytes {} is more than the {} bytes it may hold, in a run that fit", t.name,
                       t.usage.peak_reserved_bytes, limit));
  }
  if (s.status != "ok") return;  // the parts of a step stopped at an oom need not add up
  const double parts = own + s.exposed_host_time_s + s.exposed_comm_time_s + s.idle_time_s;
  if (!near(parts, s.iteration_time_s))
    fail(fmt::format("the iteration time {} s is not the sum of its parts {} s (compute {} + host {} + stall {} + "
                     "recompute {} + exposed comm {} + idle {})",
                     s.iteration_time_s, parts, s.compute_time_s, s.exposed_host_time_s, s.stall_time_s,
                     s.recompute_time_s, s.exposed_comm_time_s, s.idle_time_s));
}

}  // namespace memsim
