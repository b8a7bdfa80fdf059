// The judge API server: its TLS (a self-signed certificate for 127.0.0.1 made here with
// OpenSSL), an HTTPS server on one I/O thread (Beast coroutines, every read bounded), and the
// resource model of pods and ConfigMaps with the real server's refusals.
#include "fakes/kubernetes/fake_kube_api.hpp"

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <ctime>
#include <fstream>
#include <sstream>
#include <stdexcept>

extern "C" char** environ;

namespace sky::test {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;
using nlohmann::json;

// ---- TLS: one self-signed certificate, its own CA ----------------------------------------

struct Pem {
    std::string cert, key;
};

Pem self_signed_for_loopback() {
    EVP_PKEY* key = EVP_EC_gen("P-256");
    X509* x = X509_new();
    if (!key || !x) throw std::runtime_error("fake kube-apiserver: cannot make a key");
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), static_cast<long>(std::time(nullptr)));
    X509_gmtime_adj(X509_getm_notBefore(x), -60);
    X509_gmtime_adj(X509_getm_notAfter(x), 24 * 3600);
    X509_set_pubkey(x, key);
    X509_NAME* name = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>("fake-kube-apiserver"), -1,
                               -1, 0);
    X509_set_issuer_name(x, name);
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, x, x, nullptr, nullptr, 0);
    for (const auto& [nid, value] : std::vector<std::pair<int, const char*>>{
             {NID_basic_constraints, "critical,CA:TRUE"},
             {NID_key_usage, "critical,digitalSignature,keyCertSign"},
             {NID_ext_key_usage, "serverAuth"},
             {NID_subject_alt_name, "IP:127.0.0.1"}}) {
        X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
        X509_add_ext(x, ext, -1);
        X509_EXTENSION_free(ext);
    }
    X509_sign(x, key, EVP_sha256());
    auto to_string = [](BIO* b) {
        char* data = nullptr;
        const long n = BIO_get_mem_data(b, &data);
        std::string s(data, static_cast<std::size_t>(n));
        BIO_free(b);
        return s;
    };
    BIO* c = BIO_new(BIO_s_mem());
    PEM_write_bio_X509(c, x);
    BIO* k = BIO_new(BIO_s_mem());
    PEM_write_bio_PrivateKey(k, key, nullptr, nullptr, 0, nullptr, nullptr);
    Pem out{to_string(c), to_string(k)};
    X509_free(x);
    EVP_PKEY_free(key);
    return out;
}

// ---- the API's words ------------------------------------------------------------------------

// A Status as kube-apiserver writes it (k8s.io/apimachinery/pkg/apis/meta/v1 Status).
FakeKubeApi::Reply status(int code, const std::string& reason, const std::string& message,
                          json details = nullptr) {
    json s = {{"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", json::object()},
              {"status", "Failure"}, {"message", message}, {"reason", reason},
              {"code", code}};
    if (!details.is_null()) s["details"] = std::move(details);
    return {code, s.dump() + "\n", {}, {}};
}

FakeKubeApi::Reply ok(const json& j, int code = 200) { return {code, j.dump() + "\n", {}, {}}; }

FakeKubeApi::Reply not_found(const std::string& kind, const std::string& name) {
    return status(404, "NotFound", kind + " \"" + name + "\" not found",
                  {{"name", name}, {"kind", kind}});
}

std::string percent_decoded(const std::string& s) {
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '%' && i + 2 < s.size()) {
            out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
            i += 2;
        } else {
            out += s[i] == '+' ? ' ' : s[i];
        }
    }
    return out;
}

std::map<std::string, std::string> query_of(const std::string& q) {
    std::map<std::string, std::string> out;
    std::stringstream in(q);
    for (std::string kv; std::getline(in, kv, '&');) {
        const auto eq = kv.find('=');
        out[percent_decoded(kv.substr(0, eq))] =
            eq == std::string::npos ? std::string() : percent_decoded(kv.substr(eq + 1));
    }
    return out;
}

