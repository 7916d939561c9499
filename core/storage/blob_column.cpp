#include "core/storage/blob_column.h"

#include <cstring>

namespace replayd {

void BlobColumn::set(std::uint32_t slot, std::span<const std::byte> bytes) {
  clear(slot);
  if (bytes.empty()) return;
  values_[slot] = std::make_unique_for_overwrite<std::byte[]>(bytes.size());
  std::memcpy(values_[slot].get(), bytes.data(), bytes.size());
  sizes_[slot] = static_cast<std::uint32_t>(bytes.size());
  stored_bytes_ += cost(bytes.size());
}

void BlobColumn::clear(std::uint32_t slot) {
  stored_bytes_ -= cost(sizes_[slot]);
  values_[slot].reset();
  sizes_[slot] = 0;
}

void BlobColumn::clear_all() {
  for (std::uint32_t slot = 0; slot < sizes_.size(); ++slot)
    clear(slot);
}

}  // namespace replayd
