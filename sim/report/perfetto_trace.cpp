#include "sim/report/perfetto_trace.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <queue>
#include <unordered_map>

#include <fmt/format.h>

#include "sim/report/perfetto_trace.pb.h"  // generated from perfetto_trace.proto
#include "sim/core/text_out.h"
#include "sim/report/trace_layout.h"

namespace memsim {
namespace {

namespace pb = memsim::pftrace;

constexpr std::uint32_t kSequenceId = 1;
constexpr std::uint64_t kRootUuid = 0;  // Perfetto's default track: the parent of all
// The most extra counter values one TrackEvent may carry (TrackEventData::kMaxNumExtraCounters
// in Perfetto's trace processor, which drops an event with more).
constexpr std::size_t kMaxExtraCounters = 8;

// Interned strings of one kind (event names, categories, argument keys or values): an iid
// per string, defined in the packet that first uses it. Callers that know a dense id for the
// string (an op, a buffer, a tier) look it up by that id and skip the hashing.
class InternTable {
 public:
  /// The iid of `s`, and whether it is new (and must be defined in the current packet).
  std::pair<std::uint64_t, bool> get(std::string_view s) {
    auto [it, added] = by_string_.try_emplace(std::string(s), next_);
    if (added) ++next_;
    return {it->second, added};
  }
  /// A new iid for a string known to be unseen (or whose duplicate costs only bytes).
  std::uint64_t next() { return next_++; }

 private:
  std::unordered_map<std::string, std::uint64_t> by_string_;
  std::uint64_t next_ = 1;  // 0 means unset
};

// A dense cache of iids by id: 0 until interned.
struct IidCache {
  std::vector<std::uint64_t> iid;
  std::uint64_t& operator[](std::size_t id) {
    if (id >= iid.size()) iid.resize(id + 1, 0);
    return iid[id];
  }
};

// A slice's END, waiting for its time.
struct PendingEnd {
  std::int64_t ts_ns;
  std::uint64_t order;  // ties: in the order the slices began
  std::uint64_t track;
  bool operator>(const PendingEnd& o) const {
    return ts_ns != o.ts_ns ? ts_ns > o.ts_ns : order > o.order;
  }
};

// Argument keys of the events (DebugAnnotationName), interned by this index.
enum Arg : int {
  kArgOpIndex, kArgOpKind, kArgPhase, kArgWaitingOp, kArgBuffer, kArgBytes, kArgFrom, kArgTo,
  kArgTier, kArgOp, kArgRequested, kArgAllocated, kArgCapacity, kArgReason, kArgCount
};
constexpr std::string_view kArgNames[kArgCount] = {
    "op_index", "op_kind", "phase",           "waiting_op",      "buffer",         "bytes", "from",
    "to",       "tier",    "op",              "requested_bytes", "allocated_bytes", "capacity_bytes",
    "reason"};

// The counter tracks of one tier and the values they last showed.
struct TierCounters {
  std::uint64_t allocated = 0;  // track uuids; 0: no such track
  std::uint64_t reserved = 0;
  std::array<std::uint64_t, kCategoryCount> category{};
  std::uint64_t evictions = 0;
  std::uint64_t oom = 0;
  bool emitted = false;  // whether a sample was written yet (the first writes every value)
  std::uint64_t last_reserved = 0;
  CategoryBytes last_category{};
};

// --- the wire format ----------------------------------------------------------------------

// The protocol-buffer wire format, written by hand for the event packets (a message object
// per packet, cleared and serialized, cost most of the trace's time). Fields go in the order
// of their numbers, as the generated classes write them, so the bytes are the same.
enum Wire : std::uint32_t { kVarint = 0, kBytes = 2 };

constexpr std::size_t varint_size(std::uint64_t v) {
  std::size_t n = 1;
  while (v >= 0x80) v >>= 7, ++n;
  return n;
}

// One growing buffer of bytes, written through a raw cursor.
class Bytes {
 public:
  std::size_t size() const { return size_; }
  std::string_view view() const { return {data_.data(), size_}; }
  void clear() { size_ = 0; }
  /// Room for `n` more bytes at the returned pointer; advance() past what was written.
  char* room(std::size_t n) {
    if (data_.size() - size_ < n) [[unlikely]]
      grow(n);
    return data_.data() + size_;
  }
  void advance(char* to) { size_ = static_cast<std::size_t>(to - data_.data()); }

