// The Chakra importer on files made here with the protobuf classes: the generator writes a
// GlobalMetadata and Nodes, each prefixed by its varint length, as Chakra's tools do.
#include <gtest/gtest.h>

#include <fstream>

#include "sim/core/error.h"
#include "sim/workload/importers/chakra_et.h"
#include "sim/workload/importers/chakra_et.pb.h"
#include "sim/workload/importers/importers.h"

using namespace memsim;
namespace pb = ChakraProtoMsg;

namespace {

void append_delimited(std::string& out, const google::protobuf::Message& m) {
  const std::string body = m.SerializeAsString();
  std::uint64_t n = body.size();
  do {
    unsigned char b = n & 0x7f;
    n >>= 7;
    if (n) b |= 0x80;
    out.push_back(static_cast<char>(b));
  } while (n);
  out += body;
}

pb::Node node(std::uint64_t id, const std::string& name, pb::NodeType type, std::vector<std::uint64_t> data_deps,
              std::vector<std::uint64_t> ctrl_deps, std::uint64_t duration_us,
              std::vector<std::pair<std::string, std::int64_t>> attrs) {
  pb::Node n;
  n.set_id(id);
  n.set_name(name);
  n.set_type(type);
  for (auto d : data_deps) n.add_data_deps(d);
  for (auto d : ctrl_deps) n.add_ctrl_deps(d);
  n.set_duration_micros(duration_us);
  for (const auto& [k, v] : attrs) {
    auto* a = n.add_attr();
    a->set_name(k);
    if (k == "num_ops")
      a->set_int64_val(v);
    else
      a->set_uint64_val(static_cast<std::uint64_t>(v));
  }
  return n;
}

// load -> matmul -> all-reduce -> store, plus a second matmul listed before the load it
// depends on, and a control dependency.
std::string sample() {
  std::string out;
  pb::GlobalMetadata meta;
  meta.set_version("0.0.4");
  append_delimited(out, meta);
  append_delimited(out, node(5, "mm2", pb::COMP_NODE, {1}, {}, 7, {{"num_ops", 2000000}, {"tensor_size", 1024}}));
  append_delimited(out, node(1, "load_x", pb::MEM_LOAD_NODE, {}, {}, 3, {{"tensor_size", 4096}}));
  append_delimited(out, node(2, "mm", pb::COMP_NODE, {1}, {}, 10, {{"num_ops", 1000000}, {"tensor_size", 8192}}));
  append_delimited(out, node(3, "allreduce", pb::COMM_COLL_NODE, {2}, {}, 20, {{"comm_size", 8192}}));
  append_delimited(out, node(4, "store_y", pb::MEM_STORE_NODE, {3, 5}, {2}, 0, {{"tensor_size", 8192}}));
  return out;
}

}  // namespace

TEST(ChakraEt, OpsDependenciesSizesAndDurations) {
  const std::string bytes = sample();
  EXPECT_TRUE(looks_like_chakra_et(bytes));
  const std::string path = std::string(::testing::TempDir()) + "memsim_chakra_" + std::to_string(::getpid()) + ".et";
  std::ofstream(path, std::ios::binary) << bytes;
  ASSERT_EQ(sniff_foreign_trace(path), find_importer("chakra"));
  Trace t = import_foreign_trace(path, find_importer("chakra"));
  std::remove(path.c_str());
  EXPECT_EQ(t.description, "memsim_chakra_" + std::to_string(::getpid()) + " (Chakra execution trace, version 0.0.4)");

  // Dependencies first, file order among the ready: load_x, mm2, mm, allreduce, store_y.
  ASSERT_EQ(t.ops.size(), 5u);
  const std::vector<std::string> names{"load_x", "mm2", "mm", "allreduce", "store_y"};
  for (std::size_t i = 0; i < names.size(); ++i) EXPECT_EQ(t.ops[i].name, names[i]);
  ASSERT_EQ(t.buffers.size(), 4u);
  EXPECT_EQ(t.buffers[0].bytes, 4096u);  // load_x.out
  EXPECT_EQ(t.buffers[1].bytes, 1024u);  // mm2.out
  EXPECT_EQ(t.buffers[2].bytes, 8192u);  // mm.out
  EXPECT_EQ(t.buffers[3].bytes, 8192u);  // allreduce.out
  using Ids = std::vector<BufferId>;
  EXPECT_EQ(t.ops[0].outputs, Ids{0});
  EXPECT_EQ(t.ops[1].inputs, Ids{0});
  EXPECT_EQ(t.ops[2].inputs, Ids{0});
  EXPECT_EQ(t.ops[3].inputs, Ids{2});
  EXPECT_EQ(t.ops[4].inputs, (Ids{3, 1}));  // data only: the control dependency carries nothing
  EXPECT_TRUE(t.ops[4].outputs.empty());
  EXPECT_DOUBLE_EQ(t.ops[2].flops, 1e6);
  EXPECT_DOUBLE_EQ(t.ops[1].flops, 2e6);
  EXPECT_DOUBLE_EQ(t.ops[3].bytes_moved, 8192);
  EXPECT_DOUBLE_EQ(*t.ops[2].measured_s, 10e-6);
  EXPECT_DOUBLE_EQ(*t.ops[3].measured_s, 20e-6);
  EXPECT_FALSE(t.ops[4].measured_s.has_value());
  Liveness l = compute_liveness(t);
  EXPECT_EQ(l.last_use[0], 2u);
  EXPECT_EQ(l.last_use[2], 3u);
  EXPECT_EQ(l.last_use[1], 4u);
}

