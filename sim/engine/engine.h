#pragma once
// The engine: runs one training iteration of a Trace on a platform as timed events on
// SimGrid, following the policy's Plan. The only part of memsim that knows SimGrid.
//
// Devices and tiers become SimGrid hosts, links become SimGrid links (so copies that share a
// link share its bandwidth). One actor per device stream runs its steps in order; each copy
// runs on a copy-engine slot of its device (copy_engines per direction). Around each op its
// inputs are made resident (waiting for in-flight copies is stall time), its outputs and
// workspace are allocated, and after it the workspace is released.
#include "sim/policy/policy.h"
#include "sim/report/recorder.h"
#include "sim/report/summary.h"

namespace memsim {

/// Runs `planned` (the policy's plan and runtime hooks) on ctx's platform under its caps and
/// returns the summary; events and memory samples go to `recorder`. run() (sim/run/run.h)
/// is the pipeline around it. SimGrid's engine is a process singleton: call this at most
/// once per process. Throws InputError for a trace that does not fit the platform (unknown
/// device, no rate), PolicyError for a plan that breaks the rules of memory.
///
/// `exact`: every op is its own SimGrid activity. By default a stream that no other can
/// interrupt before its op ends sums the op's time with the ones around it and hands SimGrid
/// the sum (docs/parallel.md, "How fast"): the same events in the same order, their times
/// equal but for the last bits of rounding; `exact` is what that is checked against.
Summary simulate(const PlanningContext& ctx, const PlanResult& planned, Recorder& recorder, bool exact = false);

}  // namespace memsim
