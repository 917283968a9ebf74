#include "sim/core/files.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <optional>

#include <fmt/format.h>

#include "sim/core/units.h"

namespace memsim {
namespace {

constexpr const char* kLimitVariable = "MEMSIM_MAX_INPUT_SIZE";
constexpr std::uint64_t kDefaultLimit = std::uint64_t{4} << 30;

std::string file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

std::string too_large(const std::string& path, std::uint64_t size) {
  return fmt::format("{}: {} bytes, over the input size limit of {} bytes; raise it with "
                     "--max-input-size SIZE (or {}=SIZE)",
                     path, size, input_size_limit(), kLimitVariable);
}

// Reads `fd` to its end, or until `limit` + 1 bytes are in (the caller refuses those).
std::optional<std::string> read_fd(int fd, std::uint64_t limit, std::uint64_t expected) {
  std::string out;
  out.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(expected, limit) + 64));
  char buffer[1 << 16];
  while (out.size() <= limit) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    if (n == 0) break;
    out.append(buffer, static_cast<std::size_t>(n));
  }
  return out;
}

// Standard input, read once: the first reader reads it all, later ones see the same text.
const std::string& standard_input() {
  static const std::optional<std::string> text = [] {
    auto t = read_fd(STDIN_FILENO, input_size_limit(), 1 << 16);
    if (!t) throw InputError(fmt::format("(standard input): cannot read: {}", std::strerror(errno)));
    return t;
  }();
  if (text->size() > input_size_limit()) throw InputError(too_large("(standard input)", text->size()));
  return *text;
}

// Opens a regular file for reading, checking what it is before opening it (so a FIFO's
// open cannot block) and again after (it may have been swapped in between).
int open_regular(const std::string& path, std::uint64_t* size) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw InputError(fmt::format("{}: cannot open file: {}", path, std::strerror(errno)));
  if (!S_ISREG(st.st_mode))
    throw InputError(fmt::format("{}: {}, not a regular file; inputs are regular files{}", path,
                                 file_kind(st.st_mode), " (or '-' for standard input)"));
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw InputError(fmt::format("{}: cannot open file: {}", path, std::strerror(errno)));
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw InputError(fmt::format("{}: not a regular file", path));
  }
  *size = static_cast<std::uint64_t>(st.st_size);
  return fd;
}

void write_all(int fd, std::string_view text, const std::string& path) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw OutputError(fmt::format("{}: cannot write: {}", path, std::strerror(n < 0 ? errno : EIO)));
    done += static_cast<std::size_t>(n);
  }
}

// ---- what a signal removes ----
// The temporaries in progress (OutputFile's .tmp files, OutputFolder's staging folders) are
// listed in fixed slots of static memory, so a signal handler can walk the list and unlink
// them with async-signal-safe calls only: no allocation, no lock. A slot is claimed
// (free -> claimed), filled, then published (live); the handler touches live slots only.
// A path is listed before the file is made and taken off after it is renamed or removed.

constexpr int kFree = 0, kClaimed = 1, kLive = 2;
constexpr std::size_t kPathBytes = 4096;

struct TempSlot {
  std::atomic<int> state{kFree};
  char path[kPathBytes];
};
// A staging folder: its path and the names it may hold, each followed by a NUL.
struct StagingSlot {
  std::atomic<int> state{kFree};
  char dir[kPathBytes];
  char names[kPathBytes];
  std::size_t names_bytes = 0;
};

TempSlot g_temps[128];
StagingSlot g_stagings[8];
// Set while OutputFolder::install() moves files into place: the cleanup waits for it.
std::atomic<bool> g_installing{false};

template <typename Slot>
int claim(Slot* slots, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    int expected = kFree;
    if (slots[i].state.compare_exchange_strong(expected, kClaimed)) return static_cast<int>(i);
  }
  return -1;  // full: this one is not listed (only a signal would leave it)
}

bool copy_path(char* to, const std::string& from) {
  if (from.size() + 1 > kPathBytes) return false;
  std::memcpy(to, from.c_str(), from.size() + 1);
  return true;
}

int list_temp(const std::string& path) {
  const int i = claim(g_temps, std::size(g_temps));
  if (i < 0) return -1;
  if (!copy_path(g_temps[i].path, path)) {
    g_temps[i].state.store(kFree);
    return -1;
  }
  g_temps[i].state.store(kLive);
  return i;
}

void unlist_temp(int i) {
  if (i >= 0) g_temps[i].state.store(kFree);
}

// Temporaries being made (listed, their open not returned yet) and whether the cleanup has
// begun. A writer thread that lists and makes its file while the cleanup runs on another
// thread left it behind (the cleanup unlinked the path before the open made it). The cleanup
// now waits until none is being made, at most a fifth of a second (the thread the signal
// interrupted may be one of them: its file is then not made, as the process ends first);
// a temporary begun after the cleanup started is refused.
std::atomic<int> g_opening{0};
std::atomic<bool> g_stopping{false};

