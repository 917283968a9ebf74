#include <cstdio>
#include <cstdlib>
#include <iostream>

#if defined(__GLIBC__)
#include <malloc.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>
#endif

#include "sim/app/cli.h"

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
// 64 GPUs: 66,900 page faults of 4 KiB, a fifth of the run). glibc backs its heap with
// transparent huge pages when its tunable glibc.malloc.hugetlb is 1, and the tunable is read
// at the program's start only: so memsim starts itself again with it set, once, where the
// kernel gives huge pages on request (transparent_hugepage "madvise" or "always"). The same
// run, 6 of each in turn: 1.50-1.98 s of wall time against 2.10-2.87 s, 2,400-4,300 faults,
// 3% more resident memory (docs/parallel.md, "3-D scale"). MEMSIM_SMALL_PAGES=1, a GLIBC_TUNABLES that already names the
// tunable, or an exec that fails leave the process as it is.
void use_huge_pages(char** argv) {
  if (sanitized() || std::getenv("MEMSIM_SMALL_PAGES") != nullptr) return;
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables != nullptr && std::strstr(tunables, "glibc.malloc.hugetlb") != nullptr) return;
  std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes;
  if (!std::getline(thp, modes) || modes.find("[never]") != std::string::npos) return;
  std::string value = "glibc.malloc.hugetlb=1";
  if (tunables != nullptr && *tunables != '\0') value = std::string(tunables) + ":" + value;
  if (::setenv("GLIBC_TUNABLES", value.c_str(), 1) != 0) return;
  ::execv("/proc/self/exe", argv);
  ::unsetenv("GLIBC_TUNABLES");  // the exec failed: on as before
  if (tunables != nullptr) ::setenv("GLIBC_TUNABLES", tunables, 1);
}

}  // namespace
#endif

int main(int argc, char** argv) {
#if defined(__GLIBC__)
  use_huge_pages(argv);
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
