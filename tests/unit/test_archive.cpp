// Trace files as users have them: gzip (one member or several), tar (ustar, GNU long names,
// pax records, macOS metadata members) and tar.gz, built here byte by byte.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <zlib.h>

#include "sim/core/error.h"
#include "sim/workload/importers/archive.h"

using namespace memsim;

namespace {

std::string gzip(const std::string& data) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, data.size()) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// One tar header block for `name` (type '0' file unless given), with its checksum.
std::string tar_header(const std::string& name, std::size_t size, char type = '0') {
  std::string h(512, '\0');
  h.replace(0, std::min<std::size_t>(name.size(), 100), name.substr(0, 100));
  auto octal = [&](std::size_t at, std::size_t width, std::uint64_t v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%0*llo", static_cast<int>(width - 1), static_cast<unsigned long long>(v));
    h.replace(at, width - 1, buf);
  };
  octal(100, 8, 0644);
  octal(108, 8, 0);
  octal(116, 8, 0);
  octal(124, 12, size);
  octal(136, 12, 0);
  h[156] = type;
  h.replace(257, 6, std::string("ustar\0", 6));
  h.replace(263, 2, "00");
  h.replace(148, 8, "        ");
  std::uint64_t sum = 0;
  for (unsigned char c : h) sum += c;
  char buf[16];
  std::snprintf(buf, sizeof buf, "%06llo", static_cast<unsigned long long>(sum));
  h.replace(148, 6, buf);
  h[154] = '\0';
  h[155] = ' ';
  return h;
}

std::string tar_member(const std::string& name, const std::string& data, char type = '0') {
  std::string out = tar_header(name, data.size(), type) + data;
  out.resize((out.size() + 511) / 512 * 512, '\0');
  return out;
}

std::string tar_end() { return std::string(1024, '\0'); }

