// memsim._memsim: the C++ half of the Python package (python/memsim/__init__.py is the
// other). SimGrid's engine can be started once per process, and a run leaves interned
// strings and its records behind, so every call runs in a child process forked for it: the
// child runs the call, sends its answer back over a pipe and ends with _Exit, and the
// Python process that asked never starts SimGrid and keeps nothing of the run but the
// answer. The answer is a list of byte strings, each sent as an 8-byte length and the
// bytes; the first says what happened ("ok", or the kind of error) and the rest are the
// values (a summary's JSON, CSV texts, an error's message).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "sim/app/cli.h"
#include "sim/app/run_command.h"
#include "sim/app/sweep_cli.h"
#include "sim/core/error.h"
#include "sim/core/files.h"
#include "sim/core/text_out.h"
#include "sim/report/peak.h"
#include "sim/report/writers.h"

namespace py = pybind11;

namespace memsim {
namespace {

// Writes all of `text` to `fd` (a pipe: a write may take part of it).
bool write_all(int fd, const char* data, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

void send(int fd, const std::string& value) {
  const std::uint64_t n = value.size();
  char length[8];
  std::memcpy(length, &n, 8);
  write_all(fd, length, 8);
  write_all(fd, value.data(), value.size());
}

struct ChildAnswer {
  std::string out, err;  // what the child wrote to the answer pipe and to its stderr
  int exit_code = -1;    // -1: ended by a signal
  int signal = 0;
};

// Runs `body` in a forked child whose standard output and standard error go to pipes (the
// answer and the notes); `body` returns the child's exit code. The caller holds no GIL.
ChildAnswer in_child(const std::function<int()>& body) {
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) throw std::runtime_error(std::string("memsim: pipe: ") + std::strerror(errno));
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    ::close(out_pipe[0]), ::close(out_pipe[1]);
    throw std::runtime_error(std::string("memsim: pipe: ") + std::strerror(errno));
  }
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) ::close(fd);
    throw std::runtime_error(std::string("memsim: fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::dup2(out_pipe[1], STDOUT_FILENO);
    ::dup2(err_pipe[1], STDERR_FILENO);
    ::signal(SIGPIPE, SIG_DFL);
    int code = 3;
    try {
      code = body();
    } catch (const std::exception& e) {
      std::cerr << "memsim: " << e.what() << "\n";
    } catch (...) {
    }
    std::cout.flush();
    std::cerr.flush();
    std::fflush(stdout);
    std::fflush(stderr);
    ::_Exit(code);
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  ChildAnswer answer;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* into[2] = {&answer.out, &answer.err};
  int open = 2;
  std::vector<char> buffer(1 << 16);
  while (open > 0) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int k = 0; k < 2; ++k) {
      if (fds[k].fd < 0 || fds[k].revents == 0) continue;
      const ssize_t n = ::read(fds[k].fd, buffer.data(), buffer.size());
      if (n > 0) {
        into[k]->append(buffer.data(), static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        ::close(fds[k].fd);
        fds[k].fd = -1;
        --open;
      }
    }
  }
  for (const pollfd& f : fds)
    if (f.fd >= 0) ::close(f.fd);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) answer.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) answer.signal = WTERMSIG(status);
  return answer;
}

// The child's answer as its values; an empty list when it was cut short.
std::vector<std::string> values_of(const std::string& out) {
  std::vector<std::string> values;
  std::size_t at = 0;
  while (at + 8 <= out.size()) {
    std::uint64_t n = 0;
    std::memcpy(&n, out.data() + at, 8);
    at += 8;
    if (n > out.size() - at) return {};
    values.emplace_back(out, at, n);
    at += n;
  }
  return at == out.size() ? values : std::vector<std::string>{};
}

// The body of a call in the child: sends "ok" and its values, or the kind of error and its
// message, as `memsim` would have exited.
int answer(const std::function<std::vector<std::string>()>& call) {
  try {
    std::vector<std::string> values = call();
    send(STDOUT_FILENO, "ok");
    for (const std::string& v : values) send(STDOUT_FILENO, v);
    return 0;
  } catch (const UsageError& e) {
    send(STDOUT_FILENO, "usage"), send(STDOUT_FILENO, e.what());
    return 2;
  } catch (const OutputError& e) {
    send(STDOUT_FILENO, "output"), send(STDOUT_FILENO, e.what());
    return 1;
  } catch (const InputError& e) {
    send(STDOUT_FILENO, "input"), send(STDOUT_FILENO, e.what());
    return 1;
  } catch (const std::logic_error& e) {  // PolicyError, InternalError: memsim's own fault
    send(STDOUT_FILENO, "internal"), send(STDOUT_FILENO, e.what());
    return 3;
  }
}

