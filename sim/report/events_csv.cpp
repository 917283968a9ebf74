#include "sim/report/events_csv.h"

#include <iterator>

#include <fmt/format.h>

namespace memsim {
namespace {

void csv_field(std::string& out, std::string_view s) {
  if (s.find_first_of(",\"\n") == std::string_view::npos) {
    out += s;
    return;
  }
  out += '"';
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
}

}  // namespace

std::string events_csv(const std::vector<AllocationChange>& changes, const Trace& trace,
                       const PlatformSpec& platform) {
  std::string out = "time_s,event,buffer,category,tier,address,bytes\n";
  out.reserve(out.size() + changes.size() * 72);
  auto it = std::back_inserter(out);
  for (const AllocationChange& c : changes) {
    fmt::format_to(it, "{},{},", c.time_s, c.allocated ? "alloc" : "free");
    if (c.buffer != AllocationChange::kNoBuffer) csv_field(out, trace.buffers[c.buffer].name);
    fmt::format_to(it, ",{},{},{},{}\n", to_string(c.category), platform.tiers[c.tier].name,
                   c.allocation.address, c.allocation.bytes);
  }
  return out;
}

}  // namespace memsim