// Whether an object's labels satisfy an equality selector ("a=b,c=d").
bool selected(const json& object, const std::string& selector) {
    const json labels = object["metadata"].value("labels", json::object());
    std::stringstream in(selector);
    for (std::string term; std::getline(in, term, ',');) {
        if (term.empty()) continue;
        const auto eq = term.find('=');
        if (eq == std::string::npos) return false;
        if (labels.value(term.substr(0, eq), std::string("\x01")) != term.substr(eq + 1))
            return false;
    }
    return true;
}

std::string rfc3339(std::time_t t) {
    char b[32];
    std::tm tm{};
    ::gmtime_r(&t, &tm);
    std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return b;
}

std::vector<std::string> split_path(const std::string& path) {
    std::vector<std::string> out;
    std::stringstream in(path);
    for (std::string s; std::getline(in, s, '/');)
        if (!s.empty()) out.push_back(percent_decoded(s));
    return out;
}

}  // namespace

// ---- the server ---------------------------------------------------------------------------

struct FakeKubeApi::Net {
    asio::io_context io;
    ssl::context tls{ssl::context::tls_server};
    tcp::acceptor acceptor{io};
    std::thread thread;
};

namespace {

// Runs argv on this machine with `input` on its stdin; its stdout, stderr and exit status.
struct Ran {
    std::string out, err;
    int status = -1;  // -1: it could not be started
};
Ran run_here(const std::vector<std::string>& argv, const std::string& input) {
    Ran r;
    int in[2], out[2], err[2];
    if (::pipe2(in, O_CLOEXEC) || ::pipe2(out, O_CLOEXEC) || ::pipe2(err, O_CLOEXEC)) return r;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_adddup2(&fa, err[1], 2);
    std::vector<std::string> args = argv;
    std::vector<char*> cargs;
    for (auto& a : args) cargs.push_back(a.data());
    cargs.push_back(nullptr);
    pid_t pid = -1;
    const int rc = ::posix_spawnp(&pid, cargs[0], &fa, nullptr, cargs.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(in[0]);
    ::close(out[1]);
    ::close(err[1]);
    if (rc == 0) {
        std::size_t off = 0;
        while (off < input.size()) {
            const ssize_t n = ::write(in[1], input.data() + off, input.size() - off);
            if (n <= 0) break;
            off += static_cast<std::size_t>(n);
        }
    }
    ::close(in[1]);
    pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
    std::string* sinks[2] = {&r.out, &r.err};
    for (int open = rc == 0 ? 2 : 0; open > 0;) {
        if (::poll(fds, 2, 10000) <= 0) break;  // bounded: the judge's commands are short
        for (int k = 0; k < 2; ++k) {
            if (fds[k].fd < 0 || !(fds[k].revents & (POLLIN | POLLHUP))) continue;
            char b[4096];
            const ssize_t n = ::read(fds[k].fd, b, sizeof b);
            if (n > 0) {
                sinks[k]->append(b, static_cast<std::size_t>(n));
            } else {
                fds[k].fd = -1;
                --open;
            }
        }
    }
    ::close(out[0]);
    ::close(err[0]);
    if (rc != 0) return r;
    int st = 0;
    ::waitpid(pid, &st, 0);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return r;
}

std::string frame(std::uint8_t channel, const std::string& data) {
    return std::string(1, static_cast<char>(channel)) + data;
}

// The status channel's Status, as the kubelet's remotecommand writes it.
std::string exec_status(const std::vector<std::string>& argv, int status) {
    if (status == 0) return json{{"metadata", json::object()}, {"status", "Success"}}.dump();
    std::string cmd;
    for (const auto& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
    return json{{"metadata", json::object()},
                {"status", "Failure"},
                {"message",
                 "command terminated with non-zero exit code: error executing "
                 "command [" +
                     cmd + "], exit code " + std::to_string(status)},
                {"reason", "NonZeroExitCode"},
                {"details",
                 {{"causes",
                   json::array({{{"reason", "ExitCode"}, {"message", std::to_string(status)}}})}}}}
        .dump();
}

// An accepted exec: the WebSocket, the client's input (until v5's close of channel 0), the
// command run here, its output and Status; or, dropping, the first output and a cut.
asio::awaitable<void> exec_session(beast::ssl_stream<beast::tcp_stream> stream,
                                   http::request<http::string_body> req, FakeKubeApi::Reply r) {
    websocket::stream<beast::ssl_stream<beast::tcp_stream>> ws(std::move(stream));
    beast::get_lowest_layer(ws).expires_never();
    ws.set_option(websocket::stream_base::timeout::suggested(beast::role_type::server));
    ws.set_option(
        websocket::stream_base::decorator([p = r.protocol](websocket::response_type& res) {
            res.set(http::field::sec_websocket_protocol, p);
        }));
    co_await ws.async_accept(req, asio::use_awaitable);
    ws.binary(true);
    std::string input;
    const bool v5 = r.protocol == "v5.channel.k8s.io";
    for (bool open = r.stdin_open && v5; open;) {
        beast::flat_buffer b;
        co_await ws.async_read(b, asio::use_awaitable);
        const std::string m = beast::buffers_to_string(b.data());
        if (m.empty()) continue;
        if (static_cast<unsigned char>(m[0]) == 255 && m.size() >= 2 && m[1] == 0) open = false;
        if (m[0] == 0) input += m.substr(1);
    }
    const Ran ran = run_here(r.argv, input);
    if (r.drop) {
        const std::string first = ran.out.empty() ? std::string("x") : ran.out.substr(0, 1);
        co_await ws.async_write(asio::buffer(frame(1, first)), asio::use_awaitable);
        boost::system::error_code ignored;
        beast::get_lowest_layer(ws).socket().shutdown(tcp::socket::shutdown_both, ignored);
        beast::get_lowest_layer(ws).close();
        co_return;
    }
    if (ran.status < 0) {
        const std::string why = json{
            {"metadata", json::object()},
            {"status", "Failure"},
            {"message",
             "OCI runtime exec failed: exec failed: container_linux.go: "
             "starting container process caused: exec: \"" +
                 r.argv[0] + "\": executable file not found in $PATH: unknown"},
            {"reason",
             "InternalError"}}.dump();
        co_await ws.async_write(asio::buffer(frame(3, why)), asio::use_awaitable);
    } else {
        if (!ran.out.empty())
            co_await ws.async_write(asio::buffer(frame(1, ran.out)), asio::use_awaitable);
        if (!ran.err.empty())
            co_await ws.async_write(asio::buffer(frame(2, ran.err)), asio::use_awaitable);
        co_await ws.async_write(asio::buffer(frame(3, exec_status(r.argv, ran.status))),
                                asio::use_awaitable);
    }
    co_await ws.async_close(websocket::close_code::normal, asio::use_awaitable);
}

asio::awaitable<void> session(FakeKubeApi* fake, ssl::context& tls, tcp::socket socket) {
    beast::ssl_stream<beast::tcp_stream> stream(std::move(socket), tls);
    try {
        beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(10));
        co_await stream.async_handshake(ssl::stream_base::server, asio::use_awaitable);
        beast::flat_buffer buffer;
        for (;;) {
            http::request<http::string_body> req;
            beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(30));
            co_await http::async_read(stream, buffer, req, asio::use_awaitable);
            const FakeKubeApi::Reply r =
                fake->handle(std::string(req.method_string()), std::string(req.target()),
                             std::string(req[http::field::authorization]), req.body(),
                             std::string(req[http::field::sec_websocket_protocol]));
            if (r.status == 101) {
                co_await exec_session(std::move(stream), std::move(req), r);
                co_return;
            }
            if (r.delay.count() > 0) {
                asio::steady_timer t(co_await asio::this_coro::executor);
                t.expires_after(r.delay);
                co_await t.async_wait(asio::use_awaitable);
            }
            http::response<http::string_body> res{static_cast<http::status>(r.status),
                                                  req.version()};
            res.set(http::field::content_type, "application/json");
            for (const auto& [k, v] : r.headers) res.set(k, v);
            res.body() = r.body;
            // An upgrade the server refuses ends its connection, as the real one does.
            const bool upgrade = beast::iequals(req[http::field::upgrade], "websocket");
            res.keep_alive(req.keep_alive() && !upgrade);
            res.prepare_payload();
            beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(30));
            co_await http::async_write(stream, res, asio::use_awaitable);
            if (!res.keep_alive()) break;
        }
        beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(2));
        co_await stream.async_shutdown(asio::use_awaitable);
    } catch (const std::exception&) {
        // The client went away, or a read timed out: the connection ends.
    }
}

