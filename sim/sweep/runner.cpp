#include "sim/sweep/runner.h"

#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/core/files.h"
#include "sim/sweep/fit.h"
#include "sim/sweep/results.h"
#include "sim/sweep/store.h"
#include "sim/sweep/sweep.h"

namespace memsim {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// The signal that asked the sweep to stop (0: none). Set by the handler, read by the loop.
std::atomic<int> g_stop_signal{0};
extern "C" void on_stop_signal(int s) { g_stop_signal = s; }

// SIGINT and SIGTERM stop the sweep cleanly while it runs: children are stopped, finished
// points are kept, results.csv is written. The previous handlers come back afterwards.
class StopSignals {
 public:
  StopSignals() {
    g_stop_signal = 0;
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~StopSignals() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }

 private:
  struct sigaction old_int_ {}, old_term_ {};
};

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string duration_text(double s) {
  if (s < 60) return fmt::format("{:.0f}s", s);
  const auto t = static_cast<long>(s + 0.5);
  if (t < 3600) return fmt::format("{}:{:02}", t / 60, t % 60);
  return fmt::format("{}:{:02}:{:02}", t / 3600, t / 60 % 60, t % 60);
}

std::string point_label(const SweepSpec& spec, const SweepPoint& p) {
  std::string s = fmt::format("{} {} {}", spec.devices[p.device].name, spec.workloads[p.workload].name,
                              spec.policies[p.policy].name);
  for (std::size_t a = 0; a < spec.axes.size(); ++a)
    if (p.values[a]) s += fmt::format(" {}={}", spec.axes[a].key, *p.values[a]);
  return s;
}

// Points done, failed and oom, and time left: a bar redrawn in place on a terminal, one line
// per finished point otherwise.
class Progress {
 public:
  Progress(std::size_t total, bool tty) : total_(total), tty_(tty), start_(Clock::now()) {}

  void finished(const std::string& status, const std::string& label, double wall_s) {
    ++done_;
    if (status == "ok") ++ok_;
    if (status == "oom") ++oom_;
    if (status == "error") ++failed_;
    if (!tty_)
      std::cerr << fmt::format("[{}/{}] {:<5} {}  ({:.2f} s)\n", done_, total_, status, label, wall_s);
  }
  void draw(bool now = false) {
    if (!tty_ || total_ == 0) return;
    if (!now && seconds_since(last_draw_) < 0.1) return;
    last_draw_ = Clock::now();
    const int width = 30;
    const int filled = static_cast<int>(width * done_ / total_);
    std::string left = "?";
    if (done_ > 0) left = duration_text(seconds_since(start_) / done_ * (total_ - done_));
    std::cerr << fmt::format("\r\033[K[{}{}] {}/{}  ok {}  oom {}  failed {}  {} left",
                             std::string(filled, '#'), std::string(width - filled, '.'), done_,
                             total_, ok_, oom_, failed_, done_ == total_ ? "0s" : left)
              << std::flush;
  }
  void close() {
    if (tty_ && total_ > 0) {
      draw(true);
      std::cerr << "\n";
    }
  }
  std::size_t ok() const { return ok_; }
  std::size_t oom() const { return oom_; }
  std::size_t failed() const { return failed_; }

