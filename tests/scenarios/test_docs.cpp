// The examples in README.md and docs/ run: every `build/memsim ...` line of the README
// succeeds, and the trace in docs/trace-format.md is a valid trace.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>

#include <nlohmann/json.hpp>

#include "cli.h"

namespace fs = std::filesystem;

namespace {

std::vector<std::string> readme_commands() {
  std::vector<std::string> cmds;
  std::istringstream in(slurp(std::string(MEMSIM_SOURCE_DIR) + "/README.md"));
  std::string line;
  const std::regex command(R"(^    build/memsim( [^#]*)?(#.*)?$)");
  std::smatch m;
  while (std::getline(in, line))
    if (std::regex_match(line, m, command)) {
      std::string args = m[1].str();
      while (!args.empty() && args.back() == ' ') args.pop_back();
      cmds.push_back(args);
    }
  return cmds;
}

}  // namespace

TEST(Docs, EveryReadmeCommandRuns) {
  const auto cmds = readme_commands();
  ASSERT_GE(cmds.size(), 10u);
  // Run them in a scratch folder that sees the presets as the README's reader would.
  fs::path dir = fs::path(::testing::TempDir()) / ("memsim_readme_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* sub : {"configs", "workloads"})
    fs::create_directory_symlink(fs::path(MEMSIM_SOURCE_DIR) / sub, dir / sub);
  for (const auto& args : cmds) {
    const std::string cmd = "cd '" + dir.string() + "' && '" + MEMSIM_BINARY + "'" + args +
                            " > /dev/null 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << "README command failed: memsim" << args;
  }
  fs::remove_all(dir);
}

TEST(Docs, TraceFormatExampleIsAValidTrace) {
  const std::string doc = slurp(std::string(MEMSIM_SOURCE_DIR) + "/docs/trace-format.md");
  const auto start = doc.find("```json\n");
  ASSERT_NE(start, std::string::npos);
  const auto end = doc.find("```", start + 8);
  const std::string example = doc.substr(start + 8, end - start - 8);
  ASSERT_TRUE(nlohmann::json::accept(example));
  fs::path file = fs::path(::testing::TempDir()) / ("memsim_doc_trace_" + std::to_string(::getpid()) + ".json");
  std::ofstream(file) << example;
  CliResult v = run_memsim("validate " + file.string());
  EXPECT_EQ(v.exit_code, 0) << v.err;
  CliResult r = run_memsim("run a100-40gb " + file.string() + " --json --out " + file.string() + ".out");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto s = nlohmann::json::parse(r.out);
  EXPECT_EQ(s["status"], "ok");
  // w + x + y live together (9216 B), plus the backward's 2048 B workspace.
  EXPECT_EQ(s["tiers"]["gpu0.hbm"]["peak_allocated_bytes"].get<std::uint64_t>(), 1024u + 4096 + 4096 + 2048);
  fs::remove(file);
  fs::remove_all(file.string() + ".out");
}

TEST(Docs, PlatformExampleIsAValidPlatform) {
  const std::string doc = slurp(std::string(MEMSIM_SOURCE_DIR) + "/docs/platforms.md");
  const auto start = doc.find("```yaml\n");
  ASSERT_NE(start, std::string::npos);
  const auto end = doc.find("```", start + 8);
  fs::path file = fs::path(::testing::TempDir()) / ("memsim_doc_platform_" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(file) << doc.substr(start + 8, end - start - 8);
  CliResult v = run_memsim("validate " + file.string());
  EXPECT_EQ(v.exit_code, 0) << v.err;
  CliResult r = run_memsim("run " + file.string() + " mlp --json --out " + file.string() + ".out");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["status"], "ok");
  fs::remove(file);
  fs::remove_all(file.string() + ".out");
}

// The sample output of README's tour is what `make run` prints now (its --out folder named
// out, as make run names it).
TEST(Docs, ReadmeSampleOutputIsTheDefaultRun) {
  const std::string readme = slurp(std::string(MEMSIM_SOURCE_DIR) + "/README.md");
  const std::string intro = "`make run` prints the verdict first";
  auto at = readme.find(intro);
  ASSERT_NE(at, std::string::npos) << "README.md has no line starting with " << intro;
  at = readme.find("\n\n", at) + 2;
  std::string sample;
  std::istringstream lines(readme.substr(at));
  for (std::string line; std::getline(lines, line) && line.starts_with("    ");) sample += line.substr(4) + "\n";
  ASSERT_FALSE(sample.empty());
  const fs::path dir = fs::path(::testing::TempDir()) / ("memsim_readme_sample_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::string printed;
  FILE* p = popen(("cd '" + dir.string() + "' && '" + MEMSIM_BINARY + "' run --out out").c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::array<char, 4096> buf;
  for (std::size_t n; (n = fread(buf.data(), 1, buf.size(), p)) > 0;) printed.append(buf.data(), n);
  EXPECT_EQ(pclose(p), 0);
  EXPECT_EQ(sample, printed) << "update README.md's sample output to what `memsim run --out out` prints";
  fs::remove_all(dir);
}
