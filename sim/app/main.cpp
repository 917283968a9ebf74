#include <cstdio>
#include <cstdlib>
#include <iostream>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "sim/app/cli.h"

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
