// Which sanitizer a test is built under. GCC says -fsanitize=address and
// -fsanitize=thread with __SANITIZE_ADDRESS__ and __SANITIZE_THREAD__,
// clang (tools/sanitize.sh's builds) with __has_feature.
#pragma once

namespace mp::test {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kUnderAddressSanitizer = true;
#elif defined(__has_feature)
constexpr bool kUnderAddressSanitizer = __has_feature(address_sanitizer);
#else
constexpr bool kUnderAddressSanitizer = false;
#endif

#if defined(__SANITIZE_THREAD__)
constexpr bool kUnderThreadSanitizer = true;
#elif defined(__has_feature)
constexpr bool kUnderThreadSanitizer = __has_feature(thread_sanitizer);
#else
constexpr bool kUnderThreadSanitizer = false;
#endif

}  // namespace mp::test
