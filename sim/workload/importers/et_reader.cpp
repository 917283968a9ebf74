#include "sim/workload/importers/et_reader.h"

#include <algorithm>
#include <new>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <simdjson.h>

#include "sim/core/checked.h"
#include "sim/core/error.h"
#include "sim/core/json_syntax.h"
#include "sim/core/units.h"
#include "sim/workload/durations.h"

namespace memsim {
// A list type's element types: "GenericList[Tensor(float),GenericList[Int,Int]]" -> {"Tensor(float)", "GenericList[Int,Int]"}.
void set_tensor_bytes(EtTensor& t, std::uint64_t offset, std::uint64_t span) {
  const auto most = static_cast<std::uint64_t>(physical_range(UnitKind::size).max);
  const auto item = static_cast<std::uint64_t>(t.itemsize);
  const auto bytes = checked_mul(t.numel, item);
  if (!bytes || *bytes > most)
    throw InputError(fmt::format("tensor {}: expected at most 1PiB, got {} elements of {} bytes ({})", t.tensor,
                                 t.numel, item, bytes ? fmt::format("{} bytes", *bytes) : "over 2^64 bytes"));
  const auto reach = checked_add(offset, span);
  const auto extent = reach ? checked_mul(*reach, item) : std::nullopt;
  if (!extent || *extent > most)
    throw InputError(fmt::format("tensor {}: expected a view within 1PiB of storage, got offset {} and {} elements "
                                 "of {} bytes",
                                 t.tensor, offset, span, item));
  t.bytes = *bytes;
  t.extent_bytes = *extent;
}

std::vector<std::string_view> list_element_types(std::string_view type) {
  std::vector<std::string_view> out;
  const auto open = type.find('[');
  if (open == std::string_view::npos || type.back() != ']') return out;
  int depth = 0;
  std::size_t start = open + 1;
  for (std::size_t i = open + 1; i + 1 < type.size(); ++i) {
    const char c = type[i];
    if (c == '[' || c == '(') ++depth;
    if (c == ']' || c == ')') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(type.substr(start, i - start));
      start = i + 1;
    }
  }
  if (type.size() - 1 > start) out.push_back(type.substr(start, type.size() - 1 - start));
  return out;
}

namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

