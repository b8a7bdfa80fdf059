// The worker's side of a preemption notice (api.md §10a): reading it is a load, with no system
// call and no lock; the frames that carry the notice and the progress round-trip, and bad ones
// are ProtocolErrors.
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>

#include "runtime/preemption.hpp"
#include "runtime/protocol.hpp"
#include "runtime/worker_context.hpp"
#include "sky/errors.hpp"
#include "sky/instance.hpp"

using namespace sky::detail;
using namespace std::chrono_literals;

namespace {

sky::Preemption a_notice() {
    sky::Preemption p;
    p.deadline =
        std::chrono::system_clock::time_point(std::chrono::milliseconds(1'800'000'000'123));
    p.node = 1;
    p.instance_id = "sim-0123456789abcdef-01234567";  // longer than a short string's buffer
    p.reason = "spot instance-action: terminate (a reason longer than a short string)";
    p.checkpoint_step = 1001;
    return p;
}

// Runs `body` in a child process under seccomp's strict mode, where any system call but read,
// write, _exit and sigreturn kills the process with SIGKILL. Returns the child's wait status.
template <class F>
int under_strict_seccomp(F body) {
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        ::close(fds[0]);
        if (::prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT) != 0) ::_exit(90);
        const char ok = body() ? 'y' : 'n';
        // exit_group, what _exit calls, is not allowed in strict mode: the thread's exit is.
        if (::write(fds[1], &ok, 1) != 1) ::syscall(SYS_exit, 91);
        ::syscall(SYS_exit, 0);
    }
    ::close(fds[1]);
    char got = 0;
    const bool read_one = ::read(fds[0], &got, 1) == 1;
    ::close(fds[0]);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) CHECK((read_one && got == 'y'));
    return status;
}

bool exited_cleanly(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

}  // namespace

TEST_CASE("preemption: none stands until one is published, and a withdrawal clears it",
          "[preemption]") {
    publish_preemption(std::nullopt);
    CHECK_FALSE(sky::preemption().has_value());
    publish_preemption(a_notice());
    auto p = sky::preemption();
    REQUIRE(p.has_value());
    CHECK(p->node == 1);
    CHECK(p->instance_id == a_notice().instance_id);
    CHECK(p->reason == a_notice().reason);
    CHECK(p->checkpoint_step == 1001);
    CHECK(p->deadline == a_notice().deadline);
    publish_preemption(std::nullopt);
    CHECK_FALSE(sky::preemption().has_value());
}

TEST_CASE("preemption: the strict-seccomp check catches a system call", "[preemption]") {
    // The check below can fail: a body that makes one system call is killed.
    const int status = under_strict_seccomp([] { return ::syscall(SYS_getpid) > 0; });
    CHECK(WIFSIGNALED(status));
    if (WIFSIGNALED(status)) CHECK(WTERMSIG(status) == SIGKILL);
}

TEST_CASE("preemption: a million reads and progress reports make no system call", "[preemption]") {
    in_worker.store(true);  // sky::progress records only inside a worker
    for (const bool standing : {false, true}) {
        INFO("a notice stands: " << standing);
        if (standing)
            publish_preemption(a_notice());
        else
            publish_preemption(std::nullopt);
        (void)sky::preemption();  // the allocator's first chunk, before the filter
        const auto before = progress_snapshot();
        const int status = under_strict_seccomp([standing, before] {
            std::int64_t seen = 0;
            for (std::int64_t step = 0; step < 1'000'000; ++step) {
                sky::progress(step);
                if (auto p = sky::preemption()) seen += p->checkpoint_step == 1001;
            }
            const auto after = progress_snapshot();
            return seen == (standing ? 1'000'000 : 0) &&
                   after.changes == before.changes + 1'000'000 && after.step == 999'999;
        });
        CHECK(exited_cleanly(status));
    }
    in_worker.store(false);
    publish_preemption(std::nullopt);
}

TEST_CASE("preemption: a million reads of a standing notice take well under a second",
          "[preemption]") {
    publish_preemption(a_notice());
    std::int64_t sum = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 1'000'000; ++i)
        if (auto p = sky::preemption()) sum += p->checkpoint_step;
    const auto took = std::chrono::steady_clock::now() - t0;
    CHECK(sum == 1'000'000LL * 1001);
    // A generous bound (a sanitizer build included): bench/preemption measures it.
    CHECK(took < 1s);
    publish_preemption(std::nullopt);
}

