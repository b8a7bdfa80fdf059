// File transfer: SFTP uploads fed from the caller's thread, the probe that asks once whether the
// server runs an sftp subsystem, and the exec upload for servers without one.
#include <boost/asio/steady_timer.hpp>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "ssh/session_impl.hpp"
#include "util/random.hpp"
#include "util/shell.hpp"

namespace sky::detail::ssh {

namespace {

const char* sftp_error_name(unsigned long code) {
    switch (code) {
        case LIBSSH2_FX_NO_SUCH_FILE:
            return "no such file";
        case LIBSSH2_FX_PERMISSION_DENIED:
            return "permission denied";
        case LIBSSH2_FX_FAILURE:
            return "failure";
        case LIBSSH2_FX_NO_SUCH_PATH:
            return "no such path";
        case LIBSSH2_FX_FILE_ALREADY_EXISTS:
            return "file already exists";
        case LIBSSH2_FX_WRITE_PROTECT:
            return "write protected";
        case LIBSSH2_FX_NO_SPACE_ON_FILESYSTEM:
            return "no space on file system";
        case LIBSSH2_FX_QUOTA_EXCEEDED:
            return "quota exceeded";
        case LIBSSH2_FX_NOT_A_DIRECTORY:
            return "not a directory";
        default:
            return "sftp error";
    }
}

struct UploadOp final : Op {
    std::string remote_path;
    int mode = 0644;
    std::shared_ptr<Input> input = std::make_shared<Input>();
    std::shared_ptr<Waiter<Failure>> ended;

    // Strand only.
    enum { init, opening, writing, setting_mode, closing } state = init;
    LIBSSH2_SFTP_HANDLE* h = nullptr;
    Failure pending_failure;
    bool finished = false;

    void finish(Failure f) {
        if (finished) return;
        finished = true;
        input->stop();
        ended->set(std::move(f));
    }
    // libssh2 1.10 frees an SFTP handle (and the writes it still holds) only in its close,
    // which gets that far when the close cannot be sent: as now, every send failing at once.
    void release(Session::Impl&) override {
        if (h) libssh2_sftp_close_handle(h);
        h = nullptr;
    }
    void abort(const Failure& f) override {
        h = nullptr;
        finish(f);
    }
    Failure sftp_failure(Session::Impl& s, int rc, const std::string& what) {
        if (rc == LIBSSH2_ERROR_SFTP_PROTOCOL) {
            return {Failure::channel, "ssh " + s.label + ": " + what + " " + remote_path + ": " +
                                          sftp_error_name(libssh2_sftp_last_error(s.sftp))};
        }
        return s.error(rc, what + " " + remote_path);
    }
    Step fail_or_close(Session::Impl& s, Failure f) {
        if (f.kind == Failure::lost || !h) {
            if (s.sftp_user == this) s.sftp_user = nullptr;
            finish(f);
            return Step::done;
        }
        pending_failure = std::move(f);
        state = closing;
        return Step::progress;
    }

