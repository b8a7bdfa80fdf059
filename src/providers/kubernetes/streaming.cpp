#include "providers/kubernetes/streaming.hpp"

#include <openssl/ssl.h>
#include <sys/socket.h>

#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <cstring>
#include <future>
#include <nlohmann/json.hpp>

#include "io/io_core.hpp"
#include "providers/kubernetes/channel.hpp"

namespace sky::detail::kubernetes {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using Strand = asio::strand<asio::io_context::executor_type>;
using Ws = websocket::stream<beast::ssl_stream<beast::tcp_stream>>;

// A port-forward write is cut into messages of at most this size: the API server's WebSocket
// library refuses messages beyond 32 MiB, and smaller ones interleave with reads.
constexpr std::size_t kMaxMessage = 256u << 10;

std::string authority(const ClusterEndpoint& e) {
    const std::string host = e.host.find(':') != std::string::npos ? "[" + e.host + "]" : e.host;
    return host + ":" + e.port;
}

bool is_ip(const std::string& host) {
    boost::system::error_code ec;
    (void)asio::ip::make_address(host, ec);
    return !ec;
}

std::shared_ptr<ssl::context> make_tls(const KubeTarget& t, const Credential& cred) {
    auto ctx = std::make_shared<ssl::context>(ssl::context::tls_client);
    ctx->set_options(ssl::context::no_sslv2 | ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                     ssl::context::no_tlsv1_1);
    const std::string who = "cluster \"" + t.cluster_name + "\" (" + t.source + ")";
    try {
        if (t.cluster.insecure_skip_tls_verify) {
            ctx->set_verify_mode(ssl::verify_none);
        } else {
            ctx->set_verify_mode(ssl::verify_peer);
            if (!t.cluster.ca_pem.empty())
                ctx->add_certificate_authority(asio::buffer(t.cluster.ca_pem));
            else
                ctx->set_default_verify_paths();
        }
    } catch (const boost::system::system_error&) {
        throw ConfigError("sky::Kubernetes: the certificate authority of " + who + " is not PEM");
    }
    if (!cred.client_cert_pem.empty()) {
        try {
            ctx->use_certificate_chain(asio::buffer(cred.client_cert_pem));
            ctx->use_private_key(asio::buffer(cred.client_key_pem), ssl::context::pem);
        } catch (const boost::system::system_error&) {
            throw ConfigError("sky::Kubernetes: the client certificate or key of user \"" +
                              t.user_name + "\" (" + t.source +
                              ") is not PEM, or they do not match");
        }
    }
    return ctx;
}

// One WebSocket connection to the API server, on a strand of the I/O core.
struct Connection {
    Connection(Strand strand, std::shared_ptr<ssl::context> tls)
        : strand(strand), tls(std::move(tls)), ws(strand, *this->tls) {}
    Strand strand;
    std::shared_ptr<ssl::context> tls;
    Ws ws;
    std::string protocol;
};

// What a declined upgrade said: the Status's message, else the body's first line.
std::string status_message(const std::string& body) {
    try {
        const auto j = nlohmann::json::parse(body);
        if (j.is_object() && j.contains("message") && j["message"].is_string())
            return j["message"].get<std::string>();
    } catch (const nlohmann::json::exception&) {
    }
    std::string line = body.substr(0, body.find('\n'));
    if (line.size() > 300) line.resize(300);
    return line;
}

struct Declined {
    int status = 0;
    std::string message;
};

// Resolve, connect, TLS (the kubeconfig's CA, server name, client certificate), WebSocket
// upgrade offering `protocols`. A declined upgrade is returned, not thrown.
asio::awaitable<std::optional<Declined>> open(Connection& c, const KubeTarget& t,
                                              const Credential& cred, const std::string& target,
                                              const std::string& protocols,
                                              Clock::time_point deadline) {
    auto& tcp_layer = beast::get_lowest_layer(c.ws);
    tcp::resolver resolver(c.strand);
    tcp_layer.expires_at(deadline);
    const auto endpoints =
        co_await resolver.async_resolve(t.cluster.host, t.cluster.port, asio::use_awaitable);
    co_await tcp_layer.async_connect(endpoints, asio::use_awaitable);
    const std::string name =
        t.cluster.tls_server_name.empty() ? t.cluster.host : t.cluster.tls_server_name;
    if (!is_ip(name)) ::SSL_set_tlsext_host_name(c.ws.next_layer().native_handle(), name.c_str());
    if (!t.cluster.insecure_skip_tls_verify)
        c.ws.next_layer().set_verify_callback(ssl::host_name_verification(name));
    co_await c.ws.next_layer().async_handshake(ssl::stream_base::client, asio::use_awaitable);
    // The decorator is kept by the stream: it holds copies, not references.
    c.ws.set_option(websocket::stream_base::decorator(
        [protocols, token = cred.bearer_token](websocket::request_type& req) {
            req.set(http::field::user_agent, "sky/" SKY_VERSION);
            req.set(http::field::sec_websocket_protocol, protocols);
            if (!token.empty()) req.set(http::field::authorization, "Bearer " + token);
        }));
    websocket::response_type res;
    auto [ec] = co_await c.ws.async_handshake(res, authority(t.cluster), target,
                                              asio::as_tuple(asio::use_awaitable));
    if (ec == websocket::error::upgrade_declined || (ec && res.result_int() >= 300)) {
        co_return Declined{static_cast<int>(res.result_int()), status_message(res.body())};
    }
    if (ec) throw boost::system::system_error(ec);
    c.protocol = std::string(res[http::field::sec_websocket_protocol]);
    co_return std::nullopt;
}

// Runs `body` on a strand of the I/O core and waits for it from this (non-I/O) thread.
template <class T, class F>
T run_on_core(Strand strand, F body) {
    if (io::on_io_thread())
        throw Error("sky::Kubernetes: a blocking API server stream was started on an I/O thread");
    auto fut = asio::co_spawn(strand, std::move(body), asio::use_future);
    return fut.get();
}

std::string describe_error(const boost::system::system_error& e) {
    if (e.code() == beast::error::timeout) return "timed out";
    return e.code().message();
}

// Opens a connection (retrying once with a fresh credential after a 401) and returns it, or
// throws StreamRefused / sky::Error.
std::shared_ptr<Connection> connect(CredentialSource& creds, const std::string& target,
                                    const std::string& protocols, Clock::time_point deadline,
                                    const std::string& what) {
    const KubeTarget& t = creds.target();
    for (int attempt = 0;; ++attempt) {
        const Credential cred = creds.current();
        auto c = std::make_shared<Connection>(asio::make_strand(io::context()), make_tls(t, cred));
        std::optional<Declined> declined;
        try {
            declined = run_on_core<std::optional<Declined>>(
                c->strand, [&]() { return open(*c, t, cred, target, protocols, deadline); });
        } catch (const boost::system::system_error& e) {
            throw Error("sky::Kubernetes: " + what + ": cannot reach the API server " +
                        t.cluster.server + ": " + describe_error(e));
        }
        if (!declined) {
            // One message per frame: the API server's WebSocket library (golang.org/x/net's)
            // takes every frame for a message of its own, so a fragment's first byte would be
            // read as a channel number.
            c->ws.auto_fragment(false);
            return c;
        }
        if (declined->status == 401 && attempt == 0) {
            creds.unauthorized(cred);
            continue;
        }
        throw StreamRefused(declined->status, declined->message);
    }
}

asio::awaitable<void> write_all(Connection& c, std::vector<std::string> frames) {
    c.ws.binary(true);
    for (const auto& f : frames) co_await c.ws.async_write(asio::buffer(f), asio::use_awaitable);
}

}  // namespace

