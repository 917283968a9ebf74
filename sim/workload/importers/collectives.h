#pragma once
// The names collectives go by in traces (c10d::allreduce_, nccl:all_gather, record_param_comms'
// "all_to_allv", Chakra's CollectiveCommType) and the memsim op kind of each.
#include <cstdint>
#include <string>
#include <string_view>

namespace memsim {

/// "c10d::allreduce_", "nccl:all_reduce", "allreduce" -> "all_reduce"; "all_to_allv" ->
/// "all_to_all"; "wait" and "barrier" as they are; empty when the name is no collective.
std::string collective_kind(std::string_view name);

/// Chakra's CollectiveCommType (ALL_REDUCE = 0 ... BARRIER = 9) -> the op kind; empty when
/// out of range.
std::string chakra_collective_kind(std::int64_t comm_type);

}  // namespace memsim
