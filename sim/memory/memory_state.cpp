#include "sim/memory/memory_state.h"

#include <algorithm>

namespace memsim {

MemoryState::MemoryState(const PlatformSpec& platform, const Trace& trace,
                         const std::vector<std::uint64_t>& caps)
    : trace_(trace), placement_(trace.buffers.size()) {
  allocators_.reserve(platform.tiers.size());
  usage_.reserve(platform.tiers.size());
  for (std::size_t i = 0; i < platform.tiers.size(); ++i) {
    const TierSpec& t = platform.tiers[i];
    const std::uint64_t cap = i < caps.size() ? std::min(caps[i], t.capacity_bytes) : t.capacity_bytes;
    allocators_.push_back(make_allocator(t.allocator, t.allocator_params, t.capacity_bytes, cap));
    TierUsage u;
    u.capacity_bytes = t.capacity_bytes;
    if (allocators_.back()->capacity_bytes() < t.capacity_bytes)
      u.budget_bytes = allocators_.back()->capacity_bytes();
    usage_.push_back(u);
  }
}

void MemoryState::changed(std::size_t tier, double now_s) {
  TierUsage& u = usage_[tier];
  const Allocator& a = *allocators_[tier];
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
  auto a = allocators_[tier]->allocate(buf.bytes);
  if (!a) return false;
  placement_[b] = Placement{tier, *a};
  usage_[tier].by_category[static_cast<int>(buf.category)] += a->bytes;
  announce(tier, b, buf.category, true, *a, now_s);
  changed(tier, now_s);
  return true;
}

void MemoryState::release(BufferId b, double now_s) {
  Placement& p = placement_[b];
  if (p.tier == Placement::kNowhere) return;
  const Buffer& buf = trace_.buffers[b];
  allocators_[p.tier]->release(p.allocation);
  usage_[p.tier].by_category[static_cast<int>(buf.category)] -= p.allocation.bytes;
  std::size_t tier = p.tier;
  const Allocation released = p.allocation;
  p = Placement{};
  announce(tier, b, buf.category, false, released, now_s);
  changed(tier, now_s);
}

std::optional<Allocation> MemoryState::reserve_move(BufferId b, std::size_t to, double now_s) {
  const Buffer& buf = trace_.buffers[b];
  auto a = allocators_[to]->allocate(buf.bytes);
  if (!a) return std::nullopt;
  usage_[to].by_category[static_cast<int>(buf.category)] += a->bytes;
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
  auto a = allocators_[tier]->allocate(bytes);
  if (!a) return std::nullopt;
  usage_[tier].by_category[static_cast<int>(category)] += a->bytes;
  announce(tier, AllocationChange::kNoBuffer, category, true, *a, now_s);
  changed(tier, now_s);
  return a;
}

void MemoryState::release_anonymous(std::size_t tier, const Allocation& a, Category category,
                                    double now_s) {
  allocators_[tier]->release(a);
  usage_[tier].by_category[static_cast<int>(category)] -= a.bytes;
  announce(tier, AllocationChange::kNoBuffer, category, false, a, now_s);
  changed(tier, now_s);
}

std::string MemoryState::failure_reason(std::size_t tier, std::uint64_t bytes) const {
  return allocators_[tier]->failure_reason(bytes);
}

std::uint64_t MemoryState::largest_free_block(std::size_t tier) const {
  return allocators_[tier]->largest_free_block();
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
