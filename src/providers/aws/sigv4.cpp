#include "providers/aws/sigv4.hpp"

#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <cctype>
#include <ctime>
#include <map>
#include <stdexcept>

namespace sky::detail::aws {

namespace {

constexpr std::string_view kAlgorithm = "AWS4-HMAC-SHA256";

std::string to_lower(std::string_view s) {
    std::string out(s);
    for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

std::string hex(std::string_view bytes) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    out.reserve(bytes.size() * 2);
    for (unsigned char c : bytes) {
        out.push_back(kHex[c >> 4]);
        out.push_back(kHex[c & 0xF]);
    }
    return out;
}

// RFC 3986 unreserved characters stay; everything else is %XX (uppercase), as SigV4 requires.
std::string uri_encode(std::string_view text, bool keep_slash) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    std::string out;
    for (unsigned char c : text) {
        if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' ||
            (keep_slash && c == '/')) {
            out.push_back(static_cast<char>(c));
        } else {
            out.push_back('%');
            out.push_back(kHex[c >> 4]);
            out.push_back(kHex[c & 0xF]);
        }
    }
    return out;
}

std::string percent_decode(std::string_view text) {
    auto val = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
    };
    std::string out;
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] == '%' && i + 2 < text.size() && val(text[i + 1]) >= 0 &&
            val(text[i + 2]) >= 0) {
            out.push_back(static_cast<char>(val(text[i + 1]) * 16 + val(text[i + 2])));
            i += 2;
        } else {
            out.push_back(text[i]);
        }
    }
    return out;
}

// RFC 3986 5.2.4 dot-segment removal; AWS also collapses repeated slashes.
std::string normalize_path(std::string_view path) {
    if (path.empty()) return "/";
    std::vector<std::string_view> out;
    std::size_t start = 0;
    while (start <= path.size()) {
        auto slash = path.find('/', start);
        std::string_view seg = path.substr(
            start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
        if (!seg.empty() && seg != ".") {
            if (seg == "..") {
                if (!out.empty()) out.pop_back();
            } else {
                out.push_back(seg);
            }
        }
        if (slash == std::string_view::npos) break;
        start = slash + 1;
    }
    std::string result = path.front() == '/' ? "/" : "";
    for (std::size_t i = 0; i < out.size(); ++i) {
        if (i) result.push_back('/');
        result.append(out[i]);
    }
    if (path.back() == '/' && !out.empty()) result.push_back('/');
    return result;
}

// Trims and collapses runs of whitespace to one space, as the canonical form requires.
std::string canonical_header_value(std::string_view value) {
    std::string out;
    bool pending_space = false;
    for (char c : value) {
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            pending_space = !out.empty();
        } else {
            if (pending_space) out.push_back(' ');
            pending_space = false;
            out.push_back(c);
        }
    }
    return out;
}

std::string canonical_query(std::string_view query) {
    std::vector<std::pair<std::string, std::string>> pairs;
    while (!query.empty()) {
        auto amp = query.find('&');
        std::string_view pair = query.substr(0, amp);
        if (!pair.empty()) {
            auto eq = pair.find('=');
            std::string_view key = pair.substr(0, eq);
            std::string_view value = eq == std::string_view::npos ? "" : pair.substr(eq + 1);
            // Decode then encode, so raw and pre-encoded forms give the same canonical text.
            pairs.emplace_back(uri_encode(percent_decode(key), false),
                               uri_encode(percent_decode(value), false));
        }
        if (amp == std::string_view::npos) break;
        query = query.substr(amp + 1);
    }
    std::sort(pairs.begin(), pairs.end());
    std::string out;
    for (const auto& [k, v] : pairs) {
        if (!out.empty()) out.push_back('&');
        out += k + "=" + v;
    }
    return out;
}

std::optional<std::string> header_value(const SignableRequest& request,
                                        std::string_view lower_name) {
    std::optional<std::string> joined;
    for (const auto& [name, value] : request.headers) {
        if (to_lower(name) != lower_name) continue;
        std::string v = canonical_header_value(value);
        joined = joined ? *joined + "," + v : v;
    }
    return joined;
}

bool excluded_from_signing(std::string_view lower_name) {
    return lower_name == "authorization" || lower_name == "user-agent" || lower_name == "expect" ||
           lower_name == "x-amzn-trace-id";
}

void set_header(SignableRequest& request, const std::string& name, const std::string& value) {
    const std::string lower = to_lower(name);
    auto& headers = request.headers;
    headers.erase(std::remove_if(headers.begin(), headers.end(),
                                 [&](const auto& h) { return to_lower(h.first) == lower; }),
                  headers.end());
    headers.emplace_back(name, value);
}

