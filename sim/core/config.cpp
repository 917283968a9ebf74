#include "sim/core/config.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <optional>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <yaml-cpp/eventhandler.h>

#include "sim/core/error.h"
#include "sim/core/files.h"
#include "sim/core/json_syntax.h"
#include "sim/core/suggest.h"

namespace memsim {
namespace {

std::string join(const std::vector<std::string>& xs, std::string_view sep) {
  std::string out;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    if (i) out += sep;
    out += xs[i];
  }
  return out;
}

std::string mark_text(const std::string& file, const YAML::Mark& m) {
  if (m.is_null()) return file;
  return fmt::format("{}:{}:{}", file, m.line + 1, m.column + 1);
}

// A key given twice in one map is an error: yaml-cpp keeps both, a lookup finds the first,
// and the second would be ignored without a word. Iterative, so deep nesting cannot
// overflow the stack; the key path is built only for the message.
void check_unique_keys(const YAML::Node& root, const std::string& source) {
  struct Item {
    YAML::Node node;
    std::size_t parent;  // index in `trail`, or SIZE_MAX
    std::string step;    // "key" or "[3]"
  };
  std::vector<Item> trail;
  std::vector<std::size_t> todo;
  trail.push_back({root, SIZE_MAX, ""});
  todo.push_back(0);
  auto path_of = [&](std::size_t i, const std::string& last) {
    std::vector<const std::string*> steps{&last};
    for (; i != SIZE_MAX && trail[i].parent != SIZE_MAX; i = trail[i].parent) steps.push_back(&trail[i].step);
    std::string path;
    for (auto it = steps.rbegin(); it != steps.rend(); ++it)
      path += (path.empty() || (*it)->front() == '[' ? "" : ".") + **it;
    return path;
  };
  std::unordered_map<std::string, YAML::Mark> seen;
  // An alias is the node it names, not a copy: each map or list is checked once, however
  // often aliases repeat it (a "billion laughs" file would otherwise take forever). Nodes
  // are known by where they start in the text.
  std::unordered_set<int> visited;
  while (!todo.empty()) {
    const std::size_t i = todo.back();
    todo.pop_back();
    const YAML::Node node = trail[i].node;
    if (!visited.insert(node.Mark().pos).second) continue;
    if (node.IsMap()) {
      seen.clear();
      for (const auto& kv : node) {
        const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : std::string("?");
        const auto [first, fresh] = seen.emplace(key, kv.first.Mark());
        if (!fresh)
          throw InputError(fmt::format("{}: {}: key '{}' given twice (first at line {}); give each "
                                       "key once",
                                       mark_text(source, kv.first.Mark()), path_of(i, key), key,
                                       first->second.line + 1));
        if (kv.second.IsMap() || kv.second.IsSequence()) {
          trail.push_back({kv.second, i, key});
          todo.push_back(trail.size() - 1);
        }
      }
    } else if (node.IsSequence()) {
      std::size_t k = 0;
      for (const auto& item : node) {
        if (item.IsMap() || item.IsSequence()) {
          trail.push_back({item, i, "[" + std::to_string(k) + "]"});
          todo.push_back(trail.size() - 1);
        }
        ++k;
      }
    }
  }
}

// Where the second document of a text starts (its '---', or the first text after the end of
// the first document), or null_mark() when there is none. Two documents at most are walked:
// YAML::LoadAll went on allocating for ever on some malformed texts (a fuzzer's platform
// file), so the first document is read with YAML::Load and this only looks for a second.
std::optional<YAML::Mark> second_document(const std::string& text) {
  struct Starts : YAML::EventHandler {
    std::vector<YAML::Mark> marks;
    void OnDocumentStart(const YAML::Mark& m) override { marks.push_back(m); }
    void OnDocumentEnd() override {}
    void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
    void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
    void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
    void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
    void OnSequenceEnd() override {}
    void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
    void OnMapEnd() override {}
  } starts;
  std::istringstream in(text);
  YAML::Parser parser(in);
  int documents = 0;
  while (documents < 2 && parser.HandleNextDocument(starts)) ++documents;
  if (documents < 2) return std::nullopt;
  return starts.marks.size() >= 2 ? starts.marks[1] : YAML::Mark::null_mark();
}

}  // namespace

ConfigNode ConfigNode::parse_text(const std::string& text, const std::string& source) {
  auto src = std::make_shared<Source>();
  src->file = source;
  // A .json file is JSON: what YAML would also take there is an error, not a guess.
  if (names_json_file(source))
    if (auto why = json_syntax_error(text, source)) throw InputError(*why);
  try {
    YAML::Node root = YAML::Load(text);
    // A document after the first is an error rather than ignored.
    if (const auto second = second_document(text))
      throw InputError(fmt::format("{}: a second document starts here; a file holds one (YAML's '---' starts "
                                   "another)",
                                   mark_text(source, *second)));
    check_unique_keys(root, source);
    return ConfigNode(root, src, "");
  } catch (const YAML::DeepRecursion& e) {
    throw InputError(fmt::format("{}: malformed YAML: nested more than {} levels deep", mark_text(source, e.mark),
                                 e.depth()));
  } catch (const YAML::Exception& e) {
    throw InputError(fmt::format("{}: malformed YAML: {}", mark_text(source, e.mark), e.msg));
  }
}

