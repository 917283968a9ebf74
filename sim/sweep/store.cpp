#include "sim/sweep/store.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/core/files.h"

namespace memsim {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::optional<json> read_json(const std::string& path) {
  std::string text;
  try {
    text = read_input_file(path);  // a regular file: nothing put in its place can hang the sweep
  } catch (const InputError&) {
    return std::nullopt;
  }
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  return j;
}

std::string first_line(const std::string& path) {
  std::istringstream in(read_input_head(path, 1 << 16));
  std::string line;
  while (std::getline(in, line))
    if (line.find_first_not_of(" \t\r") != std::string::npos) return line;
  return "";
}

std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789-_./=:,+%@") == std::string::npos)
    return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// What a point's run leaves when it is stopped part-way (a sweep killed, a child stopped):
// temporary files of writes that never finished, and a stderr.txt with nothing in it. Only
// the point's own folder is cleaned, which no other process writes while this one runs it.
void remove_leftovers(const std::string& dir) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.find(".tmp.") != std::string::npos) fs::remove(it->path(), ec);
  }
  if (fs::is_regular_file(dir + "/stderr.txt", ec) && fs::file_size(dir + "/stderr.txt", ec) == 0)
    fs::remove(dir + "/stderr.txt", ec);
}

}  // namespace

PointStore::PointStore(std::string out_dir, std::string memsim, bool force)
    : out_dir_(std::move(out_dir)), memsim_(std::move(memsim)), force_(force) {}

std::string PointStore::point_dir(const std::string& id) const { return out_dir_ + "/points/" + id; }

std::optional<PointResult> PointStore::stored(const std::string& id) const {
  const std::string dir = point_dir(id);
  if (auto s = read_json(dir + "/summary.json"); s && s->contains("status")) {
    PointResult r;
    r.status = (*s)["status"].get<std::string>();
    r.summary = std::move(*s);
    return r;
  }
  if (auto e = read_json(dir + "/error.json")) {
    PointResult r;
    r.status = "error";
    r.error = e->value("error", "");
    return r;
  }
  return std::nullopt;
}

std::optional<json> PointStore::stored_fit(const std::string& id) const {
  return read_json(out_dir_ + "/fits/" + id + ".json");
}

void PointStore::store_fit(const std::string& id, const json& fit) {
  std::error_code ec;
  fs::create_directories(out_dir_ + "/fits", ec);
  write_output_file(out_dir_ + "/fits/" + id + ".json", fit.dump(2) + "\n");
}

PointResult PointStore::get(const ResolvedRun& run) {
  std::unique_lock lock(mutex_);
  while (true) {
    if (auto it = done_.find(run.id); it != done_.end()) {
      PointResult r = it->second;
      r.ran = false;
      if (on_result_) on_result_(run, r);
      return r;
    }
    if (!in_flight_.count(run.id)) break;
    changed_.wait(lock);
  }
  in_flight_.insert(run.id);
  lock.unlock();
  PointResult r;
  try {
    std::optional<PointResult> found = force_ ? std::nullopt : stored(run.id);
    if (found && found->status != "error")
      r = std::move(*found);
    else if (stop_)
      r.status = "interrupted";
    else
      r = run_child(run);
  } catch (...) {
    // Others waiting for this point (fits share points) must not wait for ever.
    lock.lock();
    in_flight_.erase(run.id);
    changed_.notify_all();
    throw;
  }
  lock.lock();
  in_flight_.erase(run.id);
  if (r.status != "interrupted") done_[run.id] = r;
  changed_.notify_all();
  if (on_result_) on_result_(run, r);
  return r;
}