asio::awaitable<void> accept_loop(FakeKubeApi* fake, ssl::context& tls, tcp::acceptor& acceptor) {
    for (;;) {
        tcp::socket s = co_await acceptor.async_accept(asio::use_awaitable);
        asio::co_spawn(acceptor.get_executor(), session(fake, tls, std::move(s)), asio::detached);
    }
}

}  // namespace

FakeKubeApi::FakeKubeApi() : net_(std::make_unique<Net>()) {
    char tmpl[] = "/tmp/sky-fake-kube-XXXXXX";
    if (!::mkdtemp(tmpl)) throw std::runtime_error("fake kube-apiserver: mkdtemp failed");
    dir_ = tmpl;
    const Pem pem = self_signed_for_loopback();
    net_->tls.use_certificate_chain(asio::buffer(pem.cert));
    net_->tls.use_private_key(asio::buffer(pem.key), ssl::context::pem);
    std::ofstream(dir_ / "ca.crt") << pem.cert;
    const tcp::endpoint at(asio::ip::make_address("127.0.0.1"), 0);
    net_->acceptor.open(at.protocol());
    net_->acceptor.set_option(tcp::acceptor::reuse_address(true));
    net_->acceptor.bind(at);
    net_->acceptor.listen();
    port_ = net_->acceptor.local_endpoint().port();
    write_token("token-1");
    std::ofstream(kubeconfig()) << "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n"
                                << "  cluster:\n    server: " << server() << "\n"
                                << "    certificate-authority: " << (dir_ / "ca.crt").string()
                                << "\nusers:\n- name: sky-user\n  user:\n    tokenFile: "
                                << token_file().string() << "\ncontexts:\n- name: fake\n"
                                << "  context:\n    cluster: fake\n    user: sky-user\n"
                                << "    namespace: " << ns() << "\ncurrent-context: fake\n";
    asio::co_spawn(net_->io, accept_loop(this, net_->tls, net_->acceptor), asio::detached);
    net_->thread = std::thread([this] { net_->io.run(); });
}

