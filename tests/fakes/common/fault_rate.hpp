#pragma once
/// \file Faults at a rate, for every provider fake (the HTTP fake and the fake EC2): which kinds
/// a cloud API fails with, and the seeded dice that decide which request gets one. The seed is
/// printed when the dice are made, so a failing run can be replayed with SKY_FAULT_SEED.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace sky::test {

/// What a cloud API does wrong.
enum class FaultKind {
    server_error,  ///< 500, 502 or 503 before doing anything
    throttled,     ///< 429 with Retry-After (EC2: 503 RequestLimitExceeded)
    stall,         ///< the request is carried out, its answer never comes (the client times out)
    capacity,      ///< the cloud's own "no capacity" answer (launch requests only)
    expired_auth,  ///< 401/403: the credentials expired (EC2: AuthFailure, RequestExpired)
    malformed,     ///< the request is carried out, its body is not the API's format
    truncated,     ///< the request is carried out, its body stops short of Content-Length
};

/// Every kind, in declaration order.
inline const std::vector<FaultKind>& all_fault_kinds() {
    static const std::vector<FaultKind> all = {
        FaultKind::server_error, FaultKind::throttled, FaultKind::stall,    FaultKind::capacity,
        FaultKind::expired_auth, FaultKind::malformed, FaultKind::truncated};
    return all;
}

/// "server_error", "throttled", ...
inline std::string_view fault_kind_name(FaultKind k) {
    switch (k) {
        case FaultKind::server_error:
            return "server_error";
        case FaultKind::throttled:
            return "throttled";
        case FaultKind::stall:
            return "stall";
        case FaultKind::capacity:
            return "capacity";
        case FaultKind::expired_auth:
            return "expired_auth";
        case FaultKind::malformed:
            return "malformed";
        case FaultKind::truncated:
            return "truncated";
    }
    return "?";
}

/// SKY_FAULT_SEED when set (a replay), else a fresh random seed.
inline std::uint64_t fault_seed_from_env() {
    if (const char* s = std::getenv("SKY_FAULT_SEED"); s && *s)
        return std::strtoull(s, nullptr, 10);
    return (static_cast<std::uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
}

/// The seeded dice of one fault rate: each matching request gets a fault with `probability`,
/// of a kind drawn uniformly from `kinds`. Thread-safe.
class FaultDice {
public:
    /// seed 0: fault_seed_from_env(). Prints the seed on stderr (`who` names the fake).
    FaultDice(std::string_view who, std::vector<FaultKind> kinds, double probability,
              std::uint64_t seed)
        : kinds_(std::move(kinds)),
          probability_(probability),
          seed_(seed != 0 ? seed : fault_seed_from_env()),
          rng_(seed_) {
        std::string names;
        for (auto k : kinds_)
            names += std::string(names.empty() ? "" : ",") + std::string(fault_kind_name(k));
        std::fprintf(stderr, "%.*s: faults %s at %.0f%%, seed %llu (replay: SKY_FAULT_SEED=%llu)\n",
                     static_cast<int>(who.size()), who.data(), names.c_str(), probability_ * 100,
                     static_cast<unsigned long long>(seed_),
                     static_cast<unsigned long long>(seed_));
    }

    /// The fault this request gets, or none.
    std::optional<FaultKind> roll() {
        std::lock_guard lk(m_);
        if (kinds_.empty()) return std::nullopt;
        if (std::uniform_real_distribution<double>(0, 1)(rng_) >= probability_) return std::nullopt;
        auto k = kinds_[std::uniform_int_distribution<std::size_t>(0, kinds_.size() - 1)(rng_)];
        ++hits_[static_cast<std::size_t>(k)];
        return k;
    }
    /// A number in [0, n), from the same stream (to pick among a kind's shapes).
    std::size_t pick(std::size_t n) {
        std::lock_guard lk(m_);
        return n == 0 ? 0 : std::uniform_int_distribution<std::size_t>(0, n - 1)(rng_);
    }
    [[nodiscard]] std::uint64_t seed() const { return seed_; }
    /// How many requests got a fault of this kind so far.
    [[nodiscard]] int hits(FaultKind k) const {
        std::lock_guard lk(m_);
        return hits_[static_cast<std::size_t>(k)];
    }

private:
    std::vector<FaultKind> kinds_;
    double probability_;
    std::uint64_t seed_;
    mutable std::mutex m_;
    std::mt19937_64 rng_;
    int hits_[7] = {};
};

/// A body that is no API's format: cut in the middle of `body` and followed by an HTML error page,
/// as a broken proxy might answer.
inline std::string malformed_body(const std::string& body) {
    return body.substr(0, body.size() / 2) + "\x01<html><body>502 Bad Gateway</body>";
}

}  // namespace sky::test
