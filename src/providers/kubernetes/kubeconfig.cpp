#include "providers/kubernetes/kubeconfig.hpp"

#include <yaml-cpp/yaml.h>

#include <cctype>
#include <ctime>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "http/endpoint.hpp"
#include "sky/errors.hpp"
#include "util/encoding.hpp"
#include "util/env.hpp"
#include "util/file.hpp"
#include "util/subprocess.hpp"
#include "util/text.hpp"

namespace sky::detail::kubernetes {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::system_clock;

constexpr std::size_t kMaxFile = 16u << 20;  // a kubeconfig, CA or token file
constexpr const char* kV1 = "client.authentication.k8s.io/v1";
constexpr const char* kV1beta1 = "client.authentication.k8s.io/v1beta1";

[[noreturn]] void fail(const std::string& what) { throw ConfigError("sky::Kubernetes: " + what); }

// One named entry of a kubeconfig (a cluster, user or context) with the file that defined it,
// for its relative paths and for messages.
struct Entry {
    YAML::Node body;
    fs::path file;
};

struct Merged {
    std::map<std::string, Entry> clusters, users, contexts;
    std::string current_context;
    std::vector<std::string> files;
};

std::string where(const Entry& e, const std::string& kind, const std::string& name) {
    return e.file.string() + ": " + kind + " \"" + name + "\"";
}

// A scalar field of `node`, "" when absent; a non-scalar is refused naming `what`.
std::string scalar(const YAML::Node& node, const char* key, const std::string& what) {
    const YAML::Node v = node[key];
    if (!v || v.IsNull()) return {};
    if (!v.IsScalar()) fail(what + ": field `" + key + "` must be a string");
    return v.Scalar();
}

bool boolean(const YAML::Node& node, const char* key, const std::string& what) {
    const std::string v = to_lower(scalar(node, key, what));
    if (v.empty() || v == "false") return false;
    if (v == "true") return true;
    fail(what + ": field `" + key + "` must be true or false");
}

void merge_list(const YAML::Node& root, const char* list, const char* body_key,
                const fs::path& file, std::map<std::string, Entry>& into) {
    const YAML::Node items = root[list];
    if (!items || items.IsNull()) return;
    if (!items.IsSequence()) fail(file.string() + ": `" + list + "` must be a list");
    for (const auto& item : items) {
        if (!item.IsMap()) fail(file.string() + ": every entry of `" + list + "` must be a map");
        const std::string name = scalar(item, "name", file.string() + ": an entry of " + list);
        if (name.empty()) fail(file.string() + ": an entry of `" + list + "` has no name");
        YAML::Node body = item[body_key];
        if (body && !body.IsNull() && !body.IsMap())
            fail(file.string() + ": `" + list + "` entry \"" + name + "\": `" + body_key +
                 "` must be a map");
        // client-go merges files in order and the first one that defines a name keeps it.
        into.emplace(name, Entry{body ? body : YAML::Node(YAML::NodeType::Map), file});
    }
}

void merge_file(const fs::path& file, Merged& m) {
    const auto text = read_file(file, kMaxFile);
    if (!text) fail("cannot read the kubeconfig " + file.string());
    YAML::Node root;
    try {
        root = YAML::Load(*text);
    } catch (const YAML::Exception& e) {
        // The parser's own words and position; never the text itself (it holds credentials).
        fail("the kubeconfig " + file.string() + " is not valid YAML (line " +
             std::to_string(e.mark.line + 1) + ", column " + std::to_string(e.mark.column + 1) +
             ": " + e.msg + ")");
    }
    m.files.push_back(file.string());
    if (!root || root.IsNull()) return;  // an empty file adds nothing, as in client-go
    if (!root.IsMap()) fail("the kubeconfig " + file.string() + " is not a YAML map");
    merge_list(root, "clusters", "cluster", file, m.clusters);
    merge_list(root, "users", "user", file, m.users);
    merge_list(root, "contexts", "context", file, m.contexts);
    if (m.current_context.empty())
        m.current_context = scalar(root, "current-context", file.string());
}

// A path field resolved against the folder of the file that set it (client-go's rule).
fs::path resolve(const Entry& e, const std::string& path) {
    const fs::path p(path);
    if (p.is_absolute()) return p;
    if (!path.empty() && path[0] == '~')
        return fs::path(home_path(path.size() > 2 ? path.substr(2) : ""));
    return e.file.parent_path() / p;
}

// `<key>-data` (base64) or `<key>` (a file), as client-go reads certificates, keys and CAs: the
// data wins when both are set.
std::string file_or_data(const Entry& e, const char* key, const std::string& what) {
    const std::string data_key = std::string(key) + "-data";
    const std::string data = scalar(e.body, data_key.c_str(), what);
    if (!data.empty()) {
        try {
            return base64_decode(data);
        } catch (const Error&) {
            fail(what + ": `" + data_key + "` is not base64");
        }
    }
    const std::string path = scalar(e.body, key, what);
    if (path.empty()) return {};
    const fs::path p = resolve(e, path);
    auto bytes = read_file(p, kMaxFile);
    if (!bytes) fail(what + ": cannot read its `" + key + "` file " + p.string());
    return std::move(*bytes);
}

void parse_server(const std::string& server, const std::string& what, ClusterEndpoint& out) {
    out.server = server;
    if (server.empty()) fail(what + " has no `server`");
    const std::string scheme = "https://";
    if (server.compare(0, scheme.size(), scheme) != 0)
        fail(what + ": server " + server +
             " is not https:// (sky speaks to API servers over TLS only)");
    std::string rest = server.substr(scheme.size());
    const auto slash = rest.find('/');
    std::string authority = rest.substr(0, slash);
    out.base_path = slash == std::string::npos ? "" : rest.substr(slash);
    while (!out.base_path.empty() && out.base_path.back() == '/') out.base_path.pop_back();
    if (authority.find('@') != std::string::npos)
        fail(what + ": server URL must not carry user information");
    if (!authority.empty() && authority[0] == '[') {
        const auto close = authority.find(']');
        if (close == std::string::npos) fail(what + ": server " + server + " has an unclosed [");
        out.host = authority.substr(1, close - 1);
        const std::string tail = authority.substr(close + 1);
        if (!tail.empty() && tail[0] != ':') fail(what + ": server " + server + " is malformed");
        out.port = tail.empty() ? "" : tail.substr(1);
    } else {
        const auto colon = authority.rfind(':');
        out.host = authority.substr(0, colon);
        out.port = colon == std::string::npos ? "" : authority.substr(colon + 1);
    }
    if (out.port.empty()) out.port = "443";
    if (out.host.empty()) fail(what + ": server " + server + " has no host");
    for (char c : out.port)
        if (!std::isdigit(static_cast<unsigned char>(c)))
            fail(what + ": server " + server + " has a bad port");
    if (std::stoul(out.port) == 0 || std::stoul(out.port) > 65535)
        fail(what + ": server " + server + " has a bad port");
}

// The exec plugins that replaced each removed auth-provider (client-go 1.26).
std::string auth_provider_hint(const std::string& name) {
    if (name == "gcp") return "gke-gcloud-auth-plugin";
    if (name == "azure") return "kubelogin (github.com/Azure/kubelogin)";
    if (name == "oidc")
        return "an OIDC exec plugin such as kubelogin (github.com/int128/kubelogin)";
    return "the provider's exec credential plugin";
}

void read_user(const Entry& e, const std::string& name, KubeTarget& t) {
    const std::string what = where(e, "user", name);
    if (const YAML::Node ap = e.body["auth-provider"]; ap && !ap.IsNull()) {
        const std::string provider = ap.IsMap() ? scalar(ap, "name", what) : "";
        fail(what + " uses auth-provider \"" + provider +
             "\", which client-go removed in 1.26; use an exec credential plugin instead (" +
             auth_provider_hint(provider) + ")");
    }
    if (!scalar(e.body, "username", what).empty() || !scalar(e.body, "password", what).empty())
        fail(what +
             " uses basic authentication (username/password), which API servers no "
             "longer accept; use a client certificate, a token or an exec plugin");
    t.client_cert_pem = file_or_data(e, "client-certificate", what);
    t.client_key_pem = file_or_data(e, "client-key", what);
    if (t.client_cert_pem.empty() != t.client_key_pem.empty())
        fail(what + " has a client certificate without its key, or a key without its certificate");
    t.token = scalar(e.body, "token", what);
    // client-go: the file's last read value wins over `token`.
    if (const std::string tf = scalar(e.body, "tokenFile", what); !tf.empty())
        t.token_file = resolve(e, tf);
    const YAML::Node ex = e.body["exec"];
    if (!ex || ex.IsNull()) return;
    if (!ex.IsMap()) fail(what + ": `exec` must be a map");
    const std::string ewhat = what + ": exec plugin";
    ExecPlugin p;
    p.api_version = scalar(ex, "apiVersion", ewhat);
    if (p.api_version != kV1 && p.api_version != kV1beta1)
        fail(ewhat + " has apiVersion \"" + p.api_version + "\"; sky speaks " + kV1 + " and " +
             kV1beta1);
    p.command = scalar(ex, "command", ewhat);
    if (p.command.empty()) fail(ewhat + " has no `command`");
    if (p.command.find('/') != std::string::npos) p.command = resolve(e, p.command).string();
    if (const YAML::Node args = ex["args"]; args && !args.IsNull()) {
        if (!args.IsSequence()) fail(ewhat + ": `args` must be a list");
        for (const auto& a : args) {
            if (!a.IsScalar()) fail(ewhat + ": every `args` entry must be a string");
            p.args.push_back(a.Scalar());
        }
    }
    if (const YAML::Node env = ex["env"]; env && !env.IsNull()) {
        if (!env.IsSequence()) fail(ewhat + ": `env` must be a list of {name, value}");
        for (const auto& v : env) {
            if (!v.IsMap()) fail(ewhat + ": every `env` entry must be a map {name, value}");
            const std::string n = scalar(v, "name", ewhat + " env");
            if (n.empty() || n.find('=') != std::string::npos)
                fail(ewhat + ": an `env` entry has a bad name");
            p.env.emplace_back(n, scalar(v, "value", ewhat + " env " + n));
        }
    }
    // client-go: v1 must say interactiveMode; v1beta1 defaults to IfAvailable. sky has no
    // terminal to give a plugin, so one that always needs it is refused and the others run
    // non-interactively.
    std::string mode = scalar(ex, "interactiveMode", ewhat);
    if (mode.empty() && p.api_version == kV1)
        fail(ewhat + " (" + kV1 + ") must set interactiveMode (Never or IfAvailable)");
    if (mode.empty()) mode = "IfAvailable";
    if (mode == "Always")
        fail(ewhat + " \"" + p.command +
             "\" is interactive (interactiveMode: Always); sky runs "
             "plugins without a terminal: log in beforehand or use a non-interactive mode");
    if (mode != "Never" && mode != "IfAvailable")
        fail(ewhat + " has interactiveMode \"" + mode + "\" (Never, IfAvailable or Always)");
    p.provide_cluster_info = boolean(ex, "provideClusterInfo", ewhat);
    t.exec = std::move(p);
}

void read_cluster(const Entry& e, const std::string& name, KubeTarget& t) {
    const std::string what = where(e, "cluster", name);
    parse_server(scalar(e.body, "server", what), what, t.cluster);
    t.cluster.ca_pem = file_or_data(e, "certificate-authority", what);
    t.cluster.tls_server_name = scalar(e.body, "tls-server-name", what);
    t.cluster.insecure_skip_tls_verify = boolean(e.body, "insecure-skip-tls-verify", what);
    if (t.cluster.insecure_skip_tls_verify) {
        if (!t.cluster.ca_pem.empty())
            fail(what + " sets both insecure-skip-tls-verify and a certificate authority");
        if (!is_loopback_host(t.cluster.host))
            fail(what + " sets insecure-skip-tls-verify for " + t.cluster.host +
                 ", which is not loopback: sky verifies every other API server's certificate "
                 "(set certificate-authority[-data])");
    }
    if (!scalar(e.body, "proxy-url", what).empty())
        fail(what + " sets proxy-url, which sky does not support");
}

KubeTarget in_cluster(const KubeconfigRequest& r) {
    const std::string host = env_or("KUBERNETES_SERVICE_HOST");
    const std::string port = env_or("KUBERNETES_SERVICE_PORT");
    const fs::path token = r.service_account_dir / "token";
    if (host.empty() || port.empty() || !fs::exists(token))
        fail(
            "no kubeconfig: KUBECONFIG is unset, ~/.kube/config does not exist, and this is not "
            "a pod with a service account (KUBERNETES_SERVICE_HOST, " +
            token.string() + "); set sky::Kubernetes::kubeconfig or KUBECONFIG");
    KubeTarget t;
    t.source = "in-cluster service account (" + r.service_account_dir.string() + ")";
    const std::string authority = host.find(':') != std::string::npos ? "[" + host + "]" : host;
    parse_server("https://" + authority + ":" + port, t.source, t.cluster);
    auto ca = read_file(r.service_account_dir / "ca.crt", kMaxFile);
    if (!ca) fail(t.source + ": cannot read ca.crt");
    t.cluster.ca_pem = std::move(*ca);
    t.token_file = token;
    t.user_name = "service account";
    t.ns = r.ns;
    if (t.ns.empty()) {
        if (auto ns = read_file(r.service_account_dir / "namespace", 4096))
            t.ns = std::string(trim(*ns));
    }
    if (t.ns.empty()) t.ns = "default";
    return t;
}

std::string join_paths(const std::vector<fs::path>& files) {
    std::vector<std::string> names;
    for (const auto& f : files) names.push_back(f.string());
    return join(names);
}

std::vector<fs::path> kubeconfig_files(const KubeconfigRequest& r) {
    if (!r.files.empty()) {
        std::vector<fs::path> files;
        for (const auto& f : r.files)
            if (fs::exists(f)) files.push_back(f);
        if (files.empty())
            fail("the kubeconfig " + join_paths(r.files) + (r.files.size() > 1 ? " do" : " does") +
                 " not exist");
        return files;
    }
    if (!r.kubeconfig.empty()) {
        if (!fs::exists(r.kubeconfig)) fail("the kubeconfig " + r.kubeconfig + " does not exist");
        return {fs::path(r.kubeconfig)};
    }
    std::vector<fs::path> files;
    if (const std::string list = env_or("KUBECONFIG"); !list.empty()) {
        std::set<std::string> seen;
        std::stringstream in(list);
        // Files of the list that do not exist are skipped, as client-go does.
        for (std::string item; std::getline(in, item, ':');)
            if (!item.empty() && seen.insert(item).second && fs::exists(item))
                files.emplace_back(item);
        if (files.empty()) fail("none of the files KUBECONFIG lists exists");
        return files;
    }
    const fs::path home = home_path(".kube/config");
    if (fs::exists(home)) files.push_back(home);
    return files;
}

std::string sorted_names(const std::map<std::string, Entry>& m) {
    std::vector<std::string> names;
    for (const auto& [n, e] : m) names.push_back("\"" + n + "\"");
    return names.empty() ? "none" : join(names);
}

}  // namespace

