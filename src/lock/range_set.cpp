// SPDX-License-Identifier: Apache-2.0
#include "lock/range_set.hpp"

#include <algorithm>

namespace nlockd::lock {

std::optional<ByteRange> Intersect(const ByteRange& a, const ByteRange& b) {
  if (!a.Overlaps(b)) return std::nullopt;
  return ByteRange::FromFirstLast(std::max(a.first(), b.first()), std::min(a.last(), b.last()));
}

void RangeSet::Add(const ByteRange& range) {
  ByteRange merged = range;
  std::vector<ByteRange> out;
  out.reserve(ranges_.size() + 1);
  bool placed = false;
  for (const ByteRange& r : ranges_) {
    if (r.Touches(merged)) {
      merged = merged.Hull(r);
    } else if (r.first() > merged.last()) {
      if (!placed) out.push_back(merged);
      placed = true;
      out.push_back(r);
    } else {
      out.push_back(r);
    }
  }
  if (!placed) out.push_back(merged);
  ranges_ = std::move(out);
}

void RangeSet::Subtract(const ByteRange& cut) {
  if (!Overlaps(cut)) return;
  std::vector<ByteRange> out;
  out.reserve(ranges_.size() + 1);
  for (const ByteRange& r : ranges_) {
    if (!r.Overlaps(cut)) {
      out.push_back(r);
      continue;
    }
    if (r.first() < cut.first()) {
      out.push_back(ByteRange::FromFirstLast(r.first(), cut.first() - 1));
    }
    if (r.last() > cut.last()) {
      out.push_back(ByteRange::FromFirstLast(cut.last() + 1, r.last()));
    }
  }
  ranges_ = std::move(out);
}

void RangeSet::Subtract(const RangeSet& other) {
  for (const ByteRange& r : other) Subtract(r);
}

RangeSet RangeSet::Within(const ByteRange& range) const {
  RangeSet out;
  for (const ByteRange& r : ranges_) {
    if (std::optional<ByteRange> both = Intersect(r, range)) out.ranges_.push_back(*both);
  }
  return out;
}

RangeSet RangeSet::Within(const RangeSet& other) const {
  RangeSet out;
  for (const ByteRange& r : other) {
    for (const ByteRange& piece : Within(r)) out.ranges_.push_back(piece);
  }
  std::sort(out.ranges_.begin(), out.ranges_.end(),
            [](const ByteRange& a, const ByteRange& b) { return a.first() < b.first(); });
  return out;
}

bool RangeSet::Overlaps(const ByteRange& range) const {
  return std::any_of(ranges_.begin(), ranges_.end(),
                     [&](const ByteRange& r) { return r.Overlaps(range); });
}

std::string RangeSet::ToString() const {
  std::string out;
  for (const ByteRange& r : ranges_) {
    if (!out.empty()) out += " ";
    out += r.ToString();
  }
  return out;
}

}  // namespace nlockd::lock
