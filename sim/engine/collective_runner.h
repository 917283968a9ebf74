#pragma once
// The engine's collectives: which ops run over the network and on which stream, and running
// one. Every simulated member of the group waits for the last to arrive (NCCL's kernel waits
// for its peers); the last runs the phases of the algorithm the platform chooses
// (sim/collectives/) as SimGrid communications between the ranks' memories along the
// platform's routes, with NCCL's protocol costs where the platform gives them. Part of the
// engine: it includes SimGrid.
#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "sim/collectives/collectives.h"
#include "sim/core/condition.h"
#include "sim/engine/sg_platform.h"
#include "sim/platform/platform.h"
#include "sim/workload/trace.h"

namespace memsim {

class CollectiveRunner {
 public:
  /// What the runner needs of the simulation that drives it.
  class Driver {
   public:
    virtual double now_s() const = 0;
    /// Executes the time the calling stream deferred, before it blocks.
    virtual void flush() = 0;
    /// Blocks the calling stream until `done` holds (or the run stopped).
    virtual void wait_until(Condition done, std::uint32_t on = kAnyDevice) = 0;
    virtual void notify() = 0;
    virtual bool stopped() const = 0;
    /// Throws the error of `op` ending at `end_s`, past the engine's horizon, when it is.
    virtual void past_horizon(double end_s, OpId op) const = 0;
    /// Counts `bytes` on the links of the route from tier `from` to tier `to`.
    virtual void count_route(std::size_t from, std::size_t to, std::uint64_t bytes) = 0;
    /// Sleeps the calling stream until `end_s`, an end the other streams may defer to.
    virtual void sleep_until(double end_s) = 0;

   protected:
    ~Driver() = default;
  };

  /// Finds the ops that run over the network: a communication op whose group the trace
  /// defines, with every rank one of the first `accelerators` of `compute_devices` (the
  /// devices ops name); others (an imported group known only by name, a group larger than
  /// the platform) keep their modelled duration. `horizon_s`: the engine's horizon, which
  /// no protocol's time may pass.
  CollectiveRunner(const PlatformSpec& platform, const Trace& trace, const std::vector<std::size_t>& compute_devices,
                   std::size_t accelerators, double horizon_s);

  /// Whether op `op` runs over the network.
  bool runs(OpId op) const { return collective_[op] != kNone; }
  /// A collective's stream: after its device's compute streams, one per process group the
  /// device takes part in (PyTorch gives each NCCL communicator its own stream), in the
  /// order the device first uses them.
  std::uint32_t stream(const Op& op) const;
  /// Adds to `want` (per source tier) the routes, both ways, that the groups' collectives
  /// may take under the platform's algorithms.
  void add_wanted_routes(std::vector<std::vector<std::size_t>>& want) const;
  /// Finds the groups whose flows no other flow can ever slow (replay_): each link or memory
  /// their flows cross is either theirs alone or never full, whatever runs at once (the sum of
  /// the most each group's phase can put through it, every flow at its route's narrowest
  /// bandwidth, is below its bandwidth; SimGrid shares a resource by max-min fairness, so one
  /// that never fills limits no flow). Such a group's collective of one kind and size takes
  /// the same time each time it runs: its flows' time is measured at its first run and
  /// slept thereafter, without SimGrid's flows. None when copies can run
  /// (`copies_possible`: a copy may cross any link, and many at once may fill it), nor for
  /// `--exact`. Call once, with the network the run uses.
  void plan_replay(const SgPlatform& sg, bool copies_possible);
  /// A copy started that plan_replay did not foresee: no more replay (its flows' time
  /// measured alone may not be the time with the copy).
  void stop_replay() { replay_.assign(replay_.size(), false); }
  /// How many phases were slept as measured rather than run as flows.
  std::uint64_t replayed_phases() const { return replayed_phases_; }
  /// Runs collective `op` for the calling stream's actor on the network `sg`; returns when
  /// it has ended for this rank, with the time this rank reached it.
  double run(const Op& op, const SgPlatform& sg, Driver& driver);
  /// What an op on device slot `device` takes of its time while one of the device's
  /// collectives holds its SMs (CollectiveModel::sm_share), from the time the device reached
  /// it (NCCL's kernel is resident while it waits for its peers) to its end there: 1 when none.
  double slowdown(std::uint32_t device) const {
    return device < running_.size() && running_[device] > 0 ? 1.0 / (1.0 - platform_.collectives.sm_share) : 1.0;
  }