StreamRefused::StreamRefused(int status, std::string message)
    : sky::Error("the API server refused the stream (HTTP " + std::to_string(status) +
                 "): " + message),
      status_(status),
      message_(std::move(message)) {}

ExecResult exec(CredentialSource& creds, const ExecRequest& r) {
    if (r.argv.empty()) throw Error("sky::Kubernetes: exec needs a command");
    const std::string what = "exec in pod " + r.ns + "/" + r.pod;
    const auto deadline = Clock::now() + r.timeout;
    auto c = connect(creds,
                     exec_path(creds.target().cluster.base_path, r.ns, r.pod, r.container, r.argv,
                               r.stdin_data.has_value()),
                     std::string(kChannelV5) + ", " + kChannelV4, deadline, what);
    ExecResult result;
    result.protocol = c->protocol;
    if (c->protocol != kChannelV5 && c->protocol != kChannelV4)
        throw Error("sky::Kubernetes: " + what + ": the API server chose the subprotocol \"" +
                    c->protocol + "\", which sky does not speak");
    const bool v5 = c->protocol == kChannelV5;
    std::vector<std::string> frames;
    if (r.stdin_data) {
        const std::string& in = *r.stdin_data;
        for (std::size_t off = 0; off < in.size(); off += kMaxMessage)
            frames.push_back(encode_frame(0, std::string_view(in).substr(off, kMaxMessage)));
        if (v5) frames.push_back(encode_close(0));
    }
    bool got_status = false;
    auto session = [&]() -> asio::awaitable<void> {
        // The input goes out while the output is read: a process that writes while it reads
        // would otherwise fill both directions' buffers and stall.
        std::exception_ptr write_error;
        bool writing = !frames.empty();
        if (writing)
            asio::co_spawn(c->strand, write_all(*c, std::move(frames)), [&](std::exception_ptr e) {
                write_error = e;
                writing = false;
            });
        beast::flat_buffer buf;
        for (;;) {
            auto [ec, n] = co_await c->ws.async_read(buf, asio::as_tuple(asio::use_awaitable));
            // The server closes the connection after the status; how the close reaches us
            // (a close frame, EOF, a reset, a broken pipe under the close frame beast answers
            // with) does not matter once the status came.
            if (ec == websocket::error::closed || ec == asio::error::eof ||
                ec == ssl::error::stream_truncated || (ec && got_status))
                break;
            if (ec) {
                beast::get_lowest_layer(c->ws).close();
                throw boost::system::system_error(ec);
            }
            const std::string_view msg(static_cast<const char*>(buf.data().data()), buf.size());
            if (const auto f = decode_frame(msg)) {
                if (f->channel == 1)
                    result.out.append(f->data);
                else if (f->channel == 2)
                    result.err.append(f->data);
                else if (f->channel == 3) {
                    const ExecStatus s = parse_exec_status(f->data);
                    result.exited = s.exited;
                    result.exit_code = s.exit_code;
                    result.failure = s.message;
                    got_status = true;
                }
            }
            buf.consume(buf.size());
        }
        // The writer ends with the connection: wait for it so that nothing outlives `frames`.
        while (writing) {
            beast::get_lowest_layer(c->ws).close();
            asio::steady_timer t(c->strand, std::chrono::milliseconds(1));
            co_await t.async_wait(asio::use_awaitable);
        }
        (void)write_error;  // a write cut short by the process's end is not the exec's failure
    };
    try {
        run_on_core<void>(c->strand, session);
    } catch (const boost::system::system_error& e) {
        throw Error("sky::Kubernetes: " + what + ": the stream broke: " + describe_error(e));
    }
    if (!got_status)
        throw Error("sky::Kubernetes: " + what + ": the stream ended without the process's status");
    return result;
}

