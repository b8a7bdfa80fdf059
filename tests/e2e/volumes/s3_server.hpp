#pragma once
// An S3-compatible server for the volume tests: npm's s3rver (scripts/test.sh installs it into
// build/npm), started on an address the test hosts reach, with its buckets made at start; and a
// small S3 client (SigV4 signed with sky's own signer) to put and get objects from the test.
#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace volumes_test {

class S3Server {
public:
    /// The s3rver program, or empty with *why set when it (or node) is not installed.
    static std::filesystem::path program(std::string* why);
    /// Starts s3rver on `address` (a free port) with these buckets. Throws std::runtime_error
    /// (after ending it) when it does not start listening within 30 s.
    S3Server(const std::string& address, const std::vector<std::string>& buckets);
    /// Ends the server (its process group) and removes its data.
    ~S3Server();
    S3Server(const S3Server&) = delete;
    S3Server& operator=(const S3Server&) = delete;

    /// "http://address:port"
    [[nodiscard]] const std::string& endpoint() const { return endpoint_; }
    /// s3rver's fixed keys (it accepts no others).
    static constexpr const char* access_key_id = "S3RVER";
    static constexpr const char* secret_access_key = "S3RVER";

    /// PUT an object; throws on failure.
    void put(const std::string& bucket, const std::string& key, const std::string& body) const;
    /// GET an object; nullopt when it does not exist (404).
    [[nodiscard]] std::optional<std::string> get(const std::string& bucket,
                                                 const std::string& key) const;

private:
    void stop() noexcept;

    pid_t pid_ = -1;
    std::filesystem::path dir_;
    std::string endpoint_;
};

}  // namespace volumes_test
