#pragma once
// What a node needs to run this program: the program's own file and every shared library the
// dynamic loader loaded for it, each named as the loader looks it up and identified by the
// SHA-256 of its content. The C library and the loader (the node's own, checked by version) and
// GPU driver libraries (which must match the node's kernel driver) are left out.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "ship/elf.hpp"

namespace sky::detail::ship {

/// One file to place on a node.
struct ShippedFile {
    std::string name;              ///< where it goes in the node's program directory
    std::filesystem::path source;  ///< the real file on this machine
    std::string sha256;            ///< 64 hex characters of its content
    std::uint64_t size = 0;
};

/// The program and its closure, as shipped.
struct Manifest {
    std::vector<ShippedFile> files;  ///< files[0] is the program itself
    std::string id;                  ///< hash of every (name, content hash): the program dir name
    GlibcVersion glibc{2, 0};        ///< the newest glibc version any file needs
    [[nodiscard]] const ShippedFile& program() const { return files.front(); }
    [[nodiscard]] std::uint64_t total_bytes() const;
};

/// True for the libraries a node must bring itself: the C library and its loader, and GPU driver
/// libraries. `name` is a file name such as "libc.so.6" or "libcuda.so.1".
bool is_node_provided(std::string_view name);

/// The shared objects the loader has loaded into this process (real paths, the program excluded),
/// in load order, with the file name the loader found each under.
struct LoadedObject {
    std::string name;            ///< "libfoo.so.1", as looked up (the directory entry's name)
    std::filesystem::path path;  ///< the path it was loaded from
};
std::vector<LoadedObject> loaded_objects();

/// The manifest of this process's program, computed on first use (hashes come from the on-disk
/// hash cache when a file's path, size, mtime and inode are unchanged) and then kept.
const Manifest& this_program();

/// Builds the manifest for an explicit program and library list (tests; this_program() uses it).
Manifest make_manifest(const std::filesystem::path& program, const std::vector<LoadedObject>& libs);

/// SHA-256 of a file's content, from the per-user hash cache (~/.sky/cache/file-hashes) when the
/// file's path, size, mtime and inode match an entry; computed and recorded otherwise.
std::string file_sha256(const std::filesystem::path& file);

}  // namespace sky::detail::ship