std::string string_to_sign(std::string_view amz_date, std::string_view scope,
                           std::string_view canonical) {
    return fmt::format("{}\n{}\n{}\n{}", kAlgorithm, amz_date, scope, sha256_hex(canonical));
}

}  // namespace

std::string sha256_hex(std::string_view data) {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    if (EVP_Digest(data.data(), data.size(), digest, &length, EVP_sha256(), nullptr) != 1) {
        throw std::runtime_error("SHA-256 failed");
    }
    return hex(std::string_view(reinterpret_cast<const char*>(digest), length));
}

std::string hmac_sha256(std::string_view key, std::string_view data) {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    if (!HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
              reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest, &length)) {
        throw std::runtime_error("HMAC-SHA256 failed");
    }
    return std::string(reinterpret_cast<const char*>(digest), length);
}

std::string signing_key(std::string_view secret, std::string_view date, std::string_view region,
                        std::string_view service) {
    std::string k = hmac_sha256("AWS4" + std::string(secret), date);
    k = hmac_sha256(k, region);
    k = hmac_sha256(k, service);
    return hmac_sha256(k, "aws4_request");
}

std::string amz_date(std::chrono::system_clock::time_point time) {
    std::time_t t = std::chrono::system_clock::to_time_t(time);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
    return buf;
}

std::string canonical_request(const SignableRequest& request,
                              const std::vector<std::string>& signed_headers, bool normalize) {
    std::string_view target = request.target;
    auto q = target.find('?');
    std::string_view path = target.substr(0, q);
    std::string_view query = q == std::string_view::npos ? "" : target.substr(q + 1);
    // The path is encoded as given (so an already-encoded path is encoded again, as AWS expects
    // for every service but S3).
    std::string canonical_path =
        uri_encode(normalize ? normalize_path(path) : std::string(path), true);
    if (canonical_path.empty()) canonical_path = "/";

    std::string headers_block;
    std::string names;
    for (const auto& name : signed_headers) {
        headers_block += name + ":" + header_value(request, name).value_or("") + "\n";
        if (!names.empty()) names.push_back(';');
        names += name;
    }
    std::string payload_hash =
        header_value(request, "x-amz-content-sha256").value_or(sha256_hex(request.body));
    return fmt::format("{}\n{}\n{}\n{}\n{}\n{}", request.method, canonical_path,
                       canonical_query(query), headers_block, names, payload_hash);
}

SigningResult sign_request(SignableRequest& request, const Credentials& credentials,
                           const SigningParams& params) {
    if (!header_value(request, "host")) {
        throw std::invalid_argument("SigV4: the request has no Host header to sign");
    }
    SigningResult result;
    if (auto date = header_value(request, "x-amz-date")) {
        result.amz_date = *date;
    } else {
        result.amz_date = amz_date(params.time.value_or(std::chrono::system_clock::now()));
        set_header(request, "X-Amz-Date", result.amz_date);
    }
    if (params.sign_session_token && !credentials.session_token.empty()) {
        set_header(request, "X-Amz-Security-Token", credentials.session_token);
    }
    std::vector<std::string> names;
    for (const auto& [name, value] : request.headers) {
        std::string lower = to_lower(name);
        if (!excluded_from_signing(lower)) names.push_back(lower);
    }
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());

    const std::string date = result.amz_date.substr(0, 8);
    const std::string scope =
        fmt::format("{}/{}/{}/aws4_request", date, params.region, params.service);
    result.canonical_request = canonical_request(request, names, params.normalize_path);
    result.string_to_sign = string_to_sign(result.amz_date, scope, result.canonical_request);
    result.signature = hex(
        hmac_sha256(signing_key(credentials.secret_access_key, date, params.region, params.service),
                    result.string_to_sign));
    std::string joined;
    for (const auto& n : names) joined += (joined.empty() ? "" : ";") + n;
    result.authorization =
        fmt::format("{} Credential={}/{}, SignedHeaders={}, Signature={}", kAlgorithm,
                    credentials.access_key_id, scope, joined, result.signature);
    set_header(request, "Authorization", result.authorization);
    return result;
}

namespace {

VerifyResult fail(std::string code, std::string message) {
    VerifyResult r;
    r.error_code = std::move(code);
    r.message = std::move(message);
    return r;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
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
    if (auth.substr(0, kAlgorithm.size()) != kAlgorithm) {
        return fail("IncompleteSignature", "Unsupported authorization algorithm");
    }
    auth.remove_prefix(kAlgorithm.size());
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
    const std::string expected = hex(hmac_sha256(
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
