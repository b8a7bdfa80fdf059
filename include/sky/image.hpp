#pragma once
/// \file The environment on a node (docs/api.md §6).
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sky/export.hpp"

SKY_PUBLIC_BEGIN

/// A file to place on every node before the worker starts.
struct File {
    std::string path;      ///< absolute path on the node
    std::string content;   ///< file content
    unsigned mode = 0644;  ///< permission bits
};

/// A declarative node environment; bootstrap() turns it into an idempotent shell script.
struct Image {
    std::string python;            ///< e.g. "3.13"; empty: no Python set-up
    std::vector<std::string> pip;  ///< pip packages (implies Python)
    std::optional<std::string> pip_extra_index_url;
    std::vector<std::string> apt;            ///< Debian/Ubuntu packages
    std::map<std::string, std::string> env;  ///< environment of the worker
    std::vector<std::string> setup;          ///< shell commands, run in order
    std::vector<File> files;                 ///< files to write

    /// 12 hex characters, stable across runs and machines (for image caches).
    [[nodiscard]] std::string content_hash() const;
    /// The idempotent bootstrap script; `ttl` is the node's hard lifetime (0: none). Each phase
    /// prints a marker line `::sky-phase <name>` so the pool can report progress.
    [[nodiscard]] std::string bootstrap(std::chrono::seconds ttl = std::chrono::seconds{0}) const;
    /// Same, with the lifetime in seconds (as the product documents write it).
    [[nodiscard]] std::string bootstrap(long long ttl_seconds) const {
        return bootstrap(std::chrono::seconds{ttl_seconds});
    }
    /// Throws sky::ConfigError for a value that cannot be right (bad package or variable name).
    void validate() const;
};

SKY_PUBLIC_END
