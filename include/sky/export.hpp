#pragma once
/// \file SKY_API: marks what libsky exports. libsky is compiled with -fvisibility=hidden and
/// -fvisibility-inlines-hidden, so a shared libsky exports only the declarations of the public
/// headers that carry this mark (and a static one, linked into a user's shared library, does
/// not re-export sky's internals from it).
//
/// Every public header puts its declarations between SKY_PUBLIC_BEGIN and SKY_PUBLIC_END (after
/// its #includes): what a public header declares is exported, what only src/ declares is not, and
/// a declaration added to a public header later cannot be forgotten. SKY_API marks a single
/// declaration outside such a region.
#if defined(__GNUC__) || defined(__clang__)
#define SKY_API __attribute__((visibility("default")))
#define SKY_PUBLIC_BEGIN _Pragma("GCC visibility push(default)")
#define SKY_PUBLIC_END _Pragma("GCC visibility pop")
#else
#define SKY_API
#define SKY_PUBLIC_BEGIN
#define SKY_PUBLIC_END
#endif