  void varint(std::uint64_t v) { advance(put_varint(room(10), v)); }
  void key(std::uint32_t field, Wire wire) { varint((std::uint64_t{field} << 3) | wire); }
  void uint_field(std::uint32_t field, std::uint64_t v) {
    char* p = room(20);
    p = put_varint(p, (std::uint64_t{field} << 3) | kVarint);
    advance(put_varint(p, v));
  }
  void bytes_field(std::uint32_t field, std::string_view v) {
    char* p = room(20 + v.size());
    p = put_varint(p, (std::uint64_t{field} << 3) | kBytes);
    p = put_varint(p, v.size());
    std::memcpy(p, v.data(), v.size());
    advance(p + v.size());
  }
  void append(std::string_view v) {
    char* p = room(v.size());
    std::memcpy(p, v.data(), v.size());
    advance(p + v.size());
  }
  /// A field holding a message whose body is `body`.
  void message_field(std::uint32_t field, const Bytes& body) { bytes_field(field, body.view()); }

  static char* put_varint(char* p, std::uint64_t v) {
    while (v >= 0x80) {
      *p++ = static_cast<char>(static_cast<std::uint8_t>(v) | 0x80);
      v >>= 7;
    }
    *p++ = static_cast<char>(v);
    return p;
  }

 private:
  // Out of line, so that room() is inlined where the bytes are written (called a few
  // million times for a million-event trace, it was a fifth of the trace's instructions).
  [[gnu::noinline]] void grow(std::size_t n) { data_.resize(std::max(data_.size() * 2, size_ + n + 256)); }

  std::string data_;
  std::size_t size_ = 0;
};

// Field numbers of the messages the event packets use (sim/report/perfetto_trace.proto).
namespace field {
constexpr std::uint32_t kTracePacket = 1;  // Trace.packet
constexpr std::uint32_t kTimestamp = 8, kSequenceId = 10, kTrackEvent = 11, kInternedData = 12,
                        kSequenceFlags = 13;                                            // TracePacket
constexpr std::uint32_t kCategoryIids = 3, kDebugAnnotations = 4, kType = 9, kNameIid = 10,
                        kTrackUuid = 11, kExtraCounterValues = 12, kCounterValue = 30,
                        kExtraCounterTrackUuids = 31;                                   // TrackEvent
constexpr std::uint32_t kArgNameIid = 1, kUintValue = 3, kStringValue = 6, kStringValueIid = 17;  // DebugAnnotation
constexpr std::uint32_t kEventCategories = 1, kEventNames = 2, kDebugAnnotationNames = 3,
                        kDebugAnnotationStringValues = 29;                             // InternedData
constexpr std::uint32_t kIid = 1, kInternedName = 2;  // EventCategory, EventName, ...: iid, name (or str)
}  // namespace field

class Writer {
 public:
  Writer(TextOut& out, const std::vector<Event>& events, const SampleLog& samples,
         const Summary& summary, const Trace& trace, const PlatformSpec& platform,
         std::size_t max_events)
      : sink_(out),
        events_(events),
        summary_(summary),
        trace_(trace),
        platform_(platform),
        layout_(events, samples, summary, trace, platform, max_events) {}

  PerfettoTrace write();

 private:
  // Track packets (a few per device and tier) through the generated classes: begin() clears
  // the one reused packet; end() appends it.
  pb::TracePacket& begin(std::int64_t ts_ns);
  void end();
  // Event packets, by hand: the interning and the annotations fill the scratch buffers, then
  // put_event() writes the packet with its TrackEvent (`event_`) and interned data.
  void put_event(std::int64_t ts_ns, std::uint32_t flags);
  void put_track_event(std::int64_t ts_ns, pb::TrackEvent::Type type, std::uint64_t track,
                       std::uint64_t name_iid, std::uint64_t category_iid);
  void packet_done();

