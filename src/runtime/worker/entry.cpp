// sky::init and the process modes of a sky program: started with one of the flags of the table
// below, the program is not the user's program but a worker, a node's file server, or the
// launcher that starts and watches a node's worker.
#include <openssl/crypto.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "runtime/auth.hpp"
#include "runtime/worker.hpp"
#include "runtime/worker/file_server.hpp"
#include "runtime/worker/launcher.hpp"
#include "runtime/worker/listener.hpp"
#include "runtime/worker/worker.hpp"
#include "runtime/worker_launch.hpp"
#include "sky/init.hpp"

namespace sky::detail {

namespace {

std::atomic<bool> g_initialised{false};
std::atomic<bool> g_is_worker{false};

std::string& argv0() {
    static std::string s = "sky-worker";
    return s;
}

// --sky-worker: serve one client's calls (its connection from the launch variables), then exit.
[[noreturn]] void worker_mode(int, char**) {
    WorkerLaunch launch;
    try {
        launch = WorkerLaunch::from_env();
        launch.check_complete();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "sky worker: %s\n", e.what());
        std::_Exit(2);
    }
    // A local worker dies with its client: parent-death signal, and a check against the race
    // where the parent died before prctl ran.
    if (launch.parent_pid > 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != launch.parent_pid) ::_exit(0);
    }
    // A listening (remote) worker holds its pool's token until a client authenticates: no core
    // file and no ptrace by other processes of the same user can read it out of memory.
    if (!launch.listen.empty()) {
        ::prctl(PR_SET_DUMPABLE, 0);
        rlimit no_core{0, 0};
        ::setrlimit(RLIMIT_CORE, &no_core);
    }
    std::string tok = launch.token;
    OPENSSL_cleanse(launch.token.data(), launch.token.size());
    if (!launch.token_file.empty()) {
        // A remote worker reads its token from a 0600 file (not the command line), then
        // removes it.
        std::string from_file;
        if (FILE* f = std::fopen(launch.token_file.c_str(), "r")) {
            char buf[256] = {};
            if (std::fgets(buf, sizeof buf, f)) from_file = buf;
            std::fclose(f);
            OPENSSL_cleanse(buf, sizeof buf);
            while (!from_file.empty() && (from_file.back() == '\n' || from_file.back() == '\r'))
                from_file.pop_back();
            ::unlink(launch.token_file.c_str());
        }
        if (!from_file.empty()) tok = from_file;
        OPENSSL_cleanse(from_file.data(), from_file.size());
    }
    if (tok.empty()) {
        std::fprintf(stderr, "sky worker: no token: its file was missing, unreadable or empty\n");
        std::_Exit(2);
    }
    // Wipe the value in the environment block too; the function's child processes need neither.
    WorkerLaunch::erase_token_from_env();
    int fd = -1;
    std::unique_ptr<Listener> listener;
    if (launch.fd) {
        // A socketpair from a Local client: the same handshake as over the network, so a bug in
        // it cannot hide behind the provider that runs in the tests.
        try {
            fd = worker_authenticate(-1, *launch.fd, tok,
                                     std::chrono::steady_clock::now() + std::chrono::seconds(60),
                                     std::chrono::seconds(60), [](const std::string& m) {
                                         std::fprintf(stderr, "sky worker %d: %s\n",
                                                      static_cast<int>(::getpid()), m.c_str());
                                     });
        } catch (const std::exception& e) {
            std::fprintf(stderr, "sky worker: %s\n", e.what());
        }
        if (fd < 0) std::_Exit(3);
        // Authenticated, and no connection can come back: the token is not needed any more.
        OPENSSL_cleanse(tok.data(), tok.size());
        tok.clear();
    } else {
        const auto timeout = launch.accept_timeout.value_or(std::chrono::seconds(600));
        listener = std::make_unique<Listener>(launch.listen, launch.allow_from);
        if (!listener->valid()) std::_Exit(5);
        listener->write_port_file(launch.port_file);
        if (launch.ready_fd) listener->write_port_to(*launch.ready_fd);
        fd = listener->accept_authenticated(tok, std::chrono::steady_clock::now() + timeout);
        if (fd < 0) {
            std::fprintf(stderr, "sky worker: no client authenticated within %lld s\n",
                         static_cast<long long>(timeout.count()));
            listener->close();  // its socket file goes with it
            std::_Exit(5);
        }
        // The listener and the token stay while the client may come back after a dropped
        // connection (its hello says for how long; none: they go at once).
    }
    g_is_worker = true;
    int code = run_worker(fd, launch, std::move(listener), std::move(tok));
    std::fflush(nullptr);
    ::_exit(code);
}

// --sky-serve-files: a node serving the program's files to its pool's other nodes (see
// runtime/worker/file_server.hpp).
[[noreturn]] void serve_files_mode(int, char**) { ::_exit(serve_files_main()); }

// --sky-launch: a node's launcher (runtime/worker/launcher.hpp).
[[noreturn]] void launch_mode(int argc, char** argv) {
    const int code = launch_main(argc, argv);
    std::fflush(nullptr);
    ::_exit(code);
}

struct ProcessMode {
    const char* flag;
    void (*run)(int argc, char** argv);  // never returns
};

// The first argument that names a mode selects it.
constexpr ProcessMode process_modes[] = {
    {worker_flag, worker_mode},
    {serve_files_flag, serve_files_mode},
    {launch_flag, launch_mode},
};

}  // namespace

bool initialised() noexcept { return g_initialised.load(); }

const std::string& program_name() { return argv0(); }

}  // namespace sky::detail

namespace sky::inline v0 {

bool is_worker() noexcept { return detail::g_is_worker.load(); }

void init(int argc, char** argv) {
    detail::g_initialised = true;
    if (argc > 0 && argv && argv[0]) detail::argv0() = argv[0];
    // sky starts its modes with the flag as the only argument (argv[1]): a flag further on is
    // the program's own argument (perhaps forwarded from someone else), never a mode.
    if (argc < 2 || !argv || !argv[1]) return;
    for (const auto& mode : detail::process_modes)
        if (std::strcmp(argv[1], mode.flag) == 0) mode.run(argc, argv);
}

}  // namespace sky::inline v0