TEST_CASE("preemption: the preempt and progress payloads round-trip, and bad ones are refused",
          "[preemption][frames]") {
    const Buffer b = encode_preempt(a_notice());
    auto back = decode_preempt(b.span());
    REQUIRE(back.has_value());
    CHECK(back->deadline == a_notice().deadline);
    CHECK(back->instance_id == a_notice().instance_id);
    CHECK(back->checkpoint_step == 1001);
    CHECK_FALSE(decode_preempt({}).has_value());
    CHECK(encode_preempt(std::nullopt).empty());
    const std::byte junk[3] = {std::byte{1}, std::byte{2}, std::byte{3}};
    CHECK_THROWS_AS(decode_preempt(junk), sky::ProtocolError);

    Buffer f;
    append_progress_frame(f, std::int64_t{-7});
    const FrameHeader h = decode_header(f.data(), 1 << 20);
    CHECK(h.type == MsgType::progress);
    REQUIRE(h.length == 8);
    CHECK(decode_progress(f.span().subspan(frame_header_size)) == std::optional<std::int64_t>(-7));
    Buffer none;
    append_progress_frame(none, std::nullopt);
    CHECK(decode_header(none.data(), 1 << 20).length == 0);
    CHECK_FALSE(decode_progress({}).has_value());
    CHECK_THROWS_WITH(decode_progress(junk), Catch::Contains("progress frame of 3 bytes"));
    CHECK(std::string(msg_type_name(MsgType::preempt)) == "preempt");
}

TEST_CASE("preemption: a relayed step keeps the highest until the calls are over", "[preemption]") {
    progress_cleared();
    relay_progress(10);
    relay_progress(12);
    relay_progress(11);
    CHECK(progress_snapshot().step == 12);
    progress_cleared();
    relay_progress(3);
    CHECK(progress_snapshot().step == 3);
}

TEST_CASE("preemption: a probe's output is a firm notice, a softer warning, or a reclaim now",
          "[preemption]") {
    const auto now = std::chrono::system_clock::time_point(std::chrono::seconds(1'800'000'000));
    auto n = parse_probe_output("reclaim 1800000120 spot instance-action: terminate at T\n", now);
    CHECK(n.firm);
    CHECK(n.deadline == std::chrono::system_clock::time_point(std::chrono::seconds(1'800'000'120)));
    CHECK(n.reason == "spot instance-action: terminate at T");

    n = parse_probe_output("warn 1800000300 rebalance recommendation\nmore\n", now);
    CHECK_FALSE(n.firm);
    CHECK(n.deadline == std::chrono::system_clock::time_point(std::chrono::seconds(1'800'000'300)));
    CHECK(n.reason == "rebalance recommendation");

    // A bare yes (the probe contract before deadlines), or a line that is not a notice: the
    // machine goes now.
    for (const char* out : {"", "yes\n", "reclaim soon\n", "reclaim -5 x\n", "warn\n",
                            "reclaim 99999999999999999999 overflow\n", "reclaim 4000000000 x\n"}) {
        INFO(out);
        n = parse_probe_output(out, now);
        CHECK(n.firm);
        CHECK(n.deadline == now);
        CHECK_FALSE(n.reason.empty());
    }
    // A reason is one printable line, bounded.
    n = parse_probe_output("reclaim 1800000120 a\tb" + std::string(2000, 'x'), now);
    CHECK(n.firm);
    CHECK(n.reason.rfind("a b", 0) == 0);
    CHECK(n.reason.size() <= 512);
    // No reason given: the kind's own words.
    CHECK_FALSE(parse_probe_output("warn 1800000300", now).reason.empty());
}

TEST_CASE("preemption: the notice file and the notice frame round-trip, bad ones are refused",
          "[preemption]") {
    NodeNotice n;
    n.deadline =
        std::chrono::system_clock::time_point(std::chrono::milliseconds(1'800'000'000'123));
    n.firm = false;
    n.reason = "rebalance recommendation at 2027-01-15T08:00:00Z";
    const std::string text = format_notice_file(n);
    CHECK(text == "warn 1800000000123 rebalance recommendation at 2027-01-15T08:00:00Z\n");
    auto back = parse_notice_file(text);
    REQUIRE(back);
    CHECK(*back == n);
    n.firm = true;
    back = parse_notice_file(format_notice_file(n));
    REQUIRE(back);
    CHECK(back->firm);
    // Cut short (no end of line), or not a notice at all.
    CHECK_FALSE(parse_notice_file(text.substr(0, text.size() - 1)));
    CHECK_FALSE(parse_notice_file("hello world\n"));
    CHECK_FALSE(parse_notice_file(""));

    const Buffer payload = encode_notice(n);
    CHECK(decode_notice(payload.span()) == n);
    const std::byte junk[3] = {std::byte{1}, std::byte{2}, std::byte{3}};
    CHECK_THROWS_AS(decode_notice(std::span<const std::byte>(junk, 3)), sky::ProtocolError);
}
