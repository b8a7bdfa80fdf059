#include "providers/remote/remote_node.hpp"

#include <fmt/format.h>
#include <sys/utsname.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <deque>
#include <fstream>
#include <mutex>
#include <regex>
#include <sstream>

#include "node/marks.hpp"
#include "pool/backend.hpp"
#include "runtime/auth.hpp"
#include "runtime/crash_report.hpp"
#include "runtime/worker_launch.hpp"
#include "ship/closure.hpp"
#include "ssh/session.hpp"
#include "util/shell.hpp"
#include "volumes/volumes.hpp"

namespace sky::detail {

ssh::SessionOptions RemoteNode::session_options() const {
    ssh::SessionOptions o;
    o.host = where_.host;
    o.port = where_.port;
    o.user = where_.user;
    o.private_key_file = where_.private_key_file;
    o.host_key = where_.host_key;
    o.connect_timeout = where_.connect_timeout;
    o.connect_attempts = where_.connect_attempts;
    return o;
}

void RemoteNode::fail(const std::string& phase, const std::string& message,
                      std::vector<std::string> output) const {
    throw BootstrapError(node_, instance_id_, phase, message, std::move(output));
}

std::unique_ptr<RemoteNode> RemoteNode::start(const RemoteNodeSpec& where, const PoolSpec& spec,
                                              const std::string& pool_id, int node,
                                              const std::string& instance_id,
                                              const std::function<void(Event)>& emit) {
    std::unique_ptr<RemoteNode> n(new RemoteNode());
    n->where_ = where;
    n->spec_ = spec;
    n->node_ = node;
    n->instance_id_ = instance_id;
    n->shell_ = std::make_unique<node::SshShell>(n->session_options());
    auto& s = *n->shell_;
    emit(BootstrapStarting{instance_id});

    // check: architecture and C library.
    emit(BootstrapProgress{instance_id, "check"});
    auto r = s.script("uname -m; (ldd --version 2>&1 || true) | head -n1; echo \"$HOME\"",
                      std::chrono::seconds(30));
    std::istringstream is(r.out);
    std::string arch, libc, home;
    std::getline(is, arch);
    std::getline(is, libc);
    std::getline(is, home);
    utsname u{};
    ::uname(&u);
    if (r.status != 0 || home.empty())
        n->fail("check", fmt::format("could not inspect the node ({})", r.summary()),
                {r.out, r.err});
    if (arch != u.machine)
        n->fail("check",
                fmt::format("the node is {} but this program is built for {}", arch, u.machine));
    const ship::Manifest* manifest = nullptr;
    try {
        manifest = &ship::this_program();
    } catch (const std::exception& e) {
        n->fail("check", std::string("cannot list the program's files to ship: ") + e.what());
    }
    const auto& prog = *manifest;
    std::smatch m;
    static const std::regex ver(R"((\d+)\.(\d+)\s*$)");
    if (!std::regex_search(libc, m, ver))
        n->fail("check", "the node has no GNU C library (ldd --version said: " + libc + ")");
    int maj = std::stoi(m[1]), min = std::stoi(m[2]);
    if (ship::GlibcVersion{maj, min} < prog.glibc)
        n->fail("check", fmt::format("the node's C library is glibc {}.{}, but this program needs "
                                     "glibc {}.{} or newer: build it on an older system or use a "
                                     "newer image",
                                     maj, min, prog.glibc.major, prog.glibc.minor));
    n->home_ = home;

    // A cloud without a firewall API: the pool's nodes are admitted through the host firewall
    // the boot script set up, before anything of the pool listens here.
    if (where.host_firewall) {
        const std::string why = n->admit_peers(where.pool_addresses);
        if (!why.empty())
            emit(ErrorEvent{fmt::format("node {} ({}) has no working host firewall ({}): every "
                                        "port the pool opens there is reachable by anyone who "
                                        "can reach {}",
                                        node, instance_id, why, where.host),
                            instance_id});
    }

    // This pool's private directory on the node, then the program: content-addressed, each
    // missing file sent once per pool (see ship/shipment.hpp).
    n->image_home_ = fmt::format("{}/.sky/image-{}", home, spec.image.content_hash());
    n->run_dir_ = fmt::format("{}/.sky/run/{}/{}", home, pool_id, node);
    auto mk = s.script(fmt::format("umask 077; mkdir -p {} {} && chmod 700 {}/.sky {}/.sky/run {}",
                                   shell_quote(n->image_home_), shell_quote(n->run_dir_),
                                   shell_quote(home), shell_quote(home), shell_quote(n->run_dir_)),
                       std::chrono::seconds(30));
    if (mk.status != 0) n->fail("bootstrap", "cannot create " + n->run_dir_, {mk.err});
    n->shipment_ = where.shipment ? where.shipment : std::make_shared<ship::PoolShipment>(prog);
    ship::NodeSite site;
    site.node = node;
    site.instance_id = instance_id;
    site.shell = n->shell_.get();
    site.home = home;
    site.run_dir = n->run_dir_;
    site.peer_address = where.peer_address.empty() ? where.host : where.peer_address;
    site.peers = where.peer_transfers;
    site.lifetime = spec.timeout;
    std::string prog_dir;
    try {
        prog_dir = n->shipment_->ship(site, emit);
    } catch (const ship::ShipFailure& e) {
        n->fail(e.phase, e.what(), e.output);
    } catch (const ssh::SshError&) {
        throw;
    } catch (const TimeoutError&) {
        throw;
    } catch (const std::exception& e) {
        n->fail("upload", e.what());
    }
    n->shipped_ = true;
    n->exe_path_ = prog_dir + "/" + prog.program().name;
    n->lib_dir_ = prog_dir + "/lib";

    // bootstrap: the image's idempotent script, phase by phase.
    const std::string script = spec.image.bootstrap(spec.timeout);
    s.put(script, n->run_dir_ + "/bootstrap.sh", 0700);
    node::PhaseReader output([&](const std::string& phase) {
        emit(BootstrapProgress{instance_id, phase});
    });
    node::RunOptions eo;
    eo.timeout = std::chrono::minutes(30);
    eo.on_stdout = [&](std::string_view line) { output.line(line); };
    eo.on_stderr = eo.on_stdout;
    auto b = s.run({"bash", "-c",
                    fmt::format("umask 077; SKY_HOME={} bash {}/bootstrap.sh",
                                shell_quote(n->image_home_), shell_quote(n->run_dir_))},
                   eo);
    if (b.status != 0)
        n->fail(output.phase(),
                b.timed_out
                    ? std::string("the bootstrap script timed out")
                    : fmt::format("the bootstrap script failed with exit status {}", b.status),
                output.tail());

    // volumes: mounted before any call runs; stop() unmounts them, also after a failure here.
    if (!spec.volumes.empty()) {
        emit(BootstrapProgress{instance_id, "volumes"});
        try {
            mount_volumes(s, spec, pool_id, n->run_dir_);
        } catch (const VolumeFailure& e) {
            n->fail("volumes", e.what(), e.output);
        }
    }

    n->start_worker(emit);
    emit(BootstrapCompleted{instance_id});
    return n;
}

namespace {
// Shell functions that act on this pool's processes only, never on a pid or process group id
// that the kernel has since given to someone else (a worker that died hours ago, its id reused):
//   sky_ours PG START    true while process group PG is the worker's: its leader is the process
//                        that started with START (field 22 of /proc/PG/stat), or the leader is
//                        gone while members remain (the kernel reuses no id a group still holds)
//   sky_killpg SIG PG START   signals the group only then
//   sky_kill_pidfile FILE RUN signals (TERM) the pid in FILE only when that process is this
//                        pool's: its command line or environment names the run directory RUN
constexpr const char* kProcessGuards =
    "sky_ours() { local st; st=$(sed 's/.*) //' /proc/$1/stat 2>/dev/null | cut -d' ' -f20); "
    "[ -n \"$2\" ] && { [ -z \"$st\" ] || [ \"$st\" = \"$2\" ]; }; }; "
    "sky_killpg() { sky_ours \"$2\" \"$3\" && kill -\"$1\" -- -\"$2\" 2>/dev/null; }; "
    "sky_kill_pidfile() { local p; p=$(cat \"$1\" 2>/dev/null); "
    "case \"$p\" in ''|*[!0-9]*) return 0;; esac; "
    "cat /proc/$p/cmdline /proc/$p/environ 2>/dev/null | grep -qaF -- \"$2\" && "
    "kill \"$p\" 2>/dev/null; true; }; ";

// A sanitized worker (a build with -fsanitize=..., whose libasan/libubsan/libtsan the shipment
// carries like any other library) writes its report to the files that start.sh names with
// log_path (`{run}/sanitizer.<pid>`): its stderr is its own output capture's pipe, where a report
// written as it dies is lost. These lines show the newest report's first lines, also one in
// worker.log (a report before the capture started, or a user's log_path=stderr).
constexpr int sanitizer_report_lines = 16;
// Separates the exit status and sanitizer lines from the crash report in exit_reason's output.
constexpr std::string_view crash_marker = "@@sky-crash-report@@";

std::string sanitizer_report_command(const std::string& run_dir) {
    return fmt::format(
        "cd {} 2>/dev/null && grep -h -m1 -A{} -E '(ERROR|WARNING): [A-Za-z]+Sanitizer|runtime "
        "error:' $(ls -t sanitizer.* 2>/dev/null) worker.log 2>/dev/null | head -n {}; true",
        shell_quote(run_dir), sanitizer_report_lines - 1, sanitizer_report_lines);
}

// The lines after the exit status in the output of that command, for a NodeLostError.
std::string sanitizer_report_detail(const std::string& out) {
    std::istringstream is(out);
    std::string line, text;
    std::getline(is, line);  // the exit status
    for (int i = 0; i < sanitizer_report_lines && std::getline(is, line); ++i) {
        if (line.size() > 300) line = line.substr(0, 300) + "...";
        text += "\n  " + line;
    }
    return text.empty() ? text : "; its sanitizer report begins:" + text;
}
}  // namespace

void RemoteNode::start_worker(const std::function<void(Event)>& emit) {
    auto& s = *shell_;
    emit(BootstrapProgress{instance_id_, "worker"});
    token_ = random_hex(32);
    const std::string token_line = token_ + "\n";
    s.put(token_line, run_dir_ + "/token", 0600);
    // The worker listens on a Unix socket in this pool's 0700 directory: only this user (and
    // root) can connect, where any local user could reach a TCP port.
    socket_path_ = run_dir_ + "/worker.sock";
    if (socket_path_.size() >= 100) {  // sun_path holds 108 bytes
        auto d = s.script("umask 077; mktemp -d /tmp/sky-XXXXXXXXXX", std::chrono::seconds(30));
        std::string dir = d.out.substr(0, d.out.find('\n'));
        if (d.status != 0 || dir.empty()) fail("worker", "cannot make a socket directory", {d.err});
        socket_path_ = dir + "/worker.sock";
    }
    // Everything the user gives (PoolSpec::env) goes into a 0700 script in the private run
    // directory, never into a command line that `ps` shows to every user of the node.
    std::string env;
    for (auto& [k, v] : spec_.env) env += fmt::format("export {}={}\n", k, shell_quote(v));
    const std::string script = fmt::format(
        "umask 077\n"
        "cd {run} || exit 1\n"
        "rm -f port exit crash crash.* sanitizer.*; touch heartbeat\n"
        "[ -f {img}/env.sh ] && . {img}/env.sh\n"
        "{env}"
        "export LD_LIBRARY_PATH={lib}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}\n"
        // A sanitized worker's reports go to files that exit_reason() reads (options given
        // later, in the pool's env, win); for a program built without sanitizers these are
        // inert.
        "export ASAN_OPTIONS=\"log_path=$PWD/sanitizer${{ASAN_OPTIONS:+:$ASAN_OPTIONS}}\" "
        "UBSAN_OPTIONS=\"log_path=$PWD/sanitizer${{UBSAN_OPTIONS:+:$UBSAN_OPTIONS}}\" "
        "TSAN_OPTIONS=\"log_path=$PWD/sanitizer${{TSAN_OPTIONS:+:$TSAN_OPTIONS}}\"\n"
        "{launch}"
        "{exe} --sky-worker >> {run}/worker.log 2>&1\n"
        "echo $? > {run}/exit\n",
        fmt::arg("run", shell_quote(run_dir_)), fmt::arg("img", shell_quote(image_home_)),
        fmt::arg("env", env), fmt::arg("lib", shell_quote(lib_dir_)),
        fmt::arg("launch", WorkerLaunch{.listen = "unix:" + socket_path_,
                                        .token_file = run_dir_ + "/token",
                                        .port_file = run_dir_ + "/port",
                                        .heartbeat_file = run_dir_ + "/heartbeat",
                                        .accept_timeout = spec_.idle_timeout,
                                        .crash_file = run_dir_ + "/crash"}
                               .shell_exports()),
        fmt::arg("exe", shell_quote(exe_path_)));
    s.put(script, run_dir_ + "/start.sh", 0700);
    // setsid: the worker gets a process group of its own, which the watchdog and stop() end.
    // The files the wait below polls are removed before the worker starts, not by start.sh:
    // a restarted worker's wait would otherwise read the previous worker's port and connect
    // to a socket nobody listens on yet.
    // Its start time is recorded with its id (also in worker.pgid): whatever signals the group
    // later checks that its leader is still that process (kProcessGuards).
    auto r =
        s.script(fmt::format("umask 077; rm -f {0}/port {0}/exit; "
                             "setsid bash {0}/start.sh > /dev/null 2>&1 < /dev/null & p=$!; "
                             "st=$(sed 's/.*) //' /proc/$p/stat 2>/dev/null | cut -d' ' -f20); "
                             "echo \"$p $st\" > {0}/worker.pgid; echo \"$p $st\"",
                             shell_quote(run_dir_)),
                 std::chrono::seconds(30));
    {
        std::istringstream ids(r.out);
        pgid_.clear();
        pgid_start_.clear();
        ids >> pgid_ >> pgid_start_;
    }
    if (r.status != 0 || pgid_.empty() ||
        pgid_.find_first_not_of("0123456789") != std::string::npos ||
        pgid_start_.find_first_not_of("0123456789") != std::string::npos)
        fail("worker", "could not start the worker", {r.out, r.err});
    auto port = s.script(
        fmt::format("cd {}; for i in $(seq 150); do [ -s port ] && cat port && exit 0; "
                    "[ -f exit ] && break; sleep 0.1; done; tail -n 20 worker.log; {}; exit 1",
                    shell_quote(run_dir_), sanitizer_report_command(run_dir_)),
        std::chrono::seconds(30));
    if (port.status != 0) {
        std::vector<std::string> lines;
        std::istringstream is(port.out);
        std::string loader;
        for (std::string l; std::getline(is, l);) {
            // The dynamic loader's own words say what is missing: they go into the message.
            if (l.find("error while loading shared libraries") != std::string::npos ||
                l.find("version `GLIBC") != std::string::npos ||
                l.find("cannot open shared object") != std::string::npos)
                loader = l;
            lines.push_back(l);
        }
        fail("worker",
             loader.empty() ? std::string("the worker did not start listening")
                            : "the worker could not start: " + loader,
             lines);
    }

    // The watchdog: a process of its own, independent of the worker and of this client. It ends
    // the worker when the client has not been heard from for idle_timeout or when the hard
    // timeout passes, then removes this pool's files; on a cloud instance it powers it off.
    emit(BootstrapProgress{instance_id_, "watchdog"});
    const auto deadline_cmd = fmt::format("$(( $(date +%s) + {} ))", spec_.timeout.count());
    // Powering off also needs a marker that only the instance's own launch data creates: a
    // machine that merely looks like a cloud node (a test host, a user's server) is never shut
    // down.
    const std::string power_off =
        where_.power_off_on_expiry ? "[ -f /etc/sky/power-off-on-expiry ] && "
                                     "{ sudo -n shutdown -h now || shutdown -h now; } 2>/dev/null; "
                                   : "";
    const std::string probe =
        where_.preemption_probe.empty()
            ? std::string()
            : fmt::format(
                  "tick=$((tick + 1)); if [ $((tick % 5)) -eq 0 ] && ( {} ) >/dev/null 2>&1; "
                  "then echo \"sky watchdog: the provider is reclaiming this machine\" >> "
                  "{run}/watchdog.log; echo preempted > {run}/preempted; "
                  "sky_killpg TERM {pg} {st}; sleep 1; sky_killpg KILL {pg} {st}; "
                  "exit 0; fi; ",
                  where_.preemption_probe, fmt::arg("run", shell_quote(run_dir_)),
                  fmt::arg("pg", pgid_), fmt::arg("st", shell_quote(pgid_start_)));
    // The file server (if this node serves its peers) ends by itself once the run directory
    // is gone.
    const std::string watchdog = fmt::format(
        "{guards}deadline={deadline}; tick=0; "
        "while sky_ours {pg} {st} && kill -0 -- -{pg} 2>/dev/null; do now=$(date +%s); "
        "hb=$(stat -c %Y {run}/heartbeat 2>/dev/null || echo $now); "
        "if [ $((now - hb)) -gt {idle} ] || [ $now -gt $deadline ]; then "
        "echo \"sky watchdog: stopping the worker at $(date)\" >> {run}/watchdog.log; "
        "sky_killpg TERM {pg} {st}; sleep 2; sky_killpg KILL {pg} {st}; "
        "{unmount}rm -rf {run}; {off}exit 0; fi; {probe}sleep 1; done{after}",
        fmt::arg("guards", kProcessGuards), fmt::arg("st", shell_quote(pgid_start_)),
        fmt::arg("deadline", deadline_cmd), fmt::arg("pg", pgid_),
        fmt::arg("run", shell_quote(run_dir_)), fmt::arg("idle", spec_.idle_timeout.count()),
        fmt::arg("off", power_off), fmt::arg("probe", probe),
        fmt::arg("unmount", spec_.volumes.empty() ? std::string() : unmount_command(run_dir_)),
        fmt::arg("after", spec_.volumes.empty()
                              ? std::string()
                              : unmount_after_worker(run_dir_, spec_.idle_timeout.count())));
    auto w = s.script(
        fmt::format("umask 077; setsid bash -c {} > /dev/null 2>&1 < /dev/null & echo $! > "
                    "{}/watchdog.pid",
                    shell_quote(watchdog), shell_quote(run_dir_)),
        std::chrono::seconds(30));
    if (w.status != 0) fail("watchdog", "could not start the watchdog", {w.err});
}

std::string RemoteNode::admit_peers(const std::vector<std::string>& addresses) {
    std::string args;
    for (const auto& a : addresses)
        if (!a.empty()) args += " " + shell_quote(a);
    try {
        auto r = shell_->script(
            fmt::format("f={}/admit-peers; S=; [ \"$(id -u)\" = 0 ] || S='sudo -n'; "
                        "$S test -f \"$f\" || {{ echo absent; exit 0; }}; $S sh \"$f\"{}",
                        shell_quote(kHostFirewallDir), args),
            std::chrono::seconds(30));
        std::string kind = r.out.substr(0, r.out.find('\n'));
        if (kind == "absent") return "the boot script set none up";
        if (kind == "none") return "the image has neither nftables nor iptables";
        if (r.status != 0)
            return fmt::format("admitting the pool's nodes failed ({})", r.summary());
        return {};
    } catch (const std::exception& e) {
        return e.what();
    }
}

std::unique_ptr<io::Stream> RemoteNode::connect_worker() {
    // A direct-streamlocal channel on the node's session, read and written on the I/O core.
    const auto session = shell_->session();
    if (!session) throw ssh::ConnectionLost("the SSH connection to " + where_.host + " was closed");
    return session->open_unix_socket(socket_path_, std::chrono::seconds(30));
}

std::unique_ptr<io::Stream> RemoteNode::reconnect_worker(std::chrono::milliseconds within) {
    using std::chrono::milliseconds;
    const auto deadline = std::chrono::steady_clock::now() + within;
    const auto left = [&] {
        return std::max(milliseconds(500), std::chrono::duration_cast<milliseconds>(
                                               deadline - std::chrono::steady_clock::now()));
    };
    // A channel refused while the session lives means nobody listens at the worker's socket:
    // the worker is gone, and trying again cannot bring it back.
    const auto open = [&](ssh::Session& s) {
        try {
            // A live session answers a channel request within a round trip; one that does not
            // within 2 s is as dead as a closed one (a half-open connection).
            return s.open_unix_socket(socket_path_, std::min(left(), milliseconds(2000)));
        } catch (const ssh::ChannelError& e) {
            throw WorkerGone(
                fmt::format("no worker listens on {} any more: {}", where_.host, e.what()));
        }
    };
    if (shell_->alive()) {
        const auto connection = shell_->connection();
        try {
            if (auto s = shell_->session()) return open(*s);
        } catch (const WorkerGone&) {
            throw;
        } catch (const std::exception&) {
            shell_->drop(connection);  // then exit_reason() does not wait on it either
        }
    }
    // A new session, one attempt within what is left (the pool paces the attempts). It
    // replaces the dead one only once it is connected: until then exit_reason() sees the
    // dead one and answers at once.
    shell_->reconnect(left());
    const auto s = shell_->session();
    if (!s) throw ssh::ConnectionLost("the SSH connection to " + where_.host + " was closed");
    return open(*s);
}

void RemoteNode::restart_worker(const std::function<void(Event)>& emit) {
    // The run directory is made again: the node's watchdog removes it when it ends a worker
    // that heard nothing for idle_timeout (a link cut for that long), and the new worker's
    // token, script and socket go there.
    shell_->script(
        fmt::format("{2}sky_killpg KILL {0} {3}; sky_kill_pidfile {1}/watchdog.pid "
                    "{1}; umask 077; mkdir -p {1}; true",
                    pgid_, shell_quote(run_dir_), kProcessGuards, shell_quote(pgid_start_)),
        std::chrono::seconds(30));
    start_worker(emit);
}

NodeExit RemoteNode::exit_reason() {
    if (!shell_ || !shell_->alive())
        return {NodeLostError::Reason::unreachable,
                fmt::format("the SSH connection to {} was lost", where_.host)};
    try {
        // The worker's crash report (runtime/crash_report.hpp) follows a marker line.
        auto r = shell_->script(
            fmt::format("[ -f {0}/preempted ] && echo preempted && exit 0; "
                        "for i in $(seq 20); do [ -f {0}/exit ] && break; sleep 0.1; done; "
                        "[ -f {0}/preempted ] && echo preempted && exit 0; "
                        "cat {0}/exit 2>/dev/null || echo running; {1}; echo {2}; "
                        "head -c 1048576 {0}/crash 2>/dev/null; true",
                        shell_quote(run_dir_), sanitizer_report_command(run_dir_), crash_marker),
            std::chrono::seconds(10));
        if (r.timed_out)
            return {NodeLostError::Reason::unreachable,
                    fmt::format("{} did not say within 10 s why its worker ended", where_.host)};
        std::optional<WorkerCrash> crash;
        if (const auto at = r.out.find(std::string(crash_marker) + "\n"); at != std::string::npos) {
            crash = read_crash_report(std::string_view(r.out).substr(at + crash_marker.size() + 1));
            r.out.resize(at);
        }
        std::string what = r.out.substr(0, r.out.find('\n'));
        if (what == "preempted")
            return {NodeLostError::Reason::preempted,
                    fmt::format("the provider reclaimed {} (seen on the node)", where_.host)};
        if (what == "running")
            return {NodeLostError::Reason::unreachable, "the tunnel to the worker closed"};
        int code = std::stoi(what);
        if (code > 128)
            return {NodeLostError::Reason::worker_crashed,
                    fmt::format("the worker on {} was killed by signal {} ({})", where_.host,
                                code - 128, strsignal(code - 128)),
                    std::move(crash)};
        if (code != 0)
            return {NodeLostError::Reason::worker_crashed,
                    fmt::format("the worker on {} exited with status {}{}", where_.host, code,
                                sanitizer_report_detail(r.out)),
                    std::move(crash)};
        return {NodeLostError::Reason::unreachable,
                fmt::format("the worker on {} exited", where_.host)};
    } catch (const std::exception& e) {
        return {NodeLostError::Reason::unreachable, e.what()};
    }
}

bool RemoteNode::reachable() const { return shell_ && shell_->alive(); }

void RemoteNode::stop() noexcept {
    if (!shell_) return;
    // Peers stop fetching from this node before its session goes.
    if (shipment_ && shipped_) shipment_->forget(node_);
    try {
        if (shell_->alive() && !run_dir_.empty())
            shell_->script(
                fmt::format(
                    "{guards}sky_kill_pidfile {run}/watchdog.pid {run}; "
                    "sky_kill_pidfile {run}/serve.pid {run}; "
                    "{killpg}"
                    "for i in $(seq 20); do [ -f {run}/exit ] && break; sleep 0.05; done; "
                    "{unmount}rm -rf {run}; rmdir {pool} 2>/dev/null; {sock}true",
                    fmt::arg("run", shell_quote(run_dir_)),
                    fmt::arg("unmount",
                             spec_.volumes.empty() ? std::string() : unmount_command(run_dir_)),
                    fmt::arg("pool",
                             shell_quote(std::filesystem::path(run_dir_).parent_path().string())),
                    fmt::arg(
                        "sock",
                        socket_path_.rfind(run_dir_, 0) == 0 || socket_path_.empty()
                            ? std::string()
                            : "rm -rf " +
                                  shell_quote(
                                      std::filesystem::path(socket_path_).parent_path().string()) +
                                  "; "),
                    fmt::arg("guards", kProcessGuards),
                    fmt::arg("killpg", pgid_.empty()
                                           ? ""
                                           : fmt::format("sky_killpg TERM {0} {1}; sleep "
                                                         "0.2; sky_killpg KILL {0} {1}; ",
                                                         pgid_, shell_quote(pgid_start_)))),
                // Each volume's unmount may wait up to 4 s for its s3fs to end.
                std::chrono::seconds(15 + 4 * static_cast<int>(spec_.volumes.size())));
    } catch (...) {
    }
    try {
        shell_->close();
    } catch (...) {
    }
}

RemoteNode::~RemoteNode() { stop(); }

}  // namespace sky::detail
