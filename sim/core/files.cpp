#include "sim/core/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
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
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd_ < 0) throw OutputError(fmt::format("{}: cannot write file: {}", path, std::strerror(errno)));
}

OutputFile::~OutputFile() {
  if (fd_ < 0) return;
  if (fd_ != STDOUT_FILENO) ::close(fd_);
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
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
    throw OutputError(fmt::format("{}: cannot write: {}", path_, std::strerror(saved)));
  }
  if (tmp_.empty()) return;
  if (::rename(tmp_.c_str(), target_.c_str()) != 0) {
    const int saved = errno;
    ::unlink(tmp_.c_str());
    throw OutputError(fmt::format("{}: cannot write file: {}", path_, std::strerror(saved)));
  }
  tmp_.clear();
}

void write_output_file(const std::string& path, const std::string& text) {
  OutputFile out(path);
  out.write(text);
  out.commit();
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
