#pragma once
// The grid of ranks a parallel step runs on: named dimensions, innermost first, and the one
// place where a rank's number, its coordinates and its process groups are worked out.
//
// Megatron-LM numbers its ranks tensor-parallel innermost, then context-parallel, then
// data-parallel, then pipeline stages (its order "tp-cp-ep-dp-pp"):
// rank = tp_rank + tp x (cp_rank + cp x (dp_rank + dp x stage)). Expert parallelism splits
// the data-parallel ranks into blocks of ep consecutive ones (the ranks that exchange
// tokens); the ranks holding the same experts are every ep-th of them. So the mesh of a step is
//
//     tp (tp) x cp (cp) x ep (ep) x edp (dp / ep) x pp (pp)         innermost first
//
// and a data-parallel rank is ep_rank + ep x edp_rank. HSDP (FSDP's hybrid shard) splits the
// data-parallel ranks once more, into hdp replicas of the groups that shard the model state
// (consecutive ranks: a node), so the full mesh is
//
//     tp x cp x ep x edp (dp / ep / hdp) x hdp x pp              (hdp 1 without HSDP)
//
// Every process group is the set of ranks that differ from one rank only in some of the
// dimensions:
//
//     tp : {tp}    cp : {cp}    ep : {ep}    edp : {cp, edp, hdp}    dp : {cp, ep, edp, hdp}
//     dp_shard : {cp, ep, edp}    dp_replica : {hdp}    pp : {pp}
//
// The weights are replicated over the context-parallel ranks as over the data-parallel
// ones, so the groups that reduce gradients (dp, and edp for the experts') span cp too, as
// Megatron's data-parallel group "with context parallel" does; with cp 1 they are dp's.
// listed with the inner dimensions varying fastest (the ring order NCCL is given).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace memsim {

struct ParallelSettings;
struct ParallelLayout;

class Mesh {
 public:
  struct Dim {
    std::string name;
    std::uint32_t size = 1;
  };
  using Coords = std::vector<std::uint32_t>;  // one per dimension, in the mesh's order

  /// Dimensions innermost first; names unique, sizes at least 1 (std::invalid_argument
  /// otherwise: a mesh is built by the code, not read from a file).
  explicit Mesh(std::vector<Dim> dims);
  /// Megatron's order: tp, cp, ep, edp (dp / ep / replicas), hdp (replicas), pp.
  static Mesh megatron(std::uint32_t tp, std::uint32_t dp, std::uint32_t ep, std::uint32_t pp, std::uint32_t cp = 1,
                       std::uint32_t replicas = 1);
  static Mesh of(const ParallelSettings& s);
  static Mesh of(const ParallelLayout& layout);

  const std::vector<Dim>& dims() const { return dims_; }
  /// Ranks in all.
  std::uint32_t size() const { return size_; }
  /// The size of dimension `dim` (an unknown name: std::invalid_argument).
  std::uint32_t size(std::string_view dim) const;
  /// The product of the sizes of `dims` (the ranks of one such group).
  std::uint32_t size(const std::vector<std::string_view>& dims) const;

  std::uint32_t rank(const Coords& c) const;
  Coords coords(std::uint32_t rank) const;
  std::uint32_t coord(std::uint32_t rank, std::string_view dim) const;
  /// `rank` with its coordinate in `dim` set to `value`.
  std::uint32_t with(std::uint32_t rank, std::string_view dim, std::uint32_t value) const;
  /// `rank` with its coordinates in `dims` set to 0: the first rank of its group over them.
  std::uint32_t first(std::uint32_t rank, const std::vector<std::string_view>& dims) const;

  /// The ranks that differ from `rank` only in `dims`, the first dimension varying fastest
  /// in mesh order (so the group's ring order is the ranks' order).
  std::vector<std::uint32_t> group(const std::vector<std::string_view>& dims, std::uint32_t rank) const;
  /// The group of a named kind ("tp", "ep", "edp", "dp", "dp_shard", "dp_replica", "pp")
  /// around `rank`.
  std::vector<std::uint32_t> group(std::string_view kind, std::uint32_t rank) const;
  /// Every group of `dims`, each once, in order of their first rank.
  std::vector<std::vector<std::uint32_t>> groups(const std::vector<std::string_view>& dims) const;

  /// The dimensions a process group of kind `kind` spans: tp -> {tp}, dp -> {ep, edp}, ...;
  /// empty for a kind that is not a mesh group (a pipeline's point-to-point pair, a tied
  /// weight's shared group).
  static std::vector<std::string_view> dims_of(std::string_view kind);
  /// The dimensions within one pipeline stage (every one but pp): the ranks a stage's first
  /// rank stands for when ranks are symmetric.
  static const std::vector<std::string_view>& stage_dims();

 private:
  std::size_t index(std::string_view dim) const;
  std::vector<Dim> dims_;
  std::vector<std::uint32_t> stride_;
  std::uint32_t size_ = 1;
};

}  // namespace memsim
