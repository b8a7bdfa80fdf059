#include "providers/remote/bring_up.hpp"

#include <fmt/format.h>
#include <sys/utsname.h>

#include <cstring>
#include <filesystem>
#include <regex>
#include <sstream>

#include "runtime/auth.hpp"
#include "runtime/crash_report.hpp"
#include "runtime/node_marks.hpp"
#include "runtime/sealed_box.hpp"
#include "runtime/worker/launcher.hpp"
#include "ship/closure.hpp"
#include "util/shell.hpp"
#include "volumes/volumes.hpp"

namespace sky::detail {

namespace {

// Commands that only touch files on the node: their own short limit.
constexpr auto kCommandLimit = std::chrono::seconds(30);

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream is(text);
    for (std::string l; std::getline(is, l);) out.push_back(l);
    return out;
}

// The lines after the status in the launcher's `status` output, for a NodeLostError.
std::string sanitizer_detail(const std::string& out) {
    std::istringstream is(out);
    std::string line, text;
    std::getline(is, line);  // the status
    for (int i = 0; i < launch_sanitizer_lines && std::getline(is, line); ++i) {
        if (line.size() > 300) line = line.substr(0, 300) + "...";
        text += "\n  " + line;
    }
    return text.empty() ? text : "; its sanitizer report begins:" + text;
}

}  // namespace

NodeBringUp::NodeBringUp(node::NodeShell& shell, const PoolSpec& spec, std::string pool_id,
                         int node, BringUpOptions options)
    : shell_(shell),
      spec_(spec),
      pool_id_(std::move(pool_id)),
      node_(node),
      o_(std::move(options)) {}

NodeBringUp::~NodeBringUp() = default;

void NodeBringUp::fail(const std::string& phase, const std::string& message,
                       std::vector<std::string> output) const {
    throw BootstrapError(node_, o_.instance_id, phase, message, std::move(output));
}

void NodeBringUp::check(const std::function<void(Event)>& emit) {
    if (!o_.program_dir.empty()) {
        home_ = shell_.home();
        return;
    }
    emit(BootstrapProgress{o_.instance_id, "check"});
    auto r = shell_.script("uname -m; (ldd --version 2>&1 || true) | head -n1; echo \"$HOME\"",
                           kCommandLimit);
    std::istringstream is(r.out);
    std::string arch, libc, home;
    std::getline(is, arch);
    std::getline(is, libc);
    std::getline(is, home);
    utsname u{};
    ::uname(&u);
    if (r.status != 0 || home.empty())
        fail("check", fmt::format("could not inspect the node ({})", r.summary()), {r.out, r.err});
    if (arch != u.machine)
        fail("check",
             fmt::format("the node is {} but this program is built for {}", arch, u.machine));
    const ship::Manifest* manifest = nullptr;
    try {
        manifest = &ship::this_program();
    } catch (const std::exception& e) {
        fail("check", std::string("cannot list the program's files to ship: ") + e.what());
    }
    std::smatch m;
    static const std::regex ver(R"((\d+)\.(\d+)\s*$)");
    if (!std::regex_search(libc, m, ver))
        fail("check", "the node has no GNU C library (ldd --version said: " + libc + ")");
    const int maj = std::stoi(m[1]), min = std::stoi(m[2]);
    if (ship::GlibcVersion{maj, min} < manifest->glibc)
        fail("check", fmt::format("the node's C library is glibc {}.{}, but this program needs "
                                  "glibc {}.{} or newer: build it on an older system or use a "
                                  "newer image",
                                  maj, min, manifest->glibc.major, manifest->glibc.minor));
    home_ = home;
}

void NodeBringUp::ship(const std::function<void(Event)>& emit) {
    if (home_.empty()) home_ = shell_.home();
    image_home_ = fmt::format("{}/.sky/image-{}", home_, spec_.image.content_hash());
    run_dir_ = fmt::format("{}/.sky/run/{}/{}", home_, pool_id_, node_);
    auto mk =
        shell_.script(fmt::format("umask 077; mkdir -p {} {} && chmod 700 {}/.sky {}/.sky/run {}",
                                  shell_quote(image_home_), shell_quote(run_dir_),
                                  shell_quote(home_), shell_quote(home_), shell_quote(run_dir_)),
                      kCommandLimit);
    if (mk.status != 0) fail("bootstrap", "cannot create " + run_dir_, {mk.err});
    const auto& prog = ship::this_program();
    if (!o_.program_dir.empty()) {
        prog_dir_ = o_.program_dir;
    } else {
        if (!o_.shipment) o_.shipment = std::make_shared<ship::PoolShipment>(prog);
        ship::NodeSite site;
        site.node = node_;
        site.instance_id = o_.instance_id;
        site.shell = &shell_;
        site.home = home_;
        site.run_dir = run_dir_;
        site.peer_address = o_.peer_address;
        site.peers = o_.peer_transfers && !o_.peer_address.empty();
        site.lifetime = spec_.timeout;
        try {
            prog_dir_ = o_.shipment->ship(site, emit);
        } catch (const ship::ShipFailure& e) {
            fail(e.phase, e.what(), e.output);
        } catch (const BootstrapError&) {
            throw;
        } catch (const Error&) {
            throw;  // the node could not be reached (the shell's own error)
        } catch (const std::exception& e) {
            fail("upload", e.what());
        }
        shipped_ = true;
    }
    exe_path_ = prog_dir_ + "/" + prog.program().name;
}

