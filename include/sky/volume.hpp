#pragma once
/// \file Mounted storage (api.md §12).
#include <string>
#include <variant>

namespace sky {

/// An S3 bucket (or prefix of one) mounted on every node.
struct S3Volume {
    std::string mount_path;
    std::string bucket;
    std::string prefix;
    bool read_only = true;
};

/// Any volume sky can mount.
using Volume = std::variant<S3Volume>;

}  // namespace sky