// Async-signal-safe: unlink, rmdir, clock_gettime and plain loops over static memory.
void remove_unfinished_outputs() noexcept {
  g_stopping.store(true);
  timespec from{};
  ::clock_gettime(CLOCK_MONOTONIC, &from);
  while (g_opening.load() > 0) {
    timespec now{};
    ::clock_gettime(CLOCK_MONOTONIC, &now);
    if ((now.tv_sec - from.tv_sec) * 1'000'000'000L + (now.tv_nsec - from.tv_nsec) > 200'000'000L) break;
  }
  while (g_installing.load()) {
  }
  for (TempSlot& t : g_temps)
    if (t.state.load() == kLive) ::unlink(t.path);
  for (StagingSlot& s : g_stagings) {
    if (s.state.load() != kLive) continue;
    char path[2 * kPathBytes];
    std::size_t dir_len = 0;
    while (s.dir[dir_len] != '\0') path[dir_len] = s.dir[dir_len], ++dir_len;
    path[dir_len] = '/';
    for (std::size_t at = 0; at < s.names_bytes;) {
      std::size_t k = 0;
      while (s.names[at + k] != '\0') path[dir_len + 1 + k] = s.names[at + k], ++k;
      path[dir_len + 1 + k] = '\0';
      ::unlink(path);
      at += k + 1;
    }
    ::rmdir(s.dir);
  }
}

extern "C" void memsim_remove_outputs_on_signal(int sig) {
  const int saved = errno;
  remove_unfinished_outputs();
  // Then what the signal does unhandled: end the process (the signal is held until this
  // handler returns).
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  ::raise(sig);
  errno = saved;
}

extern "C" void memsim_remove_outputs_at_exit() { remove_unfinished_outputs(); }

constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP};

// Installed once, where a signal has its default action (a handler of the program's own, or
// an ignored signal, is left alone).
void install_cleanup() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (int sig : kStopSignals) {
      struct sigaction old {};
      if (::sigaction(sig, nullptr, &old) != 0) continue;
      if ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) continue;
      struct sigaction sa {};
      sa.sa_handler = memsim_remove_outputs_on_signal;
      sigemptyset(&sa.sa_mask);
      for (int other : kStopSignals) sigaddset(&sa.sa_mask, other);
      sa.sa_flags = SA_RESTART;
      ::sigaction(sig, &sa, nullptr);
    }
    std::atexit(memsim_remove_outputs_at_exit);
  });
}

// Holds SIGINT, SIGTERM and SIGHUP on this thread (and makes the cleanup wait) while files
// move into place; a signal that came meanwhile is acted on when it ends.
class HoldStopSignals {
 public:
  HoldStopSignals() {
    sigset_t set;
    sigemptyset(&set);
    for (int sig : kStopSignals) sigaddset(&set, sig);
    ::pthread_sigmask(SIG_BLOCK, &set, &old_);
    g_installing.store(true);
  }
  ~HoldStopSignals() {
    g_installing.store(false);
    ::pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  HoldStopSignals(const HoldStopSignals&) = delete;
  HoldStopSignals& operator=(const HoldStopSignals&) = delete;

 private:
  sigset_t old_;
};

}  // namespace

std::uint64_t input_size_limit() {
  const char* v = std::getenv(kLimitVariable);
  if (!v || !*v) return kDefaultLimit;
  const auto bytes = parse_bytes(v);
  if (!bytes || *bytes == 0)
    throw InputError(fmt::format("{}={}: expected a size like '8GiB'", kLimitVariable, v));
  return *bytes;
}

void set_input_size_limit(std::uint64_t bytes) {
  ::setenv(kLimitVariable, (std::to_string(bytes) + "B").c_str(), 1);
}

