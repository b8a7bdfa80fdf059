// The worker side of "a dropped link loses nothing" (a scripted client against a real worker
// listening on a Unix socket): the worker keeps running its calls and keeps their answers when
// the connection drops, and a client that comes back with the same session within its bound
// gets every answer once more, each call having run once.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "e2e/local/functions.hpp"
#include "e2e/local/wire.hpp"

using namespace e2e;
namespace d = sky::detail;
using namespace std::chrono_literals;

namespace resume_fn {

// Appends a line to `path` (one per run), waits `ms`, returns the number of runs so far.
int slow_mark(std::string path, int ms) {
    std::ofstream(path, std::ios::app) << "run\n" << std::flush;
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    std::ifstream f(path);
    int n = 0;
    for (std::string l; std::getline(f, l);) ++n;
    return n;
}

}  // namespace resume_fn

namespace {

int lines_in(const std::string& path) {
    std::ifstream f(path);
    int n = 0;
    for (std::string l; std::getline(f, l);) ++n;
    return n;
}

// A worker of this binary listening on a Unix socket in a private temporary directory.
struct ListeningWorker {
    TempDir dir;
    std::string sock;
    std::string token = d::random_hex(32);
    pid_t pid = -1;

    ListeningWorker() {
        REQUIRE(::chmod(dir.path.c_str(), 0700) == 0);
        sock = dir.path + "/w.sock";
        const std::string port_file = dir.path + "/port";
        pid = wire::spawn_worker({"SKY_WORKER_LISTEN=unix:" + sock, "SKY_WORKER_TOKEN=" + token,
                                  "SKY_WORKER_PORT_FILE=" + port_file,
                                  "SKY_WORKER_ACCEPT_TIMEOUT=30"});
        wire::wait_port_file(port_file);
    }
    ~ListeningWorker() {
        if (pid > 0) (void)wire::wait_exit(pid, 0ms);  // kills it if a check failed first
    }
    /// Waits for it to exit (killed after `within`).
    wire::Exit wait(std::chrono::milliseconds within) {
        wire::Exit e = wire::wait_exit(pid, within);
        pid = -1;
        return e;
    }
};

// One connection of the scripted client.
struct Client {
    std::unique_ptr<d::FdTransport> t;
    std::unique_ptr<d::FrameReader> r;

    /// Connects and runs the handshake; the worker answers ready.
    Client(const ListeningWorker& w, const std::string& session, bool resume, int bound_s) {
        t = std::make_unique<d::FdTransport>(d::connect_unix(w.sock), "client");
        wire::connect_client(*t, r, w.token, hello(session, resume, bound_s));
    }
    static d::ClientHello hello(const std::string& session, bool resume, int bound_s) {
        d::ClientHello ch;
        ch.session = session;
        ch.resume = resume;
        ch.reconnect_bound_s = bound_s;
        return ch;
    }
    void call(std::uint64_t id, const d::CallDesc& c) {
        d::Buffer out;
        wire::call_frame(out, id, c);
        wire::send(*t, out);
    }
    void control(d::MsgType type, std::uint64_t id) {
        d::Buffer out;
        wire::frame(out, type, id, d::Buffer{});
        wire::send(*t, out);
    }
    void ack(std::vector<std::uint64_t> ids) {
        d::Buffer out;
        d::append_ack_frame(out, ids);
        wire::send(*t, out);
    }
    /// The next started, result or error frame within `within` (log and heartbeat frames are
    /// skipped); false when none came.
    bool next(d::Frame& f, std::chrono::milliseconds within = 10s) {
        const auto until = std::chrono::steady_clock::now() + within;
        for (;;) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                until - std::chrono::steady_clock::now());
            // Frames that came with the ready frame are in the reader already.
            if (!r->has_buffered_frame() && (left.count() <= 0 || !t->wait_readable(left)))
                return false;
            if (!r->next(f)) return false;
            if (f.header.type == d::MsgType::started || f.header.type == d::MsgType::result ||
                f.header.type == d::MsgType::error)
                return true;
        }
    }
    /// Drops the connection as a broken link would.
    void drop() {
        t->shutdown();
        r.reset();
        t.reset();
    }
};

