// Whether bytes end like a complete zip archive: the end-of-central-directory
// record ("PK\5\6", 22 bytes) lies whole within the last `window` bytes. A
// truncated archive has none; TorchScript and torch.save files always do.
#pragma once

#include <cstddef>
#include <string_view>

namespace mp {

// The zip format allows a 64 KiB comment after the record: a window of
// kZipEndWindow finds it in any complete archive.
inline constexpr size_t kZipEndWindow = 65536 + 22;

bool HasZipEndRecord(std::string_view bytes, size_t window = kZipEndWindow);

}  // namespace mp