bool is_input_file(const std::string& path) {
  if (path == "-") return true;
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string read_input_file(const std::string& path) {
  if (path == "-") return standard_input();
  std::uint64_t size = 0;
  const int fd = open_regular(path, &size);
  if (size > input_size_limit()) {
    ::close(fd);
    throw InputError(too_large(path, size));
  }
  auto text = read_fd(fd, input_size_limit(), size);
  const int saved = errno;
  ::close(fd);
  if (!text) throw InputError(fmt::format("{}: cannot read: {}", path, std::strerror(saved)));
  if (text->size() > input_size_limit()) throw InputError(too_large(path, text->size()));
  return std::move(*text);
}

std::string read_input_head(const std::string& path, std::size_t n) {
  try {
    if (path == "-") return standard_input().substr(0, n);
    std::uint64_t size = 0;
    const int fd = open_regular(path, &size);
    auto text = read_fd(fd, n == 0 ? 0 : n - 1, std::min<std::uint64_t>(size, n));
    ::close(fd);
    if (!text) return {};
    if (text->size() > n) text->resize(n);
    return std::move(*text);
  } catch (const InputError&) {
    return {};
  }
}

OutputFile::OutputFile(const std::string& path) : path_(path == "-" ? "(standard output)" : path) {
  if (path == "-") {
    std::cout.flush();
    fd_ = STDOUT_FILENO;
    return;
  }
  std::string target = path;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode) || S_ISBLK(st.st_mode))
      throw OutputError(fmt::format("{}: {}; an output is a file (memsim replaces only regular files)", path,
                                    file_kind(st.st_mode)));
    if (!S_ISREG(st.st_mode)) {
      // A device node or FIFO: written in place, never replaced.
      fd_ = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
      if (fd_ < 0) {
        if (errno == ENXIO) throw OutputError(fmt::format("{}: a FIFO with no reader; start its reader first", path));
        throw OutputError(fmt::format("{}: cannot open for writing: {}", path, std::strerror(errno)));
      }
      const int flags = ::fcntl(fd_, F_GETFL);
      if (flags >= 0) ::fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK);
      return;
    }
    // A link to a file: the file it names is replaced, the link is kept.
    std::error_code ec;
    if (std::filesystem::is_symlink(path, ec)) {
      const auto resolved = std::filesystem::canonical(path, ec);
      if (!ec) target = resolved.string();
    }
  }
  static std::atomic<unsigned> counter{0};
  target_ = target;
  tmp_ = fmt::format("{}.tmp.{}.{}", target, ::getpid(), counter++);
  install_cleanup();
  g_opening.fetch_add(1);
  if (g_stopping.load()) {
    g_opening.fetch_sub(1);
    throw OutputError(fmt::format("{}: not written: the run is being stopped", path));
  }
  listed_ = list_temp(tmp_);
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  g_opening.fetch_sub(1);
  if (fd_ < 0) {
    const int saved = errno;
    unlist_temp(listed_);
    throw OutputError(fmt::format("{}: cannot write file: {}", path, std::strerror(saved)));
  }
}

OutputFile::~OutputFile() {
  if (fd_ < 0) return;
  if (fd_ != STDOUT_FILENO) ::close(fd_);
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
  unlist_temp(listed_);
}

void OutputFile::write(std::string_view text) {
  if (fd_ < 0) throw OutputError(fmt::format("{}: written after it was closed", path_));
  write_all(fd_, text, path_);
}

void OutputFile::commit() {
  if (fd_ < 0) return;
  const int fd = fd_;
  fd_ = -1;
  if (fd == STDOUT_FILENO) return;
  if (::close(fd) != 0 && (tmp_.empty() ? errno != EINTR : true)) {
    const int saved = errno;
    if (!tmp_.empty()) ::unlink(tmp_.c_str());
    unlist_temp(listed_);
    throw OutputError(fmt::format("{}: cannot write: {}", path_, std::strerror(saved)));
  }
  if (tmp_.empty()) return;
  if (::rename(tmp_.c_str(), target_.c_str()) != 0) {
    const int saved = errno;
    ::unlink(tmp_.c_str());
    unlist_temp(listed_);
    throw OutputError(fmt::format("{}: cannot write file: {}", path_, std::strerror(saved)));
  }
  unlist_temp(listed_);
  listed_ = -1;
  tmp_.clear();
}

void write_output_file(const std::string& path, const std::string& text) {
  OutputFile out(path);
  out.write(text);
  out.commit();
}

namespace {

constexpr const char* kStagingPrefix = ".memsim-new.";

// Staging folders that a process killed outright (SIGKILL) left in `dir`: those whose process
// is gone.
void remove_abandoned_staging(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!name.starts_with(kStagingPrefix)) continue;
    const std::string rest = name.substr(std::strlen(kStagingPrefix));
    const std::string pid_text = rest.substr(0, rest.find('.'));
    if (pid_text.empty() || pid_text.size() > 9 || pid_text.find_first_not_of("0123456789") != std::string::npos)
      continue;
    const pid_t pid = static_cast<pid_t>(std::stol(pid_text));
    if (pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
    std::error_code ignored;
    std::filesystem::remove_all(e.path(), ignored);
  }
}

// Whether `path` is there as a regular file (not followed through a link).
bool is_plain_file(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// Whether `path` is there as something OutputFile writes in place: a device, a FIFO, or a
// link (to a file it replaces, keeping the link).
bool written_in_place(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
}

}  // namespace

