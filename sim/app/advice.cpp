#include "sim/app/advice.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/core/units.h"
#include "sim/inputs/inputs.h"
#include "sim/plan/plan.h"
#include "sim/policy/policy.h"
#include "sim/sweep/fit.h"
#include "sim/sweep/runner.h"
#include "sim/sweep/store.h"
#include "sim/workload/importers/importers.h"
#include "sim/workload/models/models.h"

namespace memsim {
namespace {

// Policies the advice does not try, and why (said on the advice's notes).
const std::map<std::string, std::string>& left_out() {
  static const std::map<std::string, std::string> m = {
      {"none", "the baseline"},
      {"keep-all", "uses more memory than none"},
      {"checkmate", "its solver takes up to a minute a run (try --policy checkmate)"},
  };
  return m;
}

std::uint64_t tier_peak(const nlohmann::json& summary, const std::string& tier) {
  if (!summary.is_object() || !summary.contains("tiers") || !summary["tiers"].contains(tier)) return 0;
  return summary["tiers"][tier].value("peak_allocated_bytes", std::uint64_t{0});
}

std::string status_of(const PointResult& r) { return r.status.empty() ? "error" : r.status; }

double iteration_time(const nlohmann::json& summary) {
  return summary.is_object() && summary.contains("iteration_time_s") && summary["iteration_time_s"].is_number()
             ? summary["iteration_time_s"].get<double>()
             : 0.0;
}

constexpr const char* kRoomyOrigin = "the advice's run with enough memory";

// The --set overrides that give every tier of every device at least `bytes` (a tiled tier:
// each of its tiles, since a tile may hold a share of every live buffer, and a share is at
// most the buffer); a tier that already holds that keeps its capacity. Made from the
// platform's document, so a multi-node platform's node description covers every node.
std::vector<Override> roomy_overrides(const RunRequest& request, std::uint64_t bytes) {
  const auto most = static_cast<std::uint64_t>(physical_range(UnitKind::size).max);
  std::vector<Override> out;
  auto add = [&](const std::string& tier, const std::string& key, std::uint64_t value) {
    Override o = parse_override(fmt::format("{}.{}={}B", tier, key, value));
    o.origin = kRoomyOrigin;
    out.push_back(std::move(o));
  };
  const ConfigNode root = platform_document_arg(request.device, request.overrides);
  const auto devices = root.find("devices");
  if (!devices || !devices->is_map()) return out;
  for (const auto& [device, d] : devices->entries()) {
    const auto tiers = d.is_map() ? d.find("tiers") : std::nullopt;
    if (!tiers || !tiers->is_map()) continue;
    for (const auto& [name, t] : tiers->entries()) {
      if (!t.is_map()) continue;
      const std::string tier = device + "." + name;
      const auto allocator = t.find("allocator");
      if (allocator && allocator->as_string() == "tiled") {
        const auto tiles = t.find("tiles");
        const auto tile = t.find("tile_capacity");
        if (!tiles || !tile) continue;  // the run's own load would have refused it
        const auto n = static_cast<std::uint64_t>(std::max<std::int64_t>(1, tiles->as_int()));
        const std::uint64_t per_tile = std::max(tile->as_positive_bytes(), std::min(bytes, most / n));
        add(tier, "tile_capacity", per_tile);
        if (t.has("capacity")) add(tier, "capacity", per_tile * n);
      } else {
        const auto capacity = t.find("capacity");
        if (capacity && capacity->as_positive_bytes() >= bytes) continue;
        add(tier, "capacity", bytes);
      }
    }
  }
  return out;
}

// Why a run did not give a peak to quote, in one line (never empty).
std::string why_not_ok(const ResolvedRun& run, const PointResult& r) {
  if (!run.error.empty()) return run.error;
  if (r.status == "oom") {
    const nlohmann::json oom = r.summary.is_object() ? r.summary.value("oom", nlohmann::json::object())
                                                     : nlohmann::json::object();
    return fmt::format("it ran out of memory as well: {} full at op '{}', asked {} with {} of {} in use",
                       oom.value("tier", std::string("a tier")), oom.value("op", std::string("?")),
                       format_bytes(static_cast<double>(oom.value("requested_bytes", std::uint64_t{0}))),
                       format_bytes(static_cast<double>(oom.value("allocated_bytes", std::uint64_t{0}))),
                       format_bytes(static_cast<double>(oom.value("capacity_bytes", std::uint64_t{0}))));
  }
  if (!r.error.empty()) return r.error;
  return fmt::format("it ended with status '{}' and no message", status_of(r));
}

}  // namespace

std::uint64_t step_memory_bound(const Trace& trace, const PlatformSpec& platform) {
  double buffers = 0, workspace = 0, reserved = 0;
  for (const Buffer& b : trace.buffers) buffers += static_cast<double>(b.bytes);
  for (const Op& op : trace.ops) workspace = std::max(workspace, static_cast<double>(op.workspace_bytes));
  for (const DeviceSpec& d : platform.devices)
    reserved = std::max(reserved, static_cast<double>(d.reserved_bytes(true)));
  // Room for an allocator's rounding and its cached segments (the caching allocator's are up
  // to 20 MiB, several at once): generous, not tight; a run that still runs out says so.
  constexpr double kAllocatorSlack = 1024.0 * 1024 * 1024;
  const double bound = 2 * buffers + workspace + reserved + kAllocatorSlack;
  return static_cast<std::uint64_t>(std::min(bound, physical_range(UnitKind::size).max));
}

std::string workload_param(const std::string& workload, const std::vector<Override>& overrides,
                           const std::string& name) {
  if (sniff_foreign_trace(workload) != nullptr) return "";
  ConfigNode root = open_input(workload, "workloads");
  if (classify(root) != InputKind::workload_spec) return "";
  const ModelInfo* model = nullptr;
  if (auto m = root.find("model")) model = find_model(m->as_string());
  if (!model || std::none_of(model->params.begin(), model->params.end(),
                             [&](const ParamSpec& p) { return p.name == name; }))
    return "";
  std::string value;
  if (auto v = root.find(name); v && v->is_scalar()) value = v->as_string();
  if (value.empty())
    for (const ParamSpec& p : model->params)
      if (p.name == name && p.default_value) value = *p.default_value;
  for (const Override& o : overrides)
    if (o.target == "workload" && o.key == name) value = o.value;
  return value;
}

std::int64_t workload_batch(const std::string& workload, const std::vector<Override>& overrides) {
  if (sniff_foreign_trace(workload) != nullptr) return 0;
  ConfigNode root = open_input(workload, "workloads");
  if (classify(root) != InputKind::workload_spec) return 0;
  std::string batch;
  if (auto b = root.find("batch")) batch = b->as_string();
  if (batch.empty())
    if (auto m = root.find("model"))
      if (const ModelInfo* model = find_model(m->as_string()))
        for (const ParamSpec& p : model->params)
          if (p.name == "batch" && p.default_value) batch = *p.default_value;
  bool has_batch = !batch.empty();
  if (auto m = root.find("model"); m && !has_batch)
    if (const ModelInfo* model = find_model(m->as_string()))
      has_batch = std::any_of(model->params.begin(), model->params.end(),
                              [](const ParamSpec& p) { return p.name == "batch"; });
  for (const Override& o : overrides)
    if (o.target == "workload" && o.key == "batch") batch = o.value;
  if (batch.empty() || batch.find_first_not_of("0123456789") != std::string::npos) return 0;
  return std::stoll(batch);
}

OomAdvice advise(const RunRequest& request, const Summary& summary, const std::string& out_dir,
                 const std::string& memsim, std::uint64_t step_bytes, const AdviceProgress& progress) {
  OomAdvice advice;
  const OomReport& oom = *summary.oom;
  const std::string tier = oom.tier;
  Resolver resolver;
  PointStore store(out_dir + "/advice", memsim, false);
  std::mutex say;
  std::size_t runs = 0;
  if (progress)
    store.on_result([&](const ResolvedRun& run, const PointResult& r) {
      std::lock_guard lock(say);
      std::string what = run.request.policy;
      for (const Override& o : run.request.overrides)
        if (o.target == "workload" && o.key == "batch") what += " at batch " + o.value;
      progress(fmt::format("what would fit: run {} ({}: {}{})", ++runs, what, status_of(r),
                           r.ran ? "" : ", from an earlier run"));
    });
  auto point_of = [&](const ResolvedRun& run) { return store.point_dir(run.id); };
  // The policy's own overrides do not carry to another policy.
  std::vector<Override> shared;
  for (const Override& o : request.overrides)
    if (o.target != "policy") shared.push_back(o);

  // 1. The peak with enough memory: the same run with every tier of every device given at
  // least what the whole step could hold at once (step_bytes). A budget still caps it; when
  // that run still runs out, policy none (no budget) answers.
  {
    ResolvedRun run;
    PointResult r;
    try {
      const std::vector<Override> room = roomy_overrides(request, step_bytes);
      auto roomy = [&](RunRequest req) {
        req.overrides.insert(req.overrides.end(), room.begin(), room.end());
        return req;
      };
      run = resolver.resolve(roomy(request));
      r = run.error.empty() ? store.get(run) : PointResult{};
      if (run.error.empty() && r.status == "oom" && request.policy != "none") {
        RunRequest plain = request;
        plain.policy = "none";
        plain.overrides = shared;
        run = resolver.resolve(roomy(plain));
        r = run.error.empty() ? store.get(run) : PointResult{};
      }
    } catch (const InputError& e) {
      run.error = e.what();
    }
    if (run.error.empty() && r.status == "ok") {
      advice.needs_bytes = tier_peak(r.summary, tier);
      advice.needs_time_s = iteration_time(r.summary);
      advice.needs_policy = run.request.policy;
      advice.needs_point = point_of(run);
      const auto& by = r.summary["tiers"][tier]["peak_by_category"];
      for (int c = 0; c < kCategoryCount; ++c) {
        const auto cat = static_cast<Category>(c);
        advice.needs_by_category[c] = by.value(std::string(to_string(cat)), std::uint64_t{0});
        if (advice.needs_by_category[c] > oom.capacity_bytes) advice.exceeding.push_back(cat);
      }
      advice.model_state_bytes = advice.needs_by_category[static_cast<int>(Category::weight)] +
                                 advice.needs_by_category[static_cast<int>(Category::gradient)] +
                                 advice.needs_by_category[static_cast<int>(Category::optimizer_state)];
      if (advice.needs_bytes == 0)
        advice.needs_error = fmt::format("the run with enough memory ({}) allocated nothing on {}",
                                         advice.needs_point, tier);
    } else {
      advice.needs_error = why_not_ok(run, r);
      if (!run.id.empty() && run.error.empty()) advice.needs_point = point_of(run);
      advice.notes.push_back(fmt::format("the run with enough memory did not finish: {}{}", advice.needs_error,
                                         advice.needs_point.empty() ? "" : fmt::format(" ({}/)", advice.needs_point)));
    }
  }

  // 2. The largest batch that fits under this policy: memsim fit's search below this batch.
  const std::int64_t batch = workload_batch(request.workload, request.overrides);
  if (batch > 1) {
    std::vector<Override> others;
    for (const Override& o : request.overrides)
      if (!(o.target == "workload" && o.key == "batch")) others.push_back(o);
    RunRequest base = request;
    base.overrides = others;
    FitOptions options;
    options.max = batch - 1;
    const FitResult fit = run_fit(base, options, resolver, store);
    if (!fit.error.empty()) {
      advice.notes.push_back("the batch search stopped: " + fit.error);
    } else if (fit.max == 0) {
      advice.notes.push_back(fmt::format("no batch fits under policy {}, not even 1", request.policy));
    } else {
      FitAdvice f;
      f.change = "batch";
      f.policy = request.policy;
      f.batch = fit.max;
      f.first_fail = fit.first_fail;
      for (const FitProbe& p : fit.probes)
        if (p.value == fit.max) {
          f.iteration_time_s = p.iteration_time_s;
          f.point = store.point_dir(p.id);
        }
      advice.fits.push_back(f);
    }
  } else if (batch == 0) {
    advice.notes.push_back("the workload has no batch to change");
  }

  // 3. Every registered policy at this batch (in parallel); the fastest that fits.
  std::vector<std::string> candidates;
  for (const PolicyInfo& p : builtin_policies()) {
    if (p.name == request.policy) continue;
    if (auto it = left_out().find(p.name); it != left_out().end()) {
      if (p.name == "checkmate") advice.notes.push_back(fmt::format("not tried: {}, {}", p.name, it->second));
      continue;
    }
    const bool required = std::any_of(p.params.begin(), p.params.end(),
                                      [](const ParamSpec& s) { return !s.default_value; });
    if (required) {
      advice.notes.push_back(fmt::format("not tried: {}, which needs a parameter", p.name));
      continue;
    }
    candidates.push_back(p.name);
  }
  std::vector<OomAdvice::Tried> tried(candidates.size());
  std::vector<std::string> points(candidates.size());
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t i = next++; i < candidates.size(); i = next++) {
      RunRequest r = request;
      r.policy = candidates[i];
      r.overrides = shared;
      const ResolvedRun run = resolver.resolve(r);
      tried[i].policy = candidates[i];
      if (!run.error.empty()) {
        tried[i].status = "error";
        tried[i].error = run.error;
        continue;
      }
      const PointResult pr = store.get(run);
      tried[i].status = status_of(pr);
      if (tried[i].status == "error") tried[i].error = pr.error.empty() ? "it failed with no message" : pr.error;
      tried[i].iteration_time_s = iteration_time(pr.summary);
      points[i] = point_of(run);
    }
  };
  {
    const int jobs = std::min<int>(default_jobs(0), static_cast<int>(candidates.size()));
    std::vector<std::thread> threads;
    for (int j = 1; j < jobs; ++j) threads.emplace_back(work);
    work();
    for (auto& t : threads) t.join();
  }
  advice.tried = tried;
  std::optional<std::size_t> best;
  for (std::size_t i = 0; i < tried.size(); ++i)
    if (tried[i].status == "ok" && (!best || tried[i].iteration_time_s < tried[*best].iteration_time_s))
      best = i;
  // 4. A transformer's own recomputation (recompute: full; selective attention where the
  // attention is materialized) under policy none, when that fits faster than any policy.
  const std::string recompute = workload_param(request.workload, request.overrides, "recompute");
  const std::string attention = workload_param(request.workload, request.overrides, "attention_impl");
  std::optional<FitAdvice> by_recompute;
  for (const char* form : {"selective", "full"}) {
    if (recompute.empty() || recompute == "full") break;
    const bool selective = std::string(form) == "selective";
    if (selective && attention != "materialized") continue;
    RunRequest r = request;
    r.policy = "none";
    r.overrides = shared;
    Override o = parse_override(selective ? "workload.attention_impl=selective" : "workload.recompute=full");
    o.origin = "the advice's recomputation";
    r.overrides.push_back(std::move(o));
    const ResolvedRun run = resolver.resolve(r);
    if (!run.error.empty()) continue;
    const PointResult pr = store.get(run);
    if (pr.status != "ok") continue;
    const double t = iteration_time(pr.summary);
    if (by_recompute && by_recompute->iteration_time_s <= t) continue;
    FitAdvice f;
    f.change = "recompute";
    f.policy = "none";
    f.recompute = form;
    f.batch = batch;
    f.iteration_time_s = t;
    f.slowdown = advice.needs_time_s > 0 ? t / advice.needs_time_s : 0;
    f.point = point_of(run);
    by_recompute = f;
  }
  if (by_recompute && (!best || by_recompute->iteration_time_s < tried[*best].iteration_time_s))
    advice.fits.push_back(*by_recompute);
  if (best) {
    FitAdvice f;
    f.change = "policy";
    f.policy = tried[*best].policy;
    f.batch = batch;
    f.iteration_time_s = tried[*best].iteration_time_s;
    f.slowdown = advice.needs_time_s > 0 ? f.iteration_time_s / advice.needs_time_s : 0;
    f.point = points[*best];
    advice.fits.push_back(f);
  }

  // 5. A transformer's layout: memsim plan's search over the step's GPUs and global batch
  // (tensor and pipeline ranks, micro-batches, ZeRO, recomputation), its fastest that fits.
  // A step without layout (one replica on each device) is searched on one GPU.
  if (!recompute.empty() && summary.throughput && summary.throughput->samples > 0) {
    const Throughput& t = *summary.throughput;
    PlanOptions p;
    p.platform = request.device;
    p.workload = request.workload;
    for (const Override& o : shared) {
      if (o.target == "workload" && o.key == "seq_len" && o.value.find_first_not_of("0123456789") == std::string::npos &&
          !o.value.empty() && o.value.size() < 10)
        p.seq_len = std::stoll(o.value);  // the step's, which the search keeps
      else if (!plan_sets_key(o))
        p.sets.push_back(fmt::format("{}.{}={}", o.target, o.key, o.value));
    }
    p.gpus = summary.ranks > 1 ? summary.ranks : 1;
    p.global_batch = static_cast<std::int64_t>(summary.ranks > 1 ? t.samples : t.samples / t.gpus);
    p.top = 1;
    p.out_dir = out_dir + "/advice/plan";
    p.memsim = memsim;
    p.quiet = true;
    if (progress)
      progress(fmt::format("what would fit: a layout search (memsim plan) over {} GPU{}, global batch {}", p.gpus,
                           p.gpus == 1 ? "" : "s", p.global_batch));
    std::optional<PlanBest> found;
    try {
      plan_command(p, &found);
      if (found) {
        FitAdvice f;
        f.change = "layout";
        f.policy = found->policy;
        f.layout = found->layout;
        f.sets = found->sets;
        f.gpus = p.gpus;
        f.global_batch = p.global_batch;
        f.iteration_time_s = found->time_s;
        f.mfu = found->mfu;
        f.slowdown = advice.needs_time_s > 0 ? f.iteration_time_s / advice.needs_time_s : 0;
        f.point = found->point;
        advice.fits.push_back(f);
      } else {
        advice.notes.push_back(fmt::format("no layout of {} GPUs at global batch {} fits (memsim plan's search, {}/)",
                                           p.gpus, p.global_batch, p.out_dir));
      }
    } catch (const std::exception& e) {
      const std::string why = e.what();
      advice.notes.push_back("the layout search stopped: " + why.substr(0, why.find('\n')));
    }
  }
  return advice;
}

}  // namespace memsim