FakeKubeApi::~FakeKubeApi() {
    net_->io.stop();
    if (net_->thread.joinable()) net_->thread.join();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
}

std::string FakeKubeApi::server() const { return "https://127.0.0.1:" + std::to_string(port_); }

void FakeKubeApi::accept_tokens(std::set<std::string> tokens) {
    std::lock_guard lk(m_);
    tokens_ = std::move(tokens);
}

void FakeKubeApi::write_token(const std::string& token) const {
    std::ofstream(token_file()) << token << "\n";
}

void FakeKubeApi::allow_exec(bool allowed) {
    std::lock_guard lk(m_);
    exec_allowed_ = allowed;
}

void FakeKubeApi::pod_quota(int pods) {
    std::lock_guard lk(m_);
    quota_ = pods;
}

void FakeKubeApi::throttle(std::string method, std::string prefix, int count, int retry_after) {
    std::lock_guard lk(m_);
    throttles_.push_back({std::move(method), std::move(prefix), count, retry_after});
}

void FakeKubeApi::exec_protocols(std::vector<std::string> protocols) {
    std::lock_guard lk(m_);
    exec_protocols_ = std::move(protocols);
}

void FakeKubeApi::drop_exec_streams(bool drop) {
    std::lock_guard lk(m_);
    drop_exec_ = drop;
}