OutputFolder::OutputFolder(std::string dir, std::vector<std::string> names, std::string marker)
    : dir_(std::move(dir)), marker_(std::move(marker)), names_(std::move(names)) {
  static std::atomic<unsigned> counter{0};
  staging_ = fmt::format("{}/{}{}.{}", dir_, kStagingPrefix, ::getpid(), counter++);
  install_cleanup();
  // Listed before it is made, so a signal between the two finds nothing to remove.
  slot_ = claim(g_stagings, std::size(g_stagings));
  if (slot_ < 0) return;
  StagingSlot& s = g_stagings[slot_];
  std::size_t bytes = 0;
  bool fits = copy_path(s.dir, staging_);
  for (const std::string& n : names_) {
    if (bytes + n.size() + 1 > kPathBytes) fits = false;
    if (!fits) break;
    std::memcpy(s.names + bytes, n.c_str(), n.size() + 1);
    bytes += n.size() + 1;
  }
  s.names_bytes = bytes;
  if (fits) {
    s.state.store(kLive);
  } else {
    s.state.store(kFree);
    slot_ = -1;
  }
}

void OutputFolder::make() {
  std::call_once(made_, [this] {
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    if (ec) throw OutputError(fmt::format("{}: cannot create output folder: {}", dir_, ec.message()));
    remove_abandoned_staging(dir_);
    // A writer may have made it already (CsvStream makes its folder).
    if (::mkdir(staging_.c_str(), 0777) != 0 && errno != EEXIST)
      throw OutputError(fmt::format("{}: cannot write: {}", dir_, std::strerror(errno)));
  });
}

OutputFolder::~OutputFolder() {
  if (!installed_) {
    std::error_code ignored;
    std::filesystem::remove_all(staging_, ignored);
  }
  if (slot_ >= 0) g_stagings[slot_].state.store(kFree);
}

std::string OutputFolder::path(const std::string& name) {
  make();
  const std::string in_place = dir_ + "/" + name;
  return written_in_place(in_place) ? in_place : staging_ + "/" + name;
}

void OutputFolder::install() {
  if (installed_) return;
  make();
  // One install at a time in a folder (two runs writing the same folder at once).
  const int lock = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (lock >= 0) ::flock(lock, LOCK_EX);
  std::string failed;
  // Every place a file moves to must take it (absent, or a regular file) before anything
  // moves: a failure half-way would leave neither set.
  for (const std::string& n : names_) {
    const std::string to = dir_ + "/" + n;
    struct stat st {};
    if (is_plain_file(staging_ + "/" + n) && ::lstat(to.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
      failed = fmt::format("{}: {}; an output is a file (memsim replaces only regular files)", to,
                           file_kind(st.st_mode));
      break;
    }
  }
  if (!failed.empty()) {
    if (lock >= 0) ::close(lock);
    throw OutputError(failed);
  }
  {
    HoldStopSignals hold;
    auto move_in = [&](const std::string& name) {
      const std::string from = staging_ + "/" + name, to = dir_ + "/" + name;
      if (is_plain_file(from)) {
        if (::rename(from.c_str(), to.c_str()) != 0 && failed.empty())
          failed = fmt::format("{}: cannot write file: {}", to, std::strerror(errno));
      } else if (is_plain_file(to) && ::unlink(to.c_str()) != 0 && errno != ENOENT && failed.empty()) {
        failed = fmt::format("{}: cannot remove the previous run's file: {}", to, std::strerror(errno));
      }
    };
    // The old marker first: from here until the new one is in, the folder vouches for no run.
    const std::string old_marker = dir_ + "/" + marker_;
    if (is_plain_file(old_marker) && ::unlink(old_marker.c_str()) != 0 && errno != ENOENT)
      failed = fmt::format("{}: cannot remove the previous run's file: {}", old_marker, std::strerror(errno));
    if (failed.empty())
      for (const std::string& n : names_)
        if (n != marker_) move_in(n);
    if (failed.empty()) move_in(marker_);
    if (failed.empty()) {
      ::rmdir(staging_.c_str());
      installed_ = true;
      if (slot_ >= 0) g_stagings[slot_].state.store(kFree);
      slot_ = -1;
    }
  }
  if (lock >= 0) ::close(lock);  // and its lock
  if (!failed.empty()) throw OutputError(failed);
}

void finish_standard_output() {
  errno = 0;
  std::cout.flush();
  const bool failed = std::fflush(stdout) != 0 || std::ferror(stdout) || !std::cout;
  const int saved = errno;
  if (!failed) return;
  std::clearerr(stdout);
  std::cout.clear();
  throw OutputError(fmt::format("(standard output): cannot write: {}",
                                saved ? std::strerror(saved) : "the output was lost"));
}

}  // namespace memsim