KubeTarget load_kubeconfig(const KubeconfigRequest& request) {
    const auto files = kubeconfig_files(request);
    if (files.empty()) return in_cluster(request);
    Merged m;
    for (const auto& f : files) merge_file(f, m);
    const std::string sources = join(m.files);
    const std::string context = request.context.empty() ? m.current_context : request.context;
    if (context.empty())
        fail("the kubeconfig " + sources +
             " sets no current-context; name one with "
             "sky::Kubernetes::context (known: " +
             sorted_names(m.contexts) + ")");
    const auto c = m.contexts.find(context);
    if (c == m.contexts.end())
        fail("no context \"" + context + "\" in the kubeconfig " + sources +
             " (known: " + sorted_names(m.contexts) + ")");
    const std::string cwhat = where(c->second, "context", context);
    KubeTarget t;
    t.source = sources;
    t.files = files;
    t.context = context;
    t.cluster_name = scalar(c->second.body, "cluster", cwhat);
    t.user_name = scalar(c->second.body, "user", cwhat);
    const auto cl = m.clusters.find(t.cluster_name);
    if (cl == m.clusters.end())
        fail(cwhat + " names cluster \"" + t.cluster_name + "\", which no file defines");
    read_cluster(cl->second, t.cluster_name, t);
    if (!t.user_name.empty()) {
        const auto u = m.users.find(t.user_name);
        if (u == m.users.end())
            fail(cwhat + " names user \"" + t.user_name + "\", which no file defines");
        read_user(u->second, t.user_name, t);
    }
    t.ns = request.ns;
    if (t.ns.empty()) t.ns = scalar(c->second.body, "namespace", cwhat);
    if (t.ns.empty()) t.ns = "default";
    return t;
}