void FakeKubeApi::kubelet_confirms(bool confirms) {
    std::lock_guard lk(m_);
    confirms_ = confirms;
}

std::vector<KubeRequest> FakeKubeApi::requests() const {
    std::lock_guard lk(m_);
    return log_;
}

int FakeKubeApi::count(const std::string& method, const std::string& prefix,
                       const std::string& token) const {
    std::lock_guard lk(m_);
    int n = 0;
    for (const auto& r : log_)
        n += r.method == method && r.path.rfind(prefix, 0) == 0 &&
             (token.empty() || r.token == token);
    return n;
}

std::vector<json> FakeKubeApi::pods() const {
    std::lock_guard lk(m_);
    std::vector<json> out;
    for (const auto& [n, p] : pods_) out.push_back(p);
    return out;
}

std::size_t FakeKubeApi::configmaps() const {
    std::lock_guard lk(m_);
    return configmaps_.size();
}

FakeKubeApi::Reply FakeKubeApi::handle(const std::string& method, const std::string& target,
                                       const std::string& authorization, const std::string& body,
                                       const std::string& offered) {
    const auto q = target.find('?');
    KubeRequest r;
    r.method = method;
    r.path = target.substr(0, q);
    r.query = q == std::string::npos ? std::string() : target.substr(q + 1);
    if (authorization.rfind("Bearer ", 0) == 0) r.token = authorization.substr(7);
    Reply reply;
    {
        std::lock_guard lk(m_);
        if (!tokens_.count(r.token)) {
            // What kube-apiserver answers a request whose token its authenticators reject.
            reply = status(401, "Unauthorized", "Unauthorized");
        } else {
            for (auto& t : throttles_) {
                if (t.count <= 0 || t.method != method || r.path.rfind(t.prefix, 0) != 0) continue;
                --t.count;
                // The max-in-flight filter's answer (k8s.io/apiserver/pkg/server/filters).
                reply = status(429, "TooManyRequests", "Too many requests, please try again later.",
                               {{"retryAfterSeconds", t.retry_after}});
                reply.headers.emplace_back("Retry-After", std::to_string(t.retry_after));
                break;
            }
        }
    }
    if (reply.status == 200) {
        try {
            reply = route(method, r.path, query_of(r.query), body, r.query, offered);
        } catch (const std::exception& e) {
            reply =
                status(500, "InternalError", std::string("an error on the server: ") + e.what());
        }
    }
    std::lock_guard lk(m_);
    r.status = reply.status;
    log_.push_back(std::move(r));
    return reply;
}

