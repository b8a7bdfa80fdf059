#pragma once
/// \file SKY_API: marks what libsky exports, and the versioned namespace every public
/// declaration lives in. libsky is compiled with -fvisibility=hidden and
/// -fvisibility-inlines-hidden, so a shared libsky exports only the declarations of the public
/// headers that carry this mark (and a static one, linked into a user's shared library, does
/// not re-export sky's internals from it).
//
/// Every public header puts its declarations between SKY_PUBLIC_BEGIN and SKY_PUBLIC_END (after
/// its #includes), with no `namespace sky` of its own: the pair opens and closes
/// `namespace sky { inline namespace v0 {` with default visibility. What a public header
/// declares is exported, what only src/ declares is not, and a declaration added to a public
/// header later cannot be forgotten. SKY_API marks a single declaration outside such a region.
///
/// The inline namespace versions the ABI: a program is written against `sky::ComputePool`, and
/// its objects name `sky::v0::ComputePool`, so one built against headers of another ABI version
/// fails to link instead of running against a libsky whose layouts differ. sky's own sources
/// (src/) extend it: `namespace sky::detail` extends `sky::v0::detail`, declared here so that it
/// exists before any of them, and a function that a public header declares in `sky` is defined
/// in `namespace sky::inline v0` (or by its qualified name).
#if defined(__GNUC__) || defined(__clang__)
#define SKY_API __attribute__((visibility("default")))
#define SKY_VISIBILITY_PUSH _Pragma("GCC visibility push(default)")
#define SKY_VISIBILITY_POP _Pragma("GCC visibility pop")
#else
#define SKY_API
#define SKY_VISIBILITY_PUSH
#define SKY_VISIBILITY_POP
#endif

/// Opens sky's versioned namespace (fmt's FMT_BEGIN_NAMESPACE): `sky::v0`, inline in `sky`.
#define SKY_BEGIN_NAMESPACE \
    namespace sky {         \
    inline namespace v0 {
/// Closes what SKY_BEGIN_NAMESPACE opened.
#define SKY_END_NAMESPACE \
    }                     \
    }

/// A public header's declarations: exported, in sky's versioned namespace.
#define SKY_PUBLIC_BEGIN SKY_VISIBILITY_PUSH SKY_BEGIN_NAMESPACE
/// Ends what SKY_PUBLIC_BEGIN began.
#define SKY_PUBLIC_END SKY_END_NAMESPACE SKY_VISIBILITY_POP

// The namespaces of the public headers, declared before anything else of sky's: sky's build
// puts this header first in every translation unit (CMakeLists.txt), so that a source's
// `namespace sky::detail` always extends this one rather than starting another beside it.
namespace sky {
inline namespace v0 {
namespace accelerators {}
namespace detail {}
namespace distributed {}
namespace events {}
}  // namespace v0
}  // namespace sky
