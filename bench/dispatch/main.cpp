// bench/dispatch: sky's dispatch path on Local against raw loopback TCP, measured in one run.
//
//   round trip   `>>` of a no-op vs a 32-byte TCP echo between two processes (median, p99)
//   calls/s      `gather` of 100,000 small calls on 2 nodes
//   payload      a 256 MiB std::vector<float> echo vs raw loopback TCP bulk throughput
//   rpc          a 64 MiB std::vector<float> echo vs the same echo through a hand-written RPC
//                over a socket pair between two processes (length-prefixed frames, a fresh
//                std::vector per message, as a user would write it), interleaved, median
//   map          sky::map of 100,000 small elements vs the same work as a hand-made gather of
//                one call per chunk (same chunks), on 2 nodes, interleaved (median of the runs)
//
//   compare      (--compare only) what two builds are compared by, one line each: a gather of
//                50,000 no-op calls on 2 nodes x 2 slots, `>>` against a 32-byte ping-pong over
//                a socket pair to a second process (blocking recv, interleaved), the 64 MiB
//                echo against the hand-written RPC (bench/dispatch/compare.sh alternates builds)
//
// Usage: dispatch [--quick | --rpc N | --gather N | --compare]   (--quick: fewer iterations, for
//        a smoke run; --rpc N: only the 64 MiB row, N interleaved rounds, each round's two times
//        printed; --gather N: only the compare row's gather, N runs, for a profiler)
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <sky/sky.hpp>
#include <string>
#include <thread>
#include <vector>

namespace bench {
void noop() {}
int inc(int x) { return x + 1; }
std::vector<float> echo(std::vector<float> v) { return v; }
// CPU time this process has used (user + system), in microseconds.
double cpu_us() {
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e6 +
           static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}
// What a user writes without sky::map: one call per chunk that loops over its elements.
std::vector<int> inc_chunk(std::vector<int> xs) {
    for (int& x : xs) x = inc(x);
    return xs;
}
}  // namespace bench

