#include "runtime/capture.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>

namespace sky::detail {

namespace {
thread_local CallContext* t_call = nullptr;
thread_local std::string t_partial[2];
}  // namespace

// No put area: every write reaches xsputn/overflow, where thread-local state keeps concurrent
// calls apart.
class OutputCapture::StreamBuf : public std::streambuf {
public:
    StreamBuf(OutputCapture& owner, std::uint8_t stream) : owner_(owner), stream_(stream) {}

protected:
    std::streamsize xsputn(const char* s, std::streamsize n) override {
        auto& part = t_partial[stream_ - 1];
        std::string_view v(s, static_cast<std::size_t>(n));
        while (!v.empty()) {
            auto nl = v.find('\n');
            if (nl == std::string_view::npos) {
                part.append(v);
                break;
            }
            part.append(v.substr(0, nl));
            owner_.emit(t_call ? t_call->call_id : 0, t_call, stream_, part);
            part.clear();
            v.remove_prefix(nl + 1);
        }
        return n;
    }
    int_type overflow(int_type c) override {
        if (c != traits_type::eof()) {
            char ch = static_cast<char>(c);
            xsputn(&ch, 1);
        }
        return traits_type::not_eof(c);
    }

private:
    OutputCapture& owner_;
    std::uint8_t stream_;
};

OutputCapture::OutputCapture(LineSink sink) : sink_(std::move(sink)) {
    std::fflush(stdout);
    std::fflush(stderr);
    orig_out_ = ::fcntl(1, F_DUPFD_CLOEXEC, 3);
    orig_err_ = ::fcntl(2, F_DUPFD_CLOEXEC, 3);
    int po[2], pe[2];
    if (::pipe2(po, O_CLOEXEC) == 0 && ::pipe2(pe, O_CLOEXEC) == 0) {
        ::dup2(po[1], 1);
        ::dup2(pe[1], 2);
        ::close(po[1]);
        ::close(pe[1]);
        pipe_out_ = po[0];
        pipe_err_ = pe[0];
        ::fcntl(pipe_out_, F_SETFL, O_NONBLOCK);
        ::fcntl(pipe_err_, F_SETFL, O_NONBLOCK);
    }
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) wake_[0] = wake_[1] = -1;
    out_buf_ = std::make_unique<StreamBuf>(*this, 1);
    err_buf_ = std::make_unique<StreamBuf>(*this, 2);
    saved_out_ = std::cout.rdbuf(out_buf_.get());
    saved_err_ = std::cerr.rdbuf(err_buf_.get());
    std::clog.rdbuf(err_buf_.get());
    if (pipe_out_ >= 0) thread_ = std::thread([this] { pipe_thread(); });
}

OutputCapture::~OutputCapture() {
    stop_ = true;
    if (wake_[1] >= 0) (void)!::write(wake_[1], "x", 1);
    if (thread_.joinable()) thread_.join();
    std::cout.rdbuf(saved_out_);
    std::cerr.rdbuf(saved_err_);
    std::clog.rdbuf(saved_err_);
    if (orig_out_ >= 0) ::dup2(orig_out_, 1);
    if (orig_err_ >= 0) ::dup2(orig_err_, 2);
    for (int fd : {orig_out_, orig_err_, pipe_out_, pipe_err_, wake_[0], wake_[1]})
        if (fd >= 0) ::close(fd);
}

void OutputCapture::enter(CallContext* ctx) noexcept {
    t_call = ctx;
    std::lock_guard lk(pipe_m_);
    int now = running_.fetch_add(1) + 1;
    only_call_.store(now == 1 ? ctx : nullptr);
}

void OutputCapture::leave() noexcept {
    for (std::uint8_t s = 1; s <= 2; ++s) {
        auto& part = t_partial[s - 1];
        if (!part.empty()) {
            emit(t_call ? t_call->call_id : 0, t_call, s, part);
            part.clear();
        }
    }
    std::fflush(stdout);
    std::fflush(stderr);
    if (pipe_out_ >= 0) {
        // Only worth a syscall when something may be waiting in the pipes.
        pollfd p[2] = {{pipe_out_, POLLIN, 0}, {pipe_err_, POLLIN, 0}};
        if (::poll(p, 2, 0) > 0) drain_pipes(false);
    }
    {
        // Under the pipe lock, so the pipe thread never holds a context that is going away.
        std::lock_guard lk(pipe_m_);
        running_.fetch_sub(1);
        only_call_.store(nullptr);
    }
    t_call = nullptr;
}

void OutputCapture::emit(std::uint64_t call_id, CallContext* ctx, std::uint8_t stream,
                         std::string_view line) {
    if (ctx) {
        std::lock_guard lk(ctx->m);
        ctx->tail.emplace_back(line);
        if (ctx->tail.size() > CallContext::tail_lines) ctx->tail.pop_front();
    }
    try {
        sink_(call_id, stream, line);
    } catch (...) {
    }
}

void OutputCapture::drain_pipes(bool) {
    std::lock_guard lk(pipe_m_);
    char buf[16384];
    for (int i = 0; i < 2; ++i) {
        int fd = i == 0 ? pipe_out_ : pipe_err_;
        for (;;) {
            ssize_t n = ::read(fd, buf, sizeof buf);
            if (n <= 0) break;
            auto& part = pipe_partial_[i];
            part.append(buf, static_cast<std::size_t>(n));
            std::size_t start = 0, nl;
            while ((nl = part.find('\n', start)) != std::string::npos) {
                CallContext* ctx = only_call_.load();
                emit(ctx ? ctx->call_id : 0, ctx, static_cast<std::uint8_t>(i + 1),
                     std::string_view(part).substr(start, nl - start));
                start = nl + 1;
            }
            part.erase(0, start);
        }
    }
}

void OutputCapture::pipe_thread() {
    while (!stop_) {
        pollfd p[3] = {{pipe_out_, POLLIN, 0}, {pipe_err_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
        int r = ::poll(p, 3, 500);
        if (r > 0 && ((p[0].revents | p[1].revents) & (POLLIN | POLLHUP))) drain_pipes(false);
    }
}

}  // namespace sky::detail