TEST(ChakraEt, ErrorsNameTheNodeOrByte) {
  auto message = [](const std::string& bytes) {
    try {
      import_chakra_et(bytes, "t.et");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  // Cut three bytes off the last node (its length fits the one-byte prefix).
  const std::string good = sample();
  const std::size_t last_body = node(4, "store_y", pb::MEM_STORE_NODE, {3, 5}, {2}, 0, {{"tensor_size", 8192}})
                                    .SerializeAsString()
                                    .size();
  const std::size_t last_start = good.size() - 1 - last_body;
  EXPECT_EQ(message(good.substr(0, good.size() - 3)),
            "t.et: truncated: message 5 at byte " + std::to_string(last_start) + " declares " +
                std::to_string(last_body) + " bytes, but only " + std::to_string(last_body - 3) + " remain");
  std::string dangling;
  pb::GlobalMetadata meta;
  append_delimited(dangling, meta);
  append_delimited(dangling, node(1, "mm", pb::COMP_NODE, {9}, {}, 1, {{"num_ops", 10}}));
  EXPECT_EQ(message(dangling), "t.et: node 1 (mm): data_deps: no node 9 in the file");
  std::string cyclic;
  append_delimited(cyclic, meta);
  append_delimited(cyclic, node(1, "a", pb::COMP_NODE, {2}, {}, 1, {}));
  append_delimited(cyclic, node(2, "b", pb::COMP_NODE, {1}, {}, 1, {}));
  EXPECT_EQ(message(cyclic), "t.et: node 1 (a): its data dependencies form a cycle");
  EXPECT_EQ(message(std::string("\x05\x0a\x03", 3)), "t.et: truncated: message 0 at byte 0 declares 5 bytes, but only 2 remain");
  // A duration is checked as every trace's are (durations.h): 2^63 us is not a time an op takes.
  std::string forever;
  append_delimited(forever, meta);
  append_delimited(forever, node(1, "mm", pb::COMP_NODE, {}, {}, std::uint64_t{1} << 63, {{"num_ops", 10}}));
  EXPECT_EQ(message(forever), "t.et: node 1 (mm): duration_micros: expected a time in microseconds from 0 to "
                              "3.6e+09 (an hour), got 9223372036854775808");
}

namespace {

void attr_string(pb::Node& n, const std::string& name, const std::string& value) {
  auto* a = n.add_attr();
  a->set_name(name);
  a->set_string_val(value);
}
void attr_int(pb::Node& n, const std::string& name, std::int64_t value) {
  auto* a = n.add_attr();
  a->set_name(name);
  a->set_int64_val(value);
}

// What chakra_converter writes for a PyTorch ET: a metadata message longer than 127 bytes
// (its first byte is then printable), tensors only in the IOInfo strings, signed attributes,
// control dependencies on nodes it dropped and one that closes a cycle (a host op on the
// kernel it launched), and a collective with its kind and group.
std::string converted() {
  std::string out;
  pb::GlobalMetadata meta;
  for (const char* k : {"schema", "time", "pid", "start_ts", "finish_ts", "an attribute with a long name"}) {
    auto* a = meta.add_attr();
    a->set_name(k);
    a->set_string_val("1.0.1 and then some more words to pass 127 bytes");
  }
  append_delimited(out, meta);
  pb::Node host = node(10, "aten::mm(0)", pb::COMP_NODE, {}, {3, 12}, 300, {});  // 3: dropped; 12: its kernel
  attr_int(host, "is_cpu_op", 1);
  attr_int(host, "seq_id", -1);
  attr_string(host, "op_schema", "aten::mm(Tensor self, Tensor mat2) -> Tensor");
  host.mutable_inputs()->set_values("[[1, 100, 0, 8, 4, 'cuda:0'], [2, 101, 0, 12, 4, 'cuda:0']]");
  host.mutable_inputs()->set_shapes("[[2, 4], [4, 3]]");
  host.mutable_inputs()->set_types("['Tensor(float)', 'Tensor(float)']");
  host.mutable_outputs()->set_values("[[3, 102, 0, 6, 4, 'cuda:0']]");
  host.mutable_outputs()->set_shapes("[[2, 3]]");
  host.mutable_outputs()->set_types("['Tensor(float)']");
  append_delimited(out, host);
  pb::Node kernel = node(12, "volta_sgemm_64x64_nn", pb::COMP_NODE, {10}, {}, 4, {});
  attr_int(kernel, "is_cpu_op", 0);
  *kernel.mutable_inputs() = host.inputs();
  *kernel.mutable_outputs() = host.outputs();
  append_delimited(out, kernel);
  pb::Node ar = node(13, "ncclKernel_AllReduce_RING_LL_Sum_float", pb::COMM_COLL_NODE, {12}, {}, 9, {});
  attr_int(ar, "comm_type", 0);
  attr_int(ar, "comm_size", 24);
  attr_string(ar, "pg_name", "0");
  ar.mutable_inputs()->set_values("[[[3, 102, 0, 6, 4, 'cuda:0']]]");
  ar.mutable_inputs()->set_types("['GenericList[Tensor(float)]']");
  append_delimited(out, ar);
  return out;
}

}  // namespace

TEST(ChakraEt, ConverterOutputTensorsFromIoInfoAndTolerantDependencies) {
  const std::string bytes = converted();
  ASSERT_GE(static_cast<unsigned char>(bytes[0]), 0x20);  // the old sniff refused this
  EXPECT_TRUE(looks_like_chakra_et(bytes));
  EXPECT_TRUE(looks_like_chakra_et(bytes.substr(0, 40)));  // a head cut inside the metadata
  EXPECT_FALSE(looks_like_chakra_et("{\n  \"schema\": \"1.0.1\""));
  EXPECT_FALSE(looks_like_chakra_et("model: resnet\n"));
  Trace t = import_chakra_et(bytes, "c.et");
  ASSERT_EQ(t.ops.size(), 3u);
  EXPECT_EQ(t.ops[0].name, "aten::mm(0)");
  ASSERT_EQ(t.buffers.size(), 3u);
  EXPECT_EQ(t.buffers[0].bytes, 32u);  // storage100: 8 floats, resident
  EXPECT_EQ(t.buffers[0].producer, kNoOp);
  EXPECT_EQ(t.buffers[2].name, "storage102@10");
  EXPECT_EQ(t.buffers[2].bytes, 24u);
  using Ids = std::vector<BufferId>;
  EXPECT_EQ(t.ops[0].outputs, Ids{2});
  // The kernel writes what its host op allocated, and carries its work and its time; the host
  // op keeps the memory effects and takes no time.
  EXPECT_TRUE(t.ops[1].outputs.empty());
  EXPECT_EQ(t.ops[1].updates, Ids{2});
  EXPECT_EQ(t.ops[1].kind, "matmul");
  EXPECT_DOUBLE_EQ(t.ops[1].flops, 2 * 6 * 4);
  EXPECT_DOUBLE_EQ(*t.ops[1].measured_s, 4e-6);
  EXPECT_DOUBLE_EQ(*t.ops[0].measured_s, 0);
  EXPECT_DOUBLE_EQ(t.ops[0].flops, 0);
  // The collective: in place, its kind, size and group from the attributes.
  EXPECT_EQ(t.ops[2].kind, "all_reduce");
  EXPECT_EQ(t.ops[2].updates, Ids{2});
  EXPECT_EQ(t.ops[2].message_bytes, 24u);
  EXPECT_EQ(t.ops[2].group, "0");
  EXPECT_EQ(t.import_notes,
            (std::vector<std::string>{"1 dependencies on 1 nodes the file does not hold left out",
                                      "1 control dependencies that closed a cycle left out",
                                      "Chakra nodes do not say forward, backward or optimizer: every op counted as forward",
                                      "1 host-side ops whose GPU kernels are nodes of their own keep their memory effects "
                                      "but no time (measured 0 s, no work)"}));
}
