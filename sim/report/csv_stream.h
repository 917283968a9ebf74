#pragma once
// timeline.csv and memory.csv written while the engine runs. The recorder passes its
// records here a block at a time (RecordStream); each block is copied onto a queue and a
// thread of the stream's own writes its rows, so the files take the second core while the
// first simulates, and are done soon after the run instead of starting then. The rows and
// their order are what write_timeline_csv and write_memory_csv write from the recorder.
//
// The files appear when finish() commits them (each written to a temporary name first, as
// every output); a stream destroyed before that leaves neither. The queue is bounded: an
// engine that runs ahead of the writer waits for it, so a million-op run holds a few
// blocks, not a copy of its records.
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "sim/core/files.h"
#include "sim/core/text_out.h"
#include "sim/report/recorder.h"
#include "sim/report/writers.h"

namespace memsim {

class CsvStream final : public RecordStream {
 public:
  /// Writes `out_dir`/timeline.csv and/or `out_dir`/memory.csv, made (with the folder) when
  /// the run starts.
  CsvStream(std::string out_dir, bool timeline, bool memory);
  /// Stops the writer (dropping what is queued) and removes the files unless finish()
  /// committed them. The step given to start() must outlive this.
  ~CsvStream() override;
  CsvStream(const CsvStream&) = delete;
  CsvStream& operator=(const CsvStream&) = delete;

  void start(const Trace& trace, const PlatformSpec& platform) override;
  void events(const Event* first, std::size_t n) override;
  void samples(const SampleLog::Entry* first, std::size_t n) override;

  /// Whether a run started it (it was given records, or none to give).
  bool started() const { return worker_.joinable() || finished_; }
  /// After the run: waits for the rows still queued, then commits the files. Throws
  /// OutputError (a full disk, say) after removing what it had written.
  void finish();

 private:
  struct Block {
    std::vector<Event> events;
    std::vector<SampleLog::Entry> entries;
  };
  static constexpr std::size_t kMaxQueued = 32;  // blocks waiting for the writer

  void push(Block block);
  void work();
  void stop();

  std::string out_dir_;
  bool timeline_, memory_;
  std::optional<OutputFile> timeline_file_, memory_file_;
  std::optional<TextOut> timeline_out_, memory_out_;
  std::optional<TimelineCsv> timeline_csv_;
  std::optional<MemoryCsv> memory_csv_;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Block> queue_;
  bool closing_ = false;       // no more blocks: the writer stops when the queue is empty
  std::exception_ptr failed_;  // the writer's first error; it writes nothing after it
  std::thread worker_;
  bool finished_ = false;
};

}  // namespace memsim
