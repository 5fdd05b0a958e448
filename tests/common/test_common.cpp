// common/: SHA-256 against the FIPS 180-4 example vectors (both paths), and byte sizes
// as users write them, and the zip end-record check.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <sched.h>
#include <sys/resource.h>

#include "common/allocator.h"
#include "common/byte_size.h"
#include "common/cpu_affinity.h"
#include "common/error.h"
#include "common/sanitizer_build.h"
#include "common/sha256.h"
#include "common/zip_end.h"

TEST_CASE("SHA-256 matches the standard's test vectors") {
  CHECK(mp::Sha256Hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(mp::Sha256Hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(mp::Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  const std::string million(1000000, 'a');
  CHECK(mp::Sha256Hex(million) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  // A file is hashed in chunks; the result is the same as in one piece.
  const std::string path = (std::filesystem::temp_directory_path() / "mp_sha256_test.bin").string();
  std::ofstream(path, std::ios::binary) << million;
  CHECK(mp::Sha256File(path) == mp::Sha256Hex(million));
  std::filesystem::remove(path);
  CHECK_THROWS_WITH_AS(mp::Sha256File("/nonexistent/model.pt"), "/nonexistent/model.pt: no such file",
                       mp::InputError);
}

TEST_CASE("SHA-256: the CPU's SHA instructions and the portable rounds give the same digests") {
  // Every length around the block and padding boundaries, and the
  // standard's vectors through the portable path.
  std::string bytes;
  for (int i = 0; i < 1100; ++i) bytes += static_cast<char>((i * 131 + i / 7) & 0xff);
  for (size_t n = 0; n <= bytes.size(); n += (n < 200 ? 1 : 61)) {
    CAPTURE(n);
    const std::string part = bytes.substr(0, n);
    CHECK(mp::Sha256Hex(part, mp::Sha256Path::kFastest) == mp::Sha256Hex(part, mp::Sha256Path::kPortable));
  }
  CHECK(mp::Sha256Hex(std::string(1000000, 'a'), mp::Sha256Path::kPortable) ==
        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  CHECK(mp::Sha256Hex("abc", mp::Sha256Path::kPortable) ==
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_CASE("byte sizes: binary and decimal units, case-insensitive") {
  CHECK(mp::ParseByteSize("40GiB", "--memory") == 40LL << 30);
  CHECK(mp::ParseByteSize("512MiB", "--memory") == 512LL << 20);
  CHECK(mp::ParseByteSize("512 mib", "--memory") == 512LL << 20);
  CHECK(mp::ParseByteSize("1.5GB", "--memory") == 1500000000LL);
  CHECK(mp::ParseByteSize("4096", "--memory") == 4096);
  CHECK(mp::ParseByteSize("2k", "--memory") == 2048);
  for (const char* bad : {"", "GiB", "12XB", "-1GiB", "0", "1e30TiB", "nan"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(mp::ParseByteSize(bad, "--memory"),
                         (std::string("--memory: '") + bad + "' is not a size (expected e.g. 40GiB or 512MiB)").c_str(),
                         mp::InputError);
  }
}

TEST_CASE("a zip end record must lie whole within the window") {
  const std::string record = std::string("PK\5\6", 4) + std::string(18, '\0');
  CHECK(mp::HasZipEndRecord(std::string(100, 'a') + record));
  CHECK_FALSE(mp::HasZipEndRecord(std::string(100, 'a')));
  CHECK_FALSE(mp::HasZipEndRecord(std::string(100, 'a') + record.substr(0, 21)));  // cut short
  const std::string commented = std::string(100, 'a') + record + std::string(5000, 'c');
  CHECK(mp::HasZipEndRecord(commented));
  CHECK_FALSE(mp::HasZipEndRecord(commented, 4096));
  CHECK_FALSE(mp::HasZipEndRecord(""));
}

TEST_CASE("CPU workers get cores of their own where their threads fit, in order") {
  const std::vector<int> allowed = {0, 1, 2, 3, 6, 7};
  CHECK(mp::WorkerCpus(allowed, 0, 2, 1) == std::vector<int>{0});
  CHECK(mp::WorkerCpus(allowed, 1, 2, 1) == std::vector<int>{1});
  CHECK(mp::WorkerCpus(allowed, 1, 3, 2) == std::vector<int>{2, 3});
  CHECK(mp::WorkerCpus(allowed, 2, 3, 2) == std::vector<int>{6, 7});
  CHECK(mp::WorkerCpus(allowed, 0, 1, 6) == allowed);
  // More threads than cores: the scheduler shares them, nobody is pinned.
  CHECK(mp::WorkerCpus(allowed, 0, 4, 2).empty());
  CHECK(mp::WorkerCpus(allowed, 0, 7, 1).empty());
  // Out of range or no threads.
  CHECK(mp::WorkerCpus(allowed, 2, 2, 1).empty());
  CHECK(mp::WorkerCpus(allowed, -1, 2, 1).empty());
  CHECK(mp::WorkerCpus(allowed, 0, 2, 0).empty());
  CHECK(mp::CpuList({0}) == "0");
  CHECK(mp::CpuList({0, 1, 2, 5, 7, 8}) == "0-2,5,7-8");
  CHECK(mp::CpuList({}).empty());
}

TEST_CASE("local ranks get equal shares of the cores, the first ones a core more where they do not divide") {
  const std::vector<int> allowed = {0, 1, 2, 3, 6};
  CHECK(mp::RankCpus(allowed, 0, 2) == std::vector<int>{0, 1, 2});
  CHECK(mp::RankCpus(allowed, 1, 2) == std::vector<int>{3, 6});
  CHECK(mp::RankCpus(allowed, 4, 5) == std::vector<int>{6});
  CHECK(mp::RankCpus({0, 1}, 1, 2) == std::vector<int>{1});
  // One rank, more ranks than cores, or out of range: left to the scheduler.
  CHECK(mp::RankCpus(allowed, 0, 1).empty());
  CHECK(mp::RankCpus(allowed, 0, 6).empty());
  CHECK(mp::RankCpus(allowed, 2, 2).empty());
  CHECK(mp::RankCpus(allowed, -1, 2).empty());
}

TEST_CASE("a scoped pin holds the thread on its cores and gives the old ones back") {
  const std::vector<int>& allowed = mp::AllowedCpus();
  REQUIRE(!allowed.empty());
  const std::vector<int> before = mp::ThisThreadCpus();
  REQUIRE(!before.empty());
  {
    const mp::ScopedPin pin({allowed.back()});
    CHECK(mp::ThisThreadCpus() == std::vector<int>{allowed.back()});
    CHECK(sched_getcpu() == allowed.back());
  }
  CHECK(mp::ThisThreadCpus() == before);
  const mp::ScopedPin nothing({});
  CHECK(mp::ThisThreadCpus() == before);
}

// The profiler maps heap ahead (measure.cpp) so that a timed weight
// gradient does not land on fresh pages: after PrefaultHeap, a block beyond
// anything allocated before takes no page faults; without it, it takes one
// a page. glibc only (mallopt), and not under ASan's or TSan's allocator,
// which mallopt does not steer.
TEST_CASE("a prefaulted heap serves a new large block without page faults") {
  if (mp::kUnderSanitizer) return;
#if defined(__GLIBC__)
  mp::KeepFreedMemory();
  const auto faults = [] {
    struct rusage usage {};
    getrusage(RUSAGE_THREAD, &usage);
    return static_cast<int64_t>(usage.ru_minflt);
  };
  const auto touch = [](int64_t bytes) {
    char* block = static_cast<char*>(std::malloc(static_cast<size_t>(bytes)));
    REQUIRE(block != nullptr);
    volatile char* pages = block;  // the writes are not optimised away
    for (int64_t i = 0; i < bytes; i += 4096) pages[i] = 1;
    std::free(block);
  };
  const int64_t mib = 1 << 20;
  int64_t before = faults();
  touch(32 * mib);  // the heap grows: a fault a page
  CHECK(faults() - before >= 32 * mib / 4096 / 2);
  mp::PrefaultHeap(128 * mib);
  CHECK(mp::HeapBytesHeld() >= 128 * mib);
  before = faults();
  touch(96 * mib);  // beyond the 32 MiB touched before, within what was mapped ahead
  CHECK(faults() - before < 64);
#endif
}
