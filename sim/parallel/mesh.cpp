#include "sim/parallel/mesh.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "sim/workload/parallel.h"
#include "sim/workload/trace.h"

namespace memsim {

Mesh::Mesh(std::vector<Dim> dims) : dims_(std::move(dims)) {
  std::uint64_t size = 1;
  for (std::size_t i = 0; i < dims_.size(); ++i) {
    if (dims_[i].size == 0) throw std::invalid_argument(fmt::format("mesh dimension '{}' of size 0", dims_[i].name));
    for (std::size_t j = 0; j < i; ++j)
      if (dims_[j].name == dims_[i].name)
        throw std::invalid_argument(fmt::format("mesh dimension '{}' given twice", dims_[i].name));
    stride_.push_back(static_cast<std::uint32_t>(size));
    size *= dims_[i].size;
    if (size > UINT32_MAX) throw std::invalid_argument("a mesh of more than 2^32 ranks");
  }
  size_ = static_cast<std::uint32_t>(size);
}

Mesh Mesh::megatron(std::uint32_t tp, std::uint32_t dp, std::uint32_t ep, std::uint32_t pp, std::uint32_t cp,
                    std::uint32_t replicas) {
  tp = std::max<std::uint32_t>(1, tp);
  cp = std::max<std::uint32_t>(1, cp);
  dp = std::max<std::uint32_t>(1, dp);
  ep = std::max<std::uint32_t>(1, ep);
  pp = std::max<std::uint32_t>(1, pp);
  replicas = std::max<std::uint32_t>(1, replicas);
  if (dp % (ep * replicas) != 0)
    throw std::invalid_argument(fmt::format("ep {} x dp replicas {} does not divide dp {}", ep, replicas, dp));
  return Mesh({{"tp", tp}, {"cp", cp}, {"ep", ep}, {"edp", dp / ep / replicas}, {"hdp", replicas}, {"pp", pp}});
}

Mesh Mesh::of(const ParallelSettings& s) { return megatron(s.tp, s.dp, s.ep, s.pp, s.cp, s.dp_replicas()); }

Mesh Mesh::of(const ParallelLayout& l) { return megatron(l.tp, l.dp, l.ep, l.stages, l.cp, l.dp_replicas); }

std::size_t Mesh::index(std::string_view dim) const {
  for (std::size_t i = 0; i < dims_.size(); ++i)
    if (dims_[i].name == dim) return i;
  throw std::invalid_argument(fmt::format("no mesh dimension '{}'", dim));
}

std::uint32_t Mesh::size(std::string_view dim) const { return dims_[index(dim)].size; }

std::uint32_t Mesh::size(const std::vector<std::string_view>& dims) const {
  std::uint32_t n = 1;
  for (std::string_view d : dims) n *= size(d);
  return n;
}

std::uint32_t Mesh::rank(const Coords& c) const {
  if (c.size() != dims_.size())
    throw std::invalid_argument(fmt::format("{} coordinates for a mesh of {} dimensions", c.size(), dims_.size()));
  std::uint32_t r = 0;
  for (std::size_t i = 0; i < dims_.size(); ++i) {
    if (c[i] >= dims_[i].size)
      throw std::invalid_argument(fmt::format("coordinate {} past dimension '{}' of size {}", c[i], dims_[i].name,
                                              dims_[i].size));
    r += c[i] * stride_[i];
  }
  return r;
}

Mesh::Coords Mesh::coords(std::uint32_t rank) const {
  if (rank >= size_) throw std::invalid_argument(fmt::format("rank {} of a mesh of {}", rank, size_));
  Coords c(dims_.size());
  for (std::size_t i = 0; i < dims_.size(); ++i) c[i] = rank / stride_[i] % dims_[i].size;
  return c;
}

std::uint32_t Mesh::coord(std::uint32_t rank, std::string_view dim) const {
  const std::size_t i = index(dim);
  return rank / stride_[i] % dims_[i].size;
}

std::uint32_t Mesh::with(std::uint32_t rank, std::string_view dim, std::uint32_t value) const {
  Coords c = coords(rank);
  c[index(dim)] = value;
  return this->rank(c);
}

std::uint32_t Mesh::first(std::uint32_t rank, const std::vector<std::string_view>& dims) const {
  Coords c = coords(rank);
  for (std::string_view d : dims) c[index(d)] = 0;
  return this->rank(c);
}

std::vector<std::uint32_t> Mesh::group(const std::vector<std::string_view>& dims, std::uint32_t rank) const {
  // The dimensions in mesh order, so that the inner ones vary fastest whatever order they
  // were named in.
  std::vector<std::size_t> in;
  for (std::size_t i = 0; i < dims_.size(); ++i)
    for (std::string_view d : dims)
      if (dims_[i].name == d) in.push_back(i);
  for (std::string_view d : dims) index(d);  // an unknown name is an error
  Coords c = coords(first(rank, dims));
  std::vector<std::uint32_t> out;
  out.reserve(size(dims));
  while (true) {
    out.push_back(this->rank(c));
    std::size_t k = 0;
    for (; k < in.size(); ++k) {
      if (++c[in[k]] < dims_[in[k]].size) break;
      c[in[k]] = 0;
    }
    if (k == in.size()) return out;
  }
}

std::vector<std::uint32_t> Mesh::group(std::string_view kind, std::uint32_t rank) const {
  const std::vector<std::string_view> dims = dims_of(kind);
  if (dims.empty()) throw std::invalid_argument(fmt::format("'{}' is not a group of the mesh", kind));
  return group(dims, rank);
}

std::vector<std::vector<std::uint32_t>> Mesh::groups(const std::vector<std::string_view>& dims) const {
  std::vector<std::vector<std::uint32_t>> out;
  for (std::uint32_t r = 0; r < size_; ++r)
    if (first(r, dims) == r) out.push_back(group(dims, r));
  return out;
}

std::vector<std::string_view> Mesh::dims_of(std::string_view kind) {
  if (kind == "tp") return {"tp"};
  if (kind == "cp") return {"cp"};
  if (kind == "ep") return {"ep"};
  if (kind == "edp") return {"cp", "edp", "hdp"};
  if (kind == "dp") return {"cp", "ep", "edp", "hdp"};
  if (kind == "dp_shard") return {"cp", "ep", "edp"};
  if (kind == "dp_replica") return {"hdp"};
  if (kind == "pp") return {"pp"};
  return {};
}

const std::vector<std::string_view>& Mesh::stage_dims() {
  static const std::vector<std::string_view> dims{"tp", "cp", "ep", "edp", "hdp"};
  return dims;
}

}  // namespace memsim