namespace {

// A port of a pod as an io::Stream: channel 0's data both ways, channel 1 (the server's error
// for the port) ends it with the server's message.
class PortForwardStream final : public io::Stream {
public:
    PortForwardStream(std::shared_ptr<Connection> c, std::string description,
                      std::chrono::milliseconds idle)
        : c_(std::move(c)), description_(std::move(description)) {
        beast::get_lowest_layer(c_->ws).expires_never();
        websocket::stream_base::timeout t{};
        t.handshake_timeout = std::chrono::seconds(30);
        t.idle_timeout = idle;
        t.keep_alive_pings = true;
        c_->ws.set_option(t);
        c_->ws.binary(true);
        c_->ws.auto_fragment(false);
    }
    ~PortForwardStream() override { close(); }

    executor_type get_executor() override { return c_->strand; }

    void async_read_some(asio::mutable_buffer buffer, io::IoHandler handler) override {
        if (pending_off_ < pending_.size()) {
            const std::size_t n = deliver(buffer);
            asio::post(c_->strand, [h = std::move(handler), n]() mutable {
                h(boost::system::error_code{}, n);
            });
            return;
        }
        if (!failure_.empty()) {
            asio::post(c_->strand,
                       [h = std::move(handler)]() mutable { h(asio::error::connection_reset, 0); });
            return;
        }
        read_next(buffer, std::move(handler));
    }