 private:
  std::size_t total_, done_ = 0, ok_ = 0, oom_ = 0, failed_ = 0;
  bool tty_;
  Clock::time_point start_, last_draw_{};
};

FitOptions fit_options(const SweepSpec& spec) {
  FitOptions o;
  if (spec.fit) {
    o.axis = spec.fit->axis;
    o.min = spec.fit->min;
    o.max = spec.fit->max;
    o.slowdown = spec.fit->slowdown;
  }
  return o;
}

std::string results_text(const ResultsTable& table, const std::vector<std::optional<std::string>>& rows) {
  std::string text = table.header();
  for (const auto& r : rows)
    if (r) text += *r;
  return text;
}

void copy_tree(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::create_directories(to.parent_path(), ec);
  fs::remove_all(to, ec);
  // Hard links where the file system allows (files are only ever replaced by rename, never
  // rewritten in place, so the copies stay right); a plain copy elsewhere.
  fs::copy(from, to, fs::copy_options::recursive | fs::copy_options::create_hard_links, ec);
  if (ec) {
    fs::remove_all(to, ec);
    fs::copy(from, to, fs::copy_options::recursive, ec);
    if (ec) throw InputError(fmt::format("{}: cannot copy to {}: {}", from.string(), to.string(), ec.message()));
  }
}

bool same_folder(const std::string& a, const std::string& b) {
  std::error_code ec;
  return fs::equivalent(a, b, ec);
}

void print_list(const SweepSpec& spec, const std::vector<const SweepPoint*>& points) {
  std::vector<std::string> head{"#", "id", "device", "workload", "policy"};
  for (const auto& a : spec.axes) head.push_back(a.key);
  std::vector<std::vector<std::string>> table{head};
  for (const SweepPoint* p : points) {
    std::vector<std::string> row{std::to_string(p->index + 1), p->run.id, spec.devices[p->device].name,
                                 spec.workloads[p->workload].name, spec.policies[p->policy].name};
    for (const auto& v : p->values) row.push_back(v ? *v : "-");
    table.push_back(std::move(row));
  }
  std::vector<std::size_t> width(head.size(), 0);
  for (const auto& row : table)
    for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  for (std::size_t r = 0; r < table.size(); ++r) {
    std::string line;
    for (std::size_t c = 0; c < table[r].size(); ++c) {
      const bool last = c + 1 == table[r].size();
      line += c == 0 ? fmt::format("{:>{}}", table[r][c], width[c])
                     : "  " + (last ? table[r][c] : fmt::format("{:<{}}", table[r][c], width[c]));
    }
    std::cout << line << "\n";
    if (r > 0 && !points[r - 1]->run.error.empty())
      std::cout << fmt::format("{:>{}}  error: {}\n", "", width[0], points[r - 1]->run.error);
  }
}

int merge(const SweepSpec& spec, const std::vector<SweepPoint>& points, Resolver& resolver,
          const SweepOptions& o, const std::string& out_dir) {
  for (const auto& d : o.merge)
    if (!fs::is_directory(d)) throw InputError(fmt::format("{}: no such folder to merge", d));
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) throw InputError(fmt::format("{}: cannot create output folder: {}", out_dir, ec.message()));
  ResultsTable table(spec, points);
  const FitOptions fopt = fit_options(spec);
  std::vector<std::optional<std::string>> rows(points.size());
  std::vector<std::unique_ptr<PointStore>> sources;
  for (const auto& d : o.merge) sources.push_back(std::make_unique<PointStore>(d, "", false));
  std::size_t missing = 0, found = 0;
  for (const auto& p : points) {
    if (!p.run.error.empty()) {
      rows[p.index] = table.row(p, {"error", p.run.error, {}, {}});
      continue;
    }
    std::optional<PointResult> best;
    const PointStore* from = nullptr;
    for (const auto& src : sources)
      if (auto s = src->stored(p.run.id); s && (!best || (best->status == "error" && s->status != "error"))) {
        best = std::move(s);
        from = src.get();
      }
    if (!best) {
      ++missing;
      continue;
    }
    ++found;
    if (!same_folder(from->out_dir(), out_dir))
      copy_tree(from->point_dir(p.run.id), fs::path(out_dir) / "points" / p.run.id);
    RowResult r{best->status, best->error, best->summary, {}};
    if (spec.fit && p.fit_base) {
      const std::string fid = fit_id(*p.fit_base, fopt, resolver);
      for (const auto& src : sources)
        if (auto f = src->stored_fit(fid)) {
          r.fit = FitResult::from_json(*f);
          if (!same_folder(src->out_dir(), out_dir)) PointStore(out_dir, "", false).store_fit(fid, *f);
          break;
        }
    }
    rows[p.index] = table.row(p, r);
  }
  write_output_file(out_dir + "/results.csv", results_text(table, rows));
  std::cout << fmt::format("merged {} of {} points from {} folder{} into {}/results.csv\n", found,
                           points.size(), o.merge.size(), o.merge.size() == 1 ? "" : "s", out_dir);
  if (missing) {
    std::cerr << fmt::format("memsim: {} of {} points have no result in the merged folders\n",
                             missing, points.size());
    return 1;
  }
  return 0;
}