std::optional<Clock::time_point> parse_rfc3339(const std::string& text) {
    // YYYY-MM-DDTHH:MM:SS[.frac](Z|+HH:MM|-HH:MM)
    std::tm tm{};
    int consumed = 0;
    if (std::sscanf(text.c_str(), "%4d-%2d-%2d%*1[Tt ]%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon,
                    &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &consumed) != 6 ||
        consumed != 19)
        return std::nullopt;
    std::size_t i = 19;
    double frac = 0;
    if (i < text.size() && text[i] == '.') {
        double scale = 0.1;
        ++i;
        if (i >= text.size() || !std::isdigit(static_cast<unsigned char>(text[i])))
            return std::nullopt;
        while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
            frac += (text[i] - '0') * scale;
            scale /= 10;
            ++i;
        }
    }
    long offset = 0;
    if (i < text.size() && (text[i] == 'Z' || text[i] == 'z')) {
        ++i;
    } else if (i + 6 == text.size() && (text[i] == '+' || text[i] == '-') && text[i + 3] == ':') {
        int hh = 0, mm = 0;
        if (std::sscanf(text.c_str() + i + 1, "%2d:%2d", &hh, &mm) != 2) return std::nullopt;
        offset = (text[i] == '-' ? -1 : 1) * (hh * 3600L + mm * 60L);
        i += 6;
    } else {
        return std::nullopt;
    }
    if (i != text.size() || tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 ||
        tm.tm_hour > 23 || tm.tm_min > 59 || tm.tm_sec > 60)
        return std::nullopt;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    const std::time_t t = ::timegm(&tm) - offset;
    // Beyond what the clock holds (2262 in nanoseconds): as good as never.
    if (t >= Clock::to_time_t(Clock::time_point::max()) - 1) return Clock::time_point::max();
    return Clock::from_time_t(t) +
           std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(frac));
}