FakeKubeApi::Reply FakeKubeApi::route(const std::string& method, const std::string& path,
                                      const std::map<std::string, std::string>& q,
                                      const std::string& body, const std::string& raw_query,
                                      const std::string& offered) {
    const auto s = split_path(path);
    if (s.size() == 3 && s[0] == "api" && s[1] == "v1" && s[2] == "nodes")
        return status(403, "Forbidden",
                      "nodes is forbidden: User \"sky-user\" cannot list resource \"nodes\" in "
                      "API group \"\" at the cluster scope",
                      {{"kind", "nodes"}});
    if (s.size() < 5 || s[0] != "api" || s[1] != "v1" || s[2] != "namespaces")
        return status(404, "NotFound", "the server could not find the requested resource",
                      {{"causes", json::array({{{"reason", "UnexpectedServerResponse"},
                                                {"message", "404 page not found"}}})}});
    if (s[3] != ns())
        return status(403, "Forbidden",
                      "pods is forbidden: User \"sky-user\" cannot " +
                          std::string(method == "GET" ? "list" : "create") +
                          " resource \"pods\" in API group \"\" in the namespace \"" + s[3] + "\"",
                      {{"kind", s[4]}});
    if (s[4] == "configmaps" && s.size() <= 6)
        return configmaps(method, s.size() == 6 ? s[5] : std::string(), body);
    if (s[4] == "pods" && s.size() == 5) return pods_collection(method, q, body);
    if (s[4] == "pods" && s.size() == 6) return one_pod(method, s[5], q, body);
    if (s[4] == "pods" && s.size() == 7 && (s[6] == "exec" || s[6] == "portforward")) {
        std::lock_guard lk(m_);
        if (!pods_.count(s[5])) return not_found("pods", s[5]);
        if (s[6] == "exec" && !exec_allowed_)
            // RBAC's refusal of a connect request (a GET upgrade: verb "get").
            return status(403, "Forbidden",
                          "pods \"" + s[5] +
                              "\" is forbidden: User \"sky-user\" cannot get resource "
                              "\"pods/exec\" in API group \"\" in the namespace \"" +
                              ns() + "\"",
                          {{"name", s[5]}, {"kind", "pods"}});
        if (s[6] == "portforward")
            return status(501, "NotImplemented", "the judge's pods listen on no port");
        // The subprotocol: the first of the server's that the client offered.
        std::vector<std::string> theirs;
        {
            std::stringstream in(offered);
            for (std::string p; std::getline(in, p, ',');) {
                while (!p.empty() && p.front() == ' ') p.erase(0, 1);
                while (!p.empty() && p.back() == ' ') p.pop_back();
                if (!p.empty()) theirs.push_back(p);
            }
        }
        Reply up;
        for (const auto& mine : exec_protocols_)
            if (up.protocol.empty() &&
                std::find(theirs.begin(), theirs.end(), mine) != theirs.end())
                up.protocol = mine;
        if (up.protocol.empty())
            return status(403, "Forbidden",
                          "unable to upgrade: none of the requested subprotocols (" + offered +
                              ") is supported");
        std::stringstream in(raw_query);
        for (std::string kv; std::getline(in, kv, '&');)
            if (kv.rfind("command=", 0) == 0) up.argv.push_back(percent_decoded(kv.substr(8)));
        if (up.argv.empty())
            return status(400, "BadRequest", "you must specify at least 1 command");
        up.status = 101;
        up.stdin_open = q.count("stdin") && (q.at("stdin") == "true" || q.at("stdin") == "1");
        up.drop = drop_exec_;
        return up;
    }

    return status(404, "NotFound", "the server could not find the requested resource");
}

void FakeKubeApi::event_locked(const std::string& type, const json& object) {
    events_.push_back({rv_, type, object});
}