    void async_write_some(std::span<const asio::const_buffer> buffers,
                          io::IoHandler handler) override {
        out_.clear();
        out_.push_back(asio::buffer(&kDataChannel, 1));
        std::size_t total = 0;
        for (const auto& b : buffers) {
            if (total == kMaxMessage) break;
            const std::size_t take = std::min(b.size(), kMaxMessage - total);
            out_.push_back(asio::buffer(b.data(), take));
            total += take;
        }
        c_->ws.async_write(
            out_, [h = std::move(handler)](boost::system::error_code ec, std::size_t n) mutable {
                h(ec, n > 0 ? n - 1 : 0);
            });
    }

    void close() noexcept override {
        if (closed_.exchange(true)) return;
        // shutdown(2) is safe from any thread while operations are in flight; they complete.
        const int fd = beast::get_lowest_layer(c_->ws).socket().native_handle();
        if (fd >= 0) ::shutdown(fd, SHUT_RDWR);
    }

    [[nodiscard]] std::string describe() const override { return description_; }
    [[nodiscard]] std::string failure() const override { return failure_; }

private:
    static constexpr char kDataChannel = 0;

    std::size_t deliver(asio::mutable_buffer buffer) {
        const std::size_t n = std::min(buffer.size(), pending_.size() - pending_off_);
        std::memcpy(buffer.data(), pending_.data() + pending_off_, n);
        pending_off_ += n;
        if (pending_off_ == pending_.size()) {
            pending_.clear();
            pending_off_ = 0;
        }
        return n;
    }

    void read_next(asio::mutable_buffer buffer, io::IoHandler handler) {
        frame_.consume(frame_.size());
        c_->ws.async_read(frame_, [this, buffer, h = std::move(handler)](
                                      boost::system::error_code ec, std::size_t) mutable {
            if (ec == websocket::error::closed || ec == ssl::error::stream_truncated)
                ec = asio::error::eof;
            if (ec == beast::error::timeout)
                failure_ = description_ + ": no answer to keep-alive pings";
            if (ec) return h(ec, 0);
            const std::string_view msg(static_cast<const char*>(frame_.data().data()),
                                       frame_.size());
            const auto f = decode_frame(msg);
            if (f && f->channel == 0) {
                const std::string_view data = data_header_.strip(f->data);
                if (!data.empty()) {
                    pending_.assign(data);
                    pending_off_ = 0;
                    return h(boost::system::error_code{}, deliver(buffer));
                }
            } else if (f && f->channel == 1) {
                const std::string_view text = error_header_.strip(f->data);
                if (!text.empty()) {
                    failure_ = description_ + ": " + std::string(text);
                    return h(asio::error::connection_reset, 0);
                }
            }
            read_next(buffer, std::move(h));
        });
    }

    std::shared_ptr<Connection> c_;
    std::string description_;
    std::atomic<bool> closed_{false};
    beast::flat_buffer frame_;
    std::string pending_;
    std::size_t pending_off_ = 0;
    PortHeader data_header_, error_header_;
    std::vector<asio::const_buffer> out_;
    std::string failure_;
};

}  // namespace

std::unique_ptr<io::Stream> open_port_forward(CredentialSource& creds, const std::string& ns,
                                              const std::string& pod, std::uint16_t port,
                                              const PortForwardOptions& options) {
    const std::string what = "port-forward to pod " + ns + "/" + pod + ":" + std::to_string(port);
    const std::string target = portforward_path(creds.target().cluster.base_path, ns, pod, port);
    auto c = connect(creds, target, kChannelV4, Clock::now() + options.connect_timeout, what);
    if (c->protocol != kChannelV4)
        throw Error("sky::Kubernetes: " + what + ": the API server chose the subprotocol \"" +
                    c->protocol + "\", which sky does not speak for port-forward");
    return std::make_unique<PortForwardStream>(std::move(c), what, options.idle_timeout);
}

}  // namespace sky::detail::kubernetes