    Step step(Session::Impl& s) override {
        switch (state) {
            case init: {
                if (s.sftp_user && s.sftp_user != this) return Step::idle;
                s.sftp_user = this;
                if (!s.sftp) {
                    if (s.opener && s.opener != this) return Step::idle;
                    s.opener = this;
                    s.sftp = libssh2_sftp_init(s.s);
                    if (!s.sftp) {
                        int rc = 0;
                        if (s.null_would_block(&rc)) return Step::idle;
                        s.opener = nullptr;
                        s.sftp_user = nullptr;
                        finish(s.error(rc, "cannot start SFTP"));
                        return Step::done;
                    }
                    s.opener = nullptr;
                }
                state = opening;
                return Step::progress;
            }
            case opening: {
                h = libssh2_sftp_open_ex(s.sftp, remote_path.data(),
                                         static_cast<unsigned>(remote_path.size()),
                                         LIBSSH2_FXF_WRITE | LIBSSH2_FXF_CREAT | LIBSSH2_FXF_TRUNC,
                                         mode & 0777, LIBSSH2_SFTP_OPENFILE);
                if (!h) {
                    int rc = 0;
                    if (s.null_would_block(&rc)) return Step::idle;
                    return fail_or_close(s, sftp_failure(s, rc, "cannot create"));
                }
                state = writing;
                return Step::progress;
            }
            case writing: {
                bool progressed = false;
                for (int i = 0; i < 256; ++i) {
                    // libssh2's SFTP write pipelines: the bytes it has not acknowledged yet must
                    // be the start of the next call's buffer, which the front chunk keeps.
                    std::span<const std::byte> piece = input->peek();
                    if (piece.empty()) {
                        if (input->exhausted()) {
                            state = setting_mode;
                            return Step::progress;
                        }
                        return progressed ? Step::progress : Step::idle;
                    }
                    ssize_t n = libssh2_sftp_write(h, reinterpret_cast<const char*>(piece.data()),
                                                   piece.size());
                    if (s.would_block(n)) return progressed ? Step::progress : Step::idle;
                    if (n < 0) {
                        return fail_or_close(s,
                                             sftp_failure(s, static_cast<int>(n), "cannot write"));
                    }
                    progressed = true;
                    input->consume(static_cast<std::size_t>(n));
                }
                return Step::progress;
            }
            case setting_mode: {
                LIBSSH2_SFTP_ATTRIBUTES attrs{};
                attrs.flags = LIBSSH2_SFTP_ATTR_PERMISSIONS;
                attrs.permissions = static_cast<unsigned long>(mode & 07777);
                int rc = libssh2_sftp_fsetstat(h, &attrs);
                if (s.would_block(rc)) return Step::idle;
                if (rc != 0) return fail_or_close(s, sftp_failure(s, rc, "cannot chmod"));
                state = closing;
                return Step::progress;
            }
            case closing: {
                int rc = libssh2_sftp_close_handle(h);
                if (s.would_block(rc)) return Step::idle;
                h = nullptr;
                s.sftp_user = nullptr;
                Failure f = pending_failure;
                if (rc != 0 && f.kind == Failure::none) f = sftp_failure(s, rc, "cannot close");
                finish(f);
                return Step::done;
            }
        }
        return Step::idle;
    }
};

// Asks for the sftp subsystem on a channel of its own and closes it: the answer decides how
// uploads go. libssh2's own sftp_init cannot be used to ask: on a refusal it frees its channel
// in a loop that never yields in non-blocking mode (a core at 100%, forever).
struct SftpProbeOp final : Op {
    static constexpr std::chrono::seconds kAnswer{30};
    std::shared_ptr<Waiter<Failure>> ended;
    bool available = false;  // read by the caller once `ended` is set

    // Strand only.
    enum { opening, requesting, closing, freeing } state = opening;
    LIBSSH2_CHANNEL* ch = nullptr;
    bool finished = false;
    std::unique_ptr<boost::asio::steady_timer> timer;

