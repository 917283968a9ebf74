#include "sim/core/interned.h"

#include <mutex>
#include <unordered_set>

namespace memsim {
namespace {

// Node-based: an element's address never changes, so Interned may point at it.
struct Pool {
  std::mutex mutex;
  std::unordered_set<std::string> strings;
};

Pool& pool() {
  static Pool* p = new Pool;  // never destroyed: Interned values may outlive static destructors
  return *p;
}

}  // namespace

const std::string& Interned::empty_string() {
  static const std::string* e = &intern("");
  return *e;
}

const std::string& Interned::intern(std::string_view s) {
  Pool& p = pool();
  std::lock_guard lock(p.mutex);
  return *p.strings.emplace(s).first;
}

}  // namespace memsim
