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
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

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
  int listed_ = -1;  // its entry in the signal handler's list (-1: none)
};

/// Writes `text` to `path` as described above ("-": standard output). OutputError naming
/// the path on any failure; a temporary file is never left behind.
void write_output_file(const std::string& path, const std::string& text);

/// A command's set of outputs in one folder (`memsim run --out DIR`), replaced as a whole.
/// The files are written into a staging folder inside it (DIR/.memsim-new.PID.N) and moved
/// into place by install() once every one of them is complete, so the folder holds either
/// the previous run's set or this run's, never a mixture: a run that fails on the way (a
/// full disk, an error, SIGINT, SIGTERM or SIGHUP) leaves the previous set as it was and no
/// staging folder or temporary file. install() takes the old `marker` (summary.json) away
/// first, moves the new files in, removes the files of the set this run did not write (an
/// older run's tiles.csv), and moves the new marker in last, with those signals held until
/// it is done: whatever stops the process, a marker in the folder vouches for the files
/// beside it. (SIGKILL can leave a staging folder behind; the next run into the folder
/// removes it.) A name that is a device, a FIFO or a link in DIR is written there in place,
/// as OutputFile writes it, outside the set.
///
/// While an OutputFolder or an OutputFile is unfinished, SIGINT, SIGTERM and SIGHUP (where
/// they have no handler of their own) remove its temporaries before the process ends by the
/// signal; so does exit() (SimGrid's own SIGINT handler ends in it).
class OutputFolder {
 public:
  /// `names`: every file the command may write there; `marker`: one of them. Nothing is
  /// made yet: the folders are made by the first path() (a run refused before it writes
  /// makes no folder).
  OutputFolder(std::string dir, std::vector<std::string> names, std::string marker);
  /// Not installed: removes the staging folder and what is in it.
  ~OutputFolder();
  OutputFolder(const OutputFolder&) = delete;
  OutputFolder& operator=(const OutputFolder&) = delete;

  /// Where to write `name` (one of `names`): in the staging folder. Makes `dir` (with its
  /// parents) and the staging folder the first time; OutputError when they cannot be made.
  /// Thread-safe.
  std::string path(const std::string& name);
  /// The staging folder, for a writer that takes a folder and makes it (CsvStream).
  const std::string& staging() const { return staging_; }
  const std::string& dir() const { return dir_; }
  /// Moves what was written into place as described above. OutputError naming the file when
  /// a move fails.
  void install();

 private:
  void make();

  std::string dir_, staging_, marker_;
  std::vector<std::string> names_;
  int slot_ = -1;  // its entry in the signal handler's list (-1: none)
  std::once_flag made_;
  bool installed_ = false;
};

/// Flushes standard output; OutputError "(standard output): ..." when anything written to it
/// was lost (a full disk behind `> file`, a closed pipe).
void finish_standard_output();

}  // namespace memsim