// Tells the worker to shut down: it exits on its own, with status 0.
void shut_down(Client& c, ListeningWorker& w) {
    c.control(d::MsgType::shutdown, 0);
    wire::Exit e = w.wait(10s);
    REQUIRE(e.exited);
    CHECK(WIFEXITED(e.status));
    CHECK(WEXITSTATUS(e.status) == 0);
}

int result_int(const d::Frame& f) {
    int v = 0;
    d::load_from(f.payload, v);
    return v;
}

}  // namespace

TEST_CASE(
    "a connection dropped mid-call: the client resumes and gets the result, the call "
    "having run once",
    "[local][resume]") {
    ListeningWorker w;
    const std::string runs = w.dir.path + "/runs";
    const auto call = sky::compute<resume_fn::slow_mark>(runs, 1500).desc();
    d::Frame f;
    {
        Client c(w, "session-1", false, 10);
        c.call(5, call);
        REQUIRE(c.next(f));
        CHECK(f.header.type == d::MsgType::started);
        CHECK(f.header.call_id == 5);
        c.drop();
    }
    std::this_thread::sleep_for(300ms);
    Client c(w, "session-1", true, 10);
    // The call still runs: the worker says so again, then answers.
    REQUIRE(c.next(f));
    CHECK(f.header.type == d::MsgType::started);
    CHECK(f.header.call_id == 5);
    REQUIRE(c.next(f, 5s));
    REQUIRE(f.header.type == d::MsgType::result);
    CHECK(f.header.call_id == 5);
    CHECK(result_int(f) == 1);
    // The same call frame again (a client that does not know whether it arrived): answered
    // from what the worker kept, not run again.
    c.call(5, call);
    REQUIRE(c.next(f, 5s));
    CHECK(f.header.type == d::MsgType::result);
    CHECK(f.header.call_id == 5);
    c.ack({5});
    shut_down(c, w);
    CHECK(lines_in(runs) == 1);
}

TEST_CASE("answers that came while the connection was down are kept until acknowledged",
          "[local][resume]") {
    ListeningWorker w;
    const std::string runs = w.dir.path + "/runs";
    d::Frame f;
    {
        Client c(w, "s", false, 10);
        c.call(1, sky::compute<resume_fn::slow_mark>(runs, 100).desc());
        c.call(2, sky::compute<throw_invalid>(2).desc());
        REQUIRE(c.next(f));
        c.drop();
    }
    std::this_thread::sleep_for(800ms);  // both finish meanwhile
    {
        Client c(w, "s", true, 10);
        std::vector<std::pair<d::MsgType, std::uint64_t>> got;
        while (c.next(f, 2s)) got.emplace_back(f.header.type, f.header.call_id);
        // In the order they were written: the result of 1, the error of 2; nothing runs.
        REQUIRE(got.size() == 2);
        CHECK(got[0] == std::make_pair(d::MsgType::result, std::uint64_t{1}));
        CHECK(got[1] == std::make_pair(d::MsgType::error, std::uint64_t{2}));
        c.ack({1});  // 2's answer is not acknowledged: it comes again after the next resume
        std::this_thread::sleep_for(200ms);
        c.drop();
    }
    Client c(w, "s", true, 10);
    REQUIRE(c.next(f, 5s));
    CHECK(f.header.type == d::MsgType::error);
    CHECK(f.header.call_id == 2);
    CHECK_FALSE(c.next(f, 500ms));
    shut_down(c, w);
    CHECK(lines_in(runs) == 1);
}