// A Python request (a dict made by memsim.run) as a RunCommand.
InputArg input_arg(const py::dict& d) {
  const std::string name = d["name"].cast<std::string>();
  if (d.contains("text") && !d["text"].is_none()) return InputArg(name, d["text"].cast<std::string>());
  return InputArg(name);
}

RunCommand command_of(const py::dict& r) {
  RunCommand c;
  c.platform = input_arg(r["platform"].cast<py::dict>());
  c.workloads.clear();
  for (const py::handle w : r["workloads"].cast<py::list>()) c.workloads.push_back(input_arg(w.cast<py::dict>()));
  c.policy = r["policy"].cast<std::string>();
  c.sets = r["sets"].cast<std::vector<std::string>>();
  if (!r["devices"].is_none()) c.devices = r["devices"].cast<std::string>();
  if (!r["step"].is_none()) c.import.step = r["step"].cast<std::int64_t>();
  c.import.kineto = r["kineto"].cast<std::string>();
  c.durations = r["durations"].cast<std::string>();
  c.max_events = r["max_events"].cast<std::size_t>();
  return c;
}

py::list as_bytes(const std::vector<std::string>& values) {
  py::list out;
  for (const std::string& v : values) out.append(py::bytes(v));
  return out;
}

py::tuple reply(const ChildAnswer& a) {
  return py::make_tuple(as_bytes(values_of(a.out)), py::bytes(a.err), a.exit_code, a.signal);
}

// memsim.run: the summary's JSON, timeline.csv, memory.csv and peak.csv as text, and the
// explanation of the peaks. Nothing is written.
py::tuple run_request(const py::dict& request) {
  RunCommand command = command_of(request);
  command.outputs = OutputChoice{true, true, true, true, false, false, false};
  ChildAnswer a;
  {
    py::gil_scoped_release unlocked;
    a = in_child([&] {
      return answer([&] {
        // Never freed: the process ends with _Exit.
        RunOutcome* outcome = new RunOutcome();
        simulate_run(command, *outcome, RunHooks{nullptr, {}, &std::cerr});
        const RunResult& r = outcome->result;
        std::string timeline, memory, peaks;
        {
          TextOut t(timeline);
          write_timeline_csv(t, r.recorder.events(), r.trace, outcome->platform());
          TextOut m(memory);
          write_memory_csv(m, r.recorder.samples(), outcome->platform());
          TextOut p(peaks);
          write_peak_csv(p, r.summary);
        }
        return std::vector<std::string>{summary_json(r.summary), timeline, memory, peaks, explain_text(r.summary)};
      });
    });
  }
  return reply(a);
}

// Result.write: `memsim run --out FOLDER` of the same request (the run is deterministic, so
// it is the run the result came from): the files written, in order.
py::tuple write_request(const py::dict& request, const std::string& out_dir, const std::string& outputs,
                const std::string& trace_format) {
  RunCommand command = command_of(request);
  ChildAnswer a;
  {
    py::gil_scoped_release unlocked;
    a = in_child([&] {
      return answer([&] {
        command.outputs = parse_outputs(outputs, false);
        RunOutcome* outcome = new RunOutcome();
        const RunFiles files = run_to_folder(command, out_dir, trace_format, *outcome, std::cerr);
        return files.written;
      });
    });
  }
  return reply(a);
}

// The command line itself, in a child: its exit code, standard output and standard error.
// `memsim_binary`: the executable of a sweep's points and of advice.
py::tuple cli(const std::vector<std::string>& args, const std::string& memsim_binary) {
  ChildAnswer a;
  {
    py::gil_scoped_release unlocked;
    a = in_child([&] {
      if (!memsim_binary.empty()) set_memsim_executable(memsim_binary);
      std::vector<std::string> argv_text{"memsim"};
      argv_text.insert(argv_text.end(), args.begin(), args.end());
      std::vector<char*> argv;
      for (std::string& s : argv_text) argv.push_back(s.data());
      argv.push_back(nullptr);
      return cli_main(static_cast<int>(argv_text.size()), argv.data());
    });
  }
  return py::make_tuple(py::bytes(a.out), py::bytes(a.err), a.exit_code, a.signal);
}

}  // namespace
}  // namespace memsim

PYBIND11_MODULE(_memsim, m) {
  m.doc() = "memsim's C++ half: each call runs in a forked child process (see python/memsim_module.cpp)";
  m.attr("version") = MEMSIM_VERSION;
  m.def("run", &memsim::run_request, py::arg("request"));
  m.def("write", &memsim::write_request, py::arg("request"), py::arg("out_dir"), py::arg("outputs"),
        py::arg("trace_format"));
  m.def("cli", &memsim::cli, py::arg("args"), py::arg("memsim_binary") = "");
}
