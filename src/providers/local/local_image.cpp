#include "providers/local/local_image.hpp"

#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <thread>

#include "bootstrap/pip.hpp"
#include "ledger/ledger.hpp"
#include "node/scripts.hpp"
#include "providers/local/local_worker.hpp"
#include "providers/local/scripts.hpp"
#include "runtime/node_marks.hpp"
#include "runtime/worker_launch.hpp"
#include "sky/errors.hpp"
#include "util/digest.hpp"
#include "util/file.hpp"
#include "util/shell.hpp"
#include "util/subprocess.hpp"
#include "util/text.hpp"

extern char** environ;

namespace sky::detail {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// As long as a node's bootstrap script may run (a large pip install).
constexpr auto kStepLimit = std::chrono::minutes(30);
constexpr std::size_t kTailLines = 20;

struct RunResult {
    int status = -1;                // exit status; 128 + signal when killed
    std::vector<std::string> tail;  // the last lines it printed (stdout and stderr)
    bool cancelled = false;
    bool timed_out = false;
};

// Runs `script` with bash in a process group of its own, with this process's environment less
// the providers' credentials and the worker launch variables; `on_line` sees every line it
// prints (stdout and stderr, as a terminal shows them) and says whether it belongs in the tail.
// Ends it (the whole group) when `cancelled` turns true or after kStepLimit.
RunResult run_bash(const std::string& script, const std::atomic<bool>& cancelled,
                   const std::function<bool(std::string_view)>& on_line) {
    SubprocessOptions o;
    for (char** e = environ; e && *e; ++e) {
        const std::string_view entry(*e);
        const std::string_view name = entry.substr(0, entry.find('='));
        if (!is_provider_credential(name) && !WorkerLaunch::is_launch_variable(entry))
            o.env.emplace_back(entry);
    }
    o.inherit_env = false;
    o.timeout = kStepLimit;
    o.output_cap = 0;  // only the tail is kept, below
    o.merge_stderr = true;
    o.cancel = &cancelled;
    std::deque<std::string> tail;
    o.on_line = [&](std::string_view l) {
        if (on_line && !on_line(l)) return;
        tail.emplace_back(l);
        if (tail.size() > kTailLines) tail.pop_front();
    };
    const auto s = run_subprocess({"bash", "-c", script}, o);
    if (s.status < 0 && !s.cancelled && !s.timed_out)
        throw Error(s.errors);  // "cannot start bash: <why>"
    RunResult r;
    r.status = s.status;
    r.cancelled = s.cancelled;
    r.timed_out = s.timed_out;
    r.tail.assign(tail.begin(), tail.end());
    return r;
}

std::string sky_home_dir() {
    try {
        return Ledger::directory().parent_path().string();
    } catch (const std::exception&) {
        return (fs::temp_directory_path() / fmt::format("sky-{}", ::geteuid())).string();
    }
}

}  // namespace

LocalImage::LocalImage(Image image, std::string sky_home) : image_(std::move(image)) {
    home_ = (fs::path(sky_home.empty() ? sky_home_dir() : sky_home) / "local").string();
    if (!image_.python.empty() || !image_.pip.empty()) {
        // One venv per Python version and package list: a later pool with the same ones finds
        // it ready (as a warm node does), and no two lists share one.
        std::string key = "sky-local-venv-v1;" + image_.python + ";" +
                          image_.pip_extra_index_url.value_or("") + ";";
        for (auto& p : image_.pip) key += p + "\n";
        venv_ = (fs::path(home_) / ("venv-" + sha256_hex(key).substr(0, 12))).string();
    }
}

LocalImage::~LocalImage() { remove_files(); }

std::map<std::string, std::string> LocalImage::worker_env() const {
    std::map<std::string, std::string> env;
    if (venv_.empty()) return env;
    env["VIRTUAL_ENV"] = venv_;
    const char* path = std::getenv("PATH");
    env["PATH"] = venv_ + "/bin" + (path && *path ? std::string(":") + path : std::string());
    return env;
}

