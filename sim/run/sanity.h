#pragma once
// The last check of every run's result, in run(), before anything is written: a summary that
// says what no correct run can is a bug to report, not a result to print. Loud beats an
// absurd number.
#include "sim/report/summary.h"

namespace memsim {

/// Checks that every time in `summary` is a finite number of seconds >= 0 (and every other
/// figure a finite number), that the iteration time is made of its parts as the summary
/// promises (compute + host + stall + recompute + exposed communication + idle of the stream
/// that speaks for it; those parts within it even where a run stopped at an oom), and that
/// in a run that fit each tier's peaks are within what the run could hold (its budget, else
/// its capacity). Throws InternalError "summary check: CHECK: VALUE" on the first that fails.
void check_summary(const Summary& summary);

}  // namespace memsim