 private:
  struct Group {
    std::vector<std::size_t> tiers;  // each rank's compute tier, in group order
    std::uint32_t simulated = 0;     // ranks whose ops this run simulates
    GroupTopology topology;          // what the algorithms see of it
  };
  /// NCCL's protocol for a phase's flows on a platform with `collectives:` protocols (the
  /// plain model otherwise: efficiency 1, no latency or floor of its own).
  struct NcclCost {
    double efficiency = 1.0;  // of the route's bandwidth
    double latency_s = 0;     // the protocol's own latency, after the flows land
    double floor_s = 0;       // the least time from the flows' start
  };
  using TierFlows = std::map<std::pair<std::size_t, std::size_t>, std::uint64_t>;  // (from, to) tiers: bytes
  /// A phase's flows between tiers: the flows between the same two tiers as one of their sum.
  static TierFlows tier_flows(const Group& group, const CollectivePhase& phase);
  NcclCost nccl_cost(const TierFlows& flows, const RouteTable& routes, std::uint32_t n, std::uint32_t steps) const;
  /// The time an algorithm's phases take on idle links (for `auto`): per phase the busiest
  /// link's or memory's bytes at its bandwidth and the protocol's efficiency, plus the steps'
  /// latency.
  double predict_s(const Group& group, const std::vector<CollectivePhase>& phases, const RouteTable& routes) const;
  /// A collective's phases as run() starts them: per phase its flows between tiers (bytes,
  /// and on the wire at the protocol's efficiency), the routes' longest latency and the
  /// protocol. The same for every collective of one kind and size over one group: made once.
  struct Prepared {
    struct Flow {
      std::size_t from, to;
      std::uint64_t bytes, wire;
    };
    std::vector<Flow> flows;
    std::uint32_t steps = 1;
    double latency_s = 0;  // the longest of the flows' routes
    double most = 0;       // the largest flow's bytes
    NcclCost nccl;
    double alone_s = -1;   // its flows' time alone, once measured (replay_)
  };
  std::vector<Prepared>& prepare(const Op& op, std::uint32_t group, const SgPlatform& sg);
  /// Counts one more (or one fewer) collective holding SMs of device slot `device`.
  void mark_running(std::uint32_t device, bool running);

  static constexpr std::uint32_t kNone = 0xffffffffu;
  const double horizon_s_;
  const PlatformSpec& platform_;
  const Trace& trace_;
  const std::vector<std::size_t>& compute_devices_;
  std::vector<Group> groups_;
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::uint32_t> channel_;  // (device, group): comm stream after the compute ones
  std::vector<std::uint32_t> collective_;            // per op: its group in groups_, or kNone
  std::vector<std::uint32_t> running_;               // per device slot: its collectives under way
  struct Rendezvous {
    std::uint32_t arrived = 0, left = 0;
    bool done = false;
  };
  std::map<std::pair<std::uint32_t, std::uint64_t>, Rendezvous> rendezvous_;  // (group, k-th)
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::uint64_t> issued_;   // (group, device)
  // (group, kind, message bytes) -> its phases; a kind is Interned, one pointer per name.
  using PreparedKey = std::tuple<std::uint32_t, std::uintptr_t, std::uint64_t>;
  std::map<PreparedKey, std::vector<Prepared>> prepared_;
  std::uint64_t replayed_phases_ = 0;
  std::vector<bool> replay_;  // per group: its flows' time is measured once and slept after (plan_replay)
};

}  // namespace memsim
