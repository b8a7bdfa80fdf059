#pragma once
// Credentials the cloud refuses: an answer that asking again cannot change. The adapters throw
// CredentialsRefused where an API call was answered 401 or 403; the cloud layer then retries
// nothing (no second create, no rounds of deletes that will be refused the same way).
#include <string>

#include "sky/errors.hpp"

namespace sky::detail {

/// The provider refused the pool's credentials (HTTP 401 or 403: expired, revoked, not
/// allowed). A ProvisionError, so a pool's start fails with it as with any other refusal.
class CredentialsRefused : public ProvisionError {
public:
    using ProvisionError::ProvisionError;
};

/// Whether an HTTP status says the credentials were refused.
[[nodiscard]] inline bool refuses_credentials(long http_status) noexcept {
    return http_status == 401 || http_status == 403;
}

/// Throws CredentialsRefused(message) when `http_status` refuses the credentials, else
/// ProvisionError(message).
[[noreturn]] inline void throw_provision_error(const std::string& message, long http_status) {
    if (refuses_credentials(http_status)) throw CredentialsRefused(message);
    throw ProvisionError(message);
}

}  // namespace sky::detail
