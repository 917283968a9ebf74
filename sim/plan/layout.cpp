#include "sim/plan/layout.h"

#include <algorithm>
#include <sstream>

#include <fmt/format.h>

#include "sim/core/error.h"

namespace memsim {
namespace {

std::vector<std::uint32_t> divisors(std::uint64_t n, std::uint64_t most) {
  std::vector<std::uint32_t> out;
  for (std::uint64_t d = 1; d <= std::min(n, most); ++d)
    if (n % d == 0) out.push_back(static_cast<std::uint32_t>(d));
  return out;
}

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  if (!text.empty() && text.back() == ',') out.push_back("");
  return out;
}

}  // namespace

std::string_view to_string(Recompute r) {
  switch (r) {
    case Recompute::none: return "none";
    case Recompute::selective: return "selective";
    case Recompute::full: return "full";
  }
  return "?";
}

std::string Layout::schedule() const {
  if (pp == 1) return "-";
  return virtual_stages > 1 ? "interleaved" : "1f1b";
}

std::string Layout::text() const {
  std::string s = fmt::format("tp {}{}, pp {}", tp, sp ? " sp" : "", pp);
  if (pp > 1) s += virtual_stages > 1 ? fmt::format(" interleaved x {}", virtual_stages) : " 1f1b";
  s += fmt::format(", dp {}, mb {} x {}, zero {}{}, recompute {}", dp, micro_batch, micro_batches, zero,
                   hsdp > 0 ? fmt::format(" hsdp {}", hsdp) : std::string(), to_string(recompute));
  if (offload) s += ", offload";
  return s;
}

std::vector<Layout> enumerate_layouts(const LayoutSpace& space) {
  std::vector<Layout> out;
  for (std::uint32_t tp : divisors(space.gpus, space.max_tp))
    for (std::uint32_t pp : divisors(space.gpus / tp, space.max_pp)) {
      if (space.layers == 0 ? pp > 1 : space.layers % pp != 0) continue;
      const std::uint32_t dp = space.gpus / tp / pp;
      if (space.global_batch % dp != 0) continue;
      for (std::uint32_t mb : divisors(static_cast<std::uint64_t>(space.global_batch / dp), space.max_micro_batch)) {
        const std::int64_t m = space.global_batch / dp / mb;
        if (m > 4096) continue;  // the most micro-batches a step runs (parallel.micro_batches)
        std::vector<std::uint32_t> chunks{1};
        if (pp > 1 && m % pp == 0)
          for (std::uint32_t v : space.virtual_stages)
            if (v > 1 && space.layers % (pp * v) == 0) chunks.push_back(v);
        for (std::uint32_t v : chunks)
          for (bool sp : {false, true}) {
            if (sp && tp == 1) continue;
            for (int zero : space.zero) {
              if (zero > 0 && dp == 1) continue;
              for (Recompute r : space.recompute)
                for (bool offload : {false, true}) {
                  // ZeRO-Offload's step with ZeRO 1 or 2's all-gather after it is not
                  // modelled (policy zero-offload refuses it).
                  if (offload && (!space.offload || zero == 1 || zero == 2)) continue;
                  Layout l;
                  l.tp = tp;
                  l.pp = pp;
                  l.dp = dp;
                  l.micro_batch = mb;
                  l.micro_batches = static_cast<std::uint32_t>(m);
                  l.virtual_stages = v;
                  l.sp = sp;
                  l.zero = zero;
                  l.recompute = r;
                  l.offload = offload;
                  out.push_back(l);
                  // HSDP: the same, sharded within each node's data-parallel ranks.
                  const std::uint32_t node_dp =
                      space.gpus_per_node % tp == 0 ? space.gpus_per_node / tp : 0;
                  if (space.hsdp && zero == 3 && !offload && node_dp >= 2 && dp > node_dp && dp % node_dp == 0) {
                    l.hsdp = node_dp;
                    out.push_back(l);
                  }
                }
            }
          }
      }
    }
  return out;
}

std::vector<Override> layout_overrides(const Layout& l, std::int64_t global_batch, bool materialized) {
  std::vector<std::string> sets{
      fmt::format("workload.batch={}", l.micro_batch),
      fmt::format("workload.recompute={}", l.recompute == Recompute::full ? "full" : "none"),
  };
  if (materialized)
    sets.push_back(fmt::format("workload.attention_impl={}",
                               l.recompute == Recompute::selective ? "selective" : "materialized"));
  sets.push_back(fmt::format("parallel.tp={}", l.tp));
  if (l.sp) sets.push_back("parallel.sp=true");
  sets.push_back(fmt::format("parallel.pp={}", l.pp));
  if (l.pp > 1) sets.push_back(fmt::format("parallel.schedule={}", l.schedule()));
  if (l.virtual_stages > 1) sets.push_back(fmt::format("parallel.virtual_stages={}", l.virtual_stages));
  sets.push_back(fmt::format("parallel.dp={}", l.dp));
  sets.push_back(fmt::format("parallel.zero={}", l.zero));
  if (l.hsdp > 0) sets.push_back(fmt::format("parallel.hsdp={}", l.hsdp));
  sets.push_back(fmt::format("parallel.global_batch={}", global_batch));
  std::vector<Override> out;
  for (const auto& s : sets) {
    Override o = parse_override(s);
    o.origin = "memsim plan (" + s + ")";
    out.push_back(std::move(o));
  }
  return out;
}

std::vector<int> parse_zero_list(const std::string& text) {
  std::vector<int> out;
  for (const std::string& item : split_commas(text)) {
    if (item.size() != 1 || item[0] < '0' || item[0] > '3')
      throw InputError(fmt::format("--zero: expected ZeRO stages from 0 to 3 separated by commas (like 0,1), "
                                   "got '{}' in '{}'",
                                   item, text));
    const int z = item[0] - '0';
    if (std::find(out.begin(), out.end(), z) == out.end()) out.push_back(z);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<Recompute> parse_recompute_list(const std::string& text) {
  std::vector<Recompute> out;
  for (const std::string& item : split_commas(text)) {
    Recompute r;
    if (item == "none")
      r = Recompute::none;
    else if (item == "selective")
      r = Recompute::selective;
    else if (item == "full")
      r = Recompute::full;
    else
      throw InputError(fmt::format("--recompute: expected none, selective or full separated by commas, got '{}' in "
                                   "'{}'",
                                   item, text));
    if (std::find(out.begin(), out.end(), r) == out.end()) out.push_back(r);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace memsim