struct Completion {
  std::size_t index = 0;
  std::string row;
  std::string status;  // ok | oom | error | interrupted
  bool ran = false;
  bool fit_failed = false;
  double wall_s = 0;
};

int run(const SweepSpec& spec, const std::vector<SweepPoint>& points, Resolver& resolver,
        const SweepOptions& o, const std::string& out_dir, int shard, int shards,
        const std::string& shard_origin) {
  const auto start = Clock::now();
  std::error_code ec;
  fs::create_directories(fs::path(out_dir) / "points", ec);
  if (ec) throw InputError(fmt::format("{}: cannot create output folder: {}", out_dir, ec.message()));
  PointStore store(out_dir, o.memsim, o.force);
  store.set_outputs(spec.outputs);
  const ResultsTable table(spec, points);
  const FitOptions fopt = fit_options(spec);
  const std::vector<const SweepPoint*> selected =
      shards ? shard_points(points, shard, shards) : shard_points(points, 1, 1);
  std::vector<char> chosen(points.size(), 0);
  for (const SweepPoint* p : selected) chosen[p->index] = 1;

  // What is there already: finished points of this selection are skipped; results other
  // shards left in a shared folder go into results.csv too.
  std::vector<std::optional<std::string>> rows(points.size());
  std::vector<const SweepPoint*> todo;
  std::size_t already = 0, unresolved = 0;
  for (const auto& p : points) {
    const bool mine = chosen[p.index];
    if (!p.run.error.empty()) {
      if (mine) {
        rows[p.index] = table.row(p, {"error", p.run.error, {}, {}});
        ++unresolved;
      }
      continue;
    }
    const bool fresh = o.force && mine;
    std::optional<PointResult> s = fresh ? std::nullopt : store.stored(p.run.id);
    std::optional<FitResult> fit;
    bool fit_done = true;
    if (spec.fit && p.fit_base) {
      auto f = fresh ? std::nullopt : store.stored_fit(fit_id(*p.fit_base, fopt, resolver));
      if (f) fit = FitResult::from_json(*f);
      fit_done = f.has_value();
    }
    const bool finished = s && s->status != "error" && fit_done;
    if (finished || (s && !mine)) rows[p.index] = table.row(p, {s->status, s->error, s->summary, fit});
    if (!mine) continue;
    if (finished)
      ++already;
    else
      todo.push_back(&p);
  }

  const int jobs = default_jobs(o.jobs);
  const std::string where =
      shards ? fmt::format("{}, shard {}/{}{} ({} of {} points)", spec.file, shard, shards,
                           shard_origin.empty() ? "" : " from " + shard_origin, selected.size(),
                           points.size())
             : fmt::format("{} ({} points)", spec.file, points.size());
  std::cerr << fmt::format("sweep {}: {} already done, {} to run with {} worker{}\n", where, already,
                             todo.size(), jobs, jobs == 1 ? "" : "s");

  Progress progress(todo.size(), isatty(STDERR_FILENO));
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<Completion> queue;
  std::atomic<std::size_t> next{0};
  const int workers = static_cast<int>(std::min<std::size_t>(jobs, todo.size()));
  int running = workers;
  // A write that fails (a full disk) stops the sweep: what is stored stays, and the same
  // command resumes once there is room. The first such error is the one reported.
  std::exception_ptr write_error;
  auto stop_for = [&](std::exception_ptr e) {
    {
      std::lock_guard lock(mutex);
      if (!write_error) write_error = e;
    }
    store.interrupt(SIGTERM);
  };
  auto process = [&](const SweepPoint& p) {
    Completion c;
    c.index = p.index;
    try {
      PointResult pr = store.get(p.run);
      c.ran = pr.ran;
      c.wall_s = pr.wall_s;
      c.status = pr.status;
      if (pr.status == "interrupted") return c;
      RowResult r{pr.status, pr.error, std::move(pr.summary), {}};
      if (spec.fit && p.fit_base) {
        r.fit = run_fit(*p.fit_base, fopt, resolver, store);
        if (!r.fit->error.empty()) {
          if (store.interrupted()) {
            c.status = "interrupted";
            return c;
          }
          c.fit_failed = true;
        }
      }
      c.row = table.row(p, r);
    } catch (const OutputError&) {
      stop_for(std::current_exception());
      c.status = "interrupted";
    } catch (const std::exception& e) {
      c.status = "error";
      c.row = table.row(p, {"error", e.what(), {}, {}});
    }
    return c;
  };
  std::vector<std::thread> threads;
  {
    StopSignals signals;
    for (int w = 0; w < workers; ++w)
      threads.emplace_back([&] {
        while (!store.interrupted()) {
          const std::size_t i = next++;
          if (i >= todo.size()) break;
          Completion c = process(*todo[i]);
          std::lock_guard lock(mutex);
          queue.push_back(std::move(c));
          cv.notify_all();
        }
        std::lock_guard lock(mutex);
        --running;
        cv.notify_all();
      });

    // The main thread stops children on a signal, records completions, rewrites
    // results.csv (throttled so rewriting never costs more than about a tenth of the time)
    // and draws the progress.
    auto last_write = Clock::now();
    double write_cost = 0;
    bool dirty = false;
    std::size_t fit_failures = 0;
    try {
      while (true) {
        std::deque<Completion> batch;
        bool all_done;
        {
          std::unique_lock lock(mutex);
          cv.wait_for(lock, std::chrono::milliseconds(100), [&] { return !queue.empty() || running == 0; });
          batch.swap(queue);
          all_done = running == 0 && queue.empty();
        }
        if (g_stop_signal && !store.interrupted()) store.interrupt(SIGTERM);
        for (auto& c : batch) {
          if (c.status == "interrupted") continue;
          rows[c.index] = std::move(c.row);
          dirty = true;
          fit_failures += c.fit_failed;
          progress.finished(c.status, point_label(spec, points[c.index]), c.wall_s);
        }
        if (dirty && !all_done && seconds_since(last_write) >= 10 * write_cost) {
          const auto t = Clock::now();
          write_output_file(out_dir + "/results.csv", results_text(table, rows));
          write_cost = seconds_since(t);
          last_write = Clock::now();
          dirty = false;
        }
        progress.draw();
        if (all_done) break;
      }
    } catch (const OutputError&) {
      stop_for(std::current_exception());
    }
    for (auto& t : threads) t.join();
    if (write_error) {
      progress.close();
      try {
        std::rethrow_exception(write_error);
      } catch (const OutputError& e) {
        throw OutputError(fmt::format("{}\nmemsim: sweep stopped; finished points are kept in {}: make room and run "
                                      "the same command to resume",
                                      e.what(), out_dir));
      }
    }
    // Always: a sweep killed between two rewrites left results.csv behind its points.
    write_output_file(out_dir + "/results.csv", results_text(table, rows));
    progress.close();

    const double wall = seconds_since(start);
    const double in_children = store.child_seconds();
    nlohmann::ordered_json timing = {
        {"wall_s", wall},
        {"workers", jobs},
        {"points_run", todo.size()},
        {"child_runs", store.children_run()},
        {"child_wall_s", in_children},
        {"outside_fraction", wall > 0 ? 1 - in_children / (jobs * wall) : 0.0}};
    write_output_file(out_dir + "/timing.json", timing.dump(2) + "\n");

    if (g_stop_signal) {
      std::cerr << fmt::format("memsim: sweep interrupted; finished points are kept in {}: run the "
                               "same command to resume\n",
                               out_dir);
      return 128 + g_stop_signal;
    }
    const std::size_t failed = progress.failed() + unresolved;
    std::cout << fmt::format("sweep {}: {} already done, {} run: {} ok, {} oom, {} failed{} in {:.1f} s\n",
                             where, already, todo.size(), progress.ok(), progress.oom(), failed,
                             fit_failures ? fmt::format(", {} fits failed", fit_failures) : "", wall);
    std::cout << fmt::format("results: {}/results.csv\n", out_dir);
    if (failed || fit_failures) {
      std::cerr << fmt::format("memsim: {} point{} failed; see the error column of {}/results.csv\n",
                               failed + fit_failures, failed + fit_failures == 1 ? "" : "s", out_dir);
      return 1;
    }
  }
  return 0;
}

}  // namespace

