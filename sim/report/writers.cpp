#include "sim/report/writers.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <optional>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/core/error.h"
#include "sim/core/files.h"
#include "sim/core/text_out.h"
#include "sim/core/units.h"
#include "sim/report/kind_table.h"

namespace memsim {
namespace {

using ordered_json = nlohmann::ordered_json;

ordered_json categories_json(const CategoryBytes& by) {
  ordered_json j = ordered_json::object();
  for (int c = 0; c < kCategoryCount; ++c) j[std::string(to_string(static_cast<Category>(c)))] = by[c];
  return j;
}

ordered_json advice_json(const OomAdvice& a) {
  ordered_json j;
  j["needs_bytes"] = a.needs_bytes ? ordered_json(a.needs_bytes) : ordered_json();
  // Why needs_bytes is null: the run with enough memory failed, and how.
  j["needs_error"] = a.needs_bytes ? ordered_json()
                                   : ordered_json(a.needs_error.empty() ? std::string("not found") : a.needs_error);
  j["needs_by_category"] = categories_json(a.needs_by_category);
  j["needs_iteration_time_s"] = a.needs_time_s;
  j["needs_policy"] = a.needs_policy;
  j["needs_point"] = a.needs_point;
  ordered_json exceeding = ordered_json::array();
  for (Category c : a.exceeding) exceeding.push_back(to_string(c));
  j["exceeding_categories"] = exceeding;
  j["model_state_bytes"] = a.model_state_bytes;
  ordered_json fits = ordered_json::array();
  for (const FitAdvice& f : a.fits) {
    fits.push_back({{"change", f.change},
                    {"policy", f.policy},
                    {"batch", f.batch ? ordered_json(f.batch) : ordered_json()},
                    {"first_fail", f.first_fail ? ordered_json(f.first_fail) : ordered_json()},
                    {"iteration_time_s", f.iteration_time_s},
                    {"slowdown", f.slowdown > 0 ? ordered_json(f.slowdown) : ordered_json()},
                    {"point", f.point}});
    if (!f.recompute.empty()) fits.back()["recompute"] = f.recompute;
    if (f.change == "layout") {
      fits.back()["layout"] = f.layout;
      fits.back()["sets"] = f.sets;
      fits.back()["gpus"] = f.gpus;
      fits.back()["global_batch"] = f.global_batch;
      fits.back()["mfu"] = f.mfu >= 0 ? ordered_json(f.mfu) : ordered_json();
    }
  }
  j["would_fit"] = fits;
  ordered_json tried = ordered_json::array();
  for (const auto& t : a.tried)
    tried.push_back({{"policy", t.policy},
                     {"status", t.status},
                     {"iteration_time_s", t.status == "ok" ? ordered_json(t.iteration_time_s) : ordered_json()},
                     {"error", t.error.empty() ? ordered_json() : ordered_json(t.error)}});
  j["policies_tried"] = tried;
  j["notes"] = a.notes;
  return j;
}

// What was running at the tier's peak and its largest live buffers (peak.csv has them all).
void add_peak_json(ordered_json& tj, const PeakReport& p) {
  tj["peak_op"] = p.op_name.empty() ? ordered_json()
                                    : ordered_json{{"name", p.op_name}, {"index", p.op},
                                                   {"phase", p.phase}, {"recompute", p.recompute}};
  ordered_json largest = ordered_json::array();
  for (std::size_t i = 0; i < p.live.size() && i < kPeakBuffersShown; ++i) {
    const PeakBuffer& b = p.live[i];
    largest.push_back({{"name", b.name},
                       {"bytes", b.bytes},
                       {"category", to_string(b.category)},
                       {"producer", b.producer.empty() ? ordered_json() : ordered_json(b.producer)},
                       {"layer", b.layer.empty() ? ordered_json() : ordered_json(b.layer)}});
  }
  tj["peak_buffers"] = largest;
  tj["peak_live_buffers"] = p.live.size();
}

// What it would take to fit (memsim run's advice after an oom), as terminal rows.
std::vector<std::pair<std::string, std::string>> advice_rows(const OomReport& oom, std::uint64_t capacity) {
  std::vector<std::pair<std::string, std::string>> rows;
  if (!oom.advice) return rows;
  const OomAdvice& a = *oom.advice;
  if (a.needs_bytes > 0) {
    std::string why;
    for (Category c : a.exceeding)
      why += fmt::format("{}{} {}", why.empty() ? "" : ", ", category_words(c),
                         format_bytes(a.needs_by_category[static_cast<int>(c)]));
    if (!why.empty())
      why = "; alone more than that: " + why;
    else if (a.model_state_bytes > capacity)
      why = fmt::format(": the model state alone (weights, gradients, optimizer state) is {}",
                        format_bytes(a.model_state_bytes));
    else
      why = fmt::format(" (model state {}, activations {})", format_bytes(a.model_state_bytes),
                        format_bytes(a.needs_by_category[static_cast<int>(Category::activation)]));
    rows.emplace_back("needs", fmt::format("{} at the peak with enough memory (policy {}), {} here{}",
                                           format_bytes(a.needs_bytes), a.needs_policy,
                                           format_bytes(capacity), why));
  }
  bool first = true;
  for (const FitAdvice& f : a.fits) {
    std::string text;
    if (f.change == "batch")
      text = fmt::format("batch {} (policy {}; {} does not): {}, {}/", f.batch, f.policy,
                         f.first_fail ? std::to_string(f.first_fail) : std::string("a larger one"),
                         format_seconds(f.iteration_time_s), f.point);
    else if (f.change == "recompute")
      text = fmt::format("recompute: {} (policy {}{}): {}{}, faster than any policy, {}/", f.recompute, f.policy,
                         f.batch ? fmt::format(", batch {}", f.batch) : "", format_seconds(f.iteration_time_s),
                         f.slowdown > 0 ? fmt::format(", {:.2f}x the time with enough memory", f.slowdown) : "",
                         f.point);
    else if (f.change == "layout")
      text = fmt::format("layout {}{} (memsim plan over {} GPU{}, global batch {}): {}{}{}, {}/", f.layout,
                         f.policy == "none" ? "" : ", policy " + f.policy, f.gpus, f.gpus == 1 ? "" : "s",
                         f.global_batch, format_seconds(f.iteration_time_s),
                         f.mfu >= 0 ? fmt::format(", MFU {:.1f}%", 100 * f.mfu) : "",
                         f.slowdown > 0 ? fmt::format(", {:.2f}x the time with enough memory", f.slowdown) : "",
                         f.point);
    else
      text = fmt::format("policy {}{}: {}{}, {}/", f.policy, f.batch ? fmt::format(" at batch {}", f.batch) : "",
                         format_seconds(f.iteration_time_s),
                         f.slowdown > 0 ? fmt::format(", {:.2f}x the time with enough memory", f.slowdown) : "",
                         f.point);
    rows.emplace_back(first ? "would fit" : "", text);
    first = false;
  }
  if (a.fits.empty()) rows.emplace_back("would fit", "nothing tried fits");
  std::size_t fitting = 0;
  for (const auto& t : a.tried) fitting += t.status == "ok";
  if (!a.tried.empty())
    rows.emplace_back("", fmt::format("{} of {} other policies fit at this batch (summary.json: oom.advice)",
                                      fitting, a.tried.size()));
  for (const auto& t : a.tried)
    if (t.status == "error") rows.emplace_back("", fmt::format("could not run {}: {}", t.policy, t.error));
  for (const std::string& n : a.notes) rows.emplace_back("", n);
  return rows;
}

// "gpu3.hbm" -> ("gpu", 3, ".hbm"); nullopt for a name without such a number.
struct Numbered {
  std::string prefix;
  std::uint64_t number;
  std::string suffix;
};
std::optional<Numbered> numbered(const std::string& name) {
  const std::size_t dot = name.find('.');
  const std::string head = name.substr(0, dot);
  std::size_t i = head.size();
  while (i > 0 && std::isdigit(static_cast<unsigned char>(head[i - 1]))) --i;
  if (i == head.size() || head.size() - i > 9) return std::nullopt;
  return Numbered{head.substr(0, i), std::stoull(head.substr(i)),
                  dot == std::string::npos ? std::string() : name.substr(dot)};
}

// The step's rates from its counts (throughput: a run that finished).
struct Rates {
  double samples_per_s = 0, tokens_per_s = 0, mfu = 0, hfu = 0;
  double gpu_hours_per_1e9_tokens = 0;
};
Rates rates_of(const Throughput& t, double iteration_s) {
  Rates r;
  r.samples_per_s = static_cast<double>(t.samples) / iteration_s;
  r.tokens_per_s = static_cast<double>(t.tokens) / iteration_s;
  const double peak = t.gpus * t.peak_flops * iteration_s;  // what the GPUs could have done
  if (peak > 0) {
    r.mfu = t.model_flops / peak;
    r.hfu = t.hardware_flops / peak;
  }
  if (t.tokens > 0) r.gpu_hours_per_1e9_tokens = t.gpus * iteration_s / 3600 * 1e9 / static_cast<double>(t.tokens);
  return r;
}

// summary.json's "throughput": null for a step that did not finish; a figure it cannot know
// (the samples of an imported trace, the tokens of a CNN, the peak of a device that gives
// none) is null.
ordered_json throughput_json(const Summary& s) {
  if (!s.throughput || s.status != "ok" || s.iteration_time_s <= 0) return nullptr;
  const Throughput& t = *s.throughput;
  const Rates r = rates_of(t, s.iteration_time_s);
  auto known = [](bool has, double v) { return has ? ordered_json(v) : ordered_json(); };
  const bool samples = t.samples > 0, tokens = t.tokens > 0, peak = t.peak_flops > 0;
  return {{"gpus", t.gpus},
          {"samples_per_step", samples ? ordered_json(t.samples) : ordered_json()},
          {"tokens_per_step", tokens ? ordered_json(t.tokens) : ordered_json()},
          {"samples_per_s", known(samples, r.samples_per_s)},
          {"samples_per_s_per_gpu", known(samples, r.samples_per_s / t.gpus)},
          {"tokens_per_s", known(tokens, r.tokens_per_s)},
          {"tokens_per_s_per_gpu", known(tokens, r.tokens_per_s / t.gpus)},
          {"gpu_hours_per_1e9_tokens", known(tokens, r.gpu_hours_per_1e9_tokens)},
          {"model_flops_per_step", t.model_flops},
          {"hardware_flops_per_step", t.hardware_flops},
          {"peak_flops_per_gpu", known(peak, t.peak_flops)},
          {"peak_dtype", std::string(to_string(t.dtype))},
          {"mfu", known(peak, r.mfu)},
          {"hfu", known(peak, r.hfu)},
          {"flops_counted", "the forward and backward ops' FLOPs as memsim's trace counts them (a multiply-add "
                            "is 2) on every GPU; MFU without recomputation, HFU with it (the workload's and a "
                            "policy's); the optimizer's in neither; over gpus x peak_flops_per_gpu x "
                            "iteration_time_s"}};
}

// The terminal's throughput line: "61,440 tokens/s (7,680 per GPU, 8 GPUs); MFU 41.2%, HFU
// 41.2% of 989 TFLOPS bf16; 36.2 GPU-hours per 10^9 tokens".
std::string throughput_text(const Throughput& t, double iteration_s) {
  const Rates r = rates_of(t, iteration_s);
  std::vector<std::string> parts;
  const std::string gpus = fmt::format("{} GPU{}", t.gpus, t.gpus == 1 ? "" : "s");
  if (t.tokens > 0)
    parts.push_back(fmt::format("{:.0f} tokens/s ({:.0f} per GPU, {})", r.tokens_per_s, r.tokens_per_s / t.gpus, gpus));
  else if (t.samples > 0)
    parts.push_back(fmt::format("{:.4g} samples/s ({:.4g} per GPU, {})", r.samples_per_s, r.samples_per_s / t.gpus, gpus));
  if (t.peak_flops > 0)
    parts.push_back(fmt::format("MFU {:.1f}%, HFU {:.1f}% of {} {}{}", 100 * r.mfu, 100 * r.hfu, format_rate(t.peak_flops),
                                to_string(t.dtype), t.samples > 0 ? "" : " x " + gpus));
  if (t.tokens > 0) parts.push_back(fmt::format("{:.3g} GPU-hours per 10^9 tokens", r.gpu_hours_per_1e9_tokens));
  return fmt::format("{}", fmt::join(parts, "; "));
}

}  // namespace

void LineGroups::add(const std::string& name, std::string text) {
  const std::string* kept = &*texts_.insert(std::move(text)).first;
  const auto n = numbered(name);
  if (!n) {
    groups_.push_back({name, {}, {}, {}, kept});
    return;
  }
  const auto [g, fresh] =
      group_index_.try_emplace(fmt::format("{}\n{}\n{}", static_cast<const void*>(kept), n->prefix, n->suffix),
                               groups_.size());
  if (fresh) groups_.push_back({name, n->prefix, n->suffix, {}, kept});
  groups_[g->second].numbers.push_back(n->number);
}

std::vector<std::pair<std::string, std::string>> LineGroups::lines() const {
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(groups_.size());
  for (const Group& g : groups_) {
    if (g.numbers.size() <= 1) {  // a lone name keeps its spelling (gpu01.hbm)
      out.emplace_back(g.name, *g.text);
      continue;
    }
    std::vector<std::uint64_t> v = g.numbers;
    std::sort(v.begin(), v.end());
    std::vector<std::string> ranges;
    for (std::size_t i = 0; i < v.size();) {
      std::size_t j = i + 1;
      while (j < v.size() && v[j] == v[j - 1] + 1) ++j;
      ranges.push_back(j - i > 1 ? fmt::format("{}-{}", v[i], v[j - 1]) : fmt::format("{}", v[i]));
      i = j;
    }
    // Many ranges (a link of every node: ib0, ib8, ...) are shown by their ends and count.
    const bool many = ranges.size() > 4;
    const std::string listed = many ? fmt::format("{},{},...,{}", ranges[0], ranges[1], ranges.back())
                                    : fmt::format("{}", fmt::join(ranges, ","));
    out.emplace_back(g.prefix + listed + g.suffix + (many ? fmt::format(" ({} of them)", v.size()) : std::string()),
                     *g.text);
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> group_identical(
    const std::vector<std::pair<std::string, std::string>>& lines) {
  std::vector<std::pair<std::string, std::string>> out;
  for (std::size_t i = 0; i < lines.size();) {
    const auto first = numbered(lines[i].first);
    std::size_t j = i + 1;
    if (first)
      while (j < lines.size() && lines[j].second == lines[i].second) {
        const auto next = numbered(lines[j].first);
        if (!next || next->prefix != first->prefix || next->suffix != first->suffix ||
            next->number != first->number + (j - i))
          break;
        ++j;
      }
    if (j - i > 1)
      out.emplace_back(fmt::format("{}{}-{}{}", first->prefix, first->number, first->number + (j - i - 1),
                                   first->suffix),
                       lines[i].second);
    else
      out.push_back(lines[i]);
    i = j;
  }
  return out;
}

bool is_output_name(std::string_view name) {
  return std::find(kOutputNames.begin(), kOutputNames.end(), name) != kOutputNames.end();
}

std::string output_names_text() { return fmt::format("{}", fmt::join(kOutputNames, ", ")); }

std::string summary_json(const Summary& s) {
  std::string out;
  write_summary_json(s, [&out](std::string_view text) { out += text; });
  return out;
}

void write_summary_json(const Summary& s, const std::function<void(std::string_view)>& put) {
  ordered_json j;
  j["memsim_version"] = MEMSIM_VERSION;
  j["status"] = s.status;
  j["workload"] = s.workload;
  j["description"] = s.description;
  j["platform"] = s.platform;
  j["policy"] = s.policy;
  j["inputs"] = {{"workload", s.workload_source}, {"platform", s.platform_source}};
  // An OOM's partial iteration is no step time (easy to plot by mistake): null, and when it
  // stopped apart.
  j["iteration_time_s"] = s.status == "oom" ? ordered_json() : ordered_json(s.iteration_time_s);
  if (s.status == "oom") j["stopped_at_s"] = s.iteration_time_s;
  j["compute_time_s"] = s.compute_time_s;
  j["stall_time_s"] = s.stall_time_s;
  j["recompute_time_s"] = s.recompute_time_s;
  j["host_compute_time_s"] = s.host_compute_time_s;
  j["exposed_host_time_s"] = s.exposed_host_time_s;
  j["idle_time_s"] = s.idle_time_s;
  j["transfer_time_s"] = s.transfer_time_s;
  j["comm_time_s"] = s.comm_time_s;
  j["exposed_comm_time_s"] = s.exposed_comm_time_s;
  j["ranks"] = {{"count", s.ranks}, {"symmetric", s.symmetric}};
  if (!s.pipeline.empty()) {
    nlohmann::ordered_json stages = nlohmann::ordered_json::array();
    for (const PipelineStageSummary& st : s.pipeline)
      stages.push_back({{"stage", st.stage}, {"rank", st.rank}, {"compute_time_s", st.compute_s},
                        {"exposed_comm_time_s", st.exposed_comm_s}, {"bubble_fraction", st.bubble_fraction}});
    j["pipeline"] = {{"schedule", s.pipeline_schedule}, {"micro_batches", s.micro_batches},
                     {"flush_s", s.passes_end_s}, {"stages", stages}};
  }
  j["throughput"] = throughput_json(s);
  ordered_json collectives = ordered_json::array();
  for (const auto& c : s.collectives)
    collectives.push_back({{"kind", c.kind}, {"count", c.count}, {"bytes", c.bytes}});
  j["collectives"] = collectives;
  ordered_json links = ordered_json::array();
  for (const auto& l : s.links)
    links.push_back({{"name", l.name},
                     {"bandwidth_Bps", l.bandwidth_Bps},
                     {"duplex", l.full_duplex ? "full" : "half"},
                     {"bytes_forward", l.bytes_forward},
                     {"bytes_backward", l.bytes_backward},
                     {"utilisation", l.utilisation}});
  j["links"] = links;
  j["swap_out_bytes"] = s.swap_out_bytes;
  j["swap_in_bytes"] = s.swap_in_bytes;
  ordered_json traffic = ordered_json::array();
  for (const auto& t : s.traffic)
    traffic.push_back({{"from", t.from}, {"to", t.to}, {"bytes", t.bytes}, {"copies", t.copies}});
  j["traffic"] = traffic;
  j["recompute_flops"] = s.recompute_flops;
  j["ops_run"] = s.ops_run;
  j["ops_total"] = s.ops_total;
  j["durations"] = {{"measured_ops", s.measured_ops}, {"modelled_ops", s.modelled_ops}};
  j["import_notes"] = s.import_notes;
  ordered_json unused = ordered_json::array();  // "gpu0.efficiency.matmul"
  for (const UnusedEfficiencyKeys& u : s.unused_efficiency_keys)
    for (const std::string& k : qualified_keys(u)) unused.push_back(k);
  j["unused_efficiency_keys"] = unused;
  // The tiers go into the text one at a time, after the rest, where the document holds a
  // placeholder: a platform of 16,384 GPUs has as many tiers, and one document of them all
  // was most of a symmetric run's memory. The text is what dump(2) of the whole would be.
  j["tiers"] = nullptr;
  if (s.oom) {
    const OomReport& o = *s.oom;
    ordered_json live = ordered_json::array();
    for (const auto& b : o.largest_live)
      live.push_back({{"name", b.name}, {"category", to_string(b.category)}, {"bytes", b.bytes}});
    j["oom"] = {{"op", o.op},
                {"op_index", o.op_id},
                {"tier", o.tier},
                {"requested_bytes", o.requested_bytes},
                {"allocated_bytes", o.allocated_bytes},
                {"capacity_bytes", o.capacity_bytes},
                {"largest_free_block_bytes", o.largest_free_block},
                {"reason", o.reason.empty() ? std::string("the tier is full") : o.reason},
                {"largest_live_buffers", live}};
    if (o.advice) j["oom"]["advice"] = advice_json(*o.advice);
  }
  std::string text = j.dump(2);
  // A top-level key is the only one indented 2; strings have their quotes escaped.
  const std::string placeholder = "\n  \"tiers\": null";
  const std::size_t at = text.find(placeholder);
  if (at == std::string::npos) throw InternalError("summary.json: the tiers' placeholder is missing");
  // The tiers are put one at a time: on a platform of thousands of GPUs they are most of the
  // document, which is never held whole.
  put(std::string_view(text).substr(0, at + placeholder.size() - 4));
  put(s.tiers.empty() ? "{}" : "{\n");
  std::string out;
  for (std::size_t k = 0; k < s.tiers.size(); ++k) {
    const TierSummary& t = s.tiers[k];
    ordered_json tj = {{"role", t.role},
                     {"capacity_bytes", t.usage.capacity_bytes},
                     {"budget_bytes", t.usage.budget_bytes ? ordered_json(t.usage.budget_bytes) : ordered_json()},
                     {"peak_allocated_bytes", t.usage.peak_allocated_bytes},
                     {"peak_reserved_bytes", t.usage.peak_reserved_bytes},
                     {"peak_time_s", t.usage.peak_time_s},
                     {"largest_free_block_at_peak_bytes", t.usage.largest_free_at_peak_bytes},
                     {"peak_by_category", categories_json(t.usage.peak_by_category)}};
    add_peak_json(tj, s.peak(t));
    if (!t.tile_peaks.empty()) {
      std::vector<std::uint64_t> sorted = t.tile_peaks;
      std::sort(sorted.begin(), sorted.end());
      tj["tiles"] = {{"count", sorted.size()},
                     {"fullest_tile_peak_bytes", sorted.back()},
                     {"min_tile_peak_bytes", sorted.front()},
                     {"median_tile_peak_bytes", sorted[sorted.size() / 2]},
                     {"max_tile_peak_bytes", sorted.back()}};
    }
    // At depth 2 of the document: its key indented 4, its lines after the first 4 more.
    out += "    " + ordered_json(t.name).dump() + ": ";
    const std::string body = tj.dump(2);
    for (char c : body) {
      out += c;
      if (c == '\n') out += "    ";
    }
    out += k + 1 < s.tiers.size() ? ",\n" : "\n  }";
    if (out.size() >= (1u << 16)) {
      put(out);
      out.clear();
    }
  }
  out += std::string_view(text).substr(at + placeholder.size());
  out += '\n';
  put(out);
}

TimelineCsv::TimelineCsv(TextOut& out, const Trace& trace, const PlatformSpec& platform)
    : out_(out), trace_(trace), platform_(platform), devices_(platform.op_devices()) {
  out_.put("kind,start_s,end_s,duration_s,device,stream,op,op_kind,phase,buffer,bytes,src_tier,dst_tier\n");
}

void TimelineCsv::rows(const Event* first, std::size_t n) {
  for (const Event* e = first; e != first + n; ++e) {
    const bool copy = e->kind == EventKind::swap_in || e->kind == EventKind::swap_out;
    // Compute and stall events name a compute device by slot; copies name the platform device.
    out_.put(to_string(e->kind)).put(',').put(e->start_s, times_).put(',').put(e->end_s, times_).put(',');
    out_.put(e->end_s - e->start_s, times_).put(',').put(platform_.devices[copy ? e->device : devices_[e->device]].name).put(',');
    if (copy) {
      out_.put(e->lane == 0 ? "copy_out" : "copy_in");
    } else if (e->kind == EventKind::comm) {
      out_.put("comm");
    } else {
      while (streams_.size() <= e->lane) streams_.push_back(fmt::format("stream{}", streams_.size()));
      out_.put(streams_[e->lane]);
    }
    out_.put(',');
    if (e->op != kNoOp) {
      const Op& op = trace_.ops[e->op];
      out_.put_csv(op.name).put(',').put_csv(op.kind).put(',').put(to_string(op.phase));
    } else {
      out_.put(",,");
    }
    out_.put(',');
    if (e->buffer != kNoId) out_.put_csv(trace_.buffers[e->buffer].name);
    out_.put(',').put(e->bytes).put(',');
    if (e->src_tier != kNoId) out_.put(platform_.tiers[e->src_tier].name);
    out_.put(',');
    if (e->dst_tier != kNoId) out_.put(platform_.tiers[e->dst_tier].name);
    out_.put('\n');
  }
}

void write_timeline_csv(TextOut& out, const std::vector<Event>& events, const Trace& trace,
                        const PlatformSpec& platform) {
  TimelineCsv(out, trace, platform).rows(events.data(), events.size());
}

MemoryCsv::MemoryCsv(TextOut& out, const PlatformSpec& platform) : out_(out), platform_(platform) {
  out_.put("time_s,tier,allocated_bytes,reserved_bytes");
  for (int c = 0; c < kCategoryCount; ++c) out_.put(',').put(to_string(static_cast<Category>(c))).put("_bytes");
  out_.put('\n');
}

void MemoryCsv::rows(const SampleLog::Entry* first, std::size_t n) {
  MemorySample s;
  for (const SampleLog::Entry* at = first; at != first + n;) {
    at = replay_.next(at, s);
    out_.put(s.time_s, times_).put(',').put(platform_.tiers[s.tier].name).put(',').put(s.allocated_bytes).put(',');
    out_.put(s.reserved_bytes);
    for (auto b : s.by_category) out_.put(',').put(b);
    out_.put('\n');
  }
}

void write_memory_csv(TextOut& out, const SampleLog& samples, const PlatformSpec& platform) {
  MemoryCsv(out, platform).rows(samples.entries().data(), samples.kept_entries());
}

std::string tiles_csv(const Summary& s) {
  std::string out;
  for (const auto& t : s.tiers)
    for (std::size_t i = 0; i < t.tile_peaks.size(); ++i)
      out += fmt::format("{},{},{}\n", t.name, i, t.tile_peaks[i]);
  return out.empty() ? out : "tier,tile,peak_bytes\n" + out;
}

std::vector<std::string> peak_lines(const PeakReport& p, const std::string& out_dir, const std::string& device) {
  std::vector<std::string> lines;
  if (p.live.empty()) return lines;
  // A replica's names carry its device ("gpu3:layer1.0.conv1"): shown without it.
  const std::string prefix = device + ":";
  auto bare = [&](std::string_view name) {
    return std::string(!device.empty() && name.starts_with(prefix) ? name.substr(prefix.size()) : name);
  };
  const std::string more = out_dir.empty() ? "" : fmt::format(" (all of them: memsim explain {})", out_dir);
  lines.push_back(p.op_name.empty()
                      ? fmt::format("at the peak no op ran; {} buffers live{}", p.live.size(), more)
                      : fmt::format("at the peak {} ({}{}) runs; {} buffers live{}", bare(p.op_name), p.phase,
                                    p.recompute ? ", recomputed" : "", p.live.size(), more));
  std::string largest;
  for (std::size_t i = 0; i < p.live.size() && i < kPeakBuffersOnTerminal; ++i) {
    const PeakBuffer& b = p.live[i];
    largest += fmt::format("{}{} {} ({}{})", largest.empty() ? "" : ", ",
                           b.name.empty() ? (b.category == Category::runtime ? "CUDA context and NCCL" : "workspace")
                                          : bare(b.name),
                           format_bytes(b.bytes),
                           to_string(b.category), b.layer.empty() ? "" : ", layer " + bare(b.layer));
  }
  lines.push_back("largest: " + largest);
  return lines;
}

std::string terminal_summary(const Summary& s, const std::string& out_dir, const std::vector<std::string>& files) {
  std::string out = fmt::format("{} on {}, policy {}\n",
                                s.description.empty() ? s.workload : s.description, s.platform,
                                s.policy);
  auto row = [&](std::string_view label, const std::string& text) {
    out += fmt::format("{:<11} {}\n", label, text);
  };
  if (s.status == "ok") {
    row("status", "ok — fits");
  } else if (s.oom) {
    const OomReport& o = *s.oom;
    row("status", fmt::format("oom — {} full at op '{}': asked {} with {} of {} in use",
                              o.tier, o.op, format_bytes(o.requested_bytes),
                              format_bytes(o.allocated_bytes), format_bytes(o.capacity_bytes)));
    if (!o.reason.empty()) row("", o.reason);
    for (const auto& b : o.largest_live)
      row("", fmt::format("{:>10}  {} ({})", format_bytes(b.bytes), b.name, to_string(b.category)));
    for (const auto& [label, text] : advice_rows(o, o.capacity_bytes)) row(label, text);
  }
  // Against the compute alone: the step without stalls, recomputation (the policy's or the
  // workload's own), exposed communication, host time or idle time.
  const double slower = s.compute_time_s > 0
                            ? 100.0 * (s.iteration_time_s - s.compute_time_s) / s.compute_time_s
                            : 0.0;
  // The terms add up to the iteration time: host, exposed communication and idle are shown
  // when there are any.
  std::string terms = fmt::format("compute {}", format_seconds(s.compute_time_s));
  if (s.exposed_host_time_s > 0) terms += fmt::format(" + host {}", format_seconds(s.exposed_host_time_s));
  terms += fmt::format(" + stall {} + recompute {}", format_seconds(s.stall_time_s),
                       format_seconds(s.recompute_time_s));
  if (s.comm_time_s > 0) terms += fmt::format(" + exposed comm {}", format_seconds(s.exposed_comm_time_s));
  if (s.idle_time_s > 0) terms += fmt::format(" + idle {}", format_seconds(s.idle_time_s));
  row("iteration",
      fmt::format("{} = {}{}", format_seconds(s.iteration_time_s), terms,
                  s.status == "ok" ? fmt::format("   ({:.1f}% slower than compute alone)", slower)
                                   : std::string("   (stopped at the OOM)")));
  if (s.throughput && s.status == "ok" && s.iteration_time_s > 0) {
    const std::string text = throughput_text(*s.throughput, s.iteration_time_s);
    if (!text.empty()) row("throughput", text);
  }
  if (s.host_compute_time_s > 0)
    row("host", fmt::format("CPU computed {} (offloaded ops), {} of it while the accelerator waited",
                            format_seconds(s.host_compute_time_s), format_seconds(s.exposed_host_time_s)));
  if (s.ranks > 1)
    row("ranks", fmt::format("{} ranks{}", s.ranks,
                             !s.symmetric        ? std::string(" (each simulated)")
                             : s.node_ranks_simulated > 1
                                 ? fmt::format(" (symmetric: node 0's {} ranks simulated, sharing its host; the "
                                               "other nodes' traffic on the links)",
                                               s.node_ranks_simulated)
                             : s.pipeline.empty() ? std::string(" (symmetric: rank 0 simulated, its peers' traffic on the links)")
                                                  : " (symmetric: each stage's first rank simulated, its peers' traffic "
                                                    "on the links)"));
  if (!s.pipeline.empty()) {
    std::string bubbles;
    for (const PipelineStageSummary& st : s.pipeline)
      bubbles += fmt::format("{}{:.1f}%", bubbles.empty() ? "" : " ", 100 * st.bubble_fraction);
    row("pipeline", fmt::format("{} stages, {}, {} micro-batches; flush at {}, bubble per stage {}",
                                s.pipeline.size(), s.pipeline_schedule, s.micro_batches,
                                format_seconds(s.passes_end_s), bubbles));
  }
  if (!s.collectives.empty()) {
    std::string parts;
    for (const auto& c : s.collectives)
      parts += fmt::format("{}{} {} x, {}", parts.empty() ? "" : "; ", c.kind, c.count, format_bytes(c.bytes));
    row("comm", fmt::format("{} per rank; busy {}, exposed {}", parts, format_seconds(s.comm_time_s),
                            format_seconds(s.exposed_comm_time_s)));
  }
  // The tiers, each as a line; identical lines of devices (gpu0.hbm ... gpu7.hbm) are printed
  // once ("gpu0-7.hbm") rather than once per rank.
  LineGroups lines;
  for (const auto& t : s.tiers) {
    const TierUsage& u = t.usage;
    std::string text, extra;
    if (t.role == "compute") {
      std::string parts;
      const std::pair<Category, const char*> shown[] = {
          {Category::activation, "activations"}, {Category::activation_grad, "activation grads"},
          {Category::weight, "weights"},         {Category::gradient, "gradients"},
          {Category::optimizer_state, "optimizer"}, {Category::input, "inputs"},
          {Category::workspace, "workspace"},    {Category::other, "other"},
          {Category::comm, "comm"},              {Category::runtime, "runtime (CUDA context, NCCL)"}};
      for (const auto& [c, name] : shown)
        if (u.peak_by_category[static_cast<int>(c)] > 0)
          parts += fmt::format("{}{} {}", parts.empty() ? "" : ", ", name,
                               format_bytes(u.peak_by_category[static_cast<int>(c)]));
      const std::string reserved =
          u.peak_reserved_bytes != u.peak_allocated_bytes
              ? fmt::format(" (reserved {})", format_bytes(u.peak_reserved_bytes))
              : std::string();
      const std::string budget =
          u.budget_bytes ? fmt::format(" (budget {})", format_bytes(u.budget_bytes)) : std::string();
      text = u.peak_allocated_bytes == 0
                 ? fmt::format("peak 0 B of {}{} (idle)", format_bytes(u.capacity_bytes), budget)
                 : fmt::format("peak {}{} of {}{} at {}: {}", format_bytes(u.peak_allocated_bytes),
                               reserved, format_bytes(u.capacity_bytes), budget,
                               format_seconds(u.peak_time_s), parts);
      // The op at the peak and its largest buffers, named as any rank names them.
      const PeakReport& peak = s.peak(t);
      for (const std::string& line :
           peak_lines(peak, out_dir, peak.device.empty() ? t.name.substr(0, t.name.find('.')) : peak.device))
        extra += (extra.empty() ? "" : "\n") + line;
      if (!t.tile_peaks.empty()) {
        const auto fullest = *std::max_element(t.tile_peaks.begin(), t.tile_peaks.end());
        extra += std::string(extra.empty() ? "" : "\n") + fmt::format("fullest tile {} of {} per tile ({} tiles)", format_bytes(fullest),
                            format_bytes(u.limit_bytes() / t.tile_peaks.size()), t.tile_peaks.size());
      }
    } else {
      text = fmt::format("peak {} of {}{}", format_bytes(u.peak_allocated_bytes),
                         format_bytes(u.capacity_bytes), t.role == "scratch" ? " (op workspace)" : "");
    }
    lines.add(t.name, extra.empty() ? text : text + "\n" + extra);
  }
  for (const auto& [name, text] : lines.lines()) {
    std::size_t at = 0;
    for (std::size_t nl; (nl = text.find('\n', at)) != std::string::npos; at = nl + 1)
      row(at == 0 ? name : "", text.substr(at, nl - at));
    row(at == 0 ? name : "", text.substr(at));
  }
  row("copies", fmt::format("swapped out {}, in {}; copies busy {}", format_bytes(s.swap_out_bytes),
                            format_bytes(s.swap_in_bytes), format_seconds(s.transfer_time_s)));
  for (const auto& t : s.traffic)
    row("", fmt::format("{} -> {}: {} in {} copies", t.from, t.to, format_bytes(t.bytes), t.copies));
  if (s.comm_time_s > 0 && !s.links.empty()) {
    // The busiest links, grouped like the tiers (nvlink0-7 rather than eight lines).
    std::vector<std::pair<std::string, std::string>> link_lines;
    for (const auto& l : s.links)
      link_lines.emplace_back(l.name, fmt::format("{} out, {} in; {:.0f}% busy", format_bytes(l.bytes_forward),
                                                  format_bytes(l.bytes_backward), 100 * l.utilisation));
    LineGroups link_groups;
    for (auto& [name, text] : link_lines) link_groups.add(name, std::move(text));
    const auto grouped = link_groups.lines();
    const std::size_t shown = std::min<std::size_t>(grouped.size(), 6);
    for (std::size_t i = 0; i < shown; ++i)
      row(i == 0 ? "links" : "", fmt::format("{}: {}", grouped[i].first, grouped[i].second));
    if (grouped.size() > shown) row("", fmt::format("... {} more in summary.json", grouped.size() - shown));
  }
  if (!out_dir.empty() && !files.empty()) row(out_dir + "/", fmt::format("{}", fmt::join(files, " ")));
  return out;
}

}  // namespace memsim