FakeKubeApi::Reply FakeKubeApi::configmaps(const std::string& method, const std::string& name,
                                           const std::string& body) {
    std::lock_guard lk(m_);
    if (method == "POST" && name.empty()) {
        json cm = json::parse(body);
        const std::string n = cm["metadata"].value("name", "");
        if (n.empty())
            return status(422, "Invalid",
                          "ConfigMap \"\" is invalid: metadata.name: Required value",
                          {{"kind", "ConfigMap"}});
        if (configmaps_.count(n))
            return status(409, "AlreadyExists", "configmaps \"" + n + "\" already exists",
                          {{"name", n}, {"kind", "configmaps"}});
        cm["metadata"]["uid"] = "cm-uid-" + std::to_string(++uid_);
        cm["metadata"]["namespace"] = ns();
        cm["metadata"]["resourceVersion"] = std::to_string(++rv_);
        cm["metadata"]["creationTimestamp"] = rfc3339(std::time(nullptr));
        configmaps_[n] = cm;
        return ok(cm, 201);
    }
    if (name.empty())
        return status(405, "MethodNotAllowed", "the server does not allow this method");
    const auto it = configmaps_.find(name);
    if (it == configmaps_.end()) return not_found("configmaps", name);
    if (method == "GET") return ok(it->second);
    if (method == "DELETE") {
        const std::string uid = it->second["metadata"].value("uid", "");
        configmaps_.erase(it);
        // The garbage collector: the pods it owned are deleted with their own grace period.
        std::vector<std::string> owned;
        for (const auto& [n, p] : pods_)
            for (const auto& o : p["metadata"].value("ownerReferences", json::array()))
                if (o.value("uid", "") == uid) owned.push_back(n);
        for (const auto& n : owned) delete_pod_locked(n, std::nullopt);
        return ok({{"kind", "Status"},
                   {"apiVersion", "v1"},
                   {"metadata", json::object()},
                   {"status", "Success"},
                   {"details", {{"name", name}, {"kind", "configmaps"}, {"uid", uid}}}});
    }
    return status(405, "MethodNotAllowed", "the server does not allow this method");
}

void FakeKubeApi::delete_pod_locked(const std::string& name, std::optional<long> grace) {
    auto it = pods_.find(name);
    if (it == pods_.end()) return;
    json& p = it->second;
    const long g = grace.value_or(p["spec"].value("terminationGracePeriodSeconds", 30L));
    if (g == 0 || confirms_) {
        // Grace 0 removes the object at once; otherwise the kubelet ended the container (the
        // judge's pods run nothing) and confirmed.
        ++rv_;
        p["metadata"]["resourceVersion"] = std::to_string(rv_);
        event_locked("DELETED", p);
        pods_.erase(it);
        return;
    }
    if (p["metadata"].contains("deletionTimestamp")) {
        // A second deletion may only shorten the grace period.
        if (g >= p["metadata"].value("deletionGracePeriodSeconds", 0L)) return;
    }
    ++rv_;
    p["metadata"]["deletionTimestamp"] = rfc3339(std::time(nullptr) + g);
    p["metadata"]["deletionGracePeriodSeconds"] = g;
    p["metadata"]["resourceVersion"] = std::to_string(rv_);
    event_locked("MODIFIED", p);
}

