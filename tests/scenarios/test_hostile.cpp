// Hostile input and hostile places to write (issue 19): whatever a user names, memsim ends
// with a located message and exit 1 (2 for a malformed command line), never a crash, a
// hang, a silent guess or a replaced device node. The cases that need a file system (a
// device, a FIFO, a full disk) are here; broken files are under tests/bad_inputs/.
#include <gtest/gtest.h>

#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <filesystem>
#include <thread>

#include "cli.h"

namespace fs = std::filesystem;

namespace {

std::string temp_dir(const std::string& name) {
  fs::path p = fs::path(::testing::TempDir()) / ("memsim_hostile_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

bool is_char_device(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISCHR(st.st_mode);
}

// Files a stopped or failed run must not leave: temporary files and empty stderr.txt.
std::vector<std::string> leftovers(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.find(".tmp") != std::string::npos ||
        (name == "stderr.txt" && fs::file_size(it->path(), ec) == 0))
      out.push_back(it->path().string());
  }
  return out;
}

// Waits until no process names `dir` on its command line (a stopped sweep's children, which
// die with it): a condition, not a fixed sleep, so a loaded machine only waits longer. Gives up,
// naming one, after 60,000 looks 10 ms apart (10 minutes at least).
void wait_for_processes_naming(const std::string& dir) {
  for (int round = 0; round < 60'000; ++round) {
    std::vector<std::string> alive;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator("/proc", ec)) {
      const std::string pid = e.path().filename().string();
      if (pid.find_first_not_of("0123456789") != std::string::npos || pid == std::to_string(::getpid())) continue;
      std::string cmdline = slurp(e.path().string() + "/cmdline");
      std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
      if (cmdline.find(dir) != std::string::npos && cmdline.find("memsim") != std::string::npos)
        alive.push_back(pid + ": " + cmdline);
    }
    if (alive.empty()) return;
    if (round == 60'000 - 1) {
      ADD_FAILURE() << "still running 10 minutes after its sweep was stopped:\n" << alive.front();
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

constexpr const char* kNotRegular = ", not a regular file; inputs are regular files (or '-' for standard input)\n";

}  // namespace

TEST(HostileInput, DevicesFifosAndFoldersAreRefusedBeforeAnythingIsRead) {
  const std::string dir = temp_dir("inputs");
  const std::string fifo = dir + "/pipe.yaml";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Each would hang (a FIFO with no writer, /dev/urandom) or fill memory (/dev/zero).
  for (const auto& [path, kind] : {std::pair<std::string, std::string>{"/dev/zero", "a character device"},
                                   {"/dev/urandom", "a character device"},
                                   {fifo, "a FIFO"},
                                   {dir, "a folder"}}) {
    CliResult r = run_memsim("validate " + path);
    EXPECT_EQ(r.exit_code, 1) << path;
    EXPECT_EQ(r.err, path + ": " + kind + kNotRegular) << path;
    CliResult run = run_memsim("run a100-40gb " + path + " --out " + dir + "/out");
    EXPECT_EQ(run.exit_code, 1) << path << ": " << run.err;
  }
}

TEST(HostileInput, AFileOverTheSizeLimitIsRefusedAndTheLimitCanBeRaised) {
  const std::string file = "configs/devices/a100-40gb.yaml";
  const auto size = fs::file_size(fs::path(MEMSIM_SOURCE_DIR) / file);
  const std::string message = file + ": " + std::to_string(size) +
                              " bytes, over the input size limit of 1024 bytes; raise it with "
                              "--max-input-size SIZE (or MEMSIM_MAX_INPUT_SIZE=SIZE)\n";
  CliResult r = run_memsim("validate --max-input-size 1KiB " + file);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, message);
  ::setenv("MEMSIM_MAX_INPUT_SIZE", "1KiB", 1);
  r = run_memsim("validate " + file);
  ::unsetenv("MEMSIM_MAX_INPUT_SIZE");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, message);
  r = run_memsim("validate --max-input-size 1MiB " + file);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // A size without a unit is no size (never a guess at bytes).
  r = run_memsim("validate --max-input-size 100 " + file);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "memsim: --max-input-size expects a size like '8GiB', got '100'\n");
}

TEST(HostileInput, ACompressedTraceInflatingPastTheLimitIsRefused) {
  const std::string dir = temp_dir("gzip");
  const std::string gz = dir + "/bomb.json.gz";
  // 16 MiB of zeros compress to about 16 KiB.
  ASSERT_EQ(std::system(("head -c 16777216 /dev/zero | gzip -c > '" + gz + "'").c_str()), 0);
  CliResult r = run_memsim("validate --max-input-size 1MiB " + gz);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, gz + ": inflates to over the input size limit of 1048576 bytes; raise it with "
                        "--max-input-size SIZE (or MEMSIM_MAX_INPUT_SIZE=SIZE)\n");
}

