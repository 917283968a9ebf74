#include "sim/plan/plan.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/core/error.h"
#include "sim/core/files.h"
#include "sim/core/units.h"
#include "sim/plan/bounds.h"
#include "sim/plan/layout.h"
#include "sim/platform/platform.h"
#include "sim/sweep/resolve.h"
#include "sim/sweep/results.h"
#include "sim/sweep/runner.h"
#include "sim/sweep/store.h"

namespace memsim {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// The keys every layout sets itself: a --set of one would be overwritten, so it is refused.
bool layout_key_of(const Override& o) {
  if (o.target != "workload") return false;
  static const std::set<std::string> keys{"batch", "recompute", "parallel.tp", "parallel.sp", "parallel.pp",
                                          "parallel.schedule", "parallel.virtual_stages", "parallel.dp",
                                          "parallel.zero", "parallel.hsdp", "parallel.global_batch",
                                          "parallel.micro_batches",
                                          "parallel", "seq_len"};
  return keys.count(o.key) > 0;
}

struct Candidate {
  Layout layout;
  double time_bound_s = 0;
  /// The step's longest path (PlanBounds::path_time_s), worked out before simulating it.
  std::optional<double> path_bound_s;
  std::uint64_t memory_bound_bytes = 0;
  bool memory_rejected = false;
  ResolvedRun run;
  std::optional<PointResult> result;  // simulated (here, or found in OUT/points/)
};

// What a simulated layout came to, from its summary.json.
struct Figures {
  double time_s = 0;
  std::uint64_t peak_bytes = 0;       // the fullest compute tier's peak
  std::uint64_t capacity_bytes = 0;   // that tier's capacity
  double bubble = -1;                 // the pipeline's mean bubble fraction (-1: no pipeline)
  double exposed_comm_s = 0;
  std::uint64_t oom_short_bytes = 0;  // oom: what the failing allocation lacked
  std::string oom_op;
  // The run's throughput (summary.json's; -1: not there, as in a run of an older memsim).
  double tokens_per_s = -1, mfu = -1, hfu = -1;
};

Figures figures(const json& s) {
  Figures f;
  if (!s.is_object()) return f;  // a failed run has no summary
  if (s.contains("iteration_time_s") && s["iteration_time_s"].is_number()) f.time_s = s["iteration_time_s"];
  f.exposed_comm_s = s.value("exposed_comm_time_s", 0.0);
  if (s.contains("throughput") && s["throughput"].is_object()) {
    const json& t = s["throughput"];
    for (auto [key, to] : {std::pair{"tokens_per_s", &f.tokens_per_s}, {"mfu", &f.mfu}, {"hfu", &f.hfu}})
      if (t.contains(key) && t[key].is_number()) *to = t[key].get<double>();
  }
  if (s.contains("tiers"))
    for (const auto& [name, t] : s["tiers"].items()) {
      if (t.value("role", "") != "compute") continue;
      const std::uint64_t peak = t.value("peak_allocated_bytes", std::uint64_t{0});
      if (peak >= f.peak_bytes) {
        f.peak_bytes = peak;
        f.capacity_bytes = t.value("capacity_bytes", std::uint64_t{0});
      }
    }
  if (s.contains("pipeline") && s["pipeline"].is_object() && s["pipeline"].contains("stages")) {
    double sum = 0;
    std::size_t n = 0;
    for (const auto& st : s["pipeline"]["stages"]) {
      sum += st.value("bubble_fraction", 0.0);
      ++n;
    }
    if (n) f.bubble = sum / static_cast<double>(n);
  }
  if (s.contains("oom") && s["oom"].is_object()) {
    const auto& o = s["oom"];
    const std::uint64_t need = o.value("allocated_bytes", std::uint64_t{0}) + o.value("requested_bytes", std::uint64_t{0});
    const std::uint64_t cap = o.value("capacity_bytes", std::uint64_t{0});
    f.oom_short_bytes = need > cap ? need - cap : o.value("requested_bytes", std::uint64_t{0});
    f.oom_op = o.value("op", "");
  }
  return f;
}

std::string seconds_text(double s) { return format_seconds(s); }

std::string table_text(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width;
  for (const auto& r : rows)
    for (std::size_t c = 0; c < r.size(); ++c) {
      if (width.size() <= c) width.push_back(0);
      width[c] = std::max(width[c], r[c].size());
    }
  std::string out;
  for (const auto& r : rows) {
    std::string line = " ";
    for (std::size_t c = 0; c < r.size(); ++c)
      line += " " + (c + 1 == r.size() ? r[c] : fmt::format("{:<{}}", r[c], width[c]));
    out += line + "\n";
  }
  return out;
}

// The stream, or one that writes nothing (a stream without a buffer).
std::ostream& quiet_or(std::ostream& s, bool quiet) {
  static std::ostream none(nullptr);
  return quiet ? none : s;
}

}  // namespace

