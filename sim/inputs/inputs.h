#pragma once
// Turning command-line arguments into inputs: a DEVICE or WORKLOAD argument is a file path,
// or the name of a built-in preset (`a100-40gb`, `resnet50`). --set overrides are applied to
// the parsed document before it is read, so their values get the same checks.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sim/core/config.h"
#include "sim/platform/platform.h"
#include "sim/workload/importers/importers.h"
#include "sim/workload/trace.h"

namespace memsim {

/// One --set KEY=VALUE, split and sorted by target.
struct Override {
  std::string target;  // "workload", "policy" or "platform"
  std::string key;     // the rest of the key: "batch", "budget", "gpu0.hbm.capacity"
  std::string value;
  std::string origin;  // "--set workload.batch=128"
};
/// Parses "KEY=VALUE" (UsageError when malformed).
Override parse_override(const std::string& text);

inline constexpr const char* kDefaultDevice = "a100-40gb";
inline constexpr const char* kDefaultWorkload = "resnet50";

/// "gpu0.hbm.capacity" -> {"gpu0", "hbm", "capacity"}: a --set key as a path of map keys.
std::vector<std::string> split_dots(const std::string& key);

/// A DEVICE or WORKLOAD argument: a path or a preset name; or, with `text`, the document
/// itself (YAML or JSON, as the Python package passes a dict), `name` standing for it in
/// messages ("<platform dict>").
struct InputArg {
  std::string name;
  std::optional<std::string> text;
  InputArg(std::string n) : name(std::move(n)) {}
  InputArg(const char* n) : name(n) {}
  InputArg(std::string n, std::string t) : name(std::move(n)), text(std::move(t)) {}
};

/// A path, or a preset under `folder` ("configs/devices", "workloads"), or the text given.
ConfigNode open_input(const InputArg& arg, const std::string& folder);

PlatformSpec load_platform_arg(const InputArg& arg, const std::vector<Override>& overrides);
/// The platform document `arg` names with the platform --set overrides applied, unchecked
/// (what load_platform_arg loads).
ConfigNode platform_document_arg(const InputArg& arg, const std::vector<Override>& overrides);
/// `import`: how to read a trace from another tool (--step, --kineto); an error for a
/// workload that is no such trace.
Trace load_workload_arg(const InputArg& arg, const std::vector<Override>& overrides,
                        const ImportOptions& import = {});

/// The import notes of `trace` (what the importer left out or chose), once, on `out`.
void print_import_notes(const Trace& trace, std::ostream& out);

/// What kind of document a parsed file is, for `validate` and `info`.
enum class InputKind { platform, workload_spec, trace, unknown };
InputKind classify(const ConfigNode& root);

/// For a document of no memsim kind that is a Hugging Face config.json (it has
/// `architectures` or `model_type`): what to write instead, the `model: hf` workload that
/// wraps it, as a sentence and the YAML; empty for any other document.
std::string hf_config_hint(const ConfigNode& root);

}  // namespace memsim
