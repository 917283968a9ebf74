// The heap's prefault (sim/core/heap.h): what it faults in, and that it stops.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

#include "sim/core/heap.h"

namespace memsim {
namespace {

// Whether each 4 KiB page of [at, at + bytes) is in memory.
std::vector<bool> resident(std::uintptr_t at, std::size_t bytes) {
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in(bytes / page);
  EXPECT_EQ(::mincore(reinterpret_cast<void*>(at), bytes, in.data()), 0);
  std::vector<bool> out;
  for (unsigned char c : in) out.push_back((c & 1) != 0);
  return out;
}

TEST(Heap, PrefaultFaultsInTheRegionFromItsStartUpToWhatTheRunWillHoldThenStops) {
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  // A region of 16 MiB on a 2 MiB boundary, as main() reserves the heap's.
  void* map = ::mmap(nullptr, 18 * kMiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(map, MAP_FAILED);
  const std::uintptr_t from = (reinterpret_cast<std::uintptr_t>(map) + 2 * kMiB - 1) & ~(2 * kMiB - 1);
  for (bool in : resident(from, 16 * kMiB)) ASSERT_FALSE(in);
  // Before a region is known: nothing.
  prefault_heap(4 * kMiB);
  EXPECT_EQ(finish_prefault(), 0u);
  set_heap_region(from, from + 16 * kMiB);
  prefault_heap(4 * kMiB);  // not allowed yet (a command that runs no step): nothing
  EXPECT_EQ(finish_prefault(), 0u);
  for (bool page : resident(from, 16 * kMiB)) ASSERT_FALSE(page);
  allow_prefault();
  prefault_heap(5 * kMiB);  // whole steps of 2 MiB: 4 MiB
  EXPECT_EQ(finish_prefault(), 4 * kMiB);
  std::vector<bool> in = resident(from, 16 * kMiB);
  const std::size_t pages = in.size() / 4;  // per 4 MiB
  for (std::size_t i = 0; i < in.size(); ++i) ASSERT_EQ(in[i], i < pages) << "page " << i;
  // Asked for less than is done: nothing more; for more than the region: up to its end.
  prefault_heap(2 * kMiB);
  EXPECT_EQ(finish_prefault(), 4 * kMiB);
  prefault_heap(64 * kMiB);
  EXPECT_EQ(finish_prefault(), 16 * kMiB);
  for (bool page : resident(from, 16 * kMiB)) ASSERT_TRUE(page);
  // The pages' contents are left as they are: what was written stays.
  auto* bytes = reinterpret_cast<unsigned char*>(from);
  bytes[0] = 7;
  EXPECT_EQ(stop_prefault(), 16 * kMiB);
  EXPECT_EQ(bytes[0], 7);
  EXPECT_EQ(bytes[1], 0);
  // Stopped: no more, whatever is asked.
  ::madvise(reinterpret_cast<void*>(from), 16 * kMiB, MADV_DONTNEED);
  prefault_heap(16 * kMiB);
  EXPECT_EQ(finish_prefault(), 16 * kMiB);  // the count stays; no page is faulted in again
  for (bool page : resident(from, 16 * kMiB)) ASSERT_FALSE(page);
  ::munmap(map, 18 * kMiB);
}

TEST(Heap, ReleasePagesHandsBackOnlyThePagesWhollyInsideTheRange) {
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  void* map = ::mmap(nullptr, 8 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(map, MAP_FAILED);
  auto* bytes = static_cast<unsigned char*>(map);
  for (std::size_t i = 0; i < 8 * page; ++i) bytes[i] = 1;
  const auto at = reinterpret_cast<std::uintptr_t>(map);
  // From inside page 1 to inside page 6: pages 2-5 go, 1 and 6 (partly outside) stay.
  release_pages(bytes + page + 100, bytes + 6 * page + 100);
  const std::vector<bool> in = resident(at, 8 * page);
  for (std::size_t i = 0; i < 8; ++i) EXPECT_EQ(in[i], i < 2 || i > 5) << "page " << i;
  EXPECT_EQ(bytes[page + 99], 1);       // before the range, on a page that stays
  EXPECT_EQ(bytes[page + 100], 1);      // inside the range, on a page that stays
  EXPECT_EQ(bytes[2 * page], 0);        // a page handed back reads as zeros
  EXPECT_EQ(bytes[6 * page + 100], 1);
  // An empty or inverted range: nothing.
  release_pages(bytes + 7 * page, bytes + 7 * page);
  release_pages(bytes + 7 * page + 10, bytes + 7 * page + 5);
  EXPECT_EQ(bytes[7 * page], 1);
  ::munmap(map, 8 * page);
}

}  // namespace
}  // namespace memsim
