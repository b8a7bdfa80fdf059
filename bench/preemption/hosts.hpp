#pragma once
// bench/preemption's row on SSH test hosts (hosts.cpp): built where the test hosts and the fake
// EC2 are (SKY_BENCH_PREEMPTION_HOSTS).
#include <sky/sky.hpp>
#include <string>
#include <vector>

namespace bench {

/// When this rank first saw a notice (system clock, seconds); -1 when none came in `limit_ms`.
double first_sight(int limit_ms);
void noop();

struct HostsResult {
    std::string skipped;            ///< why the row could not run here (empty: it ran)
    std::vector<double> notice_ms;  ///< the pool heard of a notice -> the last rank saw it
    std::vector<double> probe_ms;   ///< the metadata announced it -> the pool heard of it
    std::vector<double> call_ms;    ///< baseline: a broadcast no-op round trip
    int missed = 0;
};

/// `n` notices on 3 test hosts (a new pool every 3); testdata: the EC2 model and instance types.
HostsResult hosts_row(int n, const std::string& testdata);

}  // namespace bench
