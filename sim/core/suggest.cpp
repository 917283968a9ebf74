#include "sim/core/suggest.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

namespace memsim {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Levenshtein distance with adjacent transpositions (optimal string alignment).
std::size_t distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i)
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

}  // namespace

std::string closest_name(std::string_view name, const std::vector<std::string>& candidates) {
  const std::string n = lower(name);
  // A number one digit from another is a different number, not a typo of it.
  if (n.empty() || n.find_first_not_of("0123456789.") == std::string::npos) return {};
  const std::size_t limit = std::clamp<std::size_t>(n.size() / 3, 1, 3);
  std::string best;
  std::size_t best_d = limit + 1;
  for (const std::string& c : candidates) {
    const std::string lc = lower(c);
    if (lc == n) return c;
    std::size_t d = distance(n, lc);
    if (n.size() >= 3 && lc.starts_with(n)) d = std::min(d, limit);  // "gpt2" for "gpt2-xl"
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  return best;
}

std::string did_you_mean(std::string_view name, const std::vector<std::string>& candidates) {
  const std::string c = closest_name(name, candidates);
  return c.empty() || c == name ? std::string() : fmt::format("; did you mean '{}'?", c);
}

std::string did_you_mean_aside(std::string_view name, const std::vector<std::string>& candidates) {
  const std::string c = closest_name(name, candidates);
  return c.empty() || c == name ? std::string() : fmt::format(" (did you mean '{}'?)", c);
}

}  // namespace memsim
