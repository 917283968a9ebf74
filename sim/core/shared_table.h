#pragma once
// Copy-on-write tables for the parts of a platform's description that every copy of a node
// holds alike (a device's efficiency tables, host overheads, reserved memory): a copy shares
// its source's table, and the first change through a copy gives that copy its own. A
// 2,048-node platform's 16,384 GPUs then hold one efficiency table, not 16,384 of them.
//
// Reads are a std::map's (or std::vector's) const interface; writes are the few a loader
// or a calibration makes. An empty table holds nothing at all.
#include <cstddef>
#include <map>
#include <memory>
#include <utility>
#include <vector>

namespace memsim {

template <class Container>
class SharedTable {
 public:
  using value_type = typename Container::value_type;
  using const_iterator = typename Container::const_iterator;
  using iterator = const_iterator;  // reads only: a write goes through edit()

  SharedTable() = default;
  SharedTable(std::initializer_list<value_type> items)
      : p_(items.size() ? std::make_shared<Container>(items) : nullptr) {}

  const Container& get() const { return p_ ? *p_ : none(); }
  const_iterator begin() const { return get().begin(); }
  const_iterator end() const { return get().end(); }
  bool empty() const { return !p_ || p_->empty(); }
  std::size_t size() const { return p_ ? p_->size() : 0; }
  void clear() { p_.reset(); }

  /// The table to change, this copy's own from here on.
  Container& edit() {
    if (!p_) p_ = std::make_shared<Container>();
    else if (p_.use_count() > 1) p_ = std::make_shared<Container>(*p_);
    return *p_;
  }

  /// Whether two copies share one table (for tests).
  bool shares_with(const SharedTable& other) const { return p_ && p_ == other.p_; }

 protected:
  static const Container& none() {
    static const Container none;
    return none;
  }
  std::shared_ptr<Container> p_;
};

template <class K, class V>
class SharedMap : public SharedTable<std::map<K, V>> {
  using Base = SharedTable<std::map<K, V>>;

 public:
  using Base::Base;
  using typename Base::const_iterator;
  const_iterator find(const K& k) const { return this->get().find(k); }
  std::size_t count(const K& k) const { return this->get().count(k); }
  bool contains(const K& k) const { return this->get().contains(k); }
  const V& at(const K& k) const { return this->get().at(k); }
  V& operator[](const K& k) { return this->edit()[k]; }
};

template <class T>
class SharedVector : public SharedTable<std::vector<T>> {
  using Base = SharedTable<std::vector<T>>;

 public:
  using Base::Base;
  const T& operator[](std::size_t i) const { return this->get()[i]; }
  const T& front() const { return this->get().front(); }
  const T& back() const { return this->get().back(); }
  void push_back(T v) { this->edit().push_back(std::move(v)); }
  template <class... A>
  T& emplace_back(A&&... a) { return this->edit().emplace_back(std::forward<A>(a)...); }
};

}  // namespace memsim
