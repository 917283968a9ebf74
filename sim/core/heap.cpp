#include "sim/core/heap.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string_view>
#include <system_error>
#include <thread>

#if defined(__GLIBC__)
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace memsim {

namespace {

constexpr std::uintptr_t kStep = std::uintptr_t{2} << 20;  // a huge page: one fault, one zeroing

// The region and the prefault thread. Made once and never destroyed: main() ends the process
// with std::_Exit, and a std::thread destroyed while joinable would terminate it.
struct Prefault {
  std::mutex mutex;  // all but `done`
  std::uintptr_t from = 0, to = 0;
  std::uintptr_t target = 0;            // fault in up to here
  std::atomic<std::uintptr_t> done{0};  // faulted in up to here
  bool running = false;                 // the thread has not returned
  bool stopped = false;
  bool allowed = false;
  std::thread thread;

  void run() {
    for (;;) {
      const std::uintptr_t at = done.load(std::memory_order_relaxed);
      {
        const std::lock_guard<std::mutex> lock(mutex);
        if (at >= target || stopped) {
          running = false;
          return;
        }
      }
      bool faulted = false;
#if defined(MADV_POPULATE_WRITE)
      // A kernel before 5.14 does not know it (EINVAL): nothing more is faulted in then.
      faulted = ::madvise(reinterpret_cast<void*>(at), kStep, MADV_POPULATE_WRITE) == 0;
#endif
      if (!faulted) {
        const std::lock_guard<std::mutex> lock(mutex);
        stopped = true;
        running = false;
        return;
      }
      done.store(at + kStep, std::memory_order_relaxed);
    }
  }
};

Prefault& prefault() {
  static Prefault* p = new Prefault;
  return *p;
}

bool turned_off() {
  const char* v = std::getenv("MEMSIM_PREFAULT");
  return v != nullptr && std::string_view(v) == "0";
}

}  // namespace

void set_heap_region(std::uintptr_t from, std::uintptr_t to) {
  Prefault& p = prefault();
  const std::lock_guard<std::mutex> lock(p.mutex);
  p.from = (from + kStep - 1) & ~(kStep - 1);
  p.to = to & ~(kStep - 1);
  if (p.to <= p.from) p.from = p.to = 0;
  p.target = p.from;
  p.done.store(p.from);
}

void allow_prefault() {
  Prefault& p = prefault();
  const std::lock_guard<std::mutex> lock(p.mutex);
  p.allowed = true;
}

void prefault_heap(std::size_t bytes) {
  Prefault& p = prefault();
  const std::lock_guard<std::mutex> lock(p.mutex);
  if (p.from == 0 || !p.allowed || p.stopped || turned_off()) return;
  const std::uintptr_t want = std::min(p.to, p.from + (bytes & ~(kStep - 1)));
  if (want <= p.target) return;
  p.target = want;
  if (p.running) return;  // the thread reads the new target before it returns
  if (p.thread.joinable()) p.thread.join();  // returned: it has let go of the mutex
  try {
    p.thread = std::thread([&p] { p.run(); });
    p.running = true;
  } catch (const std::system_error&) {
    p.stopped = true;  // no thread to be had (a process limit): the run faults its pages itself
  }
}

namespace {

std::size_t join_prefault(bool stop) {
  Prefault& p = prefault();
  std::thread thread;
  {
    const std::lock_guard<std::mutex> lock(p.mutex);
    if (stop) p.stopped = true;
    thread = std::move(p.thread);
  }
  if (thread.joinable()) thread.join();
  return p.from == 0 ? 0 : p.done.load() - p.from;
}

}  // namespace

std::size_t finish_prefault() { return join_prefault(false); }

std::size_t stop_prefault() { return join_prefault(true); }

void release_pages(const void* from, const void* to) {
#if defined(__GLIBC__)
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const std::uintptr_t a = (reinterpret_cast<std::uintptr_t>(from) + page - 1) & ~(page - 1);
  const std::uintptr_t b = reinterpret_cast<std::uintptr_t>(to) & ~(page - 1);
  if (b > a) ::madvise(reinterpret_cast<void*>(a), b - a, MADV_DONTNEED);
#else
  (void)from;
  (void)to;
#endif
}

void return_free_memory() {
  stop_prefault();
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

}  // namespace memsim
