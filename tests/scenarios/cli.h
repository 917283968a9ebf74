#pragma once
// Runs the memsim binary from the source tree and captures what it printed.
#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>

struct CliResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

inline std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

/// `args` is passed to the shell as written; runs in the source tree.
inline CliResult run_memsim(const std::string& args) {
  static int counter = 0;
  const std::string err_file = std::string(::testing::TempDir()) + "memsim_stderr_" +
                               std::to_string(::getpid()) + "_" + std::to_string(counter++);
  const std::string cmd = std::string("cd '") + MEMSIM_SOURCE_DIR + "' && '" + MEMSIM_BINARY +
                          "' " + args + " 2>'" + err_file + "'";
  CliResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  std::size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = slurp(err_file);
  std::remove(err_file.c_str());
  return r;
}
