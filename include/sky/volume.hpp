#pragma once
/// \file Mounted storage (docs/api.md §12).
#include <string>
#include <variant>

#include "sky/export.hpp"

SKY_PUBLIC_BEGIN

/// An S3 bucket (or prefix of one) mounted on every node.
struct S3Volume {
    std::string mount_path;  ///< absolute path on the node where the files appear
    std::string bucket;
    std::string prefix;     ///< the part of the bucket that is mounted ("datasets/"); empty: all
    bool read_only = true;  ///< a read-only volume refuses writes (EROFS)
    /// Any S3-compatible service ("https://minio.example:9000"), addressed path-style; empty:
    /// AWS S3 itself.
    std::string endpoint;
    /// The region requests are signed for; empty: us-east-1 (AWS S3 then finds the bucket's).
    std::string region;
    /// Credentials for this volume alone (a key that reaches only this bucket), sent to every
    /// node; never printed. Empty: sky mints temporary ones from the pool's AWS credentials with
    /// STS, scoped to the pool's volumes and lasting the pool's timeout (docs/security.md).
    std::string access_key_id;
    std::string secret_access_key;
    std::string session_token;  ///< with temporary `access_key_id`/`secret_access_key`
};

/// Any volume sky can mount.
using Volume = std::variant<S3Volume>;

SKY_PUBLIC_END