namespace {

using Clock = std::chrono::steady_clock;

double us(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

struct Stats {
    double median, p99;
};
Stats stats(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return {v[v.size() / 2], v[std::min(v.size() - 1, v.size() * 99 / 100)]};
}

void write_all(int fd, const char* p, std::size_t n) {
    while (n) {
        ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0) throw std::runtime_error("send failed");
        p += w;
        n -= static_cast<std::size_t>(w);
    }
}
void read_all(int fd, char* p, std::size_t n) {
    while (n) {
        ssize_t r = ::recv(fd, p, n, 0);
        if (r <= 0) throw std::runtime_error("recv failed");
        p += r;
        n -= static_cast<std::size_t>(r);
    }
}

// A child process serving one TCP connection: echo every byte back, or, with `drain`, read an
// 8-byte length and that many bytes, then answer one byte (one-way bulk throughput).
int start_echo_server(int& port, bool drain = false) {
    int ls = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(ls, 1);
    socklen_t len = sizeof a;
    ::getsockname(ls, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
    pid_t pid = ::fork();
    if (pid == 0) {
        int c = ::accept(ls, nullptr, nullptr);
        int one = 1;
        ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        std::vector<char> buf(1 << 20);
        if (drain) {
            for (;;) {
                std::uint64_t n = 0;
                try {
                    read_all(c, reinterpret_cast<char*>(&n), sizeof n);
                    while (n) {
                        std::size_t k = std::min<std::uint64_t>(n, buf.size());
                        read_all(c, buf.data(), k);
                        n -= k;
                    }
                    write_all(c, "k", 1);
                } catch (...) {
                    ::_exit(0);
                }
            }
        }
        for (;;) {
            ssize_t r = ::recv(c, buf.data(), buf.size(), 0);
            if (r <= 0) ::_exit(0);
            write_all(c, buf.data(), static_cast<std::size_t>(r));
        }
    }
    ::close(ls);
    return pid;
}

// The hand-written RPC a user would write instead of sky: a child process on the other end of a
// socket pair answers each length-prefixed frame with the same bytes, received into a fresh
// std::vector per message. Started before any pool, so the child forks a single-threaded process.
struct HandRpc {
    int fd = -1;
    pid_t pid = -1;

    HandRpc() {
        int sv[2];
        if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
            throw std::runtime_error("socketpair failed");
        pid = ::fork();
        if (pid == 0) {
            ::close(sv[0]);
            for (;;) {
                std::uint64_t n = 0;
                try {
                    read_all(sv[1], reinterpret_cast<char*>(&n), sizeof n);
                    std::vector<float> v(n / sizeof(float));
                    read_all(sv[1], reinterpret_cast<char*>(v.data()), n);
                    write_all(sv[1], reinterpret_cast<const char*>(&n), sizeof n);
                    write_all(sv[1], reinterpret_cast<const char*>(v.data()), n);
                } catch (...) {
                    ::_exit(0);
                }
            }
        }
        ::close(sv[1]);
        fd = sv[0];
    }
    ~HandRpc() {
        ::close(fd);
        int st = 0;
        ::waitpid(pid, &st, 0);
    }
    std::vector<float> echo(const std::vector<float>& v) {
        const std::uint64_t n = v.size() * sizeof(float);
        write_all(fd, reinterpret_cast<const char*>(&n), sizeof n);
        write_all(fd, reinterpret_cast<const char*>(v.data()), n);
        std::uint64_t m = 0;
        read_all(fd, reinterpret_cast<char*>(&m), sizeof m);
        std::vector<float> back(m / sizeof(float));
        read_all(fd, reinterpret_cast<char*>(back.data()), m);
        return back;
    }
};

// A 32-byte ping-pong partner over a socket pair: a child process that sends back what it reads
// (blocking recv on both sides). Started before any pool, like HandRpc.
struct PingPong {
    int fd = -1;
    pid_t pid = -1;
    PingPong() {
        int sv[2];
        if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
            throw std::runtime_error("socketpair failed");
        pid = ::fork();
        if (pid == 0) {
            ::close(sv[0]);
            char b[32];
            for (;;) {
                try {
                    read_all(sv[1], b, sizeof b);
                    write_all(sv[1], b, sizeof b);
                } catch (...) {
                    ::_exit(0);
                }
            }
        }
        ::close(sv[1]);
        fd = sv[0];
    }
    ~PingPong() {
        ::close(fd);
        int st = 0;
        ::waitpid(pid, &st, 0);
    }
    double once_us() {
        char b[32] = {};
        auto t0 = Clock::now();
        write_all(fd, b, sizeof b);
        read_all(fd, b, sizeof b);
        return us(Clock::now() - t0);
    }
};

// Like read_all, but polls for up to 50 us before blocking: what sky's caller does while it
// waits for a result, so the comparison is about the dispatch path, not about wake-ups.
void read_all_polling(int fd, char* p, std::size_t n) {
    auto until = Clock::now() + std::chrono::microseconds(50);
    while (n) {
        bool spin = Clock::now() < until;
        ssize_t r = ::recv(fd, p, n, spin ? MSG_DONTWAIT : 0);
        if (r < 0 && spin && (errno == EAGAIN || errno == EWOULDBLOCK)) continue;
        if (r <= 0) throw std::runtime_error("recv failed");
        p += r;
        n -= static_cast<std::size_t>(r);
    }
}

int connect_to(int port) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
        throw std::runtime_error("connect failed");
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

// 64 MiB through sky and through the hand-written RPC, alternating which goes first; the first
// round of each warms up (fresh memory on both sides) and is not counted.
// With `cpu`, also the CPU time of each counted sky echo in the client process and in the worker
// (milliseconds, two entries per echo): under load it says more than the wall time.
void compare_echo(sky::ComputePool& pool, HandRpc& rpc, std::size_t floats, int reps,
                  std::vector<double>& sky_s, std::vector<double>& hand_s,
                  std::vector<double>* cpu = nullptr) {
    std::vector<float> w(floats, 2.5f);
    for (int rep = 0; rep <= reps; ++rep) {
        auto sky_once = [&] {
            const double worker0 = cpu ? sky::compute<bench::cpu_us>() >> pool : 0;
            const double client0 = cpu ? bench::cpu_us() : 0;
            auto t0 = Clock::now();
            auto back = sky::compute<bench::echo>(w) >> pool;
            const double s = std::chrono::duration<double>(Clock::now() - t0).count();
            if (back.size() != w.size() || back.back() != 2.5f) throw std::runtime_error("sky");
            back = {};  // its free counts in the CPU time
            if (rep > 0) sky_s.push_back(s);
            if (cpu && rep > 0) {
                cpu->push_back((bench::cpu_us() - client0) / 1e3);
                cpu->push_back(((sky::compute<bench::cpu_us>() >> pool) - worker0) / 1e3);
            }
        };
        auto hand_once = [&] {
            auto t0 = Clock::now();
            auto back = rpc.echo(w);
            const double s = std::chrono::duration<double>(Clock::now() - t0).count();
            if (back.size() != w.size() || back.back() != 2.5f) throw std::runtime_error("rpc");
            if (rep > 0) hand_s.push_back(s);
        };
        if (rep % 2) {
            hand_once();
            sky_once();
        } else {
            sky_once();
            hand_once();
        }
    }
}

}  // namespace

int main(int argc, char** argv) {
    sky::init(argc, argv);
    const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
    const int rt_iters = quick ? 2000 : 20000;
    const int gather_n = quick ? 20000 : 100000;
    const std::size_t payload_floats = (quick ? 32u : 256u) << 20 >> 2;  // MiB -> floats
    const int map_n = 100000;
    const int map_reps = quick ? 5 : 30;
    const std::size_t rpc_floats = std::size_t{64} << 20 >> 2;  // 64 MiB
    const int rpc_reps = quick ? 5 : 15;
    HandRpc rpc;  // before any pool: its child forks this process while it has one thread
    if (argc > 1 && std::strcmp(argv[1], "--compare") == 0) {
        PingPong ping;
        // `>>` of a no-op against the socket-pair ping-pong, 20 interleaved rounds of 500.
        std::vector<double> sky_rt, raw_rt;
        std::vector<double> sky_s, hand_s;
        {
            sky::ComputePool pool{{.nodes = 1, .display = sky::Display::quiet}};
            for (int r = 0; r < 20; ++r) {
                for (int i = 0; i < 510; ++i) {
                    const double t = ping.once_us();
                    if (i >= 10) raw_rt.push_back(t);
                }
                for (int i = 0; i < 510; ++i) {
                    auto t0 = Clock::now();
                    sky::compute<bench::noop>() >> pool;
                    if (i >= 10) sky_rt.push_back(us(Clock::now() - t0));
                }
            }
            compare_echo(pool, rpc, rpc_floats, 5, sky_s, hand_s);
        }
        // A gather of 50,000 no-op calls on 2 nodes x 2 slots: the best of 5 after a warm-up.
        double best = 0;
        {
            sky::ComputePool pool{{.nodes = 2, .concurrency = 2, .display = sky::Display::quiet}};
            const int n = 50000;
            for (int rep = 0; rep < 6; ++rep) {
                std::vector<sky::PendingCompute<int>> calls;
                calls.reserve(n);
                auto g0 = Clock::now();
                for (int i = 0; i < n; ++i) calls.push_back(sky::compute<bench::inc>(i));
                auto got = sky::gather(std::move(calls)) >> pool;
                const double cps = n / std::chrono::duration<double>(Clock::now() - g0).count();
                if (got.size() != static_cast<std::size_t>(n) || got.back() != n) {
                    std::fprintf(stderr, "gather came back wrong\n");
                    return 1;
                }
                if (rep > 0) best = std::max(best, cps);
            }
        }
        const double mb = 2.0 * static_cast<double>(rpc_floats * sizeof(float)) / (1 << 20);
        const auto s = stats(sky_rt), r = stats(raw_rt);
        std::printf("gather_2x2_calls_per_s %.0f\n", best);
        std::printf("roundtrip_us %.1f pingpong_us %.1f ratio %.2f\n", s.median, r.median,
                    s.median / r.median);
        std::printf("echo64_mbs %.0f rpc_mbs %.0f ratio %.2f\n", mb / stats(sky_s).median,
                    mb / stats(hand_s).median, stats(hand_s).median / stats(sky_s).median);
        return 0;
    }
    if (argc > 2 && std::strcmp(argv[1], "--gather") == 0) {
        // Only the compare row's gather, N runs after a warm-up, each run's calls/s printed:
        // for profiling the dispatch path (perf, callgrind) without the other rows.
        const int reps = std::max(1, std::atoi(argv[2]));
        sky::ComputePool pool{{.nodes = 2, .concurrency = 2, .display = sky::Display::quiet}};
        const int n = 50000;
        for (int rep = 0; rep <= reps; ++rep) {
            std::vector<sky::PendingCompute<int>> calls;
            calls.reserve(n);
            auto g0 = Clock::now();
            for (int i = 0; i < n; ++i) calls.push_back(sky::compute<bench::inc>(i));
            auto got = sky::gather(std::move(calls)) >> pool;
            const double cps = n / std::chrono::duration<double>(Clock::now() - g0).count();
            if (got.size() != static_cast<std::size_t>(n) || got.back() != n) {
                std::fprintf(stderr, "gather came back wrong\n");
                return 1;
            }
            if (rep > 0) std::printf("gather_2x2_calls_per_s %.0f\n", cps);
        }
        return 0;
    }
    if (argc > 2 && std::strcmp(argv[1], "--rpc") == 0) {
        // Only the 64 MiB row, for measuring the payload path on a busy machine.
        const int reps = std::max(1, std::atoi(argv[2]));
        std::vector<double> sky_s, hand_s, cpu;
        {
            sky::ComputePool pool{{.nodes = 1, .display = sky::Display::quiet}};
            compare_echo(pool, rpc, rpc_floats, reps, sky_s, hand_s, &cpu);
        }
        const double mb = 2.0 * static_cast<double>(rpc_floats * sizeof(float)) / (1 << 20);
        for (std::size_t i = 0; i < sky_s.size(); ++i)
            std::printf(
                "round %2zu: sky %6.1f ms (CPU: client %5.1f ms, worker %5.1f ms), rpc %6.1f ms\n",
                i + 1, sky_s[i] * 1e3, cpu[2 * i], cpu[2 * i + 1], hand_s[i] * 1e3);
        const double sky = mb / stats(sky_s).median, hand = mb / stats(hand_s).median;
        std::printf("64 MiB echo vs socketpair RPC, median of %d: %.0f MB/s vs %.0f MB/s, %.2fx\n",
                    reps, sky, hand, sky / hand);
        return 0;
    }

    // Raw TCP: an echo server in a second process. Round trips alternate between raw TCP and
    // sky in rounds, so both see the same machine load.
    int port = 0;
    pid_t server = start_echo_server(port);
    int fd = connect_to(port);
    std::vector<double> raw_rt, poll_rt, sky_rt;
    double gather_s = 0, sky_echo_s = 0, first_echo_s = 0, raw_bulk_s = 0;
    std::vector<double> sky_rpc_s, hand_rpc_s;
    const std::size_t bytes = payload_floats * sizeof(float);
    {
        sky::ComputePool pool{{.nodes = 1, .display = sky::Display::quiet}};
        char msg[32] = {};
        const int rounds = 20, per_round = rt_iters / rounds;
        for (int r = 0; r < rounds; ++r) {
            for (int i = 0; i < per_round + 10; ++i) {
                auto t0 = Clock::now();
                write_all(fd, msg, sizeof msg);
                read_all(fd, msg, sizeof msg);
                if (i >= 10) raw_rt.push_back(us(Clock::now() - t0));
            }
            for (int i = 0; i < per_round + 10; ++i) {
                auto t0 = Clock::now();
                write_all(fd, msg, sizeof msg);
                read_all_polling(fd, msg, sizeof msg);
                if (i >= 10) poll_rt.push_back(us(Clock::now() - t0));
            }
            for (int i = 0; i < per_round + 10; ++i) {
                auto t0 = Clock::now();
                sky::compute<bench::noop>() >> pool;
                if (i >= 10) sky_rt.push_back(us(Clock::now() - t0));
            }
        }
        ::close(fd);
        int st;
        ::waitpid(server, &st, 0);
        // Raw bulk throughput: stream the payload one way to a process that drains it; best of 3.
        pid_t drain = start_echo_server(port, true);
        fd = connect_to(port);
        std::vector<char> out(bytes, 'x');
        for (int rep = 0; rep < 3; ++rep) {
            auto b0 = Clock::now();
            std::uint64_t n = bytes;
            write_all(fd, reinterpret_cast<const char*>(&n), sizeof n);
            write_all(fd, out.data(), bytes);
            char ack;
            read_all(fd, &ack, 1);
            double t = std::chrono::duration<double>(Clock::now() - b0).count();
            raw_bulk_s = rep == 0 ? t : std::min(raw_bulk_s, t);
        }
        ::close(fd);
        ::waitpid(drain, &st, 0);
        out = {};

        std::vector<float> v(payload_floats, 1.5f);
        // The first echo pays for fresh memory on both sides; later ones reuse it.
        for (int rep = 0; rep < 4; ++rep) {
            auto e0 = Clock::now();
            auto back = sky::compute<bench::echo>(v) >> pool;
            double s = std::chrono::duration<double>(Clock::now() - e0).count();
            if (rep == 0) first_echo_s = s;
            sky_echo_s = rep == 1 ? s : std::min(sky_echo_s, s);
            if (back.size() != v.size() || back.back() != 1.5f) {
                std::fprintf(stderr, "echo came back wrong\n");
                return 1;
            }
        }
        v = {};
        compare_echo(pool, rpc, rpc_floats, rpc_reps, sky_rpc_s, hand_rpc_s);
    }
    {
        sky::ComputePool pool{{.nodes = 2, .display = sky::Display::quiet}};
        std::vector<sky::PendingCompute<int>> calls;
        calls.reserve(static_cast<std::size_t>(gather_n));
        auto g0 = Clock::now();
        for (int i = 0; i < gather_n; ++i) calls.push_back(sky::compute<bench::inc>(i));
        auto r = sky::gather(std::move(calls)) >> pool;
        gather_s = std::chrono::duration<double>(Clock::now() - g0).count();
        for (int i = 0; i < gather_n; ++i)
            if (r[static_cast<std::size_t>(i)] != i + 1) {
                std::fprintf(stderr, "gather result %d wrong\n", i);
                return 1;
            }
    }

    // sky::map against the gather a user would write by hand for the same chunks: slice the
    // input, one call per slice, concatenate the results. Interleaved, so both see the same load.
    struct MapRow {
        std::size_t chunk, chunks;
        double map_ms, gather_ms;
    };
    std::vector<MapRow> map_rows;
    {
        sky::ComputePool pool{{.nodes = 2, .display = sky::Display::quiet}};
        std::vector<int> xs(static_cast<std::size_t>(map_n));
        std::iota(xs.begin(), xs.end(), 0);
        // 0: the pool's own chunk size (four chunks per slot: 12,500 elements here).
        for (std::size_t chunk : {std::size_t{0}, std::size_t{1000}, std::size_t{100}}) {
            const std::size_t slots = 2,
                              size = chunk ? chunk : (xs.size() + slots * 4 - 1) / (slots * 4);
            std::vector<double> map_ms, gather_ms;
            for (int rep = 0; rep < map_reps + 1; ++rep) {
                std::vector<int> got, flat;
                double mt = 0, gt = 0;
                auto run_map = [&] {
                    auto m0 = Clock::now();
                    auto m =
                        chunk ? sky::map<bench::inc>(xs).chunk(chunk) : sky::map<bench::inc>(xs);
                    got = m >> pool;
                    mt = std::chrono::duration<double, std::milli>(Clock::now() - m0).count();
                };
                auto run_gather = [&] {
                    auto g0 = Clock::now();
                    std::vector<sky::PendingCompute<std::vector<int>>> calls;
                    for (std::size_t first = 0; first < xs.size(); first += size) {
                        auto last = std::min(xs.size(), first + size);
                        calls.push_back(sky::compute<bench::inc_chunk>(
                            std::vector<int>(xs.begin() + static_cast<std::ptrdiff_t>(first),
                                             xs.begin() + static_cast<std::ptrdiff_t>(last))));
                    }
                    std::vector<std::vector<int>> parts = sky::gather(std::move(calls)) >> pool;
                    flat.reserve(xs.size());
                    for (auto& p : parts) flat.insert(flat.end(), p.begin(), p.end());
                    gt = std::chrono::duration<double, std::milli>(Clock::now() - g0).count();
                };
                // Each goes first in every other run.
                if (rep % 2) {
                    run_gather();
                    run_map();
                } else {
                    run_map();
                    run_gather();
                }
                if (got != flat || got.size() != xs.size() || got.back() != map_n) {
                    std::fprintf(stderr, "map and gather results differ\n");
                    return 1;
                }
                if (rep == 0) continue;  // warm-up: fresh memory on both sides
                map_ms.push_back(mt);
                gather_ms.push_back(gt);
            }
            map_rows.push_back({size, (xs.size() + size - 1) / size, stats(map_ms).median,
                                stats(gather_ms).median});
        }
    }

    auto raw = stats(raw_rt), polled = stats(poll_rt), sky_s = stats(sky_rt);
    double mb = static_cast<double>(bytes) / (1 << 20);
    double raw_mbs = mb / raw_bulk_s, sky_mbs = 2 * mb / sky_echo_s;
    double cps = gather_n / gather_s;
    std::printf("sky bench/dispatch (Local provider, %d cores)%s\n",
                static_cast<int>(std::thread::hardware_concurrency()), quick ? " [quick]" : "");
    std::printf("%-34s %14s %14s %8s %10s\n", "measure", "sky", "baseline", "ratio", "target");
    std::printf("%-34s %12.1fus %12.1fus %7.2fx %10s\n", ">> no-op round trip, median",
                sky_s.median, polled.median, sky_s.median / polled.median, "<= 1.5x");
    std::printf("%-34s %12.1fus %12.1fus %7.2fx %10s\n", ">> no-op round trip, p99", sky_s.p99,
                polled.p99, sky_s.p99 / polled.p99, "");
    std::printf("%-34s %12.1fus %12.1fus %7.2fx %10s\n", "  vs a blocking TCP client, median",
                sky_s.median, raw.median, sky_s.median / raw.median, "");
    std::printf("%-34s %12.0f/s %14s %8s %10s\n",
                (std::string("gather of ") + std::to_string(gather_n) + " calls, 2 nodes").c_str(),
                cps, "(Ray ~8000/s)", "", ">= 100000");
    std::printf("%-34s %10.0fMB/s %10.0fMB/s %7.2fx %10s\n",
                (std::to_string(static_cast<int>(mb)) + " MiB vector<float> echo").c_str(), sky_mbs,
                raw_mbs, sky_mbs / raw_mbs, ">= 0.5x");
    std::printf("%-34s %10.0fMB/s %10.0fMB/s %7.2fx %10s\n", "  the same, first call (cold memory)",
                2 * mb / first_echo_s, raw_mbs, 2 * mb / first_echo_s / raw_mbs, "");
    {
        const double rpc_mb = 2.0 * static_cast<double>(rpc_floats * sizeof(float)) / (1 << 20);
        const double sky_rpc = rpc_mb / stats(sky_rpc_s).median,
                     hand = rpc_mb / stats(hand_rpc_s).median;
        std::printf("%-34s %10.0fMB/s %10.0fMB/s %7.2fx %10s\n", "64 MiB echo vs socketpair RPC",
                    sky_rpc, hand, sky_rpc / hand, ">= 1.5x");
    }
    for (auto& r : map_rows)
        std::printf("%-34s %12.2fms %12.2fms %7.2fx %10s\n",
                    ("map of " + std::to_string(map_n) + ", " + std::to_string(r.chunks) +
                     " chunks of " + std::to_string(r.chunk))
                        .c_str(),
                    r.map_ms, r.gather_ms, r.map_ms / r.gather_ms, "~1x");
    std::printf(
        "(baselines: a 32-byte TCP echo between two processes, its client polling 50 us\n"
        " before it blocks as sky's caller does (and, one row, a plain blocking client),\n"
        " interleaved with sky's round trips; raw loopback TCP bulk throughput, one way, into a "
        "process that drains it. The echo's MB/s counts the bytes\n"
        " moved both ways: an RPC must receive all of its argument before it can answer.\n"
        " 64 MiB row: a hand-written RPC over a socket pair to a second process, length-prefixed\n"
        " frames, a fresh std::vector per message on both sides, interleaved with sky's echo on\n"
        " one node, median of %d each after a warm-up.\n"
        " map rows: sky::map<inc>(100,000 ints) >> pool against a hand-made gather of one\n"
        " compute<inc_chunk>(slice) per chunk, slicing and concatenating included; median of\n"
        " %d interleaved runs each.)\n",
        rpc_reps, map_reps);
    return 0;
}
