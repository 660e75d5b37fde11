// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "lock/range.hpp"

namespace nlockd::lock {

// The overlap of two ranges, if any.
std::optional<ByteRange> Intersect(const ByteRange& a, const ByteRange& b);

// A set of bytes as sorted, disjoint, non-touching ranges. Small by use (the undo record of a
// granted block keeps one), so a plain vector; an empty set allocates nothing.
class RangeSet {
 public:
  using const_iterator = std::vector<ByteRange>::const_iterator;

  RangeSet() = default;
  explicit RangeSet(const ByteRange& range) : ranges_{range} {}

  bool empty() const { return ranges_.empty(); }
  size_t size() const { return ranges_.size(); }
  const_iterator begin() const { return ranges_.begin(); }
  const_iterator end() const { return ranges_.end(); }

  void Add(const ByteRange& range);
  void Subtract(const ByteRange& range);
  void Subtract(const RangeSet& other);
  // The bytes of this set that lie in `range`.
  RangeSet Within(const ByteRange& range) const;
  // The bytes of both sets.
  RangeSet Within(const RangeSet& other) const;
  bool Overlaps(const ByteRange& range) const;

  // "[0,9] [20,end]"; for tests.
  std::string ToString() const;

  friend bool operator==(const RangeSet&, const RangeSet&) = default;

 private:
  std::vector<ByteRange> ranges_;
};

}  // namespace nlockd::lock