TEST(HostileInput, DashIsStandardInput) {
  CliResult r = run_memsim("validate - < configs/devices/a100-40gb.yaml");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "-: ok\n");
  r = run_memsim("validate - < tests/bad_inputs/negative_capacity.yaml");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "(standard input):7:38: devices.gpu0.tiers.hbm.capacity: expected a positive size like "
                   "'80GiB', got '-40GiB'\n");
}

TEST(HostileOutput, ADeviceNodeIsWrittenInPlaceNeverReplaced) {
  CliResult r = run_memsim("trace mlp -o /dev/null");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(is_char_device("/dev/null"));
  // A private node (where the machine lets us make one): the same, and nothing beside it.
  const std::string dir = temp_dir("node");
  const std::string node = dir + "/null";
  if (::mknod(node.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0)
    GTEST_SKIP() << "cannot make a device node here (not root): /dev/null was checked only";
  r = run_memsim("trace mlp -o " + node);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(is_char_device(node)) << "the node was replaced";
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1) << "a temporary file was left";
  r = run_memsim("run mlp --out " + dir + " --json");  // an output folder of one node: files beside it
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(is_char_device(node));
}

TEST(HostileOutput, AFifoIsWrittenToWhenReadAndRefusedWithoutAReader) {
  const std::string dir = temp_dir("fifo");
  const std::string fifo = dir + "/trace.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  CliResult r = run_memsim("trace mlp -o " + fifo);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, fifo + ": a FIFO with no reader; start its reader first\n");
  r = run_memsim("trace mlp -o " + fifo + " & cat " + fifo + " > " + dir + "/got.json; wait");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(slurp(dir + "/got.json").find("\"memsim-trace\""), std::string::npos);
  struct stat st {};
  ASSERT_EQ(::stat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "the FIFO was replaced";
}

TEST(HostileOutput, AFolderIsRefused) {
  const std::string dir = temp_dir("folder");
  CliResult r = run_memsim("trace mlp -o " + dir);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, dir + ": a folder; an output is a file (memsim replaces only regular files)\n");
}

TEST(HostileOutput, ARegularFileIsReplacedWholeAndALinkKeepsPointingAtIt) {
  const std::string dir = temp_dir("link");
  { std::ofstream(dir + "/real.json") << "old"; }
  fs::create_symlink("real.json", dir + "/link.json");
  CliResult r = run_memsim("trace mlp -o " + dir + "/link.json");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::is_symlink(dir + "/link.json"));
  EXPECT_NE(slurp(dir + "/real.json").find("\"memsim-trace\""), std::string::npos);
  EXPECT_TRUE(leftovers(dir).empty());
}

TEST(HostileOutput, AWriteErrorIsExitOneNamingThePath) {
  CliResult r = run_memsim("trace mlp -o /dev/full");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "/dev/full: cannot write: No space left on device\n");
  const std::string dir = temp_dir("stdout");
  r = run_memsim("run mlp --json --out " + dir + " > /dev/full");
  EXPECT_EQ(r.exit_code, 1);
  // After any notes of the run (a100-40gb's matmul efficiency keys time none of mlp's ops).
  EXPECT_TRUE(r.err.ends_with("(standard output): cannot write: No space left on device\n")) << r.err;
  r = run_memsim("trace mlp -o - > /dev/full");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "(standard output): cannot write: No space left on device\n");
}

