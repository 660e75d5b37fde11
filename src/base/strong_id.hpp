// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <compare>
#include <functional>
#include <utility>

namespace nlockd {

// A value of type T that cannot be mixed up with another id of the same representation:
// StrongId<struct FileKeyTag, std::string> and StrongId<struct OwnerTag, std::string> do not
// convert into each other.
template <typename Tag, typename T>
class StrongId {
 public:
  using value_type = T;

  StrongId() = default;
  explicit StrongId(T value) : value_(std::move(value)) {}

  const T& value() const& { return value_; }
  T&& value() && { return std::move(value_); }

  friend auto operator<=>(const StrongId&, const StrongId&) = default;
  friend bool operator==(const StrongId&, const StrongId&) = default;

 private:
  T value_{};
};

}  // namespace nlockd

template <typename Tag, typename T>
struct std::hash<nlockd::StrongId<Tag, T>> {
  size_t operator()(const nlockd::StrongId<Tag, T>& id) const noexcept {
    return std::hash<T>{}(id.value());
  }
};