  // Interning into the current packet.
  std::uint64_t event_name_iid(IidCache& cache, std::size_t id, std::string_view name);
  std::uint64_t new_event_name_iid(std::string_view name);
  std::uint64_t category_iid(EventKind kind);
  std::uint64_t arg_name_iid(Arg arg);
  std::uint64_t string_value_iid(std::string_view value);
  std::uint64_t string_value_iid(IidCache& cache, std::size_t id, std::string_view value);
  static void put_interned(Bytes& table, std::uint32_t table_field, std::uint64_t iid, std::string_view name);
  // Debug annotations of the current event, into `args_`.
  void add_arg(Arg arg, std::uint64_t value);
  void add_interned_arg(Arg arg, std::uint64_t value_iid);
  void add_string_arg(Arg arg, std::string_view value);

  std::uint64_t add_track(std::uint64_t parent, const std::string& name, int rank);
  void put_tracks();
  void put_slice_begin(const TraceItem& item);
  void put_counter(const TraceItem& item);
  void put_evict(const TraceItem& item);
  void put_oom(const TraceItem& item);
  void flush_ends(std::int64_t until_ns);

  TextOut& sink_;
  const std::vector<Event>& events_;
  const Summary& summary_;
  const Trace& trace_;
  const PlatformSpec& platform_;
  TraceLayout layout_;

  Bytes out_;  // packets not yet passed to sink_
  pb::TracePacket packet_;
  bool first_packet_ = true;
  std::uint64_t next_uuid_ = 1;
  // The event packet being built: its TrackEvent's annotations and body, and the entries it
  // adds to each interned table (InternedData's fields, each in the order of its iids).
  Bytes args_, event_, entry_;
  Bytes interned_categories_, interned_names_, interned_arg_names_, interned_values_;

  // Slice tracks by (pid, tid), sorted; counter and instant tracks by tier.
  std::vector<std::pair<std::pair<std::uint32_t, std::uint32_t>, std::uint64_t>> thread_tracks_;
  // Per tier with a track (sampled, evicting or out of memory): a 16,384-GPU platform's
  // 20,480 tiers are mostly idle, and each one's counters are 200 bytes.
  std::vector<std::uint32_t> tier_slot_;
  std::vector<TierCounters> tiers_;
  TierCounters& tier(std::size_t t) {
    if (tier_slot_[t] == kNoSlot) {
      tier_slot_[t] = static_cast<std::uint32_t>(tiers_.size());
      tiers_.emplace_back();
    }
    return tiers_[tier_slot_[t]];
  }
  static constexpr std::uint32_t kNoSlot = UINT32_MAX;
  std::uint64_t global_oom_track_ = 0;

  InternTable names_, categories_, arg_names_, string_values_;
  IidCache op_name_iid_, kind_name_iid_, evict_name_iid_, category_iid_, arg_name_iid_;
  IidCache buffer_value_iid_, tier_value_iid_, phase_value_iid_;
  std::unordered_map<const std::string*, std::uint64_t> kind_value_iid_;

