#pragma once
// What a blocked stream waits for, as a test anyone can run: a reference to a callable
// returning bool, without std::function's heap block. The engine keeps each waiting
// stream's test and runs it when something changes, so that a change wakes only the streams
// it frees, and so that a stream running alone knows which of the others could act next.
// The callable must outlive the Condition (it is the waiter's own lambda, on its stack).
#include <cstdint>
#include <memory>
#include <type_traits>

namespace memsim {

/// Whose work can make a test hold: the compute device (as Op::device numbers them) whose
/// streams' ops make its buffers and finish the ops it waits for, or any (a copy, a
/// collective's other members). A change on one device then runs the tests that name it or
/// any, not every waiting stream's (GPT-3 175B's 16 stages: 79 million tests a step).
inline constexpr std::uint32_t kAnyDevice = 0xffffffffu;

class Condition {
 public:
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, Condition>>>
  Condition(const F& f)  // NOLINT(google-explicit-constructor): a lambda is a condition
      : object_(std::addressof(f)), test_([](const void* o) { return static_cast<bool>((*static_cast<const F*>(o))()); }) {}
  bool operator()() const { return test_(object_); }

 private:
  const void* object_;
  bool (*test_)(const void*);
};

}  // namespace memsim
