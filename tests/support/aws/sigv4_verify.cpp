// Checking the SigV4 signature of a received request, as AWS does: the fake EC2's front door.
#include "support/aws/sigv4_verify.hpp"

#include <fmt/format.h>
#include <openssl/crypto.h>

#include <algorithm>
#include <ctime>

#include "util/encoding.hpp"
#include "util/text.hpp"

namespace sky::detail::aws {

namespace {

VerifyResult fail(std::string code, std::string message) {
    VerifyResult r;
    r.error_code = std::move(code);
    r.message = std::move(message);
    return r;
}

std::optional<std::chrono::system_clock::time_point> parse_amz_date(const std::string& text) {
    std::tm tm{};
    if (text.size() != 16 || text[8] != 'T' || text[15] != 'Z') return std::nullopt;
    const char* end = strptime(text.c_str(), "%Y%m%dT%H%M%SZ", &tm);
    if (!end || *end != '\0') return std::nullopt;
    return std::chrono::system_clock::from_time_t(timegm(&tm));
}

}  // namespace

VerifyResult verify_request(const SignableRequest& request, const VerifyParams& params) {
    auto authorization = header_value(request, "authorization");
    if (!authorization) {
        return fail("MissingAuthenticationToken", "Request is missing Authentication Token");
    }
    std::string_view auth = *authorization;
    if (auth.substr(0, kSigV4Algorithm.size()) != kSigV4Algorithm) {
        return fail("IncompleteSignature", "Unsupported authorization algorithm");
    }
    auth.remove_prefix(kSigV4Algorithm.size());
    std::string credential, signed_headers, signature;
    while (!auth.empty()) {
        auto comma = auth.find(',');
        std::string_view part = trim(auth.substr(0, comma));
        auto eq = part.find('=');
        if (eq != std::string_view::npos) {
            auto key = part.substr(0, eq);
            auto value = std::string(part.substr(eq + 1));
            if (key == "Credential") credential = value;
            if (key == "SignedHeaders") signed_headers = value;
            if (key == "Signature") signature = value;
        }
        if (comma == std::string_view::npos) break;
        auth.remove_prefix(comma + 1);
    }
    if (credential.empty() || signed_headers.empty() || signature.empty()) {
        return fail("IncompleteSignature",
                    "Authorization header requires 'Credential', 'SignedHeaders' and 'Signature'");
    }
    // Credential = <key id>/<date>/<region>/<service>/aws4_request
    std::vector<std::string> scope_parts;
    for (std::size_t start = 0;;) {
        auto slash = credential.find('/', start);
        scope_parts.push_back(credential.substr(start, slash - start));
        if (slash == std::string::npos) break;
        start = slash + 1;
    }
    if (scope_parts.size() != 5 || scope_parts[4] != "aws4_request") {
        return fail("IncompleteSignature",
                    "Credential must have the form "
                    "<key>/<date>/<region>/<service>/aws4_request");
    }
    VerifyResult result;
    result.access_key_id = scope_parts[0];
    result.region = scope_parts[2];
    result.service = scope_parts[3];
    if (!params.service.empty() && result.service != params.service) {
        return fail(
            "SignatureDoesNotMatch",
            fmt::format("Credential should be scoped to correct service: '{}'.", params.service));
    }
    if (!params.region.empty() && result.region != params.region) {
        return fail(
            "SignatureDoesNotMatch",
            fmt::format("Credential should be scoped to a valid region: '{}'.", params.region));
    }
    std::optional<Credentials> credentials =
        params.lookup ? params.lookup(result.access_key_id) : std::nullopt;
    if (!credentials) {
        return fail("AuthFailure", "AWS was not able to validate the provided access credentials");
    }
    auto date_header = header_value(request, "x-amz-date");
    if (!date_header)
        return fail("IncompleteSignature", "Request is missing the X-Amz-Date header");
    auto when = parse_amz_date(*date_header);
    if (!when) return fail("IncompleteSignature", "X-Amz-Date is not of the form YYYYMMDDTHHMMSSZ");
    if (date_header->substr(0, 8) != scope_parts[1]) {
        return fail("SignatureDoesNotMatch", "Credential date does not match X-Amz-Date");
    }
    auto now = params.now.value_or(std::chrono::system_clock::now());
    if (*when > now + params.max_skew || *when < now - params.max_skew) {
        return fail("AuthFailure", "Signature expired or not yet valid (clock skew)");
    }
    std::vector<std::string> names;
    for (std::size_t start = 0;;) {
        auto semi = signed_headers.find(';', start);
        names.push_back(to_lower(signed_headers.substr(start, semi - start)));
        if (semi == std::string::npos) break;
        start = semi + 1;
    }
    if (std::find(names.begin(), names.end(), "host") == names.end()) {
        return fail("SignatureDoesNotMatch", "The Host header must be signed");
    }
    for (const auto& name : names) {
        if (!header_value(request, name)) {
            return fail("SignatureDoesNotMatch",
                        fmt::format("Signed header '{}' is missing", name));
        }
    }
    if (!credentials->session_token.empty() &&
        header_value(request, "x-amz-security-token") != credentials->session_token) {
        return fail("AuthFailure", "The security token included in the request is invalid");
    }
    const std::string canonical = canonical_request(request, names, params.normalize_path);
    const std::string scope =
        fmt::format("{}/{}/{}/aws4_request", scope_parts[1], result.region, result.service);
    const std::string expected = hex_encode(hmac_sha256(
        signing_key(credentials->secret_access_key, scope_parts[1], result.region, result.service),
        string_to_sign(*date_header, scope, canonical)));
    if (expected.size() != signature.size() ||
        CRYPTO_memcmp(expected.data(), signature.data(), expected.size()) != 0) {
        return fail("SignatureDoesNotMatch",
                    "The request signature we calculated does not match the signature you "
                    "provided. Check your AWS Secret Access Key and signing method.");
    }
    result.ok = true;
    return result;
}

}  // namespace sky::detail::aws
