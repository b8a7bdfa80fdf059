#pragma once
// Files that decide what sky may terminate or kill (the pool ledger, simulated machine records)
// are believed only when this user alone could have written them: directories and files owned
// by the effective user, not writable by group or others, never reached through a symbolic link.
#include <cstddef>
#include <filesystem>
#include <string>

namespace sky::detail {

/// Makes `dir` and any missing parent 0700, tightens a `dir` that is group or world accessible,
/// and refuses one that is not a directory, a symbolic link, or another user's. Throws
/// sky::Error naming the path and the reason.
void ensure_private_dir(const std::filesystem::path& dir);

/// Whether `dir` is a directory (not a symbolic link) of this user that group and others cannot
/// write; when not and `why` is given, says why.
[[nodiscard]] bool is_private_dir(const std::filesystem::path& dir, std::string* why = nullptr);

/// The contents of `file` when it is a regular file of this user that group and others cannot
/// write, opened without following a symbolic link, of at most `max_bytes`. Throws sky::Error
/// naming the path and the reason otherwise.
[[nodiscard]] std::string read_private_file(const std::filesystem::path& file,
                                            std::size_t max_bytes);

}  // namespace sky::detail
