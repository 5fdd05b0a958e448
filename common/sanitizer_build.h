// Whether this build runs under a sanitizer (tools/sanitize.sh's ASan and
// TSan trees). GCC says -fsanitize=address and -fsanitize=thread with
// __SANITIZE_ADDRESS__ and __SANITIZE_THREAD__, clang with __has_feature.
// Such a build checks code paths, not speed: what only times the machine
// may do less there (the link probe's rounds), and tests skip what a
// sanitizer cannot see.
#pragma once

namespace mp {

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

constexpr bool kUnderSanitizer = kUnderAddressSanitizer || kUnderThreadSanitizer;

}  // namespace mp
