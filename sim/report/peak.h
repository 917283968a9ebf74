#pragma once
// What is in a tier at its peak. PeakLiveSet follows a run's allocations and releases and
// keeps, per tier, the buffers that were live at the moment of the peak (the first time the
// peak was reached), in amortised O(1) per change: an allocation notes when it came, a
// release of something live at the current peak is set aside, and a new peak forgets what
// was set aside (it was released before the new peak). explain_peaks() then names the op
// that was running at each peak and the buffers, largest first.
#include <cstdint>
#include <string>
#include <vector>

#include "sim/memory/memory_state.h"
#include "sim/report/summary.h"

namespace memsim {

class Recorder;
class TextOut;

class PeakLiveSet {
 public:
  /// One allocation live at a peak; `buffer` is AllocationChange::kNoBuffer for op workspace.
  struct Entry {
    BufferId buffer = AllocationChange::kNoBuffer;
    Category category = Category::other;
    std::uint64_t bytes = 0;  // as the allocator took them
  };
  /// Called for each change, on_allocation first (the listener's pairing).
  void on_allocation(const AllocationChange& change);
  void on_memory_change(std::size_t tier, const TierUsage& usage);
  /// What was live in `tier` at its peak, in no particular order.
  std::vector<Entry> live_at_peak(std::size_t tier) const;

 private:
  struct Held {  // 16 bytes: a million-buffer step holds one per buffer and tier
    std::uint64_t since : 56 = 0;  // the change that allocated it (from 1); 0: not in this tier
    std::uint64_t category : 8 = 0;
    std::uint64_t bytes = 0;
  };
  struct HeldAnonymous {
    std::uint64_t since = 0;
    Entry entry;
  };
  struct TierState {
    std::uint64_t changes = 0;
    std::uint64_t peak_change = 0;
    std::uint64_t peak_bytes = 0;
    BufferId first = 0;           // the id of buffers[0]: a replica's tier sees its own ids
    std::vector<Held> buffers;    // by buffer id - first
    std::vector<HeldAnonymous> anonymous;  // workspace, released last-in first-out
    std::vector<Entry> released;  // live at the current peak, released after it
  };
  TierState& state(std::size_t tier);
  std::vector<TierState> tiers_;
};

/// Fills each tier's `peak` from the recorder: the op running on the tier's device when the
/// peak was reached (or the next one to run, when none was) and the live buffers, largest
/// first, with each activation's layer.
void explain_peaks(Summary& summary, const Recorder& recorder, const Trace& trace,
                   const PlatformSpec& platform);

/// A category in words, plural, for sentences ("activations", "optimizer state").
std::string category_words(Category c);

/// The module a buffer's producer belongs to: the op's name without a trailing ".backward"
/// or ".recompute" and without its last component ("layer3.0.bn1" -> "layer3.0";
/// "conv1" -> "conv1"); an imported op named in its scope, what precedes the last slash
/// ("encoder.layers.3.self_attn/aten::addmm#2452" -> "encoder.layers.3.self_attn").
std::string layer_of(const std::string& op_name);

/// peak.csv: every buffer live at each tier's peak, largest first (tier, buffer, category,
/// bytes, producer, layer). Empty when no tier held anything.
std::string peak_csv(const Summary& summary);
/// The same into `out`; false (nothing written) when no tier has a peak to list.
bool write_peak_csv(TextOut& out, const Summary& summary);

/// The explanation `memsim explain` prints: for each tier that held anything, the op at the
/// peak and the full live set grouped by layer, then by category.
std::string explain_text(const Summary& summary);

/// Reads back what explain_text needs from a run's output folder (summary.json and
/// peak.csv). Throws InputError naming the file when one is missing or not memsim's.
Summary read_peak_explanation(const std::string& out_dir);

}  // namespace memsim