TEST_CASE(
    "a large result, written from the vector its function returned, is kept intact until "
    "acknowledged",
    "[local][resume]") {
    ListeningWorker w;
    // 4 MiB: the worker writes it from the returned vector (save_result), not from a copy.
    std::vector<float> big(1 << 20);
    for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i % 9973) + 0.5f;
    const auto call = sky::compute<echo>(big).desc();
    const auto result_of = [](const d::Frame& f) {
        std::vector<float> v;
        d::load_from(f.payload, v);
        return v;
    };
    d::Frame f;
    {
        Client c(w, "s", false, 10);
        c.call(1, call);
        bool result = false;
        while (!result && c.next(f, 5s)) result = f.header.type == d::MsgType::result;
        REQUIRE(result);
        CHECK(result_of(f) == big);
        // Sent again (not acknowledged yet): answered from what is kept, as it was.
        c.call(1, call);
        REQUIRE(c.next(f, 5s));
        REQUIRE(f.header.type == d::MsgType::result);
        CHECK(result_of(f) == big);
        c.drop();
    }
    {
        // A resumed connection gets it once more, from the kept frame.
        Client c(w, "s", true, 10);
        REQUIRE(c.next(f, 5s));
        REQUIRE(f.header.type == d::MsgType::result);
        CHECK(f.header.call_id == 1);
        CHECK(result_of(f) == big);
        c.ack({1});
        std::this_thread::sleep_for(200ms);
        c.drop();
    }
    // Acknowledged: forgotten (its vector freed), nothing comes after the next resume.
    Client c(w, "s", true, 10);
    CHECK_FALSE(c.next(f, 500ms));
    shut_down(c, w);
}

TEST_CASE("a client that does not come back within its bound finds no worker", "[local][resume]") {
    ListeningWorker w;
    const std::string runs = w.dir.path + "/runs";
    {
        Client c(w, "s", false, 1);
        c.call(1, sky::compute<resume_fn::slow_mark>(runs, 100).desc());
        d::Frame f;
        REQUIRE(c.next(f));
        c.drop();
    }
    wire::Exit e = w.wait(10s);
    REQUIRE(e.exited);
    CHECK(WIFEXITED(e.status));
    CHECK_THROWS(d::connect_unix(w.sock));  // its socket is gone with it
}

TEST_CASE("a connection with another session is refused while one waits to be resumed",
          "[local][resume]") {
    ListeningWorker w;
    const std::string runs = w.dir.path + "/runs";
    const auto refused = [&](const std::string& session, bool resume) {
        d::FdTransport t(d::connect_unix(w.sock), "other client");
        auto r = std::make_unique<d::FrameReader>(t, d::auth_max_frame);
        d::client_authenticate(t, *r, w.token, 10s);
        r = std::make_unique<d::FrameReader>(std::move(*r), d::default_max_frame);
        d::Frame f;
        REQUIRE(r->next(f));
        REQUIRE(f.header.type == d::MsgType::hello);
        d::Buffer p, out;
        d::save_to(p, Client::hello(session, resume, 10));
        wire::frame(out, d::MsgType::hello, 0, p);
        wire::send(t, out);
        // No ready frame: the worker closes this connection.
        if (!t.wait_readable(10s)) return false;
        try {
            return !r->next(f);
        } catch (const std::exception&) {
            return true;  // reset
        }
    };
    d::Frame f;
    {
        Client c(w, "mine", false, 10);
        c.call(1, sky::compute<resume_fn::slow_mark>(runs, 1000).desc());
        REQUIRE(c.next(f));
        c.drop();
    }
    CHECK(refused("theirs", true));
    CHECK(refused("mine", false));  // a fresh start is not a resume
    Client c(w, "mine", true, 10);
    bool result = false;
    while (!result && c.next(f, 5s)) result = f.header.type == d::MsgType::result;
    CHECK(result);
    shut_down(c, w);
    CHECK(lines_in(runs) == 1);
}

TEST_CASE("a call id the worker runs already is not run again", "[local][resume]") {
    ListeningWorker w;
    const std::string runs = w.dir.path + "/runs";
    Client c(w, "", false, 0);  // no session: nothing to resume, the rule holds all the same
    const auto call = sky::compute<resume_fn::slow_mark>(runs, 500).desc();
    c.call(3, call);
    c.call(3, call);
    d::Frame f;
    int results = 0, started = 0;
    while (c.next(f, 2s)) {
        results += f.header.type == d::MsgType::result;
        started += f.header.type == d::MsgType::started;
    }
    CHECK(started == 1);
    CHECK(results == 1);
    CHECK(lines_in(runs) == 1);
    shut_down(c, w);
}

