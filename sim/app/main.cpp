#include <cstdio>
#include <cstdlib>
#include <iostream>

#if defined(__GLIBC__)
#include <malloc.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <string>
#endif

#include "sim/app/cli.h"
#include "sim/core/heap.h"

#if defined(__GLIBC__)
namespace {

bool sanitized() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
  return true;
#else
  return false;
#endif
#else
  return false;
#endif
}

// A step's build writes a few hundred megabytes of fresh heap once (Llama 3 70B's 3-D step on
// 64 GPUs: 66,900 page faults of 4 KiB, a fifth of the run), and on this machine's virtual
// machine a fresh page costs far more than its zeroing (300 MB touched: 0.8-1.0 s in 4 KiB
// pages, 0.02-0.6 s in 2 MiB ones). So the heap is asked for transparent huge pages where
// the kernel gives them on request (transparent_hugepage "madvise" or "always"): with
// nothing mapped apart (M_MMAP_MAX 0, below) every block comes from the heap's one region,
// which is grown here once by `bytes` of address space, marked MADV_HUGEPAGE and freed back
// to the heap, untrimmed: the blocks carved from it later are faulted in 2 MiB at a time.
// Past it the heap grows in small pages. glibc's tunable glibc.malloc.hugetlb does the same
// but is read only at the program's start: memsim re-executed itself to set it, loading its
// 45 shared libraries twice (0.06-0.1 s of every run). A reservation takes no memory, only
// address space: an eighth of a limit on it (ulimit -v), none under 64 MiB.
// MEMSIM_SMALL_PAGES=1 leaves the heap in small pages.
void use_huge_pages() {
  if (sanitized() || std::getenv("MEMSIM_SMALL_PAGES") != nullptr) return;
  std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes;
  if (!std::getline(thp, modes) || modes.find("[never]") != std::string::npos) return;
  std::size_t bytes = std::size_t{1} << 30;
  rlimit limit{};
  if (::getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY)
    bytes = std::min<std::size_t>(bytes, limit.rlim_cur / 8);
  constexpr std::size_t kHuge = std::size_t{2} << 20;
  if (bytes < 32 * kHuge) return;
  void* block = std::malloc(bytes);
  if (block == nullptr) return;
  const auto at = reinterpret_cast<std::uintptr_t>(block);
  const std::uintptr_t from = (at + kHuge - 1) & ~(kHuge - 1);
  const std::uintptr_t to = (at + bytes) & ~(kHuge - 1);
  ::madvise(reinterpret_cast<void*>(from), to - from, MADV_HUGEPAGE);
  std::free(block);
  // The blocks allocated from here on come from this region, from its start up: where a run
  // knows its size, it is faulted in ahead of them (memsim::prefault_heap, sim/core/heap.h).
  memsim::set_heap_region(from, to);
}

}  // namespace
#endif

int main(int argc, char** argv) {
#if defined(__GLIBC__)
  // A step is built as a few large vectors that grow, are copied and freed (the pipeline's
  // micro-batches, the shards, the placed stages). glibc gives a block over its dynamic mmap
  // threshold a mapping of its own, unmapped when freed: the next such block comes back as
  // fresh pages, faulted in one at a time. Up to 32 MiB (glibc's largest threshold) they stay
  // in the heap and are reused: Llama 3 70B's 3-D step on 64 GPUs 3.1 -> 2.7 s of wall time
  // (summary only), at 4-15% more peak memory (`make pipeline-bench`: 328 -> 364 MiB, GPT-3
  // 175B 628 -> 720 MiB; `make platform-bench`'s 16,384 GPUs 114 -> 124 MB).
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  // Larger blocks (a 3-D step's ops: 56 MB on Llama 3 70B's 64 GPUs) are not mapped apart
  // either, and the heap's free top is not handed back on its own: a page once faulted in
  // is reused for the rest of the run. On this machine's virtual machine a fresh page costs
  // far more than its zeroing (300 MB touched: 0.8-1.0 s in 4 KiB pages, 0.02-0.6 s in huge
  // pages); the same Llama run, 6 of each in turn: 1.31 s (median 1.43 s) of wall time
  // against 1.36 s (1.56 s), the same peak. return_free_memory() still trims where a phase
  // asks for it (sim/core/heap.h).
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, -1);
  // No fast bins: a small block freed goes to the thread's cache, else straight back into
  // the heap, merged with its neighbours. With them, the build's millions of small blocks
  // (op and buffer names, copied per micro-batch and renamed per stage) sat unmerged until
  // a large request or the free of a large block (a stage's ops, moved into the placed step)
  // walked every fast bin to merge them (malloc_consolidate: 3.5% of GPT-3 175B's run on
  // 1,024 A100s, a fifth of placing its stages). Interleaved, 4-5 runs each, least user
  // time: GPT-3 175B 4.83 -> 4.39 s, Llama 3 70B on 64 GPUs 1.32 -> 1.26 s, the same peak.
  mallopt(M_MXFAST, 0);
  use_huge_pages();
#endif
  const int code = memsim::cli_main(argc, argv);
  // Everything is written and committed by now: the process ends here, without running the
  // libraries' static destructors (SimGrid's and ns-3's registries take milliseconds to tear
  // down, for nothing).
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  std::_Exit(code);
}
