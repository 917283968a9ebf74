#include "sim/memory/memory_state.h"

#include <algorithm>

namespace memsim {

MemoryState::MemoryState(const PlatformSpec& platform, const Trace& trace)
    : trace_(trace), placement_(trace.buffers.size()) {
  for (const auto& t : platform.tiers) {
    allocators_.push_back(make_allocator(t.allocator, t.capacity_bytes));
    TierUsage u;
    u.capacity_bytes = t.capacity_bytes;
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
  }
  u.peak_reserved_bytes = std::max(u.peak_reserved_bytes, u.reserved_bytes);
  if (listener_) listener_->on_memory_change(tier, u, now_s);
}

bool MemoryState::allocate(BufferId b, std::size_t tier, double now_s) {
  const Buffer& buf = trace_.buffers[b];
  auto address = allocators_[tier]->allocate(buf.bytes);
  if (!address) return false;
  placement_[b] = Placement{tier, *address};
  usage_[tier].by_category[static_cast<int>(buf.category)] += buf.bytes;
  changed(tier, now_s);
  return true;
}

void MemoryState::release(BufferId b, double now_s) {
  Placement& p = placement_[b];
  if (p.tier == Placement::kNowhere) return;
  const Buffer& buf = trace_.buffers[b];
  allocators_[p.tier]->release(p.address, buf.bytes);
  usage_[p.tier].by_category[static_cast<int>(buf.category)] -= buf.bytes;
  std::size_t tier = p.tier;
  p = Placement{};
  changed(tier, now_s);
}

std::optional<std::uint64_t> MemoryState::reserve_move(BufferId b, std::size_t to, double now_s) {
  const Buffer& buf = trace_.buffers[b];
  auto address = allocators_[to]->allocate(buf.bytes);
  if (!address) return std::nullopt;
  usage_[to].by_category[static_cast<int>(buf.category)] += buf.bytes;
  changed(to, now_s);
  return address;
}

void MemoryState::finish_move(BufferId b, std::size_t to, std::uint64_t address, double now_s) {
  release(b, now_s);
  placement_[b] = Placement{to, address};
}

std::optional<std::uint64_t> MemoryState::allocate_anonymous(std::size_t tier, std::uint64_t bytes,
                                                             Category category, double now_s) {
  auto address = allocators_[tier]->allocate(bytes);
  if (!address) return std::nullopt;
  usage_[tier].by_category[static_cast<int>(category)] += bytes;
  changed(tier, now_s);
  return address;
}

void MemoryState::release_anonymous(std::size_t tier, std::uint64_t address, std::uint64_t bytes,
                                    Category category, double now_s) {
  allocators_[tier]->release(address, bytes);
  usage_[tier].by_category[static_cast<int>(category)] -= bytes;
  changed(tier, now_s);
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