  std::priority_queue<PendingEnd, std::vector<PendingEnd>, std::greater<>> ends_;
  std::uint64_t slices_begun_ = 0;
};

// --- packets ------------------------------------------------------------------------------

void Writer::packet_done() {
  // Passed on a mebibyte at a time: the file is never held whole.
  if (out_.size() >= (std::size_t{1} << 20)) {
    sink_.put(out_.view());
    out_.clear();
  }
}

pb::TracePacket& Writer::begin(std::int64_t ts_ns) {
  packet_.Clear();
  packet_.set_timestamp(static_cast<std::uint64_t>(ts_ns));
  packet_.set_trusted_packet_sequence_id(kSequenceId);
  if (first_packet_) {
    // Nothing interned before this packet applies (there is nothing before it).
    packet_.set_first_packet_on_sequence(true);
    packet_.set_sequence_flags(pb::TracePacket::SEQ_INCREMENTAL_STATE_CLEARED);
    first_packet_ = false;
  }
  return packet_;
}

void Writer::end() {
  // The file is a serialized Trace: each packet is its field 1 (length-delimited).
  const std::size_t size = packet_.ByteSizeLong();
  out_.key(field::kTracePacket, kBytes);
  out_.varint(size);
  char* at = out_.room(size);
  packet_.SerializeWithCachedSizesToArray(reinterpret_cast<std::uint8_t*>(at));
  out_.advance(at + size);
  packet_done();
}

void Writer::put_event(std::int64_t ts_ns, std::uint32_t flags) {
  const std::size_t interned = interned_categories_.size() + interned_names_.size() +
                               interned_arg_names_.size() + interned_values_.size();
  std::size_t size = 1 + varint_size(static_cast<std::uint64_t>(ts_ns)) + 2 +  // timestamp, sequence id
                     1 + varint_size(event_.size()) + event_.size();
  if (interned) size += 1 + varint_size(interned) + interned;
  if (flags) size += 1 + varint_size(flags);
  out_.key(field::kTracePacket, kBytes);
  out_.varint(size);
  out_.uint_field(field::kTimestamp, static_cast<std::uint64_t>(ts_ns));
  out_.uint_field(field::kSequenceId, kSequenceId);
  out_.message_field(field::kTrackEvent, event_);
  if (interned) {
    out_.key(field::kInternedData, kBytes);
    out_.varint(interned);
    for (Bytes* table : {&interned_categories_, &interned_names_, &interned_arg_names_, &interned_values_}) {
      out_.append(table->view());
      table->clear();
    }
  }
  if (flags) out_.uint_field(field::kSequenceFlags, flags);
  args_.clear();
  packet_done();
}

void Writer::put_track_event(std::int64_t ts_ns, pb::TrackEvent::Type type, std::uint64_t track,
                             std::uint64_t name_iid, std::uint64_t category_iid) {
  event_.clear();
  if (category_iid) event_.uint_field(field::kCategoryIids, category_iid);
  event_.append(args_.view());
  event_.uint_field(field::kType, type);
  if (name_iid) event_.uint_field(field::kNameIid, name_iid);
  event_.uint_field(field::kTrackUuid, track);
  put_event(ts_ns, name_iid ? pb::TracePacket::SEQ_NEEDS_INCREMENTAL_STATE : 0);
}

// --- interning ----------------------------------------------------------------------------

void Writer::put_interned(Bytes& table, std::uint32_t table_field, std::uint64_t iid, std::string_view name) {
  // One entry: {iid, name}, as EventCategory, EventName, DebugAnnotationName and
  // InternedString all are.
  const std::size_t body = 1 + varint_size(iid) + 1 + varint_size(name.size()) + name.size();
  table.key(table_field, kBytes);
  table.varint(body);
  table.uint_field(field::kIid, iid);
  table.bytes_field(field::kInternedName, name);
}

std::uint64_t Writer::event_name_iid(IidCache& cache, std::size_t id, std::string_view name) {
  std::uint64_t& iid = cache[id];
  if (iid == 0) iid = new_event_name_iid(name);
  return iid;
}

std::uint64_t Writer::new_event_name_iid(std::string_view name) {
  const std::uint64_t iid = names_.next();
  put_interned(interned_names_, field::kEventNames, iid, name);
  return iid;
}

std::uint64_t Writer::category_iid(EventKind kind) {
  std::uint64_t& iid = category_iid_[static_cast<std::size_t>(kind)];
  if (iid == 0) {
    iid = categories_.next();
    put_interned(interned_categories_, field::kEventCategories, iid, to_string(kind));
  }
  return iid;
}

std::uint64_t Writer::arg_name_iid(Arg arg) {
  std::uint64_t& iid = arg_name_iid_[arg];
  if (iid == 0) {
    iid = arg_names_.next();
    put_interned(interned_arg_names_, field::kDebugAnnotationNames, iid, kArgNames[arg]);
  }
  return iid;
}

std::uint64_t Writer::string_value_iid(std::string_view value) {
  const auto [iid, added] = string_values_.get(value);
  if (added) put_interned(interned_values_, field::kDebugAnnotationStringValues, iid, value);
  return iid;
}

std::uint64_t Writer::string_value_iid(IidCache& cache, std::size_t id, std::string_view value) {
  std::uint64_t& iid = cache[id];
  if (iid == 0) iid = string_value_iid(value);
  return iid;
}

void Writer::add_arg(Arg arg, std::uint64_t value) {
  entry_.clear();
  entry_.uint_field(field::kArgNameIid, arg_name_iid(arg));
  entry_.uint_field(field::kUintValue, value);
  args_.message_field(field::kDebugAnnotations, entry_);
}

void Writer::add_interned_arg(Arg arg, std::uint64_t value_iid) {
  entry_.clear();
  entry_.uint_field(field::kArgNameIid, arg_name_iid(arg));
  entry_.uint_field(field::kStringValueIid, value_iid);
  args_.message_field(field::kDebugAnnotations, entry_);
}

void Writer::add_string_arg(Arg arg, std::string_view value) {
  entry_.clear();
  entry_.uint_field(field::kArgNameIid, arg_name_iid(arg));
  entry_.bytes_field(field::kStringValue, value);
  args_.message_field(field::kDebugAnnotations, entry_);
}

// --- tracks -------------------------------------------------------------------------------

std::uint64_t Writer::add_track(std::uint64_t parent, const std::string& name, int rank) {
  const std::uint64_t uuid = next_uuid_++;
  pb::TrackDescriptor& t = *begin(0).mutable_track_descriptor();
  t.set_uuid(uuid);
  t.set_parent_uuid(parent);
  t.set_name(name);
  t.set_sibling_order_rank(rank);
  end();
  return uuid;
}

void Writer::put_tracks() {
  // The root track: processes in the order of their pids (devices, then tiers), as
  // trace.json's process_sort_index.
  begin(0).mutable_track_descriptor()->set_uuid(kRootUuid);
  packet_.mutable_track_descriptor()->set_process_ordering(pb::TrackDescriptor::PROCESS_ORDERING_EXPLICIT);
  end();
  auto process = [&](std::uint32_t pid, const std::string& name, const std::string& description) {
    const std::uint64_t uuid = next_uuid_++;
    pb::TrackDescriptor& t = *begin(0).mutable_track_descriptor();
    t.set_uuid(uuid);
    t.mutable_process()->set_pid(static_cast<std::int32_t>(pid));
    t.mutable_process()->set_process_name(name);
    t.set_child_ordering(pb::TrackDescriptor::EXPLICIT);
    t.set_sibling_order_rank(static_cast<std::int32_t>(pid));
    if (!description.empty()) t.set_description(description);
    end();
    return uuid;
  };

  // Devices: a slice track per stream and busy copy engine, ranked as trace.json's threads;
  // the first says what ran.
  const std::string run = fmt::format(
      "memsim {}: {} on {}, policy {}: {}; {} of {} events written", MEMSIM_VERSION,
      summary_.description.empty() ? summary_.workload : summary_.description, summary_.platform,
      summary_.policy, summary_.status, layout_.events_written(), layout_.events_total());
  std::vector<std::uint64_t> device_track(platform_.devices.size());
  for (std::size_t d = 0; d < platform_.devices.size(); ++d)
    device_track[d] = process(layout_.device_pid(d), layout_.device_process_name(d), d == 0 ? run : "");
  for (const auto& [pid, tid] : layout_.threads())
    thread_tracks_.push_back({{pid, tid}, add_track(device_track[pid - 1], layout_.thread_name(pid, tid),
                                                    static_cast<int>(tid))});

  // Tiers: instant tracks, then counter tracks; the counters of a tier share one y axis.
  // The OOM's tier, or none (npos; an optional here drew a false -Wmaybe-uninitialized).
  constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  const std::size_t oom_tier = summary_.oom ? platform_.find_tier(summary_.oom->tier).value_or(kNone) : kNone;
  tier_slot_.assign(platform_.tiers.size(), kNoSlot);
  for (std::size_t t = 0; t < platform_.tiers.size(); ++t) {
    const std::uint64_t tier_track = process(layout_.tier_pid(t), layout_.tier_process_name(t), "");
    if (oom_tier != t && !layout_.tier_evicts(t) && !layout_.tier_sampled(t)) continue;  // no tracks
    TierCounters& c = tier(t);
    int rank = 0;
    if (oom_tier == t) c.oom = add_track(tier_track, "OOM", rank++);
    if (layout_.tier_evicts(t)) c.evictions = add_track(tier_track, "evictions", rank++);
    auto counter_track = [&](const std::string& name) {
      const std::uint64_t uuid = next_uuid_++;
      pb::TrackDescriptor& d = *begin(0).mutable_track_descriptor();
      d.set_uuid(uuid);
      d.set_parent_uuid(tier_track);
      d.set_name(name);
      d.set_sibling_order_rank(rank++);
      d.mutable_counter()->set_unit(pb::CounterDescriptor::UNIT_SIZE_BYTES);
      d.mutable_counter()->set_y_axis_share_key(platform_.tiers[t].name);
      end();
      return uuid;
    };
    if (!layout_.tier_sampled(t)) continue;  // never used: no counters (as trace.json)
    c.allocated = counter_track("allocated");
    if (layout_.tier_reserved_differs(t)) c.reserved = counter_track("reserved");
    for (int k = 0; k < kCategoryCount; ++k)
      if (layout_.tier_has_category(t, k))
        c.category[k] = counter_track(std::string(to_string(static_cast<Category>(k))));
  }
  if (summary_.oom && oom_tier == kNone) global_oom_track_ = add_track(kRootUuid, "OOM", 0);
}

// --- events -------------------------------------------------------------------------------

void Writer::flush_ends(std::int64_t until_ns) {
  // An END at or before the next item's time goes first: a slice that ends when the next
  // one on its track begins closes before it opens.
  while (!ends_.empty() && ends_.top().ts_ns <= until_ns) {
    const PendingEnd e = ends_.top();
    ends_.pop();
    put_track_event(e.ts_ns, pb::TrackEvent::TYPE_SLICE_END, e.track, 0, 0);
  }
}

void Writer::put_slice_begin(const TraceItem& item) {
  const Event& e = events_[item.index];
  const std::uint32_t pid = layout_.device_pid(layout_.platform_device(e));
  const auto at = std::lower_bound(thread_tracks_.begin(), thread_tracks_.end(),
                                   std::make_pair(pid, item.tid),
                                   [](const auto& t, const auto& key) { return t.first < key; });
  const std::uint64_t track = at->second;  // every (pid, tid) of an event has its track
  const Op* op = e.op == kNoOp ? nullptr : &trace_.ops[e.op];
  const std::string_view name = layout_.slice_name(e);
  const bool named_by_op = op && name.data() == op->name.data();  // the op's name, not its kind's
  const std::uint64_t name_iid = named_by_op ? event_name_iid(op_name_iid_, e.op, name)
                                             : event_name_iid(kind_name_iid_, static_cast<std::size_t>(e.kind), name);
  const std::uint64_t category = category_iid(e.kind);
  // The arguments trace.json gives the slice.
  if (op) {
    if (e.kind == EventKind::stall) {
      add_string_arg(kArgWaitingOp, op->name);
    } else {
      add_arg(kArgOpIndex, op->id);
      // A kind is one string per process (Interned): its address finds its iid.
      std::uint64_t& kind_iid = kind_value_iid_[&op->kind.str()];
      if (kind_iid == 0) kind_iid = string_value_iid(op->kind);
      add_interned_arg(kArgOpKind, kind_iid);
      add_interned_arg(kArgPhase, string_value_iid(phase_value_iid_, static_cast<std::size_t>(op->phase),
                                                   to_string(op->phase)));
    }
  }
  if (e.buffer != kNoId)
    add_interned_arg(kArgBuffer, string_value_iid(buffer_value_iid_, e.buffer, trace_.buffers[e.buffer].name));
  if (e.bytes > 0) add_arg(kArgBytes, e.bytes);
  if (e.src_tier != kNoId)
    add_interned_arg(kArgFrom, string_value_iid(tier_value_iid_, e.src_tier, platform_.tiers[e.src_tier].name));
  if (e.dst_tier != kNoId)
    add_interned_arg(e.kind == EventKind::stall ? kArgTier : kArgTo,
                     string_value_iid(tier_value_iid_, e.dst_tier, platform_.tiers[e.dst_tier].name));
  put_track_event(item.ts_ns, pb::TrackEvent::TYPE_SLICE_BEGIN, track, name_iid, category);
  ends_.push({trace_ns(e.end_s), slices_begun_++, track});
}

void Writer::put_counter(const TraceItem& item) {
  // A sample is a packet: allocated is its value, and every other counter of the tier that
  // changed (all of them in the tier's first sample) rides along as an extra value. Perfetto's
  // trace processor drops an event with more than kMaxExtraCounters extras, so the rest go
  // in further packets at the same time.
  const MemorySample& s = layout_.sample(item.index);
  TierCounters& c = tier(s.tier);
  std::array<std::pair<std::uint64_t, std::uint64_t>, kCategoryCount + 2> values;  // (track, bytes)
  std::size_t n = 0;
  values[n++] = {c.allocated, s.allocated_bytes};
  if (c.reserved && (!c.emitted || s.reserved_bytes != c.last_reserved))
    values[n++] = {c.reserved, s.reserved_bytes};
  for (int k = 0; k < kCategoryCount; ++k)
    if (c.category[k] && (!c.emitted || s.by_category[k] != c.last_category[k]))
      values[n++] = {c.category[k], s.by_category[k]};
  c.emitted = true;
  c.last_reserved = s.reserved_bytes;
  c.last_category = s.by_category;
  for (std::size_t i = 0; i < n;) {
    // TrackEvent{type, track_uuid, extra_counter_values..., counter_value, extra_counter_track_uuids...}
    const std::size_t first = i;
    const std::size_t last = std::min(n, i + 1 + kMaxExtraCounters);
    event_.clear();
    event_.uint_field(field::kType, pb::TrackEvent::TYPE_COUNTER);
    event_.uint_field(field::kTrackUuid, values[first].first);
    for (std::size_t k = first + 1; k < last; ++k) event_.uint_field(field::kExtraCounterValues, values[k].second);
    event_.uint_field(field::kCounterValue, values[first].second);
    for (std::size_t k = first + 1; k < last; ++k) event_.uint_field(field::kExtraCounterTrackUuids, values[k].first);
    put_event(item.ts_ns, 0);
    i = last;
  }
}

void Writer::put_evict(const TraceItem& item) {
  const Event& e = events_[item.index];
  const std::uint64_t name_iid = event_name_iid(evict_name_iid_, e.buffer, "evict " + trace_.buffers[e.buffer].name);
  add_arg(kArgBytes, e.bytes);
  put_track_event(item.ts_ns, pb::TrackEvent::TYPE_INSTANT, tier(e.src_tier).evictions, name_iid, 0);
}

void Writer::put_oom(const TraceItem& item) {
  const OomReport& o = *summary_.oom;
  const auto tier = platform_.find_tier(o.tier);
  const std::uint64_t name_iid = new_event_name_iid(layout_.oom_name());
  add_string_arg(kArgOp, o.op);
  add_string_arg(kArgTier, o.tier);
  add_arg(kArgRequested, o.requested_bytes);
  add_arg(kArgAllocated, o.allocated_bytes);
  add_arg(kArgCapacity, o.capacity_bytes);
  add_string_arg(kArgReason, o.reason.empty() ? std::string_view("the tier is full") : std::string_view(o.reason));
  put_track_event(item.ts_ns, pb::TrackEvent::TYPE_INSTANT, tier ? this->tier(*tier).oom : global_oom_track_, name_iid, 0);
}

PerfettoTrace Writer::write() {
  PerfettoTrace result;
  result.events_total = layout_.events_total();
  result.events_written = layout_.events_written();
  result.written_until_s = layout_.written_until_s();
  const std::size_t kept = layout_.kept();
  put_tracks();
  for (std::size_t i = 0; i < kept; ++i) {
    const TraceItem& item = layout_.items()[i];
    flush_ends(item.ts_ns);
    switch (item.kind) {
      case TraceItemKind::slice: put_slice_begin(item); break;
      case TraceItemKind::counter: put_counter(item); break;
      case TraceItemKind::evict: put_evict(item); break;
      case TraceItemKind::oom: put_oom(item); break;
    }
  }
  flush_ends(INT64_MAX);
  sink_.put(out_.view());
  return result;
}

}  // namespace

PerfettoTrace write_perfetto_trace(TextOut& out, const std::vector<Event>& events,
                                   const SampleLog& samples, const Summary& summary,
                                   const Trace& trace, const PlatformSpec& platform,
                                   std::size_t max_events) {
  return Writer(out, events, samples, summary, trace, platform, max_events).write();
}

PerfettoTrace perfetto_trace(const std::vector<Event>& events,
                             const SampleLog& samples, const Summary& summary,
                             const Trace& trace, const PlatformSpec& platform,
                             std::size_t max_events) {
  std::string bytes;
  TextOut out(bytes);
  PerfettoTrace result = write_perfetto_trace(out, events, samples, summary, trace, platform, max_events);
  result.bytes = std::move(bytes);
  return result;
}

}  // namespace memsim