std::string describe(const element& v) {
  std::string s = simdjson::minify(v);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

bool is_int(const element& v) { return v.type() == element_type::INT64 || v.type() == element_type::UINT64; }
std::int64_t as_int(const element& v) {
  if (v.type() == element_type::UINT64) return static_cast<std::int64_t>(std::min<std::uint64_t>(v.get_uint64().value_unsafe(), INT64_MAX));
  return v.get_int64().value_unsafe();
}
bool is_array(const element& v) { return v.type() == element_type::ARRAY; }
// The array or object `v` is (checked by the caller).
simdjson::dom::array arr(const element& v) {
  simdjson::dom::array a{};
  if (v.get(a)) return {};
  return a;
}
simdjson::dom::object obj(const element& v) {
  simdjson::dom::object o{};
  if (v.get(o)) return {};
  return o;
}
bool is_string(const element& v) { return v.type() == element_type::STRING; }
std::string_view as_string(const element& v) { return v.get_string().value_unsafe(); }

// Where malformed JSON stops making sense, as line:column and nlohmann's words (the messages
// the previous reader gave). When nlohmann finds nothing wrong (nesting too deep, a number
// out of simdjson's range), simdjson's error for the whole document, as its DOM parser finds
// it: the on-demand walk may have stopped on another symptom of the same fault.
InputError malformed_json(const std::string& text, simdjson::padded_string_view json, const std::string& source,
                          simdjson::error_code code) {
  if (auto why = json_syntax_error(text, source)) return InputError(*why);
  simdjson::dom::parser whole;
  simdjson::dom::element ignored;
  if (const auto err = whole.parse(json.data(), json.size(), false).get(ignored)) code = err;
  return InputError(fmt::format("{}: malformed JSON: {}", source, simdjson::error_message(code)));
}

bool names_tensors(std::string_view type) { return type.find("Tensor") != std::string_view::npos; }

// An undefined tensor (an optional argument left out) has no value to read.
bool undefined_tensor(const element& v) {
  if (v.type() == element_type::NULL_VALUE) return true;
  if (is_array(v)) return arr(v).size() == 0;
  if (is_string(v)) return as_string(v).empty() || as_string(v) == "<None>";
  return false;
}

// The nodes' layouts: the old one keeps inputs as a list, the new one as {values, ...}.
struct Side {
  std::optional<element> values, shapes, types, strides;
};
const element* ptr(const std::optional<element>& e) { return e ? &*e : nullptr; }

// The document is walked with simdjson's on-demand parser, which indexes it but builds no
// tape; each node (and each other top-level value) is then parsed alone with the DOM parser,
// into a tape the size of one node that the next one reuses. So every byte is checked as a
// parse of the whole document would check it (the same errors, the same depth limit), and
// what is kept is only what the nodes say.
class Reader {
 public:
  Reader(const std::string& text, std::string source) : text_(text), source_(std::move(source)) {
    if (text.capacity() >= text.size() + simdjson::SIMDJSON_PADDING) {
      json_ = simdjson::padded_string_view(text.data(), text.size(), text.capacity());
    } else {
      copy_ = simdjson::padded_string(text);
      json_ = copy_;
    }
    // A node is two levels down (the document, its `nodes`), a top-level value one: the
    // whole document's depth limit, counted from there.
    const std::size_t small = simdjson::dom::MINIMAL_DOCUMENT_CAPACITY;
    if (value_parser_.allocate(small, simdjson::DEFAULT_MAX_DEPTH - 1) ||
        node_parser_.allocate(small, simdjson::DEFAULT_MAX_DEPTH - 2))
      throw std::bad_alloc();
  }

  ExecutionTrace run() {
    read_document();
    et_.nodes = std::move(nodes_);
    link();
    return std::move(et_);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw InputError(fmt::format("{}: {}", source_, what)); }
  [[noreturn]] void fail_json(simdjson::error_code code) const { throw malformed_json(text_, json_, source_, code); }
  [[noreturn]] void fail_node(const std::string& what) const {
    std::string who = fmt::format("nodes[{}]", index_);
    if (id_) who = fmt::format("node {}", *id_);
    if (!name_.empty()) who += fmt::format(" ({})", name_);
    fail(fmt::format("{}: {}", who, what));
  }

  // `v` parsed alone into `parser`'s tape (valid until its next parse); malformed JSON is
  // an error of the whole document, located in it.
  element materialise(simdjson::ondemand::value v, simdjson::dom::parser& parser);
  void read_document();
  void read_nodes(simdjson::ondemand::value list);
  void read_node(const element& n);
  void read_attrs(const element& attrs, EtNode& node);
  std::vector<std::vector<EtTensor>> read_side(const char* which, const Side& s, EtNode& node);
  void read_tensors(const element& v, std::string_view type, const element* shape, const element* stride,
                    const std::string& where, std::vector<EtTensor>& out);
  EtTensor read_tensor(const std::string& where, const element& value, const element* shape, const element* stride);
  void comm_arguments(const Side& inputs, EtNode& node);
  void process_groups(const Side& inputs);
  void link();

  const std::string& text_;
  std::string source_;
  simdjson::padded_string copy_;  // the text with simdjson's padding, where it has none
  simdjson::padded_string_view json_;
  simdjson::ondemand::parser stream_;
  simdjson::dom::parser value_parser_, node_parser_;
  ExecutionTrace et_;
  std::vector<EtNode> nodes_;
  std::optional<bool> old_layout_;  // decided by the first node with inputs
  // What `nodes` is when it is no list: "nothing" until the key is seen.
  std::optional<std::string> nodes_not_a_list_ = std::string("nothing");
  // The first bad node: reported once the rest of the document is known to be JSON and to
  // have a schema, as a parse of the whole document reported those first.
  std::optional<InputError> node_error_;
  // The node being read, for messages.
  std::size_t index_ = 0;
  std::optional<std::int64_t> id_;
  std::string name_;
};

EtTensor Reader::read_tensor(const std::string& where, const element& value, const element* shape,
                             const element* stride) {
  auto bad = [&] {
    fail_node(fmt::format("{}: expected a tensor [id, storage, offset, numel, itemsize, device], got {}", where,
                          describe(value)));
  };
  if (!is_array(value)) bad();
  std::int64_t f[5] = {0, 0, 0, 0, 0};
  std::size_t k = 0;
  EtTensor t;
  for (element x : arr(value)) {
    if (k < 5) {
      if (!is_int(x) || as_int(x) < 0) bad();
      f[k] = as_int(x);
    } else if (k == 5 && is_string(x)) {
      t.device = std::string(as_string(x));
    }
    ++k;
  }
  if (k < 5) bad();
  t.tensor = f[0];
  t.storage = f[1];
  const std::int64_t offset = f[2];
  t.numel = static_cast<std::uint64_t>(f[3]);
  t.itemsize = static_cast<int>(std::min<std::int64_t>(f[4], 64));
  if (shape && is_array(*shape))
    for (element d : arr(*shape))
      if (is_int(d)) t.shape.push_back(as_int(d));
  std::optional<std::uint64_t> span = t.numel;
  if (stride && is_array(*stride) && arr(*stride).size() == t.shape.size() && t.numel > 0) {
    // The elements the view reaches: a broadcast dimension (stride 0) reaches one.
    span = 1;
    std::size_t d = 0;
    for (element s : arr(*stride)) {
      if (is_int(s) && t.shape[d] > 0 && span) {
        const auto step = checked_mul(static_cast<std::uint64_t>(t.shape[d] - 1),
                                      static_cast<std::uint64_t>(std::max<std::int64_t>(as_int(s), 0)));
        span = step ? checked_add(*span, *step) : std::nullopt;
      }
      ++d;
    }
  }
  try {
    set_tensor_bytes(t, static_cast<std::uint64_t>(offset), span.value_or(UINT64_MAX));
  } catch (const InputError& e) {
    fail_node(fmt::format("{}: {}", where, e.what()));
  }
  return t;
}

// A tensor, or a list of tensors (and of lists of tensors: all_gather's outputs), flattened.
void Reader::read_tensors(const element& v, std::string_view type, const element* shape, const element* stride,
                          const std::string& where, std::vector<EtTensor>& out) {
  if (starts_with(type, "Tensor") || starts_with(type, "Optional[Tensor")) {
    // An undefined tensor: an optional argument left out ("Tensor(nullptr (uninitialized))").
    if (undefined_tensor(v) || type.find("nullptr") != std::string_view::npos) return;
    EtTensor t = read_tensor(where, v, shape, stride);
    t.type = std::string(type);
    out.push_back(std::move(t));
    return;
  }
  if (!names_tensors(type)) return;
  if (!is_array(v)) {
    if (undefined_tensor(v)) return;
    fail_node(fmt::format("{}: expected a list of tensors, got {}", where, describe(v)));
  }
  const auto element_types = list_element_types(type);
  auto shapes = shape && is_array(*shape) ? arr(*shape).begin() : simdjson::dom::array::iterator();
  const auto shapes_end = shape && is_array(*shape) ? arr(*shape).end() : simdjson::dom::array::iterator();
  auto strides = stride && is_array(*stride) ? arr(*stride).begin() : simdjson::dom::array::iterator();
  const auto strides_end = stride && is_array(*stride) ? arr(*stride).end() : simdjson::dom::array::iterator();
  const bool have_shapes = shape && is_array(*shape), have_strides = stride && is_array(*stride);
  std::size_t k = 0;
  for (element x : arr(v)) {
    std::optional<element> sh, st;
    if (have_shapes && shapes != shapes_end) {
      sh = *shapes;
      ++shapes;
    }
    if (have_strides && strides != strides_end) {
      st = *strides;
      ++strides;
    }
    // The element's own type when the list names it; a tensor list's elements are tensors.
    std::string_view et = k < element_types.size() ? element_types[k] : std::string_view();
    if (et.empty()) et = is_array(x) && arr(x).size() > 0 &&
                                 is_array(*arr(x).begin())
                             ? std::string_view("GenericList[Tensor]")
                             : std::string_view("Tensor");
    if (names_tensors(et) && !(is_array(x) && arr(x).size() == 0))
      read_tensors(x, et, sh ? &*sh : nullptr, st ? &*st : nullptr, fmt::format("{}[{}]", where, k), out);
    ++k;
  }
}

std::vector<std::vector<EtTensor>> Reader::read_side(const char* which, const Side& s, EtNode& node) {
  std::vector<std::vector<EtTensor>> out;
  if (!s.values) return out;
  if (!is_array(*s.values)) fail_node(fmt::format("{}: expected a list, got {}", which, describe(*s.values)));
  const auto values = arr(*s.values);
  const std::size_t count = values.size();
  if (!s.types || !is_array(*s.types) || arr(*s.types).size() != count)
    fail_node(fmt::format("{} types: expected a list of {} types, got {}", which, count,
                          s.types ? describe(*s.types) : "nothing"));
  if (count == 0) return out;
  auto list_iter = [](const element* e) {
    return e && is_array(*e) ? std::optional(arr(*e).begin()) : std::nullopt;
  };
  auto list_end = [](const element* e) {
    return e && is_array(*e) ? std::optional(arr(*e).end()) : std::nullopt;
  };
  auto shapes = list_iter(ptr(s.shapes)), shapes_end = list_end(ptr(s.shapes));
  auto strides = list_iter(ptr(s.strides)), strides_end = list_end(ptr(s.strides));
  auto types = arr(*s.types).begin();
  out.resize(count);
  std::size_t i = 0;
  for (element v : values) {
    std::optional<element> sh, st;
    if (shapes && *shapes != *shapes_end) sh = **shapes, ++*shapes;
    if (strides && *strides != *strides_end) st = **strides, ++*strides;
    const element type = *types;
    ++types;
    if (is_string(type)) {
      const std::string_view ty = as_string(type);
      if (names_tensors(ty))
        read_tensors(v, ty, sh ? &*sh : nullptr, st ? &*st : nullptr, fmt::format("{}[{}]", which, i), out[i]);
    }
    ++i;
  }
  (void)node;
  return out;
}

void Reader::read_attrs(const element& attrs, EtNode& node) {
  if (!is_array(attrs)) fail_node(fmt::format("attrs: expected a list of {{name, type, value}}, got {}", describe(attrs)));
  std::string pg_name, pg_desc;
  for (element a : arr(attrs)) {
    if (a.type() != element_type::OBJECT) continue;
    std::string_view name;
    std::optional<element> value;
    for (auto field : obj(a)) {
      if (field.key == "name" && is_string(field.value)) name = as_string(field.value);
      if (field.key == "value") value = field.value;
    }
    if (!value) continue;
    if (is_int(*value)) {
      if (name == "rf_id") node.rf_id = as_int(*value);
      else if (name == "tid") node.tid = as_int(*value);
      else if (name == "seq_id") node.seq_id = as_int(*value);
      else if (name == "fw_tid") node.fw_tid = as_int(*value);
      else if (name == "pg_size") node.group_size = as_int(*value);
    } else if (is_string(*value)) {
      const std::string_view v = as_string(*value);
      if (name == "op_schema") node.op_schema = std::string(v);
      else if (name == "kernel_backend") node.kernel_backend = std::string(v);
      else if (name == "collective_name") node.collective = std::string(v);
      else if (name == "pg_name") pg_name = std::string(v);
      else if (name == "pg_desc") pg_desc = std::string(v);
    }
  }
  if (!pg_name.empty()) node.process_group = pg_desc.empty() ? pg_name : fmt::format("{} ({})", pg_name, pg_desc);
}

// record_param_comms(tensors, seq, pg, ..., "collective", in_splits, out_splits[, ...,
// group size]): the collective's name is its string argument, the group its third argument
// (a pg id, or (name, description) from schema 1.0.3 on).
void Reader::comm_arguments(const Side& inputs, EtNode& node) {
  if (!inputs.values || !is_array(*inputs.values) || !inputs.types || !is_array(*inputs.types)) return;
  std::vector<element> values, types;
  for (element v : arr(*inputs.values)) values.push_back(v);
  for (element t : arr(*inputs.types)) types.push_back(t);
  for (std::size_t i = 0; i < values.size() && i < types.size(); ++i) {
    if (!is_string(types[i])) continue;
    const std::string_view ty = as_string(types[i]);
    if (ty == "String" && is_string(values[i]) && node.collective.empty()) node.collective = std::string(as_string(values[i]));
    if (i == 2 && node.process_group.empty()) {
      if (is_int(values[i])) node.process_group = std::to_string(as_int(values[i]));
      if (starts_with(ty, "Tuple[String") && is_array(values[i])) {
        std::vector<std::string> parts;
        for (element p : arr(values[i]))
          if (is_string(p)) parts.emplace_back(as_string(p));
        if (parts.size() == 1) node.process_group = parts[0];
        if (parts.size() >= 2) node.process_group = fmt::format("{} ({})", parts[0], parts[1]);
      }
    }
  }
  // Schema 1.0.2 and later end the list with the group's size.
  if (node.group_size == 0 && values.size() >= 8 && is_int(values.back()) && is_string(types.back()) &&
      as_string(types.back()) == "Int")
    node.group_size = as_int(values.back());
}

// "## process_group:init ##" holds a JSON list of the groups: their names and sizes.
void Reader::process_groups(const Side& inputs) {
  if (!inputs.values || !is_array(*inputs.values)) return;
  for (element v : arr(*inputs.values)) {
    if (!is_string(v)) continue;
    const auto groups = nlohmann::json::parse(as_string(v), nullptr, false);
    if (!groups.is_array()) continue;
    for (const auto& g : groups)
      if (g.is_object() && g.contains("pg_name") && g["pg_name"].is_string() && g.contains("group_size") &&
          g["group_size"].is_number_integer()) {
        std::string name = g["pg_name"].get<std::string>();
        if (g.contains("pg_desc") && g["pg_desc"].is_string()) name += " (" + g["pg_desc"].get<std::string>() + ")";
        et_.group_sizes[name] = g["group_size"].get<std::int64_t>();
      }
  }
}

void Reader::read_node(const element& n) {
  id_.reset();
  name_.clear();
  if (n.type() != element_type::OBJECT) fail_node(fmt::format("expected a node (an object), got {}", describe(n)));
  std::optional<element> id, name, parent, ctrl_deps, op_schema, attrs, dur, rf_id, tid, seq_id, fw_tid;
  std::optional<element> in, out, in_shapes, in_types, out_shapes, out_types;
  for (auto field : obj(n)) {
    const std::string_view k = field.key;
    const element& v = field.value;
    if (k == "id") id = v;
    else if (k == "name") name = v;
    else if (k == "parent") parent = v;
    else if (k == "ctrl_deps") ctrl_deps = v;
    else if (k == "inputs") in = v;
    else if (k == "outputs") out = v;
    else if (k == "input_shapes") in_shapes = v;
    else if (k == "input_types") in_types = v;
    else if (k == "output_shapes") out_shapes = v;
    else if (k == "output_types") out_types = v;
    else if (k == "op_schema") op_schema = v;
    else if (k == "attrs") attrs = v;
    else if (k == "inclusive_dur") dur = v;
    else if (k == "rf_id") rf_id = v;
    else if (k == "tid") tid = v;
    else if (k == "seq_id") seq_id = v;
    else if (k == "fw_tid") fw_tid = v;
  }
  if (id && is_int(*id)) id_ = as_int(*id);
  if (name && is_string(*name)) name_ = std::string(as_string(*name));
  if (!id || !is_int(*id)) fail_node("id: expected an integer");
  if (!name || !is_string(*name)) fail_node("name: expected a string");
  // The layout, from the first node that has inputs: a list (old) or {values, ...} (new).
  if (!old_layout_ && in && in->type() != element_type::NULL_VALUE)
    old_layout_ = in->type() != element_type::OBJECT;
  const bool old = old_layout_.value_or(!parent.has_value() ? false : true);

  EtNode node;
  node.id = *id_;
  node.name = name_;
  if (dur) {
    double d = -1;
    if (dur->is_number()) d = dur->get_double().value_unsafe();
    if (!dur->is_number() || !is_op_duration(d, kMicroseconds))
      fail_node(fmt::format("inclusive_dur: expected {}, got {}", op_duration_range(kMicroseconds), describe(*dur)));
    node.duration_us = d;
  }
  const char* parent_key = old ? "parent" : "ctrl_deps";
  if (const auto& p = old ? parent : ctrl_deps; p && p->type() != element_type::NULL_VALUE) {
    if (!is_int(*p)) fail_node(fmt::format("{}: expected a node id, got {}", parent_key, describe(*p)));
    node.parent = as_int(*p);
  }
  Side inputs, outputs;
  if (old) {
    if (op_schema && is_string(*op_schema)) node.op_schema = std::string(as_string(*op_schema));
    if (rf_id && is_int(*rf_id)) node.rf_id = as_int(*rf_id);
    if (tid && is_int(*tid)) node.tid = as_int(*tid);
    if (seq_id && is_int(*seq_id)) node.seq_id = as_int(*seq_id);
    if (fw_tid && is_int(*fw_tid)) node.fw_tid = as_int(*fw_tid);
    if (in) inputs = {in, in_shapes, in_types, std::nullopt};
    if (out) outputs = {out, out_shapes, out_types, std::nullopt};
  } else {
    if (attrs) read_attrs(*attrs, node);
    auto side = [&](const char* key, const std::optional<element>& e, Side& into) {
      if (!e || e->type() == element_type::NULL_VALUE) return;
      if (e->type() != element_type::OBJECT)
        fail_node(fmt::format("{}: expected {{values, shapes, types}}, got {}", key, describe(*e)));
      for (auto field : obj(*e)) {
        if (field.key == "values") into.values = field.value;
        else if (field.key == "shapes") into.shapes = field.value;
        else if (field.key == "types") into.types = field.value;
        else if (field.key == "strides") {
          into.strides = field.value;
          et_.has_strides = true;
        }
      }
      if (!into.values) fail_node(fmt::format("{}.values: missing", key));
    };
    side("inputs", in, inputs);
    side("outputs", out, outputs);
  }
  node.inputs = read_side("inputs", inputs, node);
  node.outputs = read_side("outputs", outputs, node);
  if (node.name == "aten::as_strided" && inputs.values && is_array(*inputs.values)) {
    // as_strided(self, size, stride, ...) with a zero stride: a broadcast view.
    std::size_t k = 0;
    for (element v : arr(*inputs.values)) {
      if (k++ != 2 || !is_array(v)) continue;
      for (element s : arr(v))
        if (is_int(s) && as_int(s) == 0) node.zero_stride_argument = true;
    }
  }
  if (node.name == "record_param_comms") comm_arguments(inputs, node);
  if (starts_with(node.name, "## process_group:init")) process_groups(inputs);
  nodes_.push_back(std::move(node));
}

element Reader::materialise(simdjson::ondemand::value v, simdjson::dom::parser& parser) {
  simdjson::ondemand::json_type type{};
  if (const auto err = v.type().get(type)) fail_json(err);
  std::string_view raw;
  if (const auto err = simdjson::to_json_string(v).get(raw)) fail_json(err);
  // A container is consumed by taking its text, a scalar is not; a string left to simdjson's
  // skipping would let a ':' after it pass (it takes the string for a key).
  simdjson::ondemand::raw_json_string ignored;
  if (type == simdjson::ondemand::json_type::string)
    if (const auto err = v.get_raw_json_string().get(ignored)) fail_json(err);
  element e;
  // `raw` lies inside the padded text, so the padding simdjson reads past its end is there.
  if (const auto err = parser.parse(raw.data(), raw.size(), false).get(e)) fail_json(err);
  return e;
}

void Reader::read_document() {
  simdjson::ondemand::document doc;
  if (const auto err = stream_.iterate(json_).get(doc)) fail_json(err);
  simdjson::ondemand::json_type type{};
  if (const auto err = doc.type().get(type)) fail_json(err);
  if (type != simdjson::ondemand::json_type::object) {
    // No Execution Trace: said in the words of the whole document, once it is known to be JSON.
    simdjson::dom::parser whole;
    element e;
    if (const auto err = whole.parse(json_.data(), json_.size(), false).get(e)) fail_json(err);
    fail(fmt::format("expected a JSON object with schema and nodes, got {}", describe(e)));
  }
  simdjson::ondemand::object top;
  if (const auto err = doc.get_object().get(top)) fail_json(err);
  std::optional<std::string> schema;  // of a repeated key, the last counts, as for `nodes`
  for (auto field : top) {
    std::string_view key;
    if (const auto err = field.unescaped_key().get(key)) fail_json(err);
    simdjson::ondemand::value v;
    if (const auto err = field.value().get(v)) fail_json(err);
    if (key == "nodes") {
      read_nodes(v);
      continue;
    }
    const element e = materialise(v, value_parser_);  // checked, even where unread
    if (key == "schema") schema = is_string(e) ? std::string(as_string(e)) : simdjson::minify(e);
  }
  // Nothing may follow the object: the walk has no location left.
  if (doc.current_location().error() != simdjson::OUT_OF_BOUNDS) fail_json(simdjson::TRAILING_CONTENT);

  if (!schema) fail("schema: missing; expected an Execution Trace schema 1.0.x or 1.1.x");
  const std::string& version = *schema;
  if (!starts_with(version, "1.0.") && !starts_with(version, "1.1."))
    fail(fmt::format("schema: expected an Execution Trace schema 1.0.x or 1.1.x, got '{}'", version));
  et_.schema = version;
  if (nodes_not_a_list_) fail(fmt::format("nodes: expected a list of nodes, got {}", *nodes_not_a_list_));
  if (node_error_) throw *node_error_;
  // PARAM's rule: schema 1.0.1 is the old layout and every later one the new. The nodes
  // decide; a schema string that says otherwise is worth a note.
  et_.old_layout = old_layout_.value_or(version == "1.0.1");
  const bool schema_says_old = version == "1.0.1" || version == "1.0.0";
  if (old_layout_ && *old_layout_ != schema_says_old)
    et_.notes.push_back(fmt::format("schema '{}' names the {} node layout, but the nodes are in the {} one; read as the nodes are",
                                    version, schema_says_old ? "old (torch 1.13)" : "new (torch 2.x)",
                                    *old_layout_ ? "old (torch 1.13)" : "new (torch 2.x)"));
}

// One node at a time: parsed alone, read, and its tape reused for the next.
void Reader::read_nodes(simdjson::ondemand::value list) {
  // A later `nodes` replaces an earlier one.
  nodes_.clear();
  old_layout_.reset();
  node_error_.reset();
  et_.has_strides = false;
  et_.group_sizes.clear();
  simdjson::ondemand::json_type type{};
  if (const auto err = list.type().get(type)) fail_json(err);
  if (type != simdjson::ondemand::json_type::array) {
    nodes_not_a_list_ = describe(materialise(list, value_parser_));
    return;
  }
  nodes_not_a_list_.reset();
  simdjson::ondemand::array nodes;
  std::size_t count = 0;
  if (const auto err = list.get_array().get(nodes)) fail_json(err);
  if (const auto err = nodes.count_elements().get(count)) fail_json(err);
  nodes_.reserve(count);
  index_ = 0;
  for (auto item : nodes) {
    simdjson::ondemand::value v;
    if (const auto err = item.get(v)) fail_json(err);
    const element n = materialise(v, node_parser_);
    // After a bad node the others are only checked to be JSON.
    if (!node_error_) {
      try {
        read_node(n);
      } catch (const InputError& e) {
        node_error_ = e;
      }
    }
    ++index_;
  }
}

void Reader::link() {
  auto& nodes = et_.nodes;
  std::unordered_map<std::int64_t, std::size_t> seen;
  seen.reserve(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i)
    if (!seen.emplace(nodes[i].id, i).second) {
      index_ = i;
      id_ = nodes[i].id;
      name_ = nodes[i].name;
      fail_node(fmt::format("id {} is used by nodes[{}] too", nodes[i].id, seen[nodes[i].id]));
    }
  std::stable_sort(nodes.begin(), nodes.end(), [](const EtNode& a, const EtNode& b) { return a.id < b.id; });
  std::unordered_map<std::int64_t, std::size_t> index_of;
  index_of.reserve(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) index_of.emplace(nodes[i].id, i);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    EtNode& node = nodes[i];
    for (const auto* side : {&node.inputs, &node.outputs})
      for (const auto& arg : *side)
        for (const auto& t : arg)
          if (starts_with(t.device, "cuda")) et_.has_device_tensors = true;
    if (node.parent == 0 || node.parent == node.id) continue;
    auto p = index_of.find(node.parent);
    if (p == index_of.end()) {
      if (starts_with(node.name, "[pytorch|profiler|")) continue;  // the root of a thread
      fail(fmt::format("node {} ({}): parent {} is not a node in the file", node.id, node.name, node.parent));
    }
    // Ids count up as ops start, and a parent starts before its children; this also rules
    // out cycles.
    if (p->second >= i) fail(fmt::format("node {} ({}): parent {} starts after it", node.id, node.name, node.parent));
    nodes[p->second].children.push_back(i);
  }
}

}  // namespace

ExecutionTrace read_execution_trace(const std::string& text, const std::string& source) {
  return Reader(text, source).run();
}

}  // namespace memsim
