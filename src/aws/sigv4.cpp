#include "aws/sigv4.hpp"

#include <fmt/format.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <cctype>
#include <ctime>
#include <stdexcept>

#include "util/digest.hpp"
#include "util/encoding.hpp"
#include "util/text.hpp"

namespace sky::detail::aws {

namespace {

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
            pairs.emplace_back(url_encode(url_decode(key), false),
                               url_encode(url_decode(value), false));
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

}  // namespace

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

std::string string_to_sign(std::string_view amz_date, std::string_view scope,
                           std::string_view canonical) {
    return fmt::format("{}\n{}\n{}\n{}", kSigV4Algorithm, amz_date, scope, sha256_hex(canonical));
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
        url_encode(normalize ? normalize_path(path) : std::string(path), true);
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
    result.signature = hex_encode(
        hmac_sha256(signing_key(credentials.secret_access_key, date, params.region, params.service),
                    result.string_to_sign));
    std::string joined;
    for (const auto& n : names) joined += (joined.empty() ? "" : ";") + n;
    result.authorization =
        fmt::format("{} Credential={}/{}, SignedHeaders={}, Signature={}", kSigV4Algorithm,
                    credentials.access_key_id, scope, joined, result.signature);
    set_header(request, "Authorization", result.authorization);
    return result;
}

}  // namespace sky::detail::aws