ConfigNode ConfigNode::parse_file(const std::string& path) {
  return parse_text(read_input_file(path), path == "-" ? "(standard input)" : path);
}

void ConfigNode::override_value(const std::vector<std::string>& path, const std::string& value,
                                const std::string& origin) {
  YAML::Node parsed;
  try {
    parsed = YAML::Load(value);
  } catch (const YAML::Exception& e) {
    throw InputError(fmt::format("{}: malformed value: {}", origin, e.msg));
  }
  // yaml-cpp nodes are handles: walking with operator[] on a non-const node creates maps.
  std::vector<YAML::Node> chain{node_};
  std::string key_path = path_;
  for (std::size_t i = 0; i < path.size(); ++i) {
    YAML::Node here = chain.back();
    if (here.IsDefined() && !here.IsNull() && !here.IsMap())
      throw InputError(fmt::format("{}: {} is not a map, cannot set '{}' in it", origin,
                                   key_path.empty() ? "the document" : key_path, path[i]));
    key_path += (key_path.empty() ? "" : ".") + path[i];
    if (i + 1 == path.size())
      here[path[i]] = parsed;
    else
      chain.push_back(here[path[i]]);
  }
  source_->overrides.emplace_back(key_path, origin);
}

const std::string* ConfigNode::override_origin() const {
  for (const auto& [key, origin] : source_->overrides)
    if (path_ == key || (path_.size() > key.size() && path_.compare(0, key.size(), key) == 0 &&
                         (path_[key.size()] == '.' || path_[key.size()] == '[')))
      return &origin;
  // A map with no place in the file was made by a --set on the way to its key.
  if (node_.Mark().is_null())
    for (const auto& [key, origin] : source_->overrides)
      if (key.size() > path_.size() && key.compare(0, path_.size(), path_) == 0 && key[path_.size()] == '.')
        return &origin;
  return nullptr;
}

std::string ConfigNode::where() const {
  if (const auto* origin = override_origin()) return *origin;
  return mark_text(source_->file, node_.Mark());
}

std::string ConfigNode::describe() const {
  if (!node_.IsDefined() || node_.IsNull()) return "nothing";
  if (node_.IsMap()) return "a map";
  if (node_.IsSequence())
    return node_.size() == 1 ? std::string("a list of 1 item") : fmt::format("a list of {} items", node_.size());
  // A message quotes what is there, not all of it: a value of a megabyte stays one line.
  constexpr std::size_t kMostQuoted = 200;
  const std::string& s = node_.Scalar();
  if (s.size() > kMostQuoted) return fmt::format("'{}...' ({} characters)", s.substr(0, kMostQuoted - 3), s.size());
  return fmt::format("'{}'", s);
}

void ConfigNode::fail(std::string_view message) const {
  if (path_.empty()) throw InputError(fmt::format("{}: {}", where(), message));
  throw InputError(fmt::format("{}: {}: {}", where(), path_, message));
}

void ConfigNode::fail_expected(std::string_view expected) const {
  fail(fmt::format("expected {}, got {}", expected, describe()));
}

ConfigNode ConfigNode::child(const YAML::Node& node, std::string_view key) const {
  std::string p = path_.empty() ? std::string(key) : fmt::format("{}.{}", path_, key);
  return ConfigNode(node, source_, std::move(p));
}

bool ConfigNode::has(std::string_view key) const {
  if (!node_.IsMap()) return false;
  for (const auto& kv : node_)
    if (kv.first.IsScalar() && kv.first.Scalar() == key) return true;
  return false;
}

std::optional<ConfigNode> ConfigNode::find(std::string_view key) const {
  if (!node_.IsMap()) fail_expected("a map");
  for (const auto& kv : node_)
    if (kv.first.IsScalar() && kv.first.Scalar() == key) return child(kv.second, key);
  return std::nullopt;
}

ConfigNode ConfigNode::key_node(std::string_view key) const {
  if (!node_.IsMap()) fail_expected("a map");
  for (const auto& kv : node_)
    if (kv.first.IsScalar() && kv.first.Scalar() == key) return child(kv.first, key);
  return *this;
}

ConfigNode ConfigNode::at(std::string_view key) const {
  auto found = find(key);
  if (!found) fail(fmt::format("missing required key '{}'", key));
  return *found;
}

std::vector<std::pair<std::string, ConfigNode>> ConfigNode::entries() const {
  if (!node_.IsMap()) fail_expected("a map");
  std::vector<std::pair<std::string, ConfigNode>> out;
  for (const auto& kv : node_) {
    if (!kv.first.IsScalar())
      ConfigNode(kv.first, source_, path_).fail_expected("a plain key");
    out.emplace_back(kv.first.Scalar(), child(kv.second, kv.first.Scalar()));
  }
  return out;
}