PointResult PointStore::run_child(const ResolvedRun& run) {
  const std::string dir = point_dir(run.id);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw OutputError(fmt::format("{}: cannot create output folder: {}", dir, ec.message()));
  remove_leftovers(dir);  // of an earlier sweep that was killed
  fs::remove(dir + "/summary.json", ec);
  fs::remove(dir + "/error.json", ec);

  std::vector<std::string> args = run.request.run_args();
  args.push_back("--no-advice");  // a point that runs out of memory is an answer, not a question
  args.push_back("--outputs");     // what the sweep reads, unless it asks for more
  args.push_back(outputs_);
  args.push_back("--out");
  args.push_back(dir);
  std::string command = "memsim";
  json sets = json::array();
  for (std::size_t i = 0; i < args.size(); ++i) {
    command += " " + shell_quote(args[i]);
    if (i > 0 && args[i - 1] == "--set") sets.push_back(args[i]);
  }
  json point = {{"id", run.id},           {"device", run.request.device},
                {"workload", run.request.workload}, {"policy", run.request.policy},
                {"set", sets},            {"command", command}};
  write_output_file(dir + "/point.json", point.dump(2) + "\n");

  // Everything the child needs is prepared before fork(): between fork and exec only
  // async-signal-safe calls (this process has threads).
  args.insert(args.begin(), memsim_);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string err_path = dir + "/stderr.txt";
  const pid_t parent = ::getpid();
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) throw InputError(fmt::format("cannot start a process: {}", std::strerror(errno)));
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // dies with the sweep, even by SIGKILL
    if (::getppid() != parent) ::_exit(127);
    ::setpgid(0, 0);  // a terminal's Ctrl-C goes to the sweep, which stops its children
    const int null = ::open("/dev/null", O_RDWR);
    ::dup2(null, 0);
    ::dup2(null, 1);
    const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (err >= 0) ::dup2(err, 2);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  {
    std::lock_guard lock(mutex_);
    running_pids_.insert(pid);
  }
  if (stop_) ::kill(pid, SIGTERM);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  {
    std::lock_guard lock(mutex_);
    running_pids_.erase(pid);
    child_seconds_ += wall;
    ++children_run_;
  }

  PointResult r;
  r.ran = true;
  r.wall_s = wall;
  const bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (stop_ && !clean) {
    remove_leftovers(dir);
    r.status = "interrupted";
    return r;
  }
  if (clean) {
    if (auto s = stored(run.id); s && s->status != "error") {
      r.status = s->status;
      r.summary = std::move(s->summary);
      if (fs::file_size(err_path, ec) == 0) fs::remove(err_path, ec);
      return r;
    }
  }
  r.status = "error";
  const std::string line = first_line(err_path);
  if (WIFSIGNALED(status))
    r.error = fmt::format("crashed: signal {} ({}){}", WTERMSIG(status), strsignal(WTERMSIG(status)),
                          line.empty() ? "" : ": " + line);
  else if (clean)
    r.error = "memsim run wrote no summary.json";
  else if (WEXITSTATUS(status) == 127 && line.empty())
    r.error = fmt::format("cannot run {}", memsim_);
  else
    r.error = line.empty() ? fmt::format("memsim run exited with code {}", WEXITSTATUS(status)) : line;
  // The child could not write its outputs (a full disk): the sweep stops rather than record
  // every point after this one as failed; resuming reruns this one.
  if (!clean && r.error.find(": cannot write") != std::string::npos) throw OutputError(r.error);
  json err = {{"status", "error"}, {"error", r.error}};
  if (WIFSIGNALED(status))
    err["signal"] = WTERMSIG(status);
  else
    err["exit_code"] = WEXITSTATUS(status);
  write_output_file(dir + "/error.json", err.dump(2) + "\n");
  return r;
}

void PointStore::interrupt(int signal) {
  stop_ = true;
  std::lock_guard lock(mutex_);
  for (int pid : running_pids_) {
    ::kill(-pid, signal);
    ::kill(pid, signal);
  }
}

double PointStore::child_seconds() const {
  std::lock_guard lock(mutex_);
  return child_seconds_;
}

std::size_t PointStore::children_run() const {
  std::lock_guard lock(mutex_);
  return children_run_;
}

}  // namespace memsim
