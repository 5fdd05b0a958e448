// Byte sizes as users write them on the command line: `40GiB`, `512MiB`,
// `1.5GB`, `4096` (bytes). Binary (KiB, MiB, GiB, TiB) and decimal (KB, MB,
// GB, TB) units; the unit is case-insensitive and a space before it is allowed.
// FormatBytes writes them back in binary units.
#pragma once

#include <cstdint>
#include <string>

namespace mp {

// Throws InputError "FLAG: 'TEXT' is not a size (expected e.g. 40GiB or 512MiB)"
// for anything else, and for zero or negative sizes.
int64_t ParseByteSize(const std::string& text, const std::string& flag);

// "512 MiB", "1.31 GiB", "12 KiB", "100 B".
std::string FormatBytes(int64_t bytes);

}  // namespace mp
