#pragma once
// The one YAML reader. A ConfigNode is a YAML node that knows where it came from (file,
// line, column, key path), so every complaint about a value reads
//
//   configs/devices/x.yaml:14:7: devices.gpu0.tiers.hbm.capacity: expected a size like '80GiB', got 'eighty'
//
// Maps are checked with allow_only(): unknown keys are errors, never ignored. Required keys
// are read with at(); a missing one is an error that points at the enclosing map.
// JSON is read through the same class (JSON is YAML), so traces get the same messages.
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include "sim/core/units.h"

namespace memsim {

class ConfigNode {
 public:
  /// Reads and parses a file. Malformed YAML and unreadable files are InputErrors.
  static ConfigNode parse_file(const std::string& path);
  /// Parses text; `source` names it in messages (a path, or "(built-in) configs/...").
  static ConfigNode parse_text(const std::string& text, const std::string& source);

  /// Replaces (or adds) the value at a dotted path of map keys, e.g. {"devices","gpu0",...}.
  /// `origin` ("--set gpu0.hbm.capacity=12GiB") is named in messages about that value.
  /// Intermediate maps are created; a non-map in the way is an InputError.
  void override_value(const std::vector<std::string>& path, const std::string& value,
                      const std::string& origin);

  const std::string& file() const { return source_->file; }
  const std::string& key_path() const { return path_; }
  /// "file:line:col" (1-based), or the --set origin for overridden values.
  std::string where() const;

  bool is_map() const { return node_.IsMap(); }
  bool is_sequence() const { return node_.IsSequence(); }
  bool is_scalar() const { return node_.IsScalar(); }
  bool is_null() const { return !node_.IsDefined() || node_.IsNull(); }

  // Maps.
  bool has(std::string_view key) const;
  /// The value of a required key; a missing key is an InputError.
  ConfigNode at(std::string_view key) const;
  std::optional<ConfigNode> find(std::string_view key) const;
  /// The key itself (for messages about the key rather than its value).
  ConfigNode key_node(std::string_view key) const;
  /// Key/value pairs in file order (requires a map).
  std::vector<std::pair<std::string, ConfigNode>> entries() const;
  /// Requires a map and rejects keys outside `allowed`, pointing at the offending key.
  void allow_only(std::initializer_list<std::string_view> allowed) const;
  void allow_only(const std::vector<std::string>& allowed) const;

  // Sequences.
  std::vector<ConfigNode> items() const;  // requires a sequence

  // Scalars. Each reports "expected ..., got ..." on a mismatch.
  std::string as_string() const;
  std::int64_t as_int() const;
  std::int64_t as_int_in(std::int64_t lo, std::int64_t hi) const;
  double as_double() const;
  /// A number in [0, 1].
  double as_fraction() const;
  bool as_bool() const;
  std::uint64_t as_bytes() const;
  /// A size above zero: "0" and "-1GiB" are "expected a positive size like '80GiB'".
  std::uint64_t as_positive_bytes() const;
  /// A value of `kind` within its physical range (units.h): "1e300s" is an error.
  double as_unit(UnitKind kind) const;
  /// As as_unit, above zero and at least the range's least positive value.
  double as_positive_unit(UnitKind kind) const;
  /// One of `choices`; the message lists them.
  std::string as_choice(const std::vector<std::string>& choices) const;

  /// "where: key.path: expected <expected>, got <what is there>".
  [[noreturn]] void fail_expected(std::string_view expected) const;
  /// "where: key.path: <message>".
  [[noreturn]] void fail(std::string_view message) const;

  /// What is there, for messages: "'eighty'", "a map", "a list", "nothing".
  std::string describe() const;

 private:
  struct Source {
    std::string file;
    std::vector<std::pair<std::string, std::string>> overrides;  // key path -> origin
  };
  ConfigNode(YAML::Node node, std::shared_ptr<Source> source, std::string path)
      : node_(std::move(node)), source_(std::move(source)), path_(std::move(path)) {}
  ConfigNode child(const YAML::Node& node, std::string_view key) const;
  const std::string* override_origin() const;

  YAML::Node node_;
  std::shared_ptr<Source> source_;
  std::string path_;
};

}  // namespace memsim
