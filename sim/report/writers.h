#pragma once
// One writer per output format. Files are written to a temporary name and renamed, so a run
// that is killed leaves either the whole file or none. Numbers are printed in their
// shortest round-trip form: the same run gives byte-identical files.
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/core/text_out.h"
#include "sim/platform/platform.h"
#include "sim/report/recorder.h"
#include "sim/report/summary.h"
#include "sim/workload/trace.h"

namespace memsim {

/// The files `memsim run` can write, by the names `--outputs` and a sweep's `outputs:` take
/// ("all": every one of them).
inline constexpr std::array<std::string_view, 8> kOutputNames{"summary", "timeline", "memory", "peak",
                                                                "tiles",   "trace",    "events", "all"};
bool is_output_name(std::string_view name);
/// "summary, timeline, ..., all", for messages.
std::string output_names_text();

std::string summary_json(const Summary& s);
/// The same document, handed to `put` a piece at a time (summary.json is written so, without
/// holding it whole: on thousands of GPUs its tiers are tens of megabytes).
void write_summary_json(const Summary& s, const std::function<void(std::string_view)>& put);
/// timeline.csv: one row per event, in the order they were recorded.
void write_timeline_csv(TextOut& out, const std::vector<Event>& events, const Trace& trace,
                        const PlatformSpec& platform);
/// memory.csv: one row per memory sample.
void write_memory_csv(TextOut& out, const SampleLog& samples, const PlatformSpec& platform);

/// The same two files a block of records at a time, as a run makes them (RecordStream):
/// the header when made, then rows() for each block in order.
class TimelineCsv {
 public:
  TimelineCsv(TextOut& out, const Trace& trace, const PlatformSpec& platform);
  void rows(const Event* first, std::size_t n);

 private:
  TextOut& out_;
  const Trace& trace_;
  const PlatformSpec& platform_;
  std::vector<std::size_t> devices_;  // compute-device slot -> platform device
  std::vector<std::string> streams_;  // "stream3", made once per stream index seen
  DoubleTexts times_;                 // starts, ends and durations written lately
};

class MemoryCsv {
 public:
  MemoryCsv(TextOut& out, const PlatformSpec& platform);
  /// Whole samples (SampleLog::Replay).
  void rows(const SampleLog::Entry* first, std::size_t n);

 private:
  TextOut& out_;
  const PlatformSpec& platform_;
  SampleLog::Replay replay_;
  // The times written lately, as text: the tiers changed at one instant come one row each
  // (half of a 3-D step's rows repeat the time before them).
  DoubleTexts times_;
};

/// Tiled tiers: one row per tile with its peak ("tier,tile,peak_bytes"); empty when the
/// platform has no tiled tier.
std::string tiles_csv(const Summary& s);

/// The largest live buffers at a tier's peak that summary.json lists (peak.csv has all),
/// and how many the terminal names.
inline constexpr std::size_t kPeakBuffersShown = 10;
inline constexpr std::size_t kPeakBuffersOnTerminal = 3;

/// The two lines under a tier's peak: the op running then, and its largest live buffers.
/// Names lose the "gpu3:" prefix of `device`'s replica, so identical ranks read alike.
std::vector<std::string> peak_lines(const PeakReport& p, const std::string& out_dir,
                                    const std::string& device = "");

/// Lines (name, text) gathered as they come: numbered names of one form (gpu*.hbm) with the
/// same text are one line, at the first one's place, named by the ranges of their numbers
/// (gpu0.hbm ... gpu7.hbm -> "gpu0-7.hbm"; every node's -> "gpu0-16383.hbm"; gpu0-7 and
/// gpu16-23 -> "gpu0-7,16-23.hbm"; more than four ranges by their ends and count: "ib0,8,...,
/// 16376 (2048 of them)"); other names as they are. Each distinct text is kept
/// once: a 16,384-GPU platform's tiers are a few distinct lines.
class LineGroups {
 public:
  LineGroups() = default;
  LineGroups(const LineGroups&) = delete;  // its groups point into its own texts
  LineGroups& operator=(const LineGroups&) = delete;
  void add(const std::string& name, std::string text);
  std::vector<std::pair<std::string, std::string>> lines() const;

 private:
  struct Group {
    std::string name;            // the first name, as given
    std::string prefix, suffix;  // a numbered name's parts around its number ("gpu", ".hbm")
    std::vector<std::uint64_t> numbers;  // empty for a name without a number
    const std::string* text;     // in texts_
  };
  std::unordered_set<std::string> texts_;  // each distinct text once; node-based, so stable
  std::vector<Group> groups_;
  std::unordered_map<std::string, std::size_t> group_index_;  // text, prefix, suffix -> group
};

/// Lines (name, text) with consecutive numbered names and the same text as one line each:
/// gpu0.hbm ... gpu7.hbm -> "gpu0-7.hbm"; others as they are, in order.
std::vector<std::pair<std::string, std::string>> group_identical(
    const std::vector<std::pair<std::string, std::string>>& lines);

/// The table printed on the terminal after a run, ending with the `files` it wrote in out_dir.
std::string terminal_summary(const Summary& s, const std::string& out_dir,
                             const std::vector<std::string>& files = {});

}  // namespace memsim