int default_jobs(int requested) {
  if (requested > 0) return requested;
  if (const char* c = std::getenv("SLURM_CPUS_PER_TASK"))
    if (int n = std::atoi(c); n > 0) return n;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

void parse_shard(const std::string& text, int* shard, int* shards) {
  int i = 0, n = 0;
  char extra = 0;
  if (std::sscanf(text.c_str(), "%d/%d%c", &i, &n, &extra) != 2 || n < 1 || i < 1 || i > n)
    throw UsageError(fmt::format("--shard expects I/N with 1 <= I <= N (like 2/8), got '{}'", text));
  *shard = i;
  *shards = n;
}

bool shard_from_slurm(int* shard, int* shards, std::string* origin) {
  const char* id = std::getenv("SLURM_ARRAY_TASK_ID");
  const char* count = std::getenv("SLURM_ARRAY_TASK_COUNT");
  if (!id || !count) return false;
  const char* min = std::getenv("SLURM_ARRAY_TASK_MIN");
  const char* step = std::getenv("SLURM_ARRAY_TASK_STEP");
  const long k = std::atol(id), n = std::atol(count), lo = min ? std::atol(min) : 0,
             by = step && std::atol(step) > 0 ? std::atol(step) : 1;
  const long i = (k - lo) / by + 1;
  if (n < 1 || i < 1 || i > n)
    throw UsageError(fmt::format("SLURM_ARRAY_TASK_ID={} with SLURM_ARRAY_TASK_COUNT={}, "
                                 "SLURM_ARRAY_TASK_MIN={}, SLURM_ARRAY_TASK_STEP={}: not a shard "
                                 "of the array; pass --shard I/N",
                                 k, n, lo, by));
  *shard = static_cast<int>(i);
  *shards = static_cast<int>(n);
  *origin = fmt::format("SLURM_ARRAY_TASK_ID={}", k);
  return true;
}

int sweep_command(const SweepOptions& o) {
  const SweepSpec spec = load_sweep(o.file);
  Resolver resolver;
  std::size_t dropped = 0;
  const std::vector<SweepPoint> points = expand_sweep(spec, resolver, &dropped);
  const std::string out_dir =
      o.out_dir.empty() ? "out/" + fs::path(o.file).stem().string() : o.out_dir;

  if (o.list) {
    const auto shown = o.shards ? shard_points(points, o.shard, o.shards) : shard_points(points, 1, 1);
    std::cout << fmt::format("{}: {} points ({}){}{}\n", spec.file, points.size(), shape_text(spec),
                             dropped ? fmt::format(", {} repeats left out", dropped) : "",
                             o.shards ? fmt::format("; shard {}/{}: {} points", o.shard, o.shards, shown.size())
                                      : "");
    if (spec.fit)
      std::cout << fmt::format("each point also fits: the largest {} without oom{}\n", spec.fit->axis,
                               spec.fit->slowdown > 0
                                   ? fmt::format(", and within {}x of none's best time per unit",
                                                 spec.fit->slowdown)
                                   : "");
    print_list(spec, shown);
    return 0;
  }
  if (!o.merge.empty()) return merge(spec, points, resolver, o, out_dir);

  int shard = o.shard, shards = o.shards;
  std::string origin;
  if (!shards) shard_from_slurm(&shard, &shards, &origin);
  return run(spec, points, resolver, o, out_dir, shard, shards, origin);
}

}  // namespace memsim
