#pragma once
// MLCommons Chakra execution traces: a stream of protobuf messages, each prefixed by its
// length as a varint — one GlobalMetadata, then the Nodes (schema in chakra_et.proto).
//
// How the file becomes a trace: nodes run in an order that respects their data and control
// dependencies (file order among the ready ones). A COMP node is an op of `num_ops` FLOPs
// whose result is a buffer of `tensor_size` bytes; a MEM_LOAD brings `tensor_size` bytes in
// (a buffer), a MEM_STORE writes them out; a COMM_RECV or COMM_COLL leaves `comm_size` bytes
// behind, a COMM_SEND none. A node reads the buffers of the nodes it has data dependencies
// on; a buffer dies after its last reader. `duration_micros` becomes the op's measured time.
// Problems are InputErrors naming the file and the node or byte.
#include <string>
#include <string_view>

#include "sim/workload/trace.h"

namespace memsim {

/// True when `head`, the first bytes of a file, look like a Chakra trace: a varint length
/// and then a GlobalMetadata field.
bool looks_like_chakra_et(std::string_view head);

/// Converts the bytes of a Chakra trace; `source` (a path) names it in messages and its file
/// name (without .et) names the trace.
Trace import_chakra_et(const std::string& bytes, const std::string& source);

}  // namespace memsim