void NodeBringUp::bootstrap(const std::function<void(Event)>& emit) {
    // The image's idempotent script, phase by phase; its results (env.sh, a venv) stay in the
    // node's ~/.sky/image-<hash> for the next pool.
    const std::string script = spec_.image.bootstrap(spec_.timeout);
    std::string path = run_dir_ + "/bootstrap.sh";
    std::string unbox, cleanup = "rm -f " + shell_quote(path), box;
    if (o_.seal) {
        // The script holds Image::env, Image::files, pip's index credentials and the setup
        // commands, and the shell's stdin crosses a network in clear: it goes sealed to a key
        // the node makes for it in a private directory (runtime/sealed_box.hpp), and is opened
        // there, never written to a shared home.
        auto k = shell_.run(launcher("box-key"), kCommandLimit);
        std::string dir;
        std::optional<AuthBlock> key;
        for (const auto& l : lines_of(k.out)) {
            if (l.rfind("sky-box /tmp/sky-box-", 0) != 0) continue;
            const auto space = l.find(' ', 8);
            if (space == std::string::npos) continue;
            dir = l.substr(8, space - 8);
            key = parse_public_key(std::string_view(l).substr(space + 1));
        }
        if (k.status != 0 || !key || dir.find_first_of("'\"\\$` \n") != std::string::npos)
            fail("bootstrap",
                 fmt::format("the node made no key for the sealed bootstrap ({})", k.summary()),
                 k.last_lines());
        box = seal_box(*key, script);
        path = dir + "/bootstrap.sh";
        std::vector<std::string> argv = launcher("unbox");
        argv.insert(argv.end(), {dir, "bootstrap.sh", "700"});
        unbox = node::shell_command(argv) + " && ";
        cleanup = "rm -rf -- " + shell_quote(dir);
    } else {
        shell_.put(script, path, 0700);
    }
    node::PhaseReader output([&](const std::string& phase) {
        emit(BootstrapProgress{o_.instance_id, phase});
    });
    node::RunOptions eo;
    eo.timeout = std::chrono::minutes(30);
    eo.on_stdout = [&](std::string_view line) { output.line(line); };
    eo.on_stderr = eo.on_stdout;
    eo.stdin_data = box;
    // Nodes that share a home take turns (a lock beside the image's directory).
    const std::string lock =
        o_.shared_home ? fmt::format("exec 9>>{}; flock 9; ", shell_quote(image_home_ + ".lock"))
                       : std::string();
    auto b =
        shell_.run({"bash", "-c",
                    fmt::format("umask 077; {0}{{ {1}SKY_HOME={2} bash {3}; }}; s=$?; {4}; exit $s",
                                unbox, lock, shell_quote(image_home_), shell_quote(path), cleanup)},
                   eo);
    if (b.status != 0)
        fail(output.phase(),
             b.timed_out ? std::string("the bootstrap script timed out")
                         : fmt::format("the bootstrap script failed with exit status {}", b.status),
             output.tail());
    // Volumes: mounted before any call runs; stop() unmounts them, also after a failure here.
    if (!spec_.volumes.empty()) {
        emit(BootstrapProgress{o_.instance_id, "volumes"});
        try {
            mount_volumes(shell_, spec_, pool_id_, run_dir_);
        } catch (const VolumeFailure& e) {
            fail("volumes", e.what(), e.output);
        }
    }
}

void NodeBringUp::prepare(const std::function<void(Event)>& emit) {
    check(emit);
    ship(emit);
    bootstrap(emit);
}

std::vector<std::string> NodeBringUp::launcher(std::string_view command) const {
    // The launcher is the shipped program; its libraries are the shipment's.
    std::vector<std::string> argv{"env", "LD_LIBRARY_PATH=" + prog_dir_ + "/lib", exe_path_,
                                  launch_flag};
    if (!command.empty()) argv.emplace_back(command);
    return argv;
}