CredentialSource::CredentialSource(KubeTarget target) : target_(std::move(target)) {}

Credential CredentialSource::run_plugin() {
    const ExecPlugin& p = *target_.exec;
    const std::string what =
        "the exec credential plugin \"" + p.command + "\" of user \"" + target_.user_name + "\"";
    nlohmann::json info = {{"apiVersion", p.api_version},
                           {"kind", "ExecCredential"},
                           {"spec", {{"interactive", false}}}};
    if (p.provide_cluster_info) {
        nlohmann::json cluster = {{"server", target_.cluster.server}};
        if (!target_.cluster.ca_pem.empty())
            cluster["certificate-authority-data"] = base64_encode(target_.cluster.ca_pem);
        if (!target_.cluster.tls_server_name.empty())
            cluster["tls-server-name"] = target_.cluster.tls_server_name;
        if (target_.cluster.insecure_skip_tls_verify) cluster["insecure-skip-tls-verify"] = true;
        info["spec"]["cluster"] = cluster;
    }
    SubprocessOptions o;
    for (const auto& [n, v] : p.env) o.env.push_back(n + "=" + v);
    o.env.push_back("KUBERNETES_EXEC_INFO=" + info.dump());
    o.timeout = std::chrono::seconds(60);
    o.output_cap = 1u << 20;
    std::vector<std::string> argv{p.command};
    argv.insert(argv.end(), p.args.begin(), p.args.end());
    const SubprocessResult r = run_subprocess(argv, o);
    // Never the plugin's output in a message: it is the credential, or may quote one.
    if (r.timed_out) fail(what + " did not answer within 60 s");
    if (r.status == -1) fail(what + " could not be started");
    if (r.status != 0) fail(what + " exited with status " + std::to_string(r.status));
    nlohmann::json out;
    try {
        out = nlohmann::json::parse(r.output);
    } catch (const nlohmann::json::exception&) {
        fail(what + " printed something that is not an ExecCredential (not JSON)");
    }
    if (!out.is_object() || out.value("kind", "") != "ExecCredential")
        fail(what + " printed something that is not an ExecCredential");
    if (out.value("apiVersion", "") != p.api_version)
        fail(what + " answered in apiVersion \"" + out.value("apiVersion", "") +
             "\", not the configured " + p.api_version);
    const auto status = out.find("status");
    if (status == out.end() || !status->is_object())
        fail(what + " printed an ExecCredential without status");
    auto field = [&](const char* k) {
        const auto it = status->find(k);
        if (it == status->end() || it->is_null()) return std::string();
        if (!it->is_string()) fail(what + ": status." + k + " is not a string");
        return it->get<std::string>();
    };
    Credential c;
    c.bearer_token = field("token");
    c.client_cert_pem = field("clientCertificateData");
    c.client_key_pem = field("clientKeyData");
    if (c.client_cert_pem.empty() != c.client_key_pem.empty())
        fail(what + " gave a client certificate without its key, or a key without its certificate");
    if (c.bearer_token.empty() && c.client_cert_pem.empty())
        fail(what + " gave neither a token nor a client certificate");
    if (const std::string exp = field("expirationTimestamp"); !exp.empty()) {
        const auto at = parse_rfc3339(exp);
        if (!at) fail(what + ": expirationTimestamp is not an RFC 3339 time");
        expires_ = *at;
    } else {
        expires_ = Clock::time_point::max();
    }
    return c;
}