void LocalImage::cancel() noexcept { cancelled_ = true; }

const LocalImage::Outcome& LocalImage::once(const std::string& phase,
                                            const std::function<void(Outcome&)>& work) {
    std::lock_guard lk(m_);
    Outcome& o = outcomes_[phase];
    if (!o.done) {
        try {
            work(o);
        } catch (const std::exception& e) {
            o.failed = true;
            o.message = e.what();
        }
        o.done = true;
    }
    return o;
}

void LocalImage::apply(int node, const std::string& id, const std::function<void(Event)>& emit) {
    auto phase = [&](const std::string& name, const std::function<void(Outcome&)>& work) {
        emit(BootstrapProgress{id, name});
        const Outcome& o = once(name, work);
        for (const auto& note : o.notes) emit(BootstrapProgress{id, note});
        if (o.failed) throw BootstrapError(node, id, name, o.message, o.output);
    };
    if (!image_.apt.empty()) phase("apt", [this](Outcome& o) { check_apt(o); });
    if (!venv_.empty()) phase("python", [this](Outcome& o) { make_venv(o); });
    if (!image_.pip.empty()) phase("pip", [this](Outcome& o) { install_pip(o); });
    // Image::env goes into the worker's environment (LocalWorker), as env.sh does on a node.
    phase("env", [](Outcome&) {});
    if (!image_.files.empty()) phase("files", [this](Outcome& o) { write_files(o); });
    if (!image_.setup.empty())
        phase("setup", [this](Outcome& o) {
            o.notes.push_back(fmt::format(
                "setup skipped on Local: {} command{} not run (they prepare a fresh node; Local "
                "runs nothing of the image on this machine)",
                image_.setup.size(), image_.setup.size() == 1 ? "" : "s"));
        });
}

void LocalImage::check_apt(Outcome& o) {
    // Which of the packages this machine lacks; Local installs none (it is your machine).
    std::vector<std::string> packages;
    for (auto& p : image_.apt) packages.push_back(p.substr(0, p.find('=')));
    scripts::ScriptValues v("sky Local: which of the image's apt packages this machine lacks");
    v.words("packages", packages)
        .word("no_dpkg_mark", node::marks::no_dpkg.text)
        .word("missing_mark", node::marks::missing.text);
    const std::string script = v.then({scripts::apt_check_sh()});
    std::vector<std::string> missing;
    bool no_dpkg = false;
    RunResult r = run_bash(script, cancelled_, [&](std::string_view l) {
        if (node::marks::no_dpkg.is(l))
            no_dpkg = true;
        else if (const auto p = node::marks::missing.value_in(l))
            missing.emplace_back(*p);
        else
            return true;
        return false;
    });
    if (r.cancelled) {
        o.failed = true;
        o.message = "the pool was closed while this node started";
        return;
    }
    if (no_dpkg)
        o.notes.push_back(
            fmt::format("apt skipped on Local: {} (no dpkg-query on this machine to "
                        "check; Local installs no system packages)",
                        join(image_.apt)));
    else if (!missing.empty())
        o.notes.push_back(
            fmt::format("apt skipped on Local: {} not installed on this machine "
                        "(Local installs no system packages)",
                        join(missing)));
}

