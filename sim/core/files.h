#pragma once
// Reading inputs and writing outputs, the one way every command does it.
//
// An input is a regular file of bounded size, or standard input for "-". A folder, a
// device (/dev/zero, /dev/urandom), a FIFO or a socket is refused before anything is read,
// so no input can hang memsim or fill its memory; a file over the size limit is refused
// with the limit and the way to raise it (--max-input-size, or MEMSIM_MAX_INPUT_SIZE, which
// sweeps pass on to their points).
//
// An output replaces only a regular file, and atomically: the text goes to a temporary file
// next to it, renamed over it once complete, so a reader never sees half a file. A device
// node or a FIFO named as an output (/dev/null, /dev/stdout, a pipe) is written to directly
// and never replaced; a folder or a block device is refused. Every write is checked: a full
// disk or a closed pipe is an OutputError naming the path.
#include <cstdint>
#include <string>
#include <string_view>

#include "sim/core/error.h"

namespace memsim {

/// Writing an output failed (a full disk, a read-only folder, a closed pipe). An InputError,
/// so commands exit with code 1; sweeps stop on it rather than recording a failed point.
class OutputError : public InputError {
 public:
  explicit OutputError(const std::string& message) : InputError(message) {}
};

/// The most bytes an input may hold, compressed or not (default 4 GiB).
std::uint64_t input_size_limit();
/// Sets the limit for this process and the processes it starts (a sweep's points).
void set_input_size_limit(std::uint64_t bytes);

/// The whole content of `path` (or of standard input for "-", read once and kept, so
/// several readers may look at it). InputError "PATH: ..." when it is not a regular file,
/// is over the limit, or cannot be read.
std::string read_input_file(const std::string& path);

/// At most `n` bytes from the start of `path`; empty when it is not a readable regular
/// file (or standard input), without reading further. Never throws.
std::string read_input_head(const std::string& path, std::size_t n);

/// Whether `path` is "-" or a regular file (what read_input_file accepts, size aside).
bool is_input_file(const std::string& path);

/// An output written piece by piece, as described above: opened on construction (the
/// temporary file next to `path`, or the device, FIFO or standard output), written with
/// write(), put in place by commit(). Destroyed without commit() — an error on the way —
/// it leaves nothing behind.
class OutputFile {
 public:
  explicit OutputFile(const std::string& path);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  void write(std::string_view text);
  void commit();
  const std::string& path() const { return path_; }

 private:
  std::string path_, target_, tmp_;  // tmp_ empty: written in place
  int fd_ = -1;
};

/// Writes `text` to `path` as described above ("-": standard output). OutputError naming
/// the path on any failure; a temporary file is never left behind.
void write_output_file(const std::string& path, const std::string& text);

/// Flushes standard output; OutputError "(standard output): ..." when anything written to it
/// was lost (a full disk behind `> file`, a closed pipe).
void finish_standard_output();

}  // namespace memsim