TEST_CASE("an at-most-once call runs only once the client confirms it, a cancel drops it",
          "[local][at_most_once]") {
    ListeningWorker w;
    const std::string runs = w.dir.path + "/runs";
    Client c(w, "", false, 0);
    const auto call = sky::compute<resume_fn::slow_mark>(runs, 0).desc();
    auto at_most_once = [&](std::uint64_t id) {
        d::Buffer cp, out;
        d::append_call_header(cp, call.function, call.signature);
        cp.append(call.args->data(), call.args->size());
        d::append_frame(out, d::MsgType::call, id, cp.span());
        std::uint16_t flags = d::call_flag_at_most_once;
        std::memcpy(out.data() + 6, &flags, 2);
        wire::send(*c.t, out);
    };
    d::Frame f;
    at_most_once(1);
    REQUIRE(c.next(f));
    CHECK(f.header.type == d::MsgType::started);
    std::this_thread::sleep_for(300ms);
    CHECK(lines_in(runs) == 0);  // waits for the confirm
    c.control(d::MsgType::confirm, 1);
    REQUIRE(c.next(f));
    CHECK(f.header.type == d::MsgType::result);
    CHECK(lines_in(runs) == 1);
    at_most_once(2);
    REQUIRE(c.next(f));
    CHECK(f.header.type == d::MsgType::started);
    c.control(d::MsgType::cancel, 2);
    REQUIRE(c.next(f));
    CHECK(f.header.type == d::MsgType::error);
    CHECK(f.header.call_id == 2);
    CHECK(lines_in(runs) == 1);
    shut_down(c, w);
}

TEST_CASE("a resume whose handshake takes longer than a second is not cut off by the door",
          "[local][resume]") {
    ListeningWorker w;
    const std::string runs = w.dir.path + "/runs";
    d::Frame f;
    {
        Client c(w, "slow-link", false, 10);
        c.call(9, sky::compute<resume_fn::slow_mark>(runs, 4000).desc());
        REQUIRE(c.next(f));
        c.drop();
    }
    // A client over a slow link: its answer comes 1.5 s after the challenge (the door once
    // authenticated in rounds of 1 s and dropped a handshake still in progress at a round's end).
    auto t = std::make_unique<d::FdTransport>(d::connect_unix(w.sock), "slow client");
    auto r = std::make_unique<d::FrameReader>(*t, d::auth_max_frame);
    REQUIRE(t->wait_readable(10s));
    d::Frame challenge;
    REQUIRE(r->next(challenge));
    const d::ClientAuthAnswer answer =
        d::client_auth_answer(w.token, d::worker_auth_block(challenge, "challenge"));
    std::this_thread::sleep_for(1500ms);
    std::span<const std::byte> one[] = {answer.frame.span()};
    t->write_all(one);
    REQUIRE(t->wait_readable(10s));
    d::Frame proof;
    bool got = false;
    try {
        got = r->next(proof);
    } catch (const std::exception& e) {
        INFO(e.what());
    }
    REQUIRE(got);
    d::check_worker_proof(answer, d::worker_auth_block(proof, "proof"));
    // The rest of the resume as usual: its hello, the worker's ready, the kept answer.
    r = std::make_unique<d::FrameReader>(std::move(*r), d::default_max_frame);
    REQUIRE(r->next(f));
    REQUIRE(f.header.type == d::MsgType::hello);
    d::Buffer p, out;
    d::save_to(p, Client::hello("slow-link", true, 10));
    wire::frame(out, d::MsgType::hello, 0, p);
    wire::send(*t, out);
    bool ready = false, result = false;
    while (!result && t->wait_readable(10s) && r->next(f)) {
        ready = ready || f.header.type == d::MsgType::ready;
        result = f.header.type == d::MsgType::result && f.header.call_id == 9;
    }
    CHECK(ready);
    CHECK(result);
    d::Buffer bye;
    wire::frame(bye, d::MsgType::shutdown, 0, d::Buffer{});
    wire::send(*t, bye);
    (void)w.wait(10s);
    CHECK(lines_in(runs) == 1);
}
