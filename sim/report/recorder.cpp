#include "sim/report/recorder.h"

#include <algorithm>

namespace memsim {

std::string_view to_string(EventKind k) {
  switch (k) {
    case EventKind::compute: return "compute";
    case EventKind::recompute: return "recompute";
    case EventKind::swap_out: return "swap_out";
    case EventKind::swap_in: return "swap_in";
    case EventKind::stall: return "stall";
    case EventKind::comm: return "comm";
  }
  return "?";
}

void Recorder::on_memory_change(std::size_t tier, const TierUsage& usage, double now_s) {
  peak_live_.on_memory_change(tier, usage);
  if (!keep_samples_) return;
  samples_.add(now_s, static_cast<std::uint32_t>(tier), usage);
  if (!stream_)
    samples_.drop_unkept();
  else if (samples_.entries().size() - entries_streamed_ >= kStreamBlock)
    pass_samples();
}

void Recorder::pass_events() {
  stream_->events(events_.data() + events_streamed_, events_.size() - events_streamed_);
  events_streamed_ = events_.size();
}

void Recorder::pass_samples() {
  // SampleLog::add writes whole samples: its entries end where a sample ends.
  const auto& entries = samples_.entries();
  stream_->samples(entries.data() + entries_streamed_, entries.size() - entries_streamed_);
  samples_.drop_unkept();
  entries_streamed_ = entries.size();
}

void Recorder::flush_stream() {
  if (!stream_) return;
  if (events_.size() > events_streamed_) pass_events();
  if (samples_.entries().size() > entries_streamed_) pass_samples();
}

void SampleLog::add(double time_s, std::uint32_t tier, const TierUsage& usage) {
  if (tier >= last_.size()) last_.resize(tier + 1, CategoryBytes{});
  if (tier >= stats_.size()) stats_.resize(tier + 1);
  TierStats& st = stats_[tier];
  ++st.samples;
  for (int c = 0; c < kCategoryCount; ++c) st.categories[c] = st.categories[c] || usage.by_category[c] > 0;
  st.reserved_differs = st.reserved_differs || usage.reserved_bytes != usage.allocated_bytes;
  st.last_time_s = std::max(st.last_time_s, time_s);
  ++recorded_;
  CategoryBytes& last = last_[tier];
  Entry e;
  e.time_s = time_s;
  e.tier = tier;
  e.allocated_bytes = usage.allocated_bytes;
  e.reserved_bytes = usage.reserved_bytes;
  // Every category that moved, the last of them closing the sample; none moved (a change
  // of reserved bytes only): one entry restating category 0.
  int changed = 0;
  for (int c = 0; c < kCategoryCount; ++c) {
    if (usage.by_category[c] == last[c]) continue;
    if (changed++ > 0) entries_.back().more = true;
    e.category = static_cast<std::uint8_t>(c);
    e.category_bytes = usage.by_category[c];
    entries_.push_back(e);
  }
  if (changed == 0) {
    e.category = 0;
    e.category_bytes = usage.by_category[0];
    entries_.push_back(e);
  }
  last = usage.by_category;
  if (recorded_ <= limit_) {
    ++kept_;
    kept_entries_ = entries_.size();
  }
}

const SampleLog::Entry* SampleLog::Replay::next(const Entry* at, MemorySample& out) {
  for (;;) {
    const Entry& e = *at++;
    if (e.tier >= by_tier_.size()) by_tier_.resize(e.tier + 1, CategoryBytes{});
    CategoryBytes& split = by_tier_[e.tier];
    split[e.category] = e.category_bytes;
    if (e.more) continue;
    out.time_s = e.time_s;
    out.tier = e.tier;
    out.allocated_bytes = e.allocated_bytes;
    out.reserved_bytes = e.reserved_bytes;
    out.by_category = split;
    return at;
  }
}

SampleLog::iterator::iterator(const std::vector<Entry>* entries, std::size_t at, std::size_t end)
    : entries_(entries), at_(at), end_(end), done_(false) {
  load();
}

void SampleLog::iterator::load() {
  if (at_ >= end_) {
    *this = iterator();
    return;
  }
  const Entry* first = entries_->data();
  at_ = static_cast<std::size_t>(replay_.next(first + at_, current_) - first);
}

void Recorder::reserve(std::size_t events, std::size_t samples) {
  events_.reserve(events);
  if (keep_samples_) samples_.reserve(samples);
}

}  // namespace memsim