FakeKubeApi::Reply FakeKubeApi::pods_collection(const std::string& method,
                                                const std::map<std::string, std::string>& q,
                                                const std::string& body) {
    const std::string selector = q.count("labelSelector") ? q.at("labelSelector") : "";
    std::unique_lock lk(m_);
    if (method == "POST") {
        json pod = json::parse(body);
        const std::string n = pod["metadata"].value("name", "");
        if (pods_.count(n))
            return status(409, "AlreadyExists", "pods \"" + n + "\" already exists",
                          {{"name", n}, {"kind", "pods"}});
        if (quota_ >= 0 && static_cast<int>(pods_.size()) >= quota_)
            // The ResourceQuota admission plugin's refusal.
            return status(403, "Forbidden",
                          "pods \"" + n +
                              "\" is forbidden: exceeded quota: sky-quota, "
                              "requested: pods=1, used: pods=" +
                              std::to_string(pods_.size()) +
                              ", limited: pods=" + std::to_string(quota_),
                          {{"name", n}, {"kind", "pods"}});
        ++rv_;
        const std::string now = rfc3339(std::time(nullptr));
        pod["metadata"]["uid"] = "pod-uid-" + std::to_string(++uid_);
        pod["metadata"]["namespace"] = ns();
        pod["metadata"]["resourceVersion"] = std::to_string(rv_);
        pod["metadata"]["creationTimestamp"] = now;
        pod["spec"]["nodeName"] = "judge-node";
        pod["status"] = {
            {"phase", "Running"},
            {"podIP", "10.77.0." + std::to_string(uid_ % 250 + 2)},
            {"hostIP", "10.77.255.1"},
            {"startTime", now},
            {"conditions", json::array({{{"type", "PodScheduled"}, {"status", "True"}},
                                        {{"type", "Ready"}, {"status", "True"}}})},
            {"containerStatuses", json::array({{{"name", "sky"},
                                                {"ready", true},
                                                {"restartCount", 0},
                                                {"state", {{"running", {{"startedAt", now}}}}}}})}};
        pods_[n] = pod;
        event_locked("ADDED", pod);
        return ok(pod, 201);
    }
    if (method == "DELETE") {
        std::optional<long> grace;
        if (q.count("gracePeriodSeconds")) grace = std::stol(q.at("gracePeriodSeconds"));
        std::vector<std::string> names;
        json items = json::array();
        for (const auto& [n, p] : pods_)
            if (selected(p, selector)) names.push_back(n), items.push_back(p);
        for (const auto& n : names) delete_pod_locked(n, grace);
        return ok({{"kind", "PodList"},
                   {"apiVersion", "v1"},
                   {"metadata", {{"resourceVersion", std::to_string(rv_)}}},
                   {"items", items}});
    }
    if (method != "GET")
        return status(405, "MethodNotAllowed", "the server does not allow this method");
    if (q.count("watch") && q.at("watch") != "0" && q.at("watch") != "false") {
        long from = 0;
        try {
            from = q.count("resourceVersion") ? std::stol(q.at("resourceVersion")) : rv_;
        } catch (...) {
            return status(400, "BadRequest", "invalid resourceVersion");
        }
        if (!events_.empty() && from < events_.front().rv - 1)
            // Beyond what the watch cache keeps.
            return ok(
                {{"type", "ERROR"},
                 {"object", json::parse(status(410, "Expired",
                                               "too old resource version: " + std::to_string(from))
                                            .body)}});
        std::string out;
        for (const auto& e : events_)
            if (e.rv > from && selected(e.object, selector))
                out += json{{"type", e.type}, {"object", e.object}}.dump() + "\n";
        Reply r{200, out, {}, {}};
        // A window with nothing in it ends at its timeout (at most a second here).
        if (out.empty()) {
            long t = 1;
            try {
                t = q.count("timeoutSeconds") ? std::stol(q.at("timeoutSeconds")) : 1;
            } catch (...) {
            }
            r.delay = std::chrono::milliseconds(std::min(1L, std::max(0L, t)) * 1000);
        }
        return r;
    }
    json items = json::array();
    for (const auto& [n, p] : pods_)
        if (selected(p, selector)) items.push_back(p);
    return ok({{"kind", "PodList"},
               {"apiVersion", "v1"},
               {"metadata", {{"resourceVersion", std::to_string(rv_)}}},
               {"items", items}});
}

FakeKubeApi::Reply FakeKubeApi::one_pod(const std::string& method, const std::string& name,
                                        const std::map<std::string, std::string>& q,
                                        const std::string& body) {
    std::lock_guard lk(m_);
    const auto it = pods_.find(name);
    if (it == pods_.end()) return not_found("pods", name);
    if (method == "GET") return ok(it->second);
    if (method == "DELETE") {
        std::optional<long> grace;
        if (q.count("gracePeriodSeconds")) grace = std::stol(q.at("gracePeriodSeconds"));
        if (!body.empty()) {
            const json o = json::parse(body);
            if (o.contains("gracePeriodSeconds") && o["gracePeriodSeconds"].is_number())
                grace = o["gracePeriodSeconds"].get<long>();
        }
        json before = it->second;
        delete_pod_locked(name, grace);
        const auto now = pods_.find(name);
        return ok(now == pods_.end() ? before : now->second);
    }
    return status(405, "MethodNotAllowed", "the server does not allow this method");
}

}  // namespace sky::test