bool plan_sets_key(const Override& o) { return layout_key_of(o); }

int plan_command(const PlanOptions& o, std::optional<PlanBest>* best_out) {
  const auto start = std::chrono::steady_clock::now();
  std::ostream& out = quiet_or(std::cout, o.quiet);
  std::ostream& err = quiet_or(std::cerr, o.quiet);
  if (best_out) best_out->reset();
  if (o.top < 1) throw UsageError(fmt::format("--top expects a number of layouts >= 1, got {}", o.top));
  const std::vector<int> zero = parse_zero_list(o.zero);
  std::vector<Recompute> recompute = parse_recompute_list(o.recompute);
  std::vector<std::uint32_t> chunks;
  for (const std::string& v : [&] {
         std::vector<std::string> items;
         std::size_t at = 0;
         while (at <= o.virtual_stages.size()) {
           const std::size_t comma = o.virtual_stages.find(',', at);
           items.push_back(o.virtual_stages.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
           if (comma == std::string::npos) break;
           at = comma + 1;
         }
         return items;
       }()) {
    if (v.empty() || v.size() > 3 || v.find_first_not_of("0123456789") != std::string::npos || std::stoi(v) < 2)
      throw UsageError(fmt::format("--virtual-stages: expected chunk counts of 2 or more separated by commas (like "
                                   "2,4), got '{}'",
                                   o.virtual_stages));
    chunks.push_back(static_cast<std::uint32_t>(std::stoi(v)));
  }

  std::vector<Override> overrides;
  for (const std::string& s : o.sets) {
    Override ov = parse_override(s);
    if (layout_key_of(ov))
      throw UsageError(fmt::format("--set {}: memsim plan chooses {} for each layout (use --global-batch, --seq-len "
                                   "and the constraints --max-tp, --max-pp, --zero, --recompute)",
                                   s, ov.key));
    overrides.push_back(std::move(ov));
  }
  if (o.seq_len > 0) {
    Override ov = parse_override(fmt::format("workload.seq_len={}", o.seq_len));
    ov.origin = fmt::format("--seq-len {}", o.seq_len);
    overrides.push_back(std::move(ov));
  }

  PlanBounds bounds(o.platform, o.workload, overrides);
  const PlanFacts& facts = bounds.facts();
  const std::uint32_t gpus = o.gpus ? o.gpus : facts.platform_gpus;
  if (gpus > facts.platform_gpus)
    throw InputError(fmt::format("--gpus {}: platform {} has {} GPUs{}", gpus, bounds.platform().name,
                                 facts.platform_gpus, more_devices_hint(bounds.platform(), gpus)));
  const std::int64_t global = o.global_batch ? o.global_batch : gpus;
  if (o.offload && !facts.has_offload_tier)
    throw InputError(fmt::format("--offload: platform {} has no host memory (a tier with role: offload) to offload "
                                 "the optimizer state to",
                                 bounds.platform().name));
  std::string notes;
  if (!facts.materialized && std::erase(recompute, Recompute::selective))
    notes += fmt::format("recompute selective left out: {}'s attention is FlashAttention's (attention_impl fused), "
                         "which already recomputes the scores\n",
                         o.workload);
  if (recompute.empty()) throw UsageError("--recompute: nothing left to try (selective needs materialized attention)");

  LayoutSpace space;
  space.gpus = gpus;
  space.global_batch = global;
  space.layers = facts.layers;
  space.max_tp = o.max_tp ? o.max_tp : std::min(gpus, facts.gpus_per_node);
  space.max_pp = o.max_pp ? o.max_pp : gpus;
  space.max_micro_batch = o.max_micro_batch;
  space.virtual_stages = chunks;
  space.zero = zero;
  space.recompute = recompute;
  space.offload = o.offload;
  space.hsdp = o.hsdp;
  space.gpus_per_node = facts.gpus_per_node;
  const std::vector<Layout> layouts = enumerate_layouts(space);
  const std::string shape = fmt::format("{} on {} GPUs of {}, global batch {}, seq {}", facts.workload_name, gpus,
                                        bounds.platform().name, global, facts.seq_len);
  if (layouts.empty())
    throw InputError(fmt::format(
        "--gpus {} --global-batch {}: no layout of {}: tp (up to --max-tp {}) x pp (dividing the {} layers, up to "
        "--max-pp {}) x dp must make {} GPUs, and dp must divide the global batch {}",
        gpus, global, facts.workload_name, space.max_tp, facts.layers, space.max_pp, gpus, global));

  // Bounds, and what the model refuses.
  std::vector<Candidate> valid;
  std::map<std::string, std::size_t> refused;  // the model's message -> layouts
  for (const Layout& l : layouts) {
    std::string why;
    const auto t = bounds.time_s(l, &why);
    const auto m = t ? bounds.memory_bytes(l, &why) : std::nullopt;
    if (!t || !m) {
      ++refused[why.substr(0, why.find('\n'))];
      continue;
    }
    Candidate c;
    c.layout = l;
    c.time_bound_s = *t;
    c.memory_bound_bytes = *m;
    c.memory_rejected = *m > facts.capacity_bytes;
    valid.push_back(std::move(c));
  }
  std::stable_sort(valid.begin(), valid.end(), [](const Candidate& a, const Candidate& b) {
    if (a.time_bound_s != b.time_bound_s) return a.time_bound_s < b.time_bound_s;
    return a.layout.text() < b.layout.text();
  });
  if (valid.empty())
    throw InputError(fmt::format("no valid layout of {}: {} layouts divide, and the model refuses each: {}", shape,
                                 layouts.size(), refused.begin()->first));

  // The runs, with their ids (the sweep's: OUT/points/<id>/).
  Resolver resolver;
  for (Candidate& c : valid) {
    RunRequest req{o.platform, o.workload, c.layout.offload ? "zero-offload" : "none", overrides};
    for (Override& ov : layout_overrides(c.layout, global, facts.materialized)) req.overrides.push_back(std::move(ov));
    c.run.request = std::move(req);
    c.run.id = hash_hex(resolver.resolved_text(c.run.request));
  }
  std::vector<std::size_t> queue;  // indices into valid, in bound order
  std::size_t memory_rejected = 0;
  for (std::size_t i = 0; i < valid.size(); ++i) {
    if (valid[i].memory_rejected && !o.exhaustive) {
      ++memory_rejected;
      continue;
    }
    queue.push_back(i);
  }
  if (o.shards) {
    std::vector<std::size_t> mine;
    for (std::size_t k = 0; k < queue.size(); ++k)
      if (static_cast<int>(k % o.shards) == o.shard - 1) mine.push_back(queue[k]);
    queue = std::move(mine);
  }

  std::error_code ec;
  fs::create_directories(fs::path(o.out_dir) / "points", ec);
  if (ec) throw InputError(fmt::format("{}: cannot create output folder: {}", o.out_dir, ec.message()));
  PointStore store(o.out_dir, o.memsim, o.force);
  const int jobs = std::max(1, std::min<int>(default_jobs(o.jobs), static_cast<int>(std::max<std::size_t>(queue.size(), 1))));
  err << fmt::format("plan {}: {} valid layouts ({} refused by the model), {} over {} by their memory bound; "
                           "simulating in order of their time bound with {} worker{}{}\n",
                           shape, valid.size(),
                           [&] {
                             std::size_t n = 0;
                             for (const auto& [_, k] : refused) n += k;
                             return n;
                           }(),
                           memory_rejected, facts.tier, jobs, jobs == 1 ? "" : "s",
                           o.shards ? fmt::format(", shard {}/{} ({} layouts)", o.shard, o.shards, queue.size()) : "");

  // Branch and bound: take layouts in bound order; stop once the next bound is above the
  // top-th best step time so far (the times only fall as results come in, so nothing
  // skipped could have made the top).
  std::mutex mutex;
  std::multiset<double> best;
  std::size_t next = 0, simulated = 0;
  bool stopped = false;
  std::exception_ptr failure;
  auto cutoff = [&] {
    if (best.size() < static_cast<std::size_t>(o.top)) return std::numeric_limits<double>::infinity();
    return *std::next(best.begin(), o.top - 1);
  };
  // What this folder holds already counts from the start (a rerun prunes as the run before
  // it ended, so it skips by the path bound what that run skipped).
  std::vector<bool> counted(valid.size(), false);  // in `best` already
  for (std::size_t i : queue)
    if (auto s = store.stored(valid[i].run.id); s && s->status == "ok") {
      best.insert(figures(s->summary).time_s);
      counted[i] = true;
    }
  auto worker = [&] {
    while (true) {
      std::size_t i;
      bool pruning = false;
      {
        std::lock_guard lock(mutex);
        if (stopped || next >= queue.size() || failure) return;
        i = queue[next];
        if (!o.exhaustive && valid[i].time_bound_s > cutoff()) {
          stopped = true;
          return;
        }
        ++next;
        // Nothing is pruned before the top is full: the longest path is not worked out then.
        pruning = std::isfinite(cutoff());
      }
      PointResult r;
      try {
        // A layout not simulated yet is built first: when its longest path is above the
        // top-th best step so far, it cannot make the top and is not simulated.
        // --exhaustive works it out for every layout, for results.csv.
        if (o.exhaustive || (pruning && !store.stored(valid[i].run.id))) {
          const std::optional<double> path = bounds.path_time_s(valid[i].layout, global);
          std::lock_guard lock(mutex);
          valid[i].path_bound_s = path;
          if (!o.exhaustive && path && *path > cutoff()) {
            err << fmt::format("      skip  path bound {} > the best {} so far  {}\n", seconds_text(*path), o.top,
                               valid[i].layout.text());
            continue;
          }
        }
        r = store.get(valid[i].run);
      } catch (...) {
        std::lock_guard lock(mutex);
        if (!failure) failure = std::current_exception();
        return;
      }
      std::lock_guard lock(mutex);
      ++simulated;
      if (r.status == "ok" && !counted[i]) {
        best.insert(figures(r.summary).time_s);
        counted[i] = true;
      }
      err << fmt::format("[{}] {:<5} {}{}  {}\n", simulated, r.status,
                               r.status == "ok" ? seconds_text(figures(r.summary).time_s) : "-",
                               r.ran ? "" : " (done before)", valid[i].layout.text());
      valid[i].result = std::move(r);
    }
  };
  {
    std::vector<std::thread> threads;
    for (int j = 1; j < jobs; ++j) threads.emplace_back(worker);
    worker();
    for (auto& t : threads) t.join();
  }
  if (failure) std::rethrow_exception(failure);
  // Layouts other shards (or an earlier run) finished in this folder count too.
  for (Candidate& c : valid)
    if (!c.result && !c.memory_rejected)
      if (auto s = store.stored(c.run.id); s && s->status != "error") {
        if (s->status == "ok" && !counted[&c - valid.data()]) best.insert(figures(s->summary).time_s);
        c.result = std::move(s);
      }
  const double cut = o.exhaustive ? std::numeric_limits<double>::infinity() : cutoff();

  // results.csv: every valid layout in bound order, what became of it.
  std::string csv =
      "tp,sp,pp,schedule,virtual_stages,dp,micro_batch,micro_batches,zero,hsdp,recompute,offload,status,"
      "time_bound_s,path_bound_s,memory_bound_bytes,iteration_time_s,tokens_per_s,mfu,hfu,peak_bytes,margin_bytes,"
      "bubble_fraction,exposed_comm_s,point_id,error\n";
  struct Row {
    const Candidate* c;
    std::string status;
    Figures f;
  };
  std::vector<Row> rows;
  std::size_t failed = 0, ok = 0, oom = 0;
  for (const Candidate& c : valid) {
    Row row{&c, "", {}};
    if (c.memory_rejected && !o.exhaustive)
      row.status = "over_memory_bound";
    else if (!c.result)
      row.status = c.time_bound_s > cut || (c.path_bound_s && *c.path_bound_s > cut) ? "over_time_bound" : "not_run";
    else if (c.time_bound_s > cut)
      row.status = "over_time_bound";
    else
      row.status = c.result->status;
    if (c.result && row.status == c.result->status) row.f = figures(c.result->summary);
    ok += row.status == "ok";
    oom += row.status == "oom";
    failed += row.status == "error";
    const Layout& l = c.layout;
    const bool timed = row.status == "ok" && row.f.time_s > 0;
    auto num = [](double x) { return fmt::format("{:.9g}", x); };
    csv += fmt::format(
        "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", l.tp, l.sp, l.pp,
        l.schedule(), l.virtual_stages, l.dp, l.micro_batch, l.micro_batches, l.zero, l.hsdp, to_string(l.recompute),
        l.offload,
        row.status, num(c.time_bound_s),
        // Where it decided (or with --exhaustive, always): a rerun that reaches fewer layouts
        // writes the same bytes.
        c.path_bound_s && (o.exhaustive || (!c.result && c.time_bound_s <= cut)) ? num(*c.path_bound_s) : "",
        c.memory_bound_bytes, timed ? num(row.f.time_s) : "",
        timed && row.f.tokens_per_s >= 0 ? num(row.f.tokens_per_s) : "",
        timed && row.f.mfu >= 0 ? num(row.f.mfu) : "", timed && row.f.hfu >= 0 ? num(row.f.hfu) : "",
        row.status == "ok" || row.status == "oom" ? std::to_string(row.f.peak_bytes) : "",
        row.status == "ok" ? std::to_string(static_cast<std::int64_t>(row.f.capacity_bytes) -
                                            static_cast<std::int64_t>(row.f.peak_bytes))
                           : "",
        timed && row.f.bubble >= 0 ? num(row.f.bubble) : "", timed ? num(row.f.exposed_comm_s) : "",
        c.result ? c.run.id : "",
        row.status == "error" ? csv_cell(c.result->error) : "");
    rows.push_back(std::move(row));
  }
  write_output_file(o.out_dir + "/results.csv", csv);

  // The terminal: the count, the top layouts, the best of those that lost and why.
  std::size_t refused_count = 0;
  for (const auto& [_, k] : refused) refused_count += k;
  out << fmt::format("plan {}\n", shape);
  out << fmt::format("layouts     {} valid ({} divide; the model refuses {}), {} rejected by the memory bound, "
                           "{} simulated{}\n",
                           valid.size(), layouts.size(), refused_count, memory_rejected,
                           ok + oom + failed, o.exhaustive ? " (exhaustive: no pruning)" : "");
  out << notes;
  std::vector<const Row*> top;
  for (const Row& r : rows)
    if (r.status == "ok") top.push_back(&r);
  std::stable_sort(top.begin(), top.end(), [](const Row* a, const Row* b) {
    if (a->f.time_s != b->f.time_s) return a->f.time_s < b->f.time_s;
    return a->c->layout.text() < b->c->layout.text();
  });
  const std::size_t shown = std::min<std::size_t>(top.size(), o.top);
  if (best_out && !top.empty()) {
    const Row& r = *top.front();
    PlanBest b;
    b.layout = r.c->layout.text();
    b.policy = r.c->run.request.policy;
    const std::vector<Override>& sets = r.c->run.request.overrides;
    for (std::size_t k = overrides.size(); k < sets.size(); ++k)
      b.sets.push_back(sets[k].key.starts_with("parallel.")
                           ? fmt::format("{}={}", sets[k].key, sets[k].value)
                           : fmt::format("{}.{}={}", sets[k].target, sets[k].key, sets[k].value));
    b.time_s = r.f.time_s;
    b.mfu = r.f.mfu;
    b.peak_bytes = r.f.peak_bytes;
    b.point = store.point_dir(r.c->run.id);
    *best_out = std::move(b);
  }
  if (shown == 0) {
    out << "fits        no layout fits\n";
  } else {
    std::vector<std::vector<std::string>> table{
        {"#", "layout", "step", "tokens/s", "MFU", "HFU", "peak/GPU", "margin"}};
    auto percent = [](double x) { return x >= 0 ? fmt::format("{:.1f}%", 100 * x) : std::string("-"); };
    for (std::size_t k = 0; k < shown; ++k) {
      const Row& r = *top[k];
      table.push_back({std::to_string(k + 1), r.c->layout.text(), seconds_text(r.f.time_s),
                       r.f.tokens_per_s >= 0 ? fmt::format("{:.0f}", r.f.tokens_per_s) : "-", percent(r.f.mfu),
                       percent(r.f.hfu),
                       format_bytes(static_cast<double>(r.f.peak_bytes)),
                       format_bytes(static_cast<double>(r.f.capacity_bytes - std::min(r.f.capacity_bytes, r.f.peak_bytes)))});
    }
    out << fmt::format("top {}\n", shown) << table_text(table);
    out << fmt::format("            MFU: the step's forward and backward FLOPs as traced, without "
                             "recomputation (HFU: with it), over {} GPUs x {} peak {} x step\n",
                             gpus, to_string(facts.dtype), format_rate(facts.peak_flops));
  }
  // Why the best of the rest lose: the fastest bounds that did not fit, and the next
  // fastest simulated steps.
  std::vector<std::string> why;
  for (const Row& r : rows) {
    if (why.size() >= 3) break;
    if (r.status == "over_memory_bound")
      why.push_back(fmt::format("{}: does not fit: its resident state and the activations its first stage must keep are {} "
                                "per GPU at least, over {}'s {} by {} "
                                "(not simulated)",
                                r.c->layout.text(), format_bytes(static_cast<double>(r.c->memory_bound_bytes)),
                                facts.tier, format_bytes(static_cast<double>(facts.capacity_bytes)),
                                format_bytes(static_cast<double>(r.c->memory_bound_bytes - facts.capacity_bytes))));
    else if (r.status == "oom")
      why.push_back(fmt::format("{}: out of memory at {}, short by {}", r.c->layout.text(), r.f.oom_op,
                                format_bytes(static_cast<double>(r.f.oom_short_bytes))));
  }
  for (std::size_t k = shown; k < top.size() && k < shown + 3; ++k) {
    const Row& r = *top[k];
    std::string detail = fmt::format("exposed communication {}", seconds_text(r.f.exposed_comm_s));
    if (r.f.bubble >= 0) detail = fmt::format("bubble {:.1f}%, ", 100 * r.f.bubble) + detail;
    why.push_back(fmt::format("{}: {} ({:+.1f}% on the best): {}", r.c->layout.text(), seconds_text(r.f.time_s),
                              100 * (r.f.time_s / top[0]->f.time_s - 1), detail));
  }
  if (!why.empty()) {
    out << "others  ";
    for (std::size_t k = 0; k < why.size(); ++k) out << (k ? "            " : "    ") << why[k] << "\n";
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto path_pruned = std::count_if(rows.begin(), rows.end(), [&](const Row& r) {
    return r.status == "over_time_bound" && !r.c->result && r.c->time_bound_s <= cut;
  });
  out << fmt::format("search      {} simulated ({} ok, {} oom, {} failed), {} skipped by the time bound ({} of them "
                     "built and skipped by their longest path)\n",
                     ok + oom + failed, ok, oom, failed,
                     std::count_if(rows.begin(), rows.end(), [](const Row& r) { return r.status == "over_time_bound"; }),
                     path_pruned);
  err << fmt::format("plan: {} runs in {:.1f} s ({} of them here)\n", simulated, wall, store.children_run());
  out << fmt::format("results     {}/results.csv\n", o.out_dir);
  if (failed) {
    err << fmt::format("memsim: {} layout{} failed; see the error column of {}/results.csv\n", failed,
                             failed == 1 ? "" : "s", o.out_dir);
    return 1;
  }
  return 0;
}

}  // namespace memsim