class ArchiveFiles : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const std::string& bytes) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  void SetUp() override {
    dir_ = std::string(::testing::TempDir()) + "memsim_archive_" + std::to_string(::getpid());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

std::string message(const std::string& path) {
  try {
    read_trace_file(path);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_F(ArchiveFiles, PlainFileAsItIs) {
  const std::string path = write("t.json", "{\"schema\": \"1.0.1\"}");
  const TraceFile f = read_trace_file(path);
  EXPECT_EQ(f.bytes, "{\"schema\": \"1.0.1\"}");
  EXPECT_EQ(f.source, path);
  EXPECT_EQ(f.name, "t.json");
  EXPECT_TRUE(f.notes.empty());
  EXPECT_GE(f.bytes.capacity(), f.bytes.size() + 64);  // simdjson's padding
  EXPECT_EQ(read_trace_head(path, 5), "{\"sch");
}

TEST_F(ArchiveFiles, GzipOneMemberAndConcatenatedMembers) {
  std::string big(300000, 'x');
  for (std::size_t i = 0; i < big.size(); i += 7) big[i] = static_cast<char>('a' + i % 26);
  const std::string one = write("t.json.gz", gzip(big));
  const TraceFile f = read_trace_file(one);
  EXPECT_EQ(f.bytes, big);
  EXPECT_EQ(f.name, "t.json");
  EXPECT_EQ(read_trace_head(one, 10), big.substr(0, 10));
  // `cat a.gz b.gz > c.gz` is a gzip file too.
  const std::string two = write("two.gz", gzip("first,") + gzip("second"));
  EXPECT_EQ(read_trace_file(two).bytes, "first,second");
}

TEST_F(ArchiveFiles, CorruptAndTruncatedGzipNameTheFile) {
  const std::string good = gzip(std::string(100000, 'q') + "tail");
  const std::string cut = write("cut.gz", good.substr(0, good.size() / 2));
  EXPECT_EQ(message(cut), cut + ": truncated gzip data: the compressed stream ends after " +
                              std::to_string(good.size() / 2) + " bytes");
  std::string bad = good;
  bad[12] ^= 0x55;
  bad[13] ^= 0x55;
  const std::string corrupt = write("bad.gz", bad);
  EXPECT_NE(message(corrupt).find(corrupt + ": compressed byte "), std::string::npos) << message(corrupt);
  EXPECT_NE(message(corrupt).find("corrupt gzip data"), std::string::npos) << message(corrupt);
  EXPECT_EQ(read_trace_head(corrupt, 100), "");  // sniffing never throws
}

TEST_F(ArchiveFiles, TarWithOneTraceSkipsMetadataAndFolders) {
  const std::string tar = tar_member("dir/", "", '5') + tar_member("dir/._t.json", "apple double") +
                          tar_member("__MACOSX/dir/t.json", "resource fork") + tar_member("dir/t.json", "{\"a\": 1}") +
                          tar_end();
  const std::string path = write("t.tar", tar);
  const TraceFile f = read_trace_file(path);
  EXPECT_EQ(f.bytes, "{\"a\": 1}");
  EXPECT_EQ(f.source, path + ":dir/t.json");
  EXPECT_EQ(f.name, "t.json");
  EXPECT_TRUE(f.notes.empty());
  EXPECT_EQ(archive_members(path), std::vector<std::string>{"dir/t.json"});
  // The same, compressed: .tar.gz and .tgz.
  const std::string tgz = write("t.tgz", gzip(tar));
  EXPECT_EQ(read_trace_file(tgz).bytes, "{\"a\": 1}");
  EXPECT_EQ(read_trace_head(tgz, 4), "{\"a\"");
}

TEST_F(ArchiveFiles, LongNamesFromGnuAndPaxRecords) {
  const std::string long_name = std::string(120, 'n') + ".json";
  std::string pax_record = " path=" + std::string(130, 'p') + ".json\n";
  pax_record = std::to_string(pax_record.size() + 3) + pax_record;  // the length counts itself
  const std::string tar = tar_member("././@LongLink", long_name + '\0', 'L') + tar_member("short", "gnu") +
                          tar_member("PaxHeader", pax_record, 'x') + tar_member("short2", "pax") + tar_end();
  const std::string path = write("long.tar", tar);
  EXPECT_EQ(archive_members(path), (std::vector<std::string>{long_name, std::string(130, 'p') + ".json"}));
  EXPECT_EQ(read_trace_file(path + ":" + long_name).bytes, "gnu");
}

TEST_F(ArchiveFiles, SeveralMembersTheFirstByNameUnlessOneIsNamed) {
  const std::string tar = tar_member("ranks/rank_2.json", "two") + tar_member("ranks/rank_0.json", "zero") +
                          tar_member("ranks/rank_1.json", "one") + tar_end();
  const std::string path = write("ranks.tar.gz", gzip(tar));
  const TraceFile f = read_trace_file(path);
  EXPECT_EQ(f.bytes, "zero");
  ASSERT_EQ(f.notes.size(), 1u);
  EXPECT_EQ(f.notes[0], path + " holds 3 files (ranks/rank_0.json, ranks/rank_1.json, ranks/rank_2.json); read "
                               "ranks/rank_0.json, the first by name; name another as " + path + ":MEMBER");
  EXPECT_EQ(read_trace_file(path + ":ranks/rank_2.json").bytes, "two");
  EXPECT_EQ(read_trace_file(path + ":rank_1.json").bytes, "one");  // by file name
  EXPECT_TRUE(trace_file_exists(path + ":rank_1.json"));
  EXPECT_EQ(message(path + ":rank_9.json"), path + ": the archive has no member 'rank_9.json' (it holds: "
                                                   "ranks/rank_0.json, ranks/rank_1.json, ranks/rank_2.json)");
  EXPECT_EQ(message(dir_ + "/missing.tar.gz"), dir_ + "/missing.tar.gz: cannot read the file");
}

TEST_F(ArchiveFiles, CorruptTarNamesTheHeader) {
  std::string tar = tar_member("a.json", "aaaa") + tar_member("b.json", "bbbb") + tar_end();
  tar[512 * 2 + 10] ^= 1;  // inside b's header
  const std::string path = write("bad.tar", tar);
  EXPECT_EQ(message(path), path + ": tar header at byte 1024: checksum mismatch (not a tar archive, or corrupt)");
  const std::string cut = tar_member("a.json", std::string(5000, 'a'));
  const std::string short_path = write("cut.tar", cut.substr(0, 2048));
  EXPECT_EQ(message(short_path), short_path + ": truncated tar archive: member 'a.json' at byte 0 declares 5000 "
                                              "bytes, but only 1536 remain");
}
