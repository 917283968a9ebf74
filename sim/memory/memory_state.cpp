#include "sim/memory/memory_state.h"

#include <algorithm>

namespace memsim {

MemoryState::MemoryState(const PlatformSpec& platform, const Trace& trace,
                         const std::vector<std::uint64_t>& caps)
    : trace_(trace), platform_(platform), caps_(caps), slot_(platform.tiers.size(), kUnheld),
      placement_(trace.buffers.size()) {}

MemoryState::Held MemoryState::make(std::size_t tier) const {
  const TierSpec& t = platform_.tiers[tier];
  const std::uint64_t cap = tier < caps_.size() ? std::min(caps_[tier], t.capacity_bytes) : t.capacity_bytes;
  Held h{make_allocator(t.allocator, t.allocator_params.get(), t.capacity_bytes, cap), {}};
  h.usage.capacity_bytes = t.capacity_bytes;
  if (h.allocator->capacity_bytes() < t.capacity_bytes) h.usage.budget_bytes = h.allocator->capacity_bytes();
  return h;
}

MemoryState::Held& MemoryState::held(std::size_t tier) const {
  std::uint32_t& slot = slot_[tier];
  if (slot == kUnheld) {
    slot = static_cast<std::uint32_t>(held_.size());
    held_.push_back(make(tier));
  }
  return held_[slot];
}

void MemoryState::report(std::size_t tier, TierUsage& usage, std::vector<std::uint64_t>& tile_peaks) const {
  if (slot_[tier] != kUnheld) {
    usage = held_[slot_[tier]].usage;
    tile_peaks = held_[slot_[tier]].allocator->tile_peaks();
    return;
  }
  const Held fresh = make(tier);
  usage = fresh.usage;
  tile_peaks = fresh.allocator->tile_peaks();
}

void MemoryState::changed(std::size_t tier, double now_s) {
  Held& h = held(tier);
  TierUsage& u = h.usage;
  const Allocator& a = *h.allocator;
  u.allocated_bytes = a.allocated_bytes();
  u.reserved_bytes = a.reserved_bytes();
  // Strictly greater: the first time a peak is reached is the time reported.
  if (u.allocated_bytes > u.peak_allocated_bytes) {
    u.peak_allocated_bytes = u.allocated_bytes;
    u.peak_time_s = now_s;
    u.peak_by_category = u.by_category;
    u.largest_free_at_peak_bytes = a.largest_free_block();
  }
  u.peak_reserved_bytes = std::max(u.peak_reserved_bytes, u.reserved_bytes);
  if (listener_) listener_->on_memory_change(tier, u, now_s);
}

void MemoryState::announce(std::size_t tier, BufferId b, Category c, bool allocated,
                           const Allocation& a, double now_s) {
  if (listener_)
    listener_->on_allocation(
        AllocationChange{now_s, static_cast<std::uint32_t>(tier), b, c, allocated, a});
}

bool MemoryState::allocate(BufferId b, std::size_t tier, double now_s) {
  const Buffer& buf = trace_.buffers[b];
  auto a = held(tier).allocator->allocate(buf.bytes);
  if (!a) return false;
  placement_[b] = Placement{tier, *a};
  held(tier).usage.by_category[static_cast<int>(buf.category)] += a->bytes;
  announce(tier, b, buf.category, true, *a, now_s);
  changed(tier, now_s);
  return true;
}

void MemoryState::release(BufferId b, double now_s) {
  Placement& p = placement_[b];
  if (p.tier == Placement::kNowhere) return;
  const Buffer& buf = trace_.buffers[b];
  held(p.tier).allocator->release(p.allocation);
  held(p.tier).usage.by_category[static_cast<int>(buf.category)] -= p.allocation.bytes;
  std::size_t tier = p.tier;
  const Allocation released = p.allocation;
  p = Placement{};
  announce(tier, b, buf.category, false, released, now_s);
  changed(tier, now_s);
}

std::optional<Allocation> MemoryState::reserve_move(BufferId b, std::size_t to, double now_s) {
  const Buffer& buf = trace_.buffers[b];
  auto a = held(to).allocator->allocate(buf.bytes);
  if (!a) return std::nullopt;
  held(to).usage.by_category[static_cast<int>(buf.category)] += a->bytes;
  announce(to, b, buf.category, true, *a, now_s);
  changed(to, now_s);
  return a;
}

void MemoryState::finish_move(BufferId b, std::size_t to, const Allocation& a, double now_s) {
  release(b, now_s);
  placement_[b] = Placement{to, a};
}

std::optional<Allocation> MemoryState::allocate_anonymous(std::size_t tier, std::uint64_t bytes,
                                                          Category category, double now_s) {
  auto a = held(tier).allocator->allocate(bytes);
  if (!a) return std::nullopt;
  held(tier).usage.by_category[static_cast<int>(category)] += a->bytes;
  announce(tier, AllocationChange::kNoBuffer, category, true, *a, now_s);
  changed(tier, now_s);
  return a;
}

void MemoryState::release_anonymous(std::size_t tier, const Allocation& a, Category category,
                                    double now_s) {
  held(tier).allocator->release(a);
  held(tier).usage.by_category[static_cast<int>(category)] -= a.bytes;
  announce(tier, AllocationChange::kNoBuffer, category, false, a, now_s);
  changed(tier, now_s);
}

std::string MemoryState::failure_reason(std::size_t tier, std::uint64_t bytes) const {
  return held(tier).allocator->failure_reason(bytes);
}

std::uint64_t MemoryState::largest_free_block(std::size_t tier) const {
  return held(tier).allocator->largest_free_block();
}

std::vector<BufferId> MemoryState::largest_resident(std::size_t tier, std::size_t n) const {
  std::vector<BufferId> here;
  for (BufferId b = 0; b < placement_.size(); ++b)
    if (placement_[b].tier == tier) here.push_back(b);
  std::stable_sort(here.begin(), here.end(), [&](BufferId x, BufferId y) {
    return trace_.buffers[x].bytes > trace_.buffers[y].bytes;
  });
  if (here.size() > n) here.resize(n);
  return here;
}

}  // namespace memsim
