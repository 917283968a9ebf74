#pragma once
// The heap between the phases of a run.
//
// Handing freed memory back: glibc keeps what a process frees for its next allocations; a
// phase that frees many small blocks (SimGrid's platform, the load's name tables) leaves them
// resident, and the next phase's large blocks (a summary's tiers: 6 MB on a 16,384-GPU
// platform) come from fresh pages on top. Returning the free pages first keeps the peak to
// what is in use.
//
// Faulting in ahead: a large step's build and simulation write a few hundred megabytes of
// fresh heap (Llama 3 70B's 3-D step on 64 GPUs: about 210 MB, 630 bytes per op), and each
// fresh page is zeroed by the kernel in the thread that first touches it: a fifth of that
// run's time on this machine's virtual machine. Where main() reserved the region the heap
// grows into (sim/app/main.cpp), a run that knows its size asks for it to be faulted in on a
// thread of its own (MADV_POPULATE_WRITE, 2 MiB at a time, from the region's start up), so
// that the run's own thread finds its pages there. Faulting in a page changes nothing in it:
// a page already in use is left as it is, a new one is zeros either way.

#include <cstddef>
#include <cstdint>

namespace memsim {

/// Returns the heap's free pages to the system (malloc_trim on glibc; nothing elsewhere),
/// after stopping a prefault still under way (its pages would come back).
void return_free_memory();

/// The address range the heap grows into, from its start: set once, by main(), where it
/// reserved one. Without it prefault_heap() does nothing (the tests, the Python module).
void set_heap_region(std::uintptr_t from, std::uintptr_t to);

/// Lets prefault_heap() work in this process: a command that simulates one step (`memsim
/// run`) calls it; others that build workloads without running them (`memsim plan`'s bounds,
/// a sweep's resolution) would fault in what they never use.
void allow_prefault();

/// The run will hold about `bytes` of heap in all: the region's first `bytes` are faulted in
/// on a thread of its own (a second call faults in up to the larger of the two). Returns at
/// once; the pages come as the thread reaches them. Nothing unless a region is set and
/// allow_prefault() was called; MEMSIM_PREFAULT=0 turns it off.
void prefault_heap(std::size_t bytes);

/// Hands back the pages that lie whole inside [from, to): a large vector's capacity past its
/// size, reserved ahead and never filled, which a prefault faulted in on its way up. What is
/// written there later is faulted in again, as zeros (nothing is lost: it held nothing).
void release_pages(const void* from, const void* to);

/// The unused capacity of `v` (see release_pages).
template <typename Vector>
void release_unused_capacity(const Vector& v) {
  release_pages(v.data() + v.size(), v.data() + v.capacity());
}

/// Waits until the prefault has faulted in what was asked (or could not go on); the bytes
/// it faulted in so far, in all calls.
std::size_t finish_prefault();

/// Stops a prefault under way and waits for its thread (what return_free_memory() does first);
/// the bytes it faulted in so far, in all calls.
std::size_t stop_prefault();

}  // namespace memsim