std::string NodeBringUp::launcher_settings() const {
    LaunchSettings s;
    s.token = token_;
    s.run_dir = worker_dir_;
    s.image_env = image_home_ + "/env.sh";
    s.lib_dir = prog_dir_ + "/lib";
    if (!o_.seal)
        for (const auto& [k, v] : spec_.env) s.env.emplace_back(k, v);
    s.seal = o_.seal;
    s.listen = o_.listen_host.empty() ? "unix:" + socket_path_ : o_.listen_host + ":0";
    s.allow_from_variable = o_.allow_from_variable;
    s.accept_timeout_s = std::max(spec_.idle_timeout, o_.min_accept_timeout).count();
    s.idle_timeout_s = spec_.idle_timeout.count();
    s.hard_timeout_s = spec_.timeout.count();
    s.power_off = o_.power_off_on_expiry;
    s.probe = o_.preemption_probe;
    s.probe_period_s = 3;
    s.notice_signal = o_.notice_signal;
    s.notice_lead_s = o_.notice_lead.count();
    s.notice_reason = o_.notice_reason;
    s.release_on_idle = o_.release_on_idle;
    if (!o_.release_on_idle.empty())
        s.current_file = fmt::format("{}/.sky/run/{}/{}.current", home_, pool_id_, node_);
    s.superseded_grace_s = o_.superseded_grace.count();
    if (!spec_.volumes.empty()) s.unmount_script = unmount_script_path(run_dir_);
    s.detach = !o_.start_launcher;
    s.remove_run_dir_at_end = o_.worker_dir_per_launch;
    return s.to_text();
}

void NodeBringUp::launch(const std::function<void(Event)>& emit) {
    emit(BootstrapProgress{o_.instance_id, "worker"});
    // A fresh worker in place of the last one: its launcher (and whatever is left of its
    // worker) is ended by the new launcher before it starts its own (the run directory stays:
    // the volumes' files are in it). With a directory per launch the last launcher learns from
    // the current file that it was superseded, and ends by itself.
    ++launches_;
    worker_dir_ = o_.worker_dir_per_launch ? fmt::format("{}/{}", run_dir_, launches_) : run_dir_;
    // Sealed: the token file gets this end's public key; the worker answers with its own.
    std::unique_ptr<X25519Key> key;
    if (o_.seal) {
        key = std::make_unique<X25519Key>();
        token_ = public_key_text(key->public_key());
    } else {
        token_ = random_hex(32);
    }
    port_ = 0;
    if (o_.listen_host.empty()) {
        // The worker listens on a Unix socket in this pool's 0700 directory: only this user
        // (and root) can connect, where any local user could reach a TCP port.
        socket_path_ = worker_dir_ + "/worker.sock";
        if (socket_path_.size() >= 100) {  // sun_path holds 108 bytes
            auto d = shell_.script("umask 077; mktemp -d /tmp/sky-XXXXXXXXXX", kCommandLimit);
            const std::string dir = d.out.substr(0, d.out.find('\n'));
            if (d.status != 0 || dir.empty())
                fail("worker", "cannot make a socket directory", {d.err});
            socket_path_ = dir + "/worker.sock";
        }
    }
    // The token and the pool's env go on the launcher's stdin, never on a command line.
    const std::string settings = launcher_settings();
    node::CommandOutcome r;
    if (o_.start_launcher) {
        r = o_.start_launcher(launcher({}), settings);
    } else {
        // The launcher gives its worker 15 s to listen (after up to 4 s for the one before).
        r = shell_.run(launcher({}), std::chrono::seconds(22), settings);
    }
    launched_ = true;
    std::optional<std::string> port;
    std::vector<std::string> lines;
    std::string loader;
    for (const auto& l : lines_of(r.out + r.err)) {
        if (auto v = node::marks::port.value_in(l)) {
            port = std::string(*v);
            continue;
        }
        // The dynamic loader's own words say what is missing: they go into the message.
        if (l.find("error while loading shared libraries") != std::string::npos ||
            l.find("version `GLIBC") != std::string::npos ||
            l.find("cannot open shared object") != std::string::npos)
            loader = l;
        if (!node::is_mark(l)) lines.push_back(l);
    }
    if (!port)
        fail("worker",
             loader.empty() ? std::string("the worker did not start listening")
                            : "the worker could not start: " + loader,
             lines);
    if (key) {
        // "PORT x25519:<the worker's public key>"
        const auto space = port->find(' ');
        const auto theirs = parse_public_key(space == std::string::npos
                                                 ? std::string_view{}
                                                 : std::string_view(*port).substr(space + 1));
        if (!theirs)
            fail("worker",
                 fmt::format("the worker announced no public key with its port ('{}')", *port),
                 lines);
        token_ = agreed_token(*key, *theirs);
        port->resize(space);
    }
    if (!o_.listen_host.empty()) {
        const int p = std::atoi(port->c_str());
        if (p <= 0 || p > 65535)
            fail("worker", fmt::format("the worker said it listens on '{}'", *port), lines);
        port_ = static_cast<std::uint16_t>(p);
    }
}

