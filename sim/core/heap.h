#pragma once
// Handing freed memory back to the system between the phases of a run. glibc keeps what a
// process frees for its next allocations; a phase that frees many small blocks (SimGrid's
// platform, the load's name tables) leaves them resident, and the next phase's large blocks
// (a summary's tiers: 6 MB on a 16,384-GPU platform) come from fresh pages on top. Returning
// the free pages first keeps the peak to what is in use.

namespace memsim {

/// Returns the heap's free pages to the system (malloc_trim on glibc; nothing elsewhere).
void return_free_memory();

}  // namespace memsim
