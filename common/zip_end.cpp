#include "common/zip_end.h"

namespace mp {

bool HasZipEndRecord(std::string_view bytes, size_t window) {
  constexpr size_t kRecord = 22;
  if (bytes.size() < kRecord) return false;
  const size_t from = bytes.size() > window ? bytes.size() - window : 0;
  const size_t last_start = bytes.size() - kRecord;  // the record must fit
  if (last_start < from) return false;
  return bytes.substr(from, last_start - from + 4).find(std::string_view("PK\5\6", 4)) != std::string_view::npos;
}

}  // namespace mp
