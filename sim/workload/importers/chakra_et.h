#pragma once
// MLCommons Chakra execution traces: a stream of protobuf messages, each prefixed by its
// length as a varint — one GlobalMetadata, then the Nodes (schema in chakra_et.proto).
//
// How the file becomes a trace: every COMP, MEM and COMM node is an op; they run in an
// order that respects their data and control dependencies (file order among the ready
// ones). Dependencies on nodes the file does not hold (chakra_converter drops some) are
// left out, with a note.
// - Memory, when the nodes carry their tensors (chakra_converter's output from a PyTorch ET:
//   IOInfo `inputs`/`outputs`, Python-literal lists of [id, storage, offset, numel,
//   itemsize, device]): buffers are storages, as for the ET (pytorch_et.h); an output storage
//   that exists already is written in place when the node depends on its maker or reads it,
//   a new buffer otherwise. A host-side node (`is_cpu_op` 1) whose GPU kernels are nodes of
//   their own keeps its memory effects but no time (its kernels carry it).
// - Otherwise (converted from ASTRA-sim text or MSCCL, the microbenchmarks): a COMP node is
//   an op of `num_ops` FLOPs whose result is a buffer of `tensor_size` bytes; a MEM_LOAD
//   brings `tensor_size` bytes in, a MEM_STORE writes them out; a COMM_RECV or COMM_COLL
//   leaves `comm_size` bytes behind, a COMM_SEND none. A node reads the buffers of the nodes
//   it has data dependencies on.
// - COMM_COLL nodes are ops of the collective's kind (`comm_type`: all_reduce, all_gather,
//   ...), COMM_SEND/RECV of kind send/recv, with `comm_size` as their message_bytes and
//   `pg_name` as their group. `duration_micros` becomes the op's measured time.
// Problems are InputErrors naming the file and the node or byte.
#include <string>
#include <string_view>

#include "sim/workload/trace.h"

namespace memsim {

/// True when `head`, the first bytes of a file, look like a Chakra trace: a varint length,
/// then a well-formed GlobalMetadata (version and attributes), whatever its length.
bool looks_like_chakra_et(std::string_view head);

/// Converts the bytes of a Chakra trace; `source` (a path) names it in messages and `name`
/// names the trace (default: `source`'s file name without .et).
Trace import_chakra_et(const std::string& bytes, const std::string& source, const std::string& name = "");

}  // namespace memsim
