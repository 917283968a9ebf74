#include "sim/report/csv_stream.h"

#include <filesystem>
#include <utility>

#include <fmt/format.h>

#include "sim/core/error.h"

namespace memsim {

CsvStream::CsvStream(std::string out_dir, bool timeline, bool memory)
    : out_dir_(std::move(out_dir)), timeline_(timeline), memory_(memory) {}

CsvStream::~CsvStream() {
  // Not finished: what is still queued is dropped, and the files go with their temporaries.
  {
    std::lock_guard lock(mutex_);
    queue_.clear();
  }
  stop();
}

void CsvStream::start(const Trace& trace, const PlatformSpec& platform) {
  if (started()) throw std::logic_error("CsvStream::start: started twice");
  std::error_code ec;
  std::filesystem::create_directories(out_dir_, ec);
  if (ec) throw InputError(fmt::format("{}: cannot create output folder: {}", out_dir_, ec.message()));
  // The headers now, on this thread: a file that cannot be made fails the run here.
  if (timeline_) {
    timeline_file_.emplace(out_dir_ + "/timeline.csv");
    timeline_out_.emplace(*timeline_file_);
    timeline_csv_.emplace(*timeline_out_, trace, platform);
  }
  if (memory_) {
    memory_file_.emplace(out_dir_ + "/memory.csv");
    memory_out_.emplace(*memory_file_);
    memory_csv_.emplace(*memory_out_, platform);
  }
  worker_ = std::thread([this] { work(); });
}

void CsvStream::events(const Event* first, std::size_t n) {
  if (!timeline_csv_ || n == 0) return;
  Block b;
  b.events.assign(first, first + n);
  push(std::move(b));
}

void CsvStream::samples(const SampleLog::Entry* first, std::size_t n) {
  if (!memory_csv_ || n == 0) return;
  Block b;
  b.entries.assign(first, first + n);
  push(std::move(b));
}

void CsvStream::push(Block block) {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [this] { return queue_.size() < kMaxQueued || failed_; });
  if (failed_) return;  // nothing more is written; finish() reports why
  queue_.push_back(std::move(block));
  changed_.notify_all();
}

void CsvStream::work() {
  for (;;) {
    Block b;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [this] { return !queue_.empty() || closing_; });
      if (queue_.empty()) return;  // closing, and every block written
      b = std::move(queue_.front());
      queue_.pop_front();
      changed_.notify_all();
    }
    try {
      if (!b.events.empty()) timeline_csv_->rows(b.events.data(), b.events.size());
      if (!b.entries.empty()) memory_csv_->rows(b.entries.data(), b.entries.size());
    } catch (...) {
      std::lock_guard lock(mutex_);
      if (!failed_) failed_ = std::current_exception();
      queue_.clear();
      changed_.notify_all();
    }
  }
}

void CsvStream::stop() {
  if (!worker_.joinable()) return;
  {
    std::lock_guard lock(mutex_);
    closing_ = true;
    changed_.notify_all();
  }
  worker_.join();
}

void CsvStream::finish() {
  if (finished_) return;
  stop();
  finished_ = true;
  if (failed_) std::rethrow_exception(failed_);  // the files' destructors remove them
  if (timeline_out_) timeline_out_->finish();
  if (memory_out_) memory_out_->finish();
}

}  // namespace memsim
