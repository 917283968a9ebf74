#pragma once
// A policy that hands the engine a plan written by the test, for timelines worked out by hand.
#include <string>
#include <utility>

#include "sim/policy/policy.h"

namespace memsim::test {

class FixedPlan final : public Policy {
 public:
  explicit FixedPlan(Plan p) : plan_(std::move(p)) {}
  PlanResult plan(const PlanningContext&) const override { return {plan_, "fixed", {}, {}, {}}; }

 private:
  Plan plan_;
};

}  // namespace memsim::test
