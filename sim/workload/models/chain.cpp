#include "sim/workload/models/models.h"
namespace memsim {
ModelInfo chain_model() { return {"chain", "(not yet written)", {}, [](const Params&) { return Trace{}; }}; }
}  // namespace memsim
