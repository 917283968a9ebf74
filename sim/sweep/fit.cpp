#include "sim/sweep/fit.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "sim/core/error.h"

namespace memsim {
namespace {

using json = nlohmann::json;

// The placeholder the fit id hashes in place of the axis value.
constexpr const char* kOpenValue = "<fit>";

Override axis_override(const std::string& axis, const std::string& value) {
  Override o = parse_override("workload." + axis + "=" + value);
  o.origin = fmt::format("fit workload.{}={}", axis, value);
  return o;
}

}  // namespace

Search bisect(std::int64_t good, std::int64_t bad,
              const std::function<ProbeOutcome(std::int64_t)>& probe) {
  Search s{good, bad, false};
  while (s.first_fail - s.largest > 1) {
    const std::int64_t mid = s.largest + (s.first_fail - s.largest) / 2;
    switch (probe(mid)) {
      case ProbeOutcome::fits: s.largest = mid; break;
      case ProbeOutcome::fails: s.first_fail = mid; break;
      case ProbeOutcome::error: s.error = true; return s;
    }
  }
  return s;
}

Search search_largest(std::int64_t lo, std::int64_t hi,
                      const std::function<ProbeOutcome(std::int64_t)>& probe) {
  Search s;
  switch (probe(lo)) {
    case ProbeOutcome::fits: s.largest = lo; break;
    case ProbeOutcome::fails: s.first_fail = lo; return s;
    case ProbeOutcome::error: s.error = true; return s;
  }
  while (s.largest < hi) {
    const std::int64_t next = s.largest > hi / 2 ? hi : s.largest * 2;
    switch (probe(next)) {
      case ProbeOutcome::fits: s.largest = next; break;
      case ProbeOutcome::fails: return bisect(s.largest, next, probe);
      case ProbeOutcome::error: s.error = true; return s;
    }
  }
  return s;  // everything up to hi fits
}

json FitResult::to_json() const {
  json j;
  j["axis"] = axis;
  j["max"] = max;
  j["first_fail"] = first_fail;
  j["fail_status"] = fail_status;
  if (!fail_error.empty()) j["fail_error"] = fail_error;
  if (slowdown > 0) {
    j["slowdown"] = slowdown;
    j["baseline"] = {{"policy", "none"}, {"value", baseline_value},
                     {"time_per_unit_s", baseline_time_per_unit_s}};
    if (max_within) j["max_within_slowdown"] = *max_within;
  }
  j["probes"] = json::array();
  for (const auto& p : probes) {
    json pj = {{"value", p.value}, {"status", p.status}};
    if (p.status == "ok" || p.status == "oom") {
      pj["iteration_time_s"] = p.iteration_time_s;
      pj["peak_bytes"] = p.peak_bytes;
    }
    if (!p.id.empty()) pj["id"] = p.id;
    if (!p.error.empty()) pj["error"] = p.error;
    j["probes"].push_back(pj);
  }
  if (!error.empty()) j["error"] = error;
  return j;
}

FitResult FitResult::from_json(const json& j) {
  FitResult r;
  r.axis = j.value("axis", "");
  r.max = j.value("max", std::int64_t{0});
  r.first_fail = j.value("first_fail", std::int64_t{0});
  r.fail_status = j.value("fail_status", "");
  r.fail_error = j.value("fail_error", "");
  r.slowdown = j.value("slowdown", 0.0);
  if (j.contains("max_within_slowdown")) r.max_within = j["max_within_slowdown"].get<std::int64_t>();
  if (j.contains("baseline")) {
    r.baseline_value = j["baseline"].value("value", std::int64_t{0});
    r.baseline_time_per_unit_s = j["baseline"].value("time_per_unit_s", 0.0);
  }
  if (j.contains("probes"))
    for (const auto& pj : j["probes"])
      r.probes.push_back({pj.value("value", std::int64_t{0}), pj.value("status", ""),
                          pj.value("iteration_time_s", 0.0), pj.value("peak_bytes", std::uint64_t{0}),
                          pj.value("id", ""), pj.value("error", "")});
  r.error = j.value("error", "");
  return r;
}

std::string fit_id(const RunRequest& base, const FitOptions& options, Resolver& resolver) {
  RunRequest open = base;
  open.overrides.push_back(axis_override(options.axis, kOpenValue));
  return hash_hex(fmt::format("fit axis={} min={} max={} slowdown={}\n{}", options.axis,
                              options.min, options.max, options.slowdown,
                              resolver.resolved_text(open)));
}

FitResult run_fit(const RunRequest& base, const FitOptions& options, Resolver& resolver,
                  PointStore& store) {
  const std::string id = fit_id(base, options, resolver);
  if (!store.force())
    if (auto stored = store.stored_fit(id)) return FitResult::from_json(*stored);

  FitResult res;
  res.axis = options.axis;
  res.slowdown = options.slowdown;
  std::map<std::int64_t, FitProbe> probed;
  auto probe = [&](std::int64_t v) -> const FitProbe& {
    if (auto it = probed.find(v); it != probed.end()) return it->second;
    RunRequest r = base;
    r.overrides.push_back(axis_override(options.axis, std::to_string(v)));
    ResolvedRun run = resolver.resolve(r);
    FitProbe p;
    p.value = v;
    p.id = run.id;
    if (!run.error.empty()) {
      p.status = "invalid";
      p.error = run.error;
    } else {
      PointResult pr = store.get(run);
      p.status = pr.status == "interrupted" ? "error" : pr.status;
      p.error = pr.status == "interrupted" ? "interrupted" : pr.error;
      if (pr.summary.contains("iteration_time_s") && pr.summary["iteration_time_s"].is_number())
        p.iteration_time_s = pr.summary["iteration_time_s"].get<double>();
      if (!run.compute_tiers.empty() && pr.summary.contains("tiers") &&
          pr.summary["tiers"].contains(run.compute_tiers.front()))
        p.peak_bytes = pr.summary["tiers"][run.compute_tiers.front()].value("peak_allocated_bytes", std::uint64_t{0});
    }
    res.probes.push_back(p);
    return probed.emplace(v, std::move(p)).first->second;
  };
  auto fits = [&](std::int64_t v) {
    const FitProbe& p = probe(v);
    if (p.status == "ok") return ProbeOutcome::fits;
    if (p.status == "oom") return ProbeOutcome::fails;
    // A value the inputs refuse is a ceiling — unless it is the first one: then the inputs
    // themselves are wrong.
    if (p.status == "invalid" && v != options.min) return ProbeOutcome::fails;
    return ProbeOutcome::error;
  };

  const Search s = search_largest(options.min, options.max, fits);
  if (s.error) {
    for (const auto& p : res.probes)
      if (p.status == "error" || p.status == "invalid")
        res.error = fmt::format("at {} {}: {}", options.axis, p.value, p.error);
    return res;  // not stored: an error may be transient, and is cheap to find again
  }
  res.max = s.largest;
  res.first_fail = s.first_fail;
  if (s.first_fail) {
    res.fail_status = probed.at(s.first_fail).status;
    if (res.fail_status == "invalid") res.fail_error = probed.at(s.first_fail).error;
  }

  if (options.slowdown > 0 && res.max == 0) {
    res.max_within = 0;
  } else if (options.slowdown > 0) {
    RunRequest none = base;
    none.policy = "none";
    std::erase_if(none.overrides, [](const Override& o) { return o.target == "policy"; });
    FitOptions plain = options;
    plain.slowdown = 0;
    const bool self = base.policy == "none" && none.overrides.size() == base.overrides.size();
    const FitResult baseline = self ? res : run_fit(none, plain, resolver, store);
    if (!baseline.error.empty()) {
      res.error = "baseline (policy none): " + baseline.error;
      return res;
    }
    if (baseline.max == 0) {
      res.error = fmt::format("baseline: the none policy does not fit at {} {}", options.axis,
                              options.min);
      return res;
    }
    res.baseline_value = baseline.max;
    for (const auto& p : baseline.probes)
      if (p.value == baseline.max) res.baseline_time_per_unit_s = p.iteration_time_s / p.value;
    const double limit = options.slowdown * res.baseline_time_per_unit_s;
    auto within = [&](std::int64_t v) {
      const ProbeOutcome o = fits(v);
      if (o != ProbeOutcome::fits) return o;
      return probed.at(v).iteration_time_s / v <= limit ? ProbeOutcome::fits : ProbeOutcome::fails;
    };
    const std::int64_t m = res.max;
    if (m == 0) {
      res.max_within = 0;
    } else if (within(m) == ProbeOutcome::fits) {
      res.max_within = m;
    } else {
      const std::int64_t lo = std::min(res.baseline_value, m);
      if (lo == m || within(lo) != ProbeOutcome::fits) {
        res.max_within = 0;
      } else {
        const Search w = bisect(lo, m, within);
        if (w.error) {
          res.error = "a run failed during the slowdown search";
          return res;
        }
        res.max_within = w.largest;
      }
    }
  }
  store.store_fit(id, res.to_json());
  return res;
}

}  // namespace memsim