void ConfigNode::allow_only(const std::vector<std::string>& allowed) const {
  if (!node_.IsMap()) fail_expected("a map");
  for (const auto& kv : node_) {
    const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : std::string();
    if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
    ConfigNode at_key = child(kv.first, key);
    at_key.fail(fmt::format("unknown key '{}'{}; expected one of: {}", key, did_you_mean_aside(key, allowed),
                            join(allowed, ", ")));
  }
}

void ConfigNode::allow_only(std::initializer_list<std::string_view> allowed) const {
  std::vector<std::string> keys;
  for (auto k : allowed) keys.emplace_back(k);
  allow_only(keys);
}

std::vector<ConfigNode> ConfigNode::items() const {
  if (!node_.IsSequence()) fail_expected("a list");
  std::vector<ConfigNode> out;
  std::size_t i = 0;
  for (const auto& item : node_) {
    out.push_back(ConfigNode(item, source_, fmt::format("{}[{}]", path_, i)));
    ++i;
  }
  return out;
}

std::string ConfigNode::as_string() const {
  if (!node_.IsScalar()) fail_expected("a string");
  return node_.Scalar();
}

// In a JSON file a number or a boolean is not a string: "64" there is text, as a JSON reader
// takes it, whatever YAML would make of it. Called once the text reads as the value, so
// that other text keeps the usual message. (yaml-cpp tags a quoted scalar "!".)
static void refuse_json_string(const YAML::Node& node, const std::string& file, const ConfigNode& at,
                        std::string_view expected) {
  if (node.IsScalar() && node.Tag() == "!" && names_json_file(file))
    at.fail(fmt::format("expected {}, got the string \"{}\"", expected, node.Scalar()));
}

std::int64_t ConfigNode::as_int() const {
  if (!node_.IsScalar()) fail_expected("an integer");
  const std::string& s = node_.Scalar();
  std::int64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc{} || ptr != s.data() + s.size()) fail_expected("an integer");
  refuse_json_string(node_, source_->file, *this, "an integer");
  return v;
}

std::int64_t ConfigNode::as_int_in(std::int64_t lo, std::int64_t hi) const {
  std::int64_t v = as_int();
  if (v < lo || v > hi) {
    if (hi == INT64_MAX)
      fail_expected(fmt::format("an integer >= {}", lo));
    fail_expected(fmt::format("an integer from {} to {}", lo, hi));
  }
  return v;
}

double ConfigNode::as_double() const {
  if (!node_.IsScalar()) fail_expected("a number");
  const std::string& s = node_.Scalar();
  double v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc{} || ptr != s.data() + s.size() || !std::isfinite(v))
    fail_expected("a number");
  refuse_json_string(node_, source_->file, *this, "a number");
  return v;
}

double ConfigNode::as_fraction() const {
  double v = node_.IsScalar() ? as_double() : (fail_expected("a number from 0 to 1"), 0.0);
  if (v < 0 || v > 1) fail_expected("a number from 0 to 1");
  return v;
}

bool ConfigNode::as_bool() const {
  if (node_.IsScalar()) {
    const std::string& s = node_.Scalar();
    if (s == "true" || s == "false") {
      refuse_json_string(node_, source_->file, *this, "true or false");
      return s == "true";
    }
  }
  fail_expected("true or false");
}

std::uint64_t ConfigNode::as_bytes() const {
  if (node_.IsScalar())
    if (auto v = parse_bytes(node_.Scalar())) {
      if (static_cast<double>(*v) > physical_range(UnitKind::size).max)
        fail_expected(range_text(UnitKind::size, false));
      return *v;
    }
  fail_expected(unit_example(UnitKind::size));
}

std::uint64_t ConfigNode::as_positive_bytes() const {
  if (is_scalar() && !as_string().empty() && as_string()[0] == '-')
    fail_expected("a positive size like '80GiB'");
  const std::uint64_t v = as_bytes();
  if (v == 0) fail_expected("a positive size like '80GiB'");
  return v;
}

double ConfigNode::as_unit(UnitKind kind) const {
  if (node_.IsScalar())
    if (auto v = parse_unit(node_.Scalar(), kind)) {
      if (*v > physical_range(kind).max) fail_expected(range_text(kind, false));
      return *v;
    }
  fail_expected(unit_example(kind));
}

double ConfigNode::as_positive_unit(UnitKind kind) const {
  std::optional<double> v;
  if (node_.IsScalar()) v = parse_unit(node_.Scalar(), kind);
  if (!v) fail_expected(unit_example(kind));
  if (*v <= 0) fail_expected("a value above zero, " + unit_example(kind));
  if (*v < physical_range(kind).min || *v > physical_range(kind).max) fail_expected(range_text(kind, true));
  return *v;
}

std::string ConfigNode::as_choice(const std::vector<std::string>& choices) const {
  if (node_.IsScalar() &&
      std::find(choices.begin(), choices.end(), node_.Scalar()) != choices.end())
    return node_.Scalar();
  fail(fmt::format("expected one of {}, got {}{}", join(choices, ", "), describe(),
                   node_.IsScalar() ? did_you_mean(node_.Scalar(), choices) : std::string()));
}

}  // namespace memsim
