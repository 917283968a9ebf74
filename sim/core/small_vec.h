#pragma once
// A vector of trivially copyable values that keeps up to N of them inside itself: an op's
// inputs, outputs and updates are one to three buffer ids, and a million-op step would
// otherwise make three million small heap blocks (a third of its memory and most of the
// time spent building and freeing it). Same size as std::vector for N = 4 ids; the subset
// of std::vector's interface the trace uses.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <new>
#include <type_traits>
#include <vector>

namespace memsim {

template <typename T, std::uint32_t N>
class SmallVec {
  static_assert(std::is_trivially_copyable_v<T>, "SmallVec holds plain values");

 public:
  using value_type = T;
  using size_type = std::size_t;
  using iterator = T*;
  using const_iterator = const T*;
  using reference = T&;
  using const_reference = const T&;

  SmallVec() = default;
  SmallVec(std::initializer_list<T> values) { assign(values.begin(), values.end()); }
  SmallVec(const std::vector<T>& values) { assign(values.data(), values.data() + values.size()); }  // NOLINT
  template <typename It>
  SmallVec(It first, It last) {
    for (; first != last; ++first) push_back(*first);
  }
  SmallVec(const SmallVec& o) { assign(o.begin(), o.end()); }
  SmallVec(SmallVec&& o) noexcept { take(o); }
  SmallVec& operator=(const SmallVec& o) {
    if (this != &o) assign(o.begin(), o.end());
    return *this;
  }
  SmallVec& operator=(SmallVec&& o) noexcept {
    if (this != &o) {
      release();
      take(o);
    }
    return *this;
  }
  SmallVec& operator=(std::initializer_list<T> values) {
    assign(values.begin(), values.end());
    return *this;
  }
  SmallVec& operator=(const std::vector<T>& values) {
    assign(values.data(), values.data() + values.size());
    return *this;
  }
  ~SmallVec() { release(); }

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::size_t capacity() const { return cap_; }
  T* data() { return cap_ > N ? heap_ : inline_; }
  const T* data() const { return cap_ > N ? heap_ : inline_; }
  T* begin() { return data(); }
  T* end() { return data() + size_; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size_; }
  T& operator[](std::size_t i) { return data()[i]; }
  const T& operator[](std::size_t i) const { return data()[i]; }
  T& front() { return data()[0]; }
  const T& front() const { return data()[0]; }
  T& back() { return data()[size_ - 1]; }
  const T& back() const { return data()[size_ - 1]; }

  void reserve(std::size_t n) {
    if (n <= cap_) return;
    const auto cap = static_cast<std::uint32_t>(std::max<std::size_t>(n, 2 * std::size_t{cap_}));
    T* grown = static_cast<T*>(std::malloc(sizeof(T) * cap));
    if (!grown) throw std::bad_alloc();
    std::memcpy(grown, data(), sizeof(T) * size_);
    if (cap_ > N) std::free(heap_);
    heap_ = grown;
    cap_ = cap;
  }
  void push_back(const T& v) {
    if (size_ == cap_) {
      const T copy = v;  // v may be one of ours
      reserve(std::size_t{size_} + 1);
      data()[size_++] = copy;
      return;
    }
    data()[size_++] = v;
  }
  template <typename... A>
  T& emplace_back(A&&... args) {
    push_back(T(std::forward<A>(args)...));
    return back();
  }
  void pop_back() { --size_; }
  void clear() { size_ = 0; }
  void resize(std::size_t n, const T& v = T()) {
    reserve(n);
    for (std::size_t i = size_; i < n; ++i) data()[i] = v;
    size_ = static_cast<std::uint32_t>(n);
  }
  template <typename It>
  T* insert(const T* pos, It first, It last) {
    const std::size_t at = static_cast<std::size_t>(pos - begin());
    std::vector<T> added(first, last);  // the range may be ours
    reserve(size_ + added.size());
    T* p = data() + at;
    std::memmove(p + added.size(), p, sizeof(T) * (size_ - at));
    if (!added.empty()) std::memcpy(p, added.data(), sizeof(T) * added.size());
    size_ += static_cast<std::uint32_t>(added.size());
    return p;
  }
  T* insert(const T* pos, const T& v) {
    const T copy = v;
    return insert(pos, &copy, &copy + 1);
  }
  T* erase(const T* first, const T* last) {
    const std::size_t at = static_cast<std::size_t>(first - begin());
    const std::size_t n = static_cast<std::size_t>(last - first);
    T* p = data() + at;
    std::memmove(p, p + n, sizeof(T) * (size_ - at - n));
    size_ -= static_cast<std::uint32_t>(n);
    return p;
  }
  T* erase(const T* pos) { return erase(pos, pos + 1); }

  std::vector<T> to_vector() const { return {begin(), end()}; }
  friend bool operator==(const SmallVec& a, const SmallVec& b) {
    return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin());
  }

 private:
  template <typename It>
  void assign(It first, It last) {
    size_ = 0;
    reserve(static_cast<std::size_t>(last - first));
    for (; first != last; ++first) data()[size_++] = *first;
  }
  void take(SmallVec& o) {
    size_ = o.size_;
    cap_ = o.cap_;
    if (o.cap_ > N)
      heap_ = o.heap_;
    else
      std::memcpy(inline_, o.inline_, sizeof(T) * o.size_);
    o.size_ = 0;
    o.cap_ = N;
  }
  void release() {
    if (cap_ > N) std::free(heap_);
    cap_ = N;
    size_ = 0;
  }

  std::uint32_t size_ = 0;
  std::uint32_t cap_ = N;
  union {
    T inline_[N];
    T* heap_;
  };
};

/// std::erase_if and std::erase for a SmallVec: how many were removed.
template <typename T, std::uint32_t N, typename Pred>
std::size_t erase_if(SmallVec<T, N>& v, Pred pred) {
  T* kept = std::remove_if(v.begin(), v.end(), pred);
  const auto n = static_cast<std::size_t>(v.end() - kept);
  v.erase(kept, v.end());
  return n;
}
template <typename T, std::uint32_t N>
std::size_t erase(SmallVec<T, N>& v, const T& value) {
  return erase_if(v, [&](const T& x) { return x == value; });
}

}  // namespace memsim