// A sweep into a small tmpfs: it fills, the sweep stops (its workers joined, exit 1, the
// file named), and once there is room the same command finishes it.
TEST(HostileSweep, AFullDiskStopsTheSweepCleanlyAndItResumes) {
  const std::string dir = temp_dir("tmpfs");
  if (::mount("memsim-test", dir.c_str(), "tmpfs", 0, "size=256k") != 0)
    GTEST_SKIP() << "cannot mount a tmpfs here (needs root): " << std::strerror(errno);
  struct Unmount {
    std::string dir;
    ~Unmount() { ::umount2(dir.c_str(), MNT_DETACH); }
  } unmount{dir};
  const std::string sweep = dir + "/../full_disk_sweep.yaml";
  {
    std::ofstream f(sweep);
    // Every point's full output (a point writes only summary.json by default), so it fills.
    f << "devices: [a100-40gb]\nworkloads: [mlp]\noutputs: all\nset:\n  workload.batch: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]\n";
  }
  CliResult r = run_memsim("sweep " + sweep + " -j 2 --out " + dir + "/out");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find(": cannot write"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("No space left on device"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("run the same command to resume"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("terminate called"), std::string::npos) << r.err;
  ASSERT_EQ(::mount("memsim-test", dir.c_str(), "tmpfs", MS_REMOUNT, "size=64m"), 0) << std::strerror(errno);
  r = run_memsim("sweep " + sweep + " -j 2 --out " + dir + "/out");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const std::string results = slurp(dir + "/out/results.csv");
  EXPECT_EQ(std::count(results.begin(), results.end(), '\n'), 13) << results;
  std::size_t ok = 0;
  for (std::size_t at = results.find(",ok,"); at != std::string::npos; at = results.find(",ok,", at + 1)) ++ok;
  EXPECT_EQ(ok, 12u) << results;
  EXPECT_TRUE(leftovers(dir + "/out").empty());
}

// Stopped with SIGTERM while points run, then killed outright: neither leaves temporary
// files or empty stderr.txt behind once the sweep has been resumed.
TEST(HostileSweep, AStoppedSweepLeavesNoTemporaryFilesOrEmptyStderr) {
  const std::string dir = temp_dir("stopped");
  const std::string sweep = dir + "/sweep.yaml";
  {
    std::ofstream f(sweep);
    f << "devices: [a100-40gb]\nworkloads: [resnet50]\npolicies: [none, dtr, swap-lru]\nset:\n"
         "  workload.batch: [16, 32, 64, 128]\n";
  }
  for (const char* signal : {"TERM", "KILL"}) {
    CliResult r = run_memsim("sweep " + sweep + " -j 2 --out " + dir + "/out > /dev/null & pid=$!; sleep 1.5; kill -" +
                             signal + " $pid; wait $pid; true");
    if (std::string(signal) == "TERM") EXPECT_TRUE(leftovers(dir + "/out").empty()) << signal;
    wait_for_processes_naming(dir + "/out");  // its children die with the sweep
  }
  CliResult r = run_memsim("sweep " + sweep + " -j 2 --out " + dir + "/out");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(leftovers(dir + "/out").empty());
}

TEST(HostileRun, TheEngineStopsAtItsHorizonNamingTheOp) {
  CliResult r = run_memsim("run tests/scenarios/data/testbox.yaml tests/scenarios/data/hostile/endless.json "
                           "--set gpu0.compute.fp32=1KFLOPS --out " + temp_dir("horizon"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "tests/scenarios/data/hostile/endless.json:12:5: ops[1]: op 'huge' would end at 1e+17 s of "
                   "simulated time, past the engine's horizon of 1e+07 s (about 116 days): check the op's work "
                   "and the platform's rates\n");
}

TEST(HostileRun, NativeTraceDeviceAndStreamErrorsNameTheOpsLine) {
  CliResult r = run_memsim("run tests/scenarios/data/testbox.yaml tests/scenarios/data/hostile/stream3.json --out " +
                           temp_dir("stream"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "tests/scenarios/data/hostile/stream3.json:11:5: ops[0]: op 'late' runs on stream 3, but device "
                   "'gpu0' has 1 stream(s)\n");
  r = run_memsim("run tests/scenarios/data/testbox.yaml tests/scenarios/data/hostile/device2.json --out " +
                 temp_dir("device"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "tests/scenarios/data/hostile/device2.json:11:5: ops[0]: op 'far' runs on device 2, but platform "
                   "'testbox' has 1 device(s) that run ops\n");
}

TEST(HostileRun, ASetNamingATierTheDeviceLacksSaysItCameFromSet) {
  CliResult r = run_memsim("run --set gpu0.hbm9.capacity=12GiB --out " + temp_dir("set"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "--set gpu0.hbm9.capacity=12GiB: no tier 'hbm9' on gpu0 (tiers: hbm)\n");
  r = run_memsim("run --set gpu0.launch_overhead=1e300s --out " + temp_dir("set"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "--set gpu0.launch_overhead=1e300s: devices.gpu0.launch_overhead: expected a time from 0 to 1s, "
                   "got '1e300s'\n");
}

TEST(HostileUsage, CountsThatMeanNothingAreUsageErrorsNotDefaults) {
  const std::string out = temp_dir("usage");
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {"sweep configs/sweeps/policies.yaml -j 0 --list",
            "--jobs: expected a number of workers from 1 to 4096, got '0'\nRun with --help for more information.\n"},
           {"run --max-events -1 --out " + out,
            "--max-events: expected a number of events >= 0, got '-1'\nRun with --help for more information.\n"},
           {"run --devices '' --out " + out,
            "memsim: --devices '': give compute device names separated by commas (platform a100-40gb has gpu0)\n"},
           {"run --devices gpu0, --out " + out,
            "memsim: --devices 'gpu0,': give compute device names separated by commas (platform a100-40gb has "
            "gpu0)\n"},
           {"fit a100-40gb mlp --slowdown 0 --out " + out,
            "--slowdown: expected a factor >= 1 (like 1.25), got '0'\nRun with --help for more information.\n"},
       }) {
    CliResult r = run_memsim(args);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_EQ(r.err, message) << args;
  }
}