void LocalImage::make_venv(Outcome& o) {
    std::error_code ec;
    fs::create_directories(home_, ec);
    ::chmod(home_.c_str(), 0700);
    const std::string want = image_.python.empty() ? "python3" : "python" + image_.python;
    // Another pool (another process) may be making the same venv: one at a time, bounded.
    const std::string lock_path = venv_ + ".lock";
    const int lock = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (lock < 0) {
        o.failed = true;
        o.message = fmt::format("cannot create {}: {}", lock_path, std::strerror(errno));
        return;
    }
    struct Unlock {
        int fd;
        ~Unlock() { ::close(fd); }
    } unlock{lock};
    for (const auto until = Clock::now() + kStepLimit; ::flock(lock, LOCK_EX | LOCK_NB) != 0;) {
        if (cancelled_ || Clock::now() >= until) {
            o.failed = true;
            o.message = fmt::format("another pool held {} for too long", lock_path);
            return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    scripts::ScriptValues values("sky Local: the image's Python environment");
    values.word("want", want)
        .word("venv", venv_)
        .word("python_mark", node::marks::python.text)
        .word("python_missing_mark", node::marks::python_missing.text)
        .word("no_python_mark", node::marks::no_python.text);
    const std::string script = values.then({scripts::venv_sh()});
    bool missing = false, none = false;
    RunResult r = run_bash(script, cancelled_, [&](std::string_view l) {
        if (node::marks::python_missing.is(l))
            missing = true;
        else if (node::marks::no_python.is(l))
            none = true;
        else if (const auto p = node::marks::python.value_in(l))
            python_ = std::string(*p);
        else
            return true;
        return false;
    });
    if (missing && !none)
        o.notes.push_back(
            fmt::format("python {} skipped on Local: no {} on this machine, the "
                        "venv uses {}",
                        image_.python, want, python_));
    if (r.cancelled) {
        o.failed = true;
        o.message = "the pool was closed while this node started";
    } else if (none) {
        o.failed = true;
        o.message = fmt::format("no {} on this machine: the image's pip environment needs Python",
                                want == "python3" ? want : want + " (nor python3)");
    } else if (r.status != 0) {
        o.failed = true;
        o.message =
            fmt::format("{} -m venv {} failed with exit status {}", python_, venv_, r.status);
        o.output = r.tail;
    }
}

void LocalImage::install_pip(Outcome& o) {
    const int lock = ::open((venv_ + ".lock").c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    struct Unlock {
        int fd;
        ~Unlock() {
            if (fd >= 0) ::close(fd);
        }
    } unlock{lock};
    for (const auto until = Clock::now() + kStepLimit;
         lock >= 0 && ::flock(lock, LOCK_EX | LOCK_NB) != 0;) {
        if (cancelled_ || Clock::now() >= until) {
            o.failed = true;
            o.message = "another pool held the pip environment for too long";
            return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    // The requirements, the index URL and its credentials go to pip in private files (a 0700
    // directory of 0600 files, removed after; the URL into pip's environment from there), as on
    // a node: the bash command line and pip's argument list name only those files.
    const PipFiles files = pip_files(image_);
    std::string dir = (fs::temp_directory_path() / "sky-pip-XXXXXX").string();
    if (!::mkdtemp(dir.data())) {
        o.failed = true;
        o.message = fmt::format("cannot create a private directory for pip's settings: {}",
                                std::strerror(errno));
        return;
    }
    struct RemoveDir {
        std::string path;
        ~RemoveDir() {
            std::error_code ec;
            fs::remove_all(path, ec);
        }
    } remove_dir{dir};
    auto put = [&](const std::string& name, const std::string& text) {
        const std::string path = dir + "/" + name;
        const int fd =
            ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        bool ok = fd >= 0;
        for (std::size_t done = 0; ok && done < text.size();) {
            const ssize_t w = ::write(fd, text.data() + done, text.size() - done);
            if (w < 0 && errno == EINTR) continue;
            ok = w > 0;
            if (ok) done += static_cast<std::size_t>(w);
        }
        if (fd >= 0) ok = (::close(fd) == 0) && ok;
        if (!ok)
            throw Error(fmt::format("cannot write pip's {} file: {}", name, std::strerror(errno)));
        return shell_quote(path);
    };
    std::string script;
    if (!files.extra_index_url.empty())
        script += "PIP_EXTRA_INDEX_URL=\"$(cat " + put("index-url", files.extra_index_url) + ")\" ";
    if (!files.netrc.empty()) {
        // The user's own entries first: they still count for their other indexes.
        std::string netrc;
        if (const char* home = std::getenv("HOME"); home && *home)
            netrc = read_file(std::string(home) + "/.netrc").value_or("");
        script += "NETRC=" + put("netrc", netrc + "\n" + files.netrc) + " ";
    }
    script += fmt::format("{}/bin/python -m pip install -q --disable-pip-version-check -r {}",
                          shell_quote(venv_), put("requirements.txt", files.requirements));
    RunResult r = run_bash(script, cancelled_, {});
    if (r.cancelled) {
        o.failed = true;
        o.message = "the pool was closed while this node started";
    } else if (r.status != 0) {
        o.failed = true;
        o.message = fmt::format("pip install {} failed with exit status {}{}", join(image_.pip),
                                r.status, r.tail.empty() ? "" : ": " + r.tail.back());
        o.output = r.tail;
    }
}

void LocalImage::write_files(Outcome& o) {
    for (const File& f : image_.files) {
        const fs::path path(f.path);
        struct stat st {};
        if (::lstat(path.c_str(), &st) == 0) {
            if (S_ISREG(st.st_mode) && read_file(path) == f.content) continue;
            o.failed = true;
            o.message = fmt::format(
                "{} is already on this machine with other content: Local does not replace a file "
                "of this machine (a node gets it fresh); remove it, or change Image::files",
                f.path);
            return;
        }
        if (errno != ENOENT) {
            o.failed = true;
            o.message = fmt::format("cannot check {}: {}", f.path, std::strerror(errno));
            return;
        }
        // The directories it lacks, outermost first, made as the bootstrap makes them (0755).
        std::vector<fs::path> lacking;
        for (fs::path d = path.parent_path(); !d.empty() && d != d.root_path();
             d = d.parent_path()) {
            struct stat ds {};
            if (::lstat(d.c_str(), &ds) == 0) break;
            lacking.push_back(d);
        }
        for (auto it = lacking.rbegin(); it != lacking.rend(); ++it) {
            if (::mkdir(it->c_str(), 0755) != 0 && errno != EEXIST) {
                o.failed = true;
                o.message = fmt::format("cannot create {}: {}", it->string(), std::strerror(errno));
                return;
            }
            made_dirs_.push_back(it->string());
        }
        // Into a fresh file beside it (created exclusively, 0600 on the way), then renamed.
        std::string tmp = (path.parent_path() / ".sky-file.XXXXXX").string();
        const int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
        bool ok = fd >= 0;
        if (ok) {
            std::size_t done = 0;
            while (ok && done < f.content.size()) {
                const ssize_t w = ::write(fd, f.content.data() + done, f.content.size() - done);
                if (w < 0 && errno == EINTR) continue;
                ok = w > 0;
                if (ok) done += static_cast<std::size_t>(w);
            }
            ok = ok && ::fchmod(fd, f.mode & 07777) == 0;
            ok = (::close(fd) == 0) && ok;
            ok = ok && ::rename(tmp.c_str(), path.c_str()) == 0;
        }
        if (!ok) {
            const int err = errno;
            if (fd >= 0) ::unlink(tmp.c_str());
            o.failed = true;
            o.message = fmt::format("cannot write {}: {}", f.path, std::strerror(err));
            return;
        }
        written_.emplace_back(f.path, f.content);
    }
}

void LocalImage::remove_files() noexcept {
    std::lock_guard lk(m_);
    try {
        for (auto it = written_.rbegin(); it != written_.rend(); ++it) {
            // Only what is still as it was written: a file changed since is somebody's.
            if (read_file(it->first) == it->second) ::unlink(it->first.c_str());
        }
        for (auto it = made_dirs_.rbegin(); it != made_dirs_.rend(); ++it)
            ::rmdir(it->c_str());  // only when empty
    } catch (...) {
    }
    written_.clear();
    made_dirs_.clear();
}

}  // namespace sky::detail