std::unique_ptr<io::Stream> NodeBringUp::connect(std::chrono::milliseconds timeout) {
    try {
        if (o_.listen_host.empty()) return shell_.open_unix_socket(socket_path_, timeout);
        return shell_.open_channel(o_.listen_host, port_, timeout);
    } catch (const node::ChannelRefused& e) {
        throw WorkerGone(
            fmt::format("no worker listens on {} any more: {}", shell_.describe(), e.what()));
    }
}

NodeExit NodeBringUp::exit_reason() {
    const std::string where = shell_.describe();
    if (!shell_.alive())
        return {NodeLostError::Reason::unreachable,
                fmt::format("the connection to {} was lost", where)};
    try {
        auto argv = launcher("status");
        argv.push_back(worker_dir_);
        auto r = shell_.run(argv, std::chrono::seconds(10));
        if (r.timed_out)
            return {NodeLostError::Reason::unreachable,
                    fmt::format("{} did not say within 10 s why its worker ended", where)};
        std::optional<WorkerCrash> crash;
        const std::string marker = std::string(launch_crash_marker) + "\n";
        if (const auto at = r.out.find(marker); at != std::string::npos) {
            crash = read_crash_report(std::string_view(r.out).substr(at + marker.size()));
            r.out.resize(at);
        }
        const std::string what = r.out.substr(0, r.out.find('\n'));
        if (what == "preempted")
            return {NodeLostError::Reason::preempted,
                    fmt::format("the provider reclaimed {} (seen on the node)", where)};
        if (what == "running" || what.empty() ||
            what.find_first_not_of("0123456789") != std::string::npos)
            return {NodeLostError::Reason::unreachable, "the tunnel to the worker closed"};
        const int code = std::stoi(what);
        if (code > 128)
            return {NodeLostError::Reason::worker_crashed,
                    fmt::format("the worker on {} was killed by signal {} ({})", where, code - 128,
                                strsignal(code - 128)),
                    std::move(crash)};
        if (code != 0)
            return {NodeLostError::Reason::worker_crashed,
                    fmt::format("the worker on {} exited with status {}{}", where, code,
                                sanitizer_detail(r.out)),
                    std::move(crash)};
        return {NodeLostError::Reason::unreachable, fmt::format("the worker on {} exited", where)};
    } catch (const std::exception& e) {
        return {NodeLostError::Reason::unreachable, e.what()};
    }
}

void NodeBringUp::stop() noexcept {
    // Peers stop fetching from this node before it goes.
    if (o_.shipment && shipped_) o_.shipment->forget(node_);
    if (run_dir_.empty()) return;
    try {
        if (!shell_.alive()) return;
        const auto limit = std::chrono::seconds(15 + 4 * static_cast<int>(spec_.volumes.size()));
        if (!launched_ || exe_path_.empty() || o_.worker_dir_per_launch) {
            // Nothing was launched (a bootstrap that failed): the volumes and files only.
            if (!spec_.volumes.empty()) shell_.run({"bash", unmount_script_path(run_dir_)}, limit);
            shell_.run({"rm", "-rf", "--", run_dir_}, kCommandLimit);
            shell_.run({"rmdir", "--", std::filesystem::path(run_dir_).parent_path().string()},
                       kCommandLimit);
            return;
        }
        std::vector<std::string> argv = launcher("stop");
        argv.push_back(worker_dir_);
        if (!spec_.volumes.empty()) {
            argv.emplace_back("--unmount");
            argv.push_back(unmount_script_path(run_dir_));
        }
        argv.emplace_back("--remove");
        if (!socket_path_.empty() && socket_path_.rfind(worker_dir_, 0) != 0)
            argv.push_back(std::filesystem::path(socket_path_).parent_path().string());
        // Each volume's unmount may wait up to 4 s for its s3fs to end.
        shell_.run(argv, limit);
    } catch (...) {
    }
}

}  // namespace sky::detail
