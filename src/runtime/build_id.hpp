#pragma once
// The GNU build id of a loaded module, read from its notes in memory: what tells two copies of
// an executable or a library apart (the worker's hello, a crash report's frames).
#include <link.h>

#include <cstddef>
#include <string>

namespace sky::detail {

/// Copies the build id of the module `info` describes (dl_iterate_phdr) into `out`, at most
/// `cap` bytes; returns its length, 0 when it has none. Reads only the module's mapped notes
/// and calls nothing: usable in a signal handler.
std::size_t build_id_bytes(const dl_phdr_info& info, unsigned char* out, std::size_t cap) noexcept;

/// The same in lower-case hex ("" when none).
std::string build_id_hex(const dl_phdr_info& info);

}  // namespace sky::detail