    void start(Session::Impl& s) override {
        timer = std::make_unique<boost::asio::steady_timer>(s.strand, kAnswer);
        timer->async_wait([op = std::static_pointer_cast<SftpProbeOp>(shared_from_this()),
                           label = s.label](boost::system::error_code ec) {
            if (ec) return;
            op->finish({Failure::timeout,
                        "ssh " + label + ": no answer to the sftp subsystem request within 30 s"});
        });
    }
    void finish(Failure f = {}) {
        if (finished) return;
        finished = true;
        if (timer) timer->cancel();
        ended->set(std::move(f));
    }
    void abort(const Failure& f) override {
        ch = nullptr;
        finish(f);
    }
    Step step(Session::Impl& s) override {
        switch (state) {
            case opening: {
                Failure f;
                auto r = s.open_channel(this, "session", 256u << 10, {},
                                        "cannot open a session channel", &ch, &f, true);
                if (r == Session::Impl::Open::wait) return Step::idle;
                if (r == Session::Impl::Open::failed) {
                    finish(f);
                    return Step::done;
                }
                state = requesting;  // the opener slot is kept until the request is answered
                return Step::progress;
            }
            case requesting: {
                int rc = libssh2_channel_process_startup(ch, "subsystem", 9, "sftp", 4);
                if (s.would_block(rc)) return Step::idle;
                if (s.opener == this) s.opener = nullptr;
                if (rc != 0) {
                    Failure f = s.error(rc, "sftp subsystem request");
                    if (f.kind == Failure::lost) {
                        finish(f);
                        return Step::done;
                    }
                }
                if (!finished) available = rc == 0;
                state = closing;
                return Step::progress;
            }
            case closing: {
                int rc = libssh2_channel_close(ch);
                if (s.would_block(rc)) return Step::idle;
                state = freeing;
                return Step::progress;
            }
            case freeing: {
                int rc = libssh2_channel_free(ch);
                if (s.would_block(rc)) return Step::idle;
                ch = nullptr;
                finish();
                return Step::done;
            }
        }
        return Step::idle;
    }
};

/// Whether the server runs an sftp subsystem: asked on the first upload, then known.
bool sftp_available(Session::Impl& impl) {
    using Sftp = Session::Impl::Sftp;
    if (auto k = impl.sftp_support.load(); k != Sftp::unknown) return k == Sftp::available;
    std::lock_guard probing(impl.sftp_probe_m);
    if (auto k = impl.sftp_support.load(); k != Sftp::unknown) return k == Sftp::available;
    auto op = std::make_shared<SftpProbeOp>();
    op->ended = std::make_shared<Waiter<Failure>>("ssh::Session::upload");
    impl.submit(op);
    Failure f = op->ended->get();
    if (f.kind != Failure::none) f.raise();
    impl.sftp_support = op->available ? Sftp::available : Sftp::refused;
    return op->available;
}

/// An upload where the server has no sftp (hardened hosts), as configuration-management tools
/// do it: `cat` into a temporary file beside the target, then chmod and rename in a second
/// command only once every byte arrived, so a broken source never replaces the file.
void upload_by_exec(Session& self, Session::Impl& impl, const Session::UploadSource& read,
                    const std::string& remote_path, int mode,
                    const std::function<void(std::uint64_t)>& on_progress) {
    const std::string part = shell_quote(remote_path + ".sky-part." + random_hex(12));
    const std::string target = shell_quote(remote_path);
    auto failed = [&](const std::string& why) {
        std::string msg = "ssh " + impl.label + ": cannot upload " + remote_path +
                          " (through exec: the server has no sftp subsystem): " + why;
        while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
        return ChannelError(msg);
    };
    auto input = std::make_shared<Input>();
    std::exception_ptr source_error;
    ExecOptions quiet;
    quiet.capture_limit = 64u << 10;
    ExecResult r = exec_with_input(
        impl, "umask 077 && cat > " + part, input,
        [&] {
            source_error = feed_input(impl, *input, read, on_progress);
            if (source_error) {
                // Ends the command's input early; the partial file is removed below, never
                // renamed.
                std::lock_guard lk(input->mu);
                input->done = true;
            }
        },
        quiet);
    if (source_error || r.exit_status != 0) {
        try {
            ExecOptions cleanup;
            cleanup.timeout = std::chrono::seconds(30);
            self.exec("rm -f " + part, cleanup);
        } catch (const sky::Error&) {
            // The session may be the reason; a stray part file is named as such.
        }
        if (source_error) std::rethrow_exception(source_error);
        throw failed(r.err.empty() ? "cat exited with " + std::to_string(r.exit_status) : r.err);
    }
    char octal[16];
    std::snprintf(octal, sizeof octal, "%o", static_cast<unsigned>(mode & 07777));
    ExecOptions place;
    place.timeout = std::chrono::seconds(60);
    r = self.exec("chmod " + std::string(octal) + " " + part + " && mv -f " + part + " " + target +
                      " || { s=$?; rm -f " + part + "; exit $s; }",
                  place);
    if (r.exit_status != 0) throw failed(r.err);
}

/// A source over a buffer the caller keeps alive.
Session::UploadSource span_source(std::span<const std::byte> data) {
    return [data, off = std::size_t{0}](std::byte* buf, std::size_t n) mutable {
        std::size_t k = std::min(n, data.size() - off);
        std::memcpy(buf, data.data() + off, k);
        off += k;
        return k;
    };
}

std::shared_ptr<UploadOp> make_upload(const std::string& remote_path, int mode) {
    auto op = std::make_shared<UploadOp>();
    op->remote_path = remote_path;
    op->mode = mode;
    op->ended = std::make_shared<Waiter<Failure>>("ssh::Session::upload");
    return op;
}

}  // namespace

std::exception_ptr feed_input(Session::Impl& im, Input& in, const Session::UploadSource& read,
                              const std::function<void(std::uint64_t)>& on_progress) {
    constexpr std::size_t kChunk = 1u << 20;
    constexpr std::size_t kInFlight = 8u << 20;
    std::uint64_t sent = 0;
    std::exception_ptr source_error;
    for (;;) {
        Input::Chunk c;
        c.owned.resize(kChunk);
        std::size_t got = 0;
        bool eof = false;
        try {
            // Fill the chunk: a source may hand out less than asked before its end.
            while (got < kChunk) {
                std::size_t n = read(c.owned.data() + got, kChunk - got);
                if (n == 0) {
                    eof = true;
                    break;
                }
                got += n;
            }
        } catch (...) {
            source_error = std::current_exception();
            eof = true;
            got = 0;
        }
        c.owned.resize(got);
        c.data = c.owned.data();
        c.size = got;
        {
            std::unique_lock lk(in.mu);
            in.cv.wait(lk, [&] { return in.queued < kInFlight || in.stopped; });
            if (in.stopped) break;
            if (got > 0) {
                in.queued += got;
                in.chunks.push_back(std::move(c));
            }
            if (eof) in.done = true;
        }
        im.wake();
        sent += got;
        if (on_progress && got > 0) on_progress(sent);
        if (eof) break;
    }
    return source_error;
}

void Session::upload(std::span<const std::byte> data, const std::string& remote_path, int mode) {
    io::forbid_blocking_on_io_thread("ssh::Session::upload");
    if (!sftp_available(*impl_)) {
        upload_by_exec(*this, *impl_, span_source(data), remote_path, mode, {});
        return;
    }
    auto op = make_upload(remote_path, mode);
    // The caller's buffer outlives the upload: this call blocks until it is done.
    constexpr std::size_t kChunk = 1u << 20;
    for (std::size_t off = 0; off < data.size(); off += kChunk) {
        op->input->chunks.push_back({{}, data.data() + off, std::min(kChunk, data.size() - off)});
    }
    op->input->queued = data.size();
    op->input->done = true;
    auto ended = op->ended;
    impl_->submit(std::move(op));
    if (Failure f = ended->get(); f.kind != Failure::none) f.raise();
}

void Session::upload(std::string_view data, const std::string& remote_path, int mode) {
    upload(std::as_bytes(std::span(data.data(), data.size())), remote_path, mode);
}

void Session::upload(const std::filesystem::path& local_path, const std::string& remote_path,
                     int mode) {
    std::ifstream in(local_path, std::ios::binary);
    if (!in) throw SshError("ssh upload: cannot read " + local_path.string());
    upload(
        [&](std::byte* buf, std::size_t n) {
            in.read(reinterpret_cast<char*>(buf), static_cast<std::streamsize>(n));
            if (in.bad()) throw SshError("ssh upload: error reading " + local_path.string());
            return static_cast<std::size_t>(in.gcount());
        },
        remote_path, mode);
}

void Session::upload(const UploadSource& read, const std::string& remote_path, int mode,
                     const std::function<void(std::uint64_t)>& on_progress) {
    io::forbid_blocking_on_io_thread("ssh::Session::upload");
    if (!sftp_available(*impl_)) {
        upload_by_exec(*this, *impl_, read, remote_path, mode, on_progress);
        return;
    }
    auto op = make_upload(remote_path, mode);
    auto input = op->input;
    auto ended = op->ended;
    impl_->submit(std::move(op));
    std::exception_ptr source_error = feed_input(*impl_, *input, read, on_progress);
    if (Failure f = ended->get(); f.kind != Failure::none) f.raise();
    if (source_error) std::rethrow_exception(source_error);
}

}  // namespace sky::detail::ssh