Credential CredentialSource::current() {
    std::lock_guard lock(mutex_);
    const auto now = Clock::now();
    if (cached_ && now < expires_) return *cached_;
    Credential c;
    c.client_cert_pem = target_.client_cert_pem;
    c.client_key_pem = target_.client_key_pem;
    c.bearer_token = target_.token;
    if (!target_.token_file.empty()) {
        auto token = read_file(target_.token_file, 1u << 20);
        if (!token)
            fail("cannot read the token file " + target_.token_file.string() + " of user \"" +
                 target_.user_name + "\"");
        c.bearer_token = std::string(trim(*token));
        if (c.bearer_token.empty())
            fail("the token file " + target_.token_file.string() + " is empty");
        expires_ = now + std::chrono::minutes(1);  // client-go re-reads it every minute
    } else if (target_.exec) {
        // A plugin's certificate or token replaces the file's own (client-go: exec wins).
        const Credential plugin = run_plugin();
        if (!plugin.bearer_token.empty()) c.bearer_token = plugin.bearer_token;
        if (!plugin.client_cert_pem.empty()) {
            c.client_cert_pem = plugin.client_cert_pem;
            c.client_key_pem = plugin.client_key_pem;
        }
    } else {
        expires_ = Clock::time_point::max();
    }
    cached_ = c;
    return c;
}

void CredentialSource::unauthorized(const Credential& used) {
    std::lock_guard lock(mutex_);
    if (!cached_) return;
    if (cached_->bearer_token != used.bearer_token ||
        cached_->client_cert_pem != used.client_cert_pem)
        return;  // another caller already replaced it
    if (!target_.token_file.empty() || target_.exec) cached_.reset();
}

}  // namespace sky::detail::kubernetes
