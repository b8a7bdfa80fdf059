// Kubeconfigs as client-go reads them: files the test writes (and an exec plugin script it
// writes), resolved, merged and refused as api.md §5c says, never with a credential in a message.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "providers/kubernetes/kubeconfig.hpp"
#include "sky/errors.hpp"
#include "util/encoding.hpp"
#include "util/file.hpp"

namespace fs = std::filesystem;
using sky::detail::kubernetes::CredentialSource;
using sky::detail::kubernetes::KubeconfigRequest;
using sky::detail::kubernetes::load_kubeconfig;
using sky::detail::kubernetes::parse_rfc3339;

namespace {

constexpr const char* kSecret = "s3cr3t-t0ken-never-shown";

// A directory of its own, removed at the end; the environment variables the loader reads set
// (or unset) for the test and restored after.
class Scratch {
public:
    Scratch() {
        char tmpl[] = "/tmp/sky-kubeconfig-test-XXXXXX";
        dir_ = ::mkdtemp(tmpl);
        for (const char* v :
             {"KUBECONFIG", "HOME", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"}) {
            const char* old = std::getenv(v);
            saved_.emplace_back(v, old ? std::optional<std::string>(old) : std::nullopt);
            ::unsetenv(v);
        }
        fs::create_directories(dir_ / "home");
        ::setenv("HOME", (dir_ / "home").c_str(), 1);
    }
    ~Scratch() {
        for (const auto& [n, v] : saved_) {
            if (v)
                ::setenv(n.c_str(), v->c_str(), 1);
            else
                ::unsetenv(n.c_str());
        }
        std::error_code ec;
        fs::remove_all(dir_, ec);
    }
    fs::path write(const std::string& name, const std::string& text, int mode = 0600) const {
        const fs::path p = dir_ / name;
        fs::create_directories(p.parent_path());
        std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
        ::chmod(p.c_str(), static_cast<mode_t>(mode));
        return p;
    }
    [[nodiscard]] const fs::path& dir() const { return dir_; }

private:
    fs::path dir_;
    std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

std::string config(const std::string& user_body,
                   const std::string& cluster_body = "    server: https://127.0.0.1:6443\n",
                   const std::string& extra = "") {
    return "apiVersion: v1\nkind: Config\ncurrent-context: main\n"
           "clusters:\n- name: c\n  cluster:\n" +
           cluster_body + "users:\n- name: u\n  user:\n" + user_body +
           "contexts:\n- name: main\n  context: {cluster: c, user: u, namespace: team}\n" + extra;
}

std::string config_error(const KubeconfigRequest& r) {
    try {
        (void)load_kubeconfig(r);
    } catch (const sky::ConfigError& e) {
        return e.what();
    }
    return "(no error)";
}

KubeconfigRequest at(const fs::path& p) {
    KubeconfigRequest r;
    r.kubeconfig = p.string();
    return r;
}

// An exec plugin: counts its runs in `count`, keeps KUBERNETES_EXEC_INFO in `info`, prints an
// ExecCredential with token "tok-<run>" that expires at `expiry` (none when empty).
fs::path plugin(const Scratch& s, const std::string& api_version, const std::string& expiry,
                const std::string& body = "") {
    const std::string status =
        body.empty()
            ? R"("token": "tok-$n")" +
                  (expiry.empty() ? std::string() : R"(, "expirationTimestamp": ")" + expiry + "\"")
            : body;
    return s.write("plugin.sh",
                   "#!/bin/sh\n"
                   "n=$(( $(cat \"$0.count\" 2>/dev/null || echo 0) + 1 ))\n"
                   "echo \"$n\" > \"$0.count\"\n"
                   "printf '%s' \"$KUBERNETES_EXEC_INFO\" > \"$0.info\"\n"
                   "echo \"$PLUGIN_ENV\" > \"$0.env\"\n"
                   "cat <<EOF\n{\"apiVersion\": \"" +
                       api_version + "\", \"kind\": \"ExecCredential\", \"status\": {" + status +
                       "}}\nEOF\n",
                   0700);
}

std::string exec_user(const std::string& api_version, const std::string& extra = "") {
    return "    exec:\n      apiVersion: " + api_version +
           "\n      command: ./plugin.sh\n      args: [get-token]\n"
           "      env: [{name: PLUGIN_ENV, value: from-kubeconfig}]\n" +
           extra;
}

}  // namespace

TEST_CASE(
    "kubeconfig: one file: the cluster, CA file, client certificate files (relative to "
    "the file), namespace of the context",
    "[kubernetes][kubeconfig]") {
    Scratch s;
    s.write("pki/ca.crt", "CA PEM");
    s.write("pki/u.crt", "CERT PEM");
    s.write("pki/u.key", "KEY PEM");
    const auto p = s.write("kc/config", config("    client-certificate: ../pki/u.crt\n"
                                               "    client-key: ../pki/u.key\n",
                                               "    server: https://[::1]:6443/prefix/\n"
                                               "    certificate-authority: ../pki/ca.crt\n"
                                               "    tls-server-name: api.internal\n"));
    const auto t = load_kubeconfig(at(p));
    CHECK(t.context == "main");
    CHECK(t.ns == "team");
    CHECK(t.cluster.host == "::1");
    CHECK(t.cluster.port == "6443");
    CHECK(t.cluster.base_path == "/prefix");
    CHECK(t.cluster.tls_server_name == "api.internal");
    CHECK(t.cluster.ca_pem == "CA PEM");
    CHECK(t.client_cert_pem == "CERT PEM");
    CHECK(t.client_key_pem == "KEY PEM");
    KubeconfigRequest r = at(p);
    r.ns = "other";
    CHECK(load_kubeconfig(r).ns == "other");
    CredentialSource creds(t);
    const auto c = creds.current();
    CHECK(c.client_cert_pem == "CERT PEM");
    CHECK(c.bearer_token.empty());
}

TEST_CASE(
    "kubeconfig: -data fields are base64 and win over files, bad base64 is refused naming "
    "the field",
    "[kubernetes][kubeconfig]") {
    Scratch s;
    const auto p = s.write(
        "config", config("    client-certificate-data: " + sky::detail::base64_encode("CERT") +
                             "\n    client-key-data: " + sky::detail::base64_encode("KEY") +
                             "\n    client-key: /nonexistent\n",
                         "    server: https://k.example:443\n    certificate-authority-data: " +
                             sky::detail::base64_encode("CA") + "\n"));
    const auto t = load_kubeconfig(at(p));
    CHECK(t.cluster.ca_pem == "CA");
    CHECK(t.client_cert_pem == "CERT");
    CHECK(t.client_key_pem == "KEY");
    const auto bad = s.write("bad", config("    client-certificate-data: '%%%%not-base64'\n"
                                           "    client-key-data: a2V5\n"));
    const std::string e = config_error(at(bad));
    CHECK_THAT(e, Catch::Contains("client-certificate-data") && Catch::Contains("not base64") &&
                      Catch::Contains("user \"u\""));
    CHECK_THAT(e, !Catch::Contains("%%%%"));
}

TEST_CASE(
    "kubeconfig: a KUBECONFIG list merges in order, the first file that sets a value "
    "wins, files that do not exist are skipped",
    "[kubernetes][kubeconfig]") {
    Scratch s;
    const auto a = s.write("a",
                           "current-context: from-a\n"
                           "users:\n- name: u\n  user: {token: first}\n"
                           "contexts:\n- name: from-a\n  context: {cluster: c, user: u}\n");
    const auto b = s.write("b",
                           "current-context: from-b\n"
                           "clusters:\n- name: c\n  cluster: {server: 'https://10.1.2.3'}\n"
                           "users:\n- name: u\n  user: {token: second}\n"
                           "contexts:\n- name: from-b\n  context: {cluster: c, user: u, "
                           "namespace: b-ns}\n");
    ::setenv("KUBECONFIG",
             (a.string() + "::" + (s.dir() / "missing").string() + ":" + b.string()).c_str(), 1);
    auto t = load_kubeconfig({});
    CHECK(t.context == "from-a");
    CHECK(t.token == "first");
    CHECK(t.cluster.host == "10.1.2.3");
    CHECK(t.cluster.port == "443");
    CHECK(t.ns == "default");
    KubeconfigRequest r;
    r.context = "from-b";
    t = load_kubeconfig(r);
    CHECK(t.ns == "b-ns");
    CHECK(t.token == "first");  // the user "u" of the first file
    CHECK(t.source == a.string() + ", " + b.string());
    // Without KUBECONFIG: ~/.kube/config.
    ::unsetenv("KUBECONFIG");
    s.write("home/.kube/config", config("    token: t\n"));
    CHECK(load_kubeconfig({}).context == "main");
}

TEST_CASE(
    "kubeconfig: an unknown context is refused naming the known ones, so are contexts "
    "naming unknown clusters or users, and malformed YAML (without its text)",
    "[kubernetes][kubeconfig]") {
    Scratch s;
    const auto p =
        s.write("config", config(std::string("    token: ") + kSecret + "\n",
                                 "    server: https://127.0.0.1:1\n",
                                 "- name: dangling\n  context: {cluster: nope, user: u}\n"
                                 "- name: lost-user\n  context: {cluster: c, user: nobody}\n"));
    KubeconfigRequest r = at(p);
    r.context = "prod";
    std::string e = config_error(r);
    CHECK_THAT(e, Catch::Contains("no context \"prod\"") && Catch::Contains("\"main\"") &&
                      Catch::Contains("\"dangling\""));
    r.context = "dangling";
    CHECK_THAT(config_error(r), Catch::Contains("cluster \"nope\""));
    r.context = "lost-user";
    CHECK_THAT(config_error(r), Catch::Contains("user \"nobody\""));
    const auto bad =
        s.write("bad", std::string("users:\n- name: u\n  user: {token: ") + kSecret + "\n  : [\n");
    e = config_error(at(bad));
    CHECK_THAT(e, Catch::Contains("not valid YAML") && Catch::Contains("line"));
    CHECK_THAT(e, !Catch::Contains(kSecret));
    CHECK_THAT(config_error(at(s.dir() / "absent")), Catch::Contains("does not exist"));
}

TEST_CASE("kubeconfig: no kubeconfig anywhere and not in a pod is a ConfigError saying so",
          "[kubernetes][kubeconfig]") {
    Scratch s;
    KubeconfigRequest r;
    r.service_account_dir = s.dir() / "no-sa";
    CHECK_THAT(config_error(r), Catch::Contains("no kubeconfig") && Catch::Contains("KUBECONFIG"));
}

TEST_CASE(
    "kubeconfig: in a pod, the service account: server from KUBERNETES_SERVICE_HOST/PORT, "
    "its CA, namespace and token file (re-read after a 401)",
    "[kubernetes][kubeconfig]") {
    Scratch s;
    s.write("sa/token", "token-1\n");
    s.write("sa/ca.crt", "SA CA");
    s.write("sa/namespace", "pod-ns");
    ::setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
    ::setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    KubeconfigRequest r;
    r.service_account_dir = s.dir() / "sa";
    const auto t = load_kubeconfig(r);
    CHECK(t.cluster.server == "https://[fd00::1]:443");
    CHECK(t.cluster.host == "fd00::1");
    CHECK(t.cluster.ca_pem == "SA CA");
    CHECK(t.ns == "pod-ns");
    CredentialSource creds(t);
    auto c = creds.current();
    CHECK(c.bearer_token == "token-1");
    s.write("sa/token", "token-2\n");
    CHECK(creds.current().bearer_token == "token-1");  // cached (client-go: a minute)
    creds.unauthorized(c);
    CHECK(creds.current().bearer_token == "token-2");
}

TEST_CASE("kubeconfig: a tokenFile wins over token and is re-read after a 401, not before",
          "[kubernetes][kubeconfig]") {
    Scratch s;
    const auto tf = s.write("tok", "alpha\n");
    const auto p = s.write("config", config("    token: inline\n    tokenFile: tok\n"));
    CredentialSource creds(load_kubeconfig(at(p)));
    const auto first = creds.current();
    CHECK(first.bearer_token == "alpha");
    s.write("tok", "beta\n");
    CHECK(creds.current().bearer_token == "alpha");
    creds.unauthorized(first);
    const auto second = creds.current();
    CHECK(second.bearer_token == "beta");
    creds.unauthorized(first);  // a stale 401 (already replaced) reads nothing again
    s.write("tok", "gamma\n");
    CHECK(creds.current().bearer_token == "beta");
    fs::remove(tf);
    creds.unauthorized(second);
    try {
        (void)creds.current();
        FAIL("a missing token file must fail");
    } catch (const sky::ConfigError& e) {
        CHECK_THAT(std::string(e.what()),
                   Catch::Contains("token file") && !Catch::Contains("beta"));
    }
}

TEST_CASE("kubeconfig: insecure-skip-tls-verify only for a loopback server and never with a CA",
          "[kubernetes][kubeconfig]") {
    Scratch s;
    const std::string u = "    token: t\n";
    CHECK(load_kubeconfig(at(s.write("a", config(u,
                                                 "    server: https://127.0.0.1:6443\n"
                                                 "    insecure-skip-tls-verify: true\n"))))
              .cluster.insecure_skip_tls_verify);
    CHECK(load_kubeconfig(at(s.write("b", config(u,
                                                 "    server: https://localhost:6443\n"
                                                 "    insecure-skip-tls-verify: true\n"))))
              .cluster.insecure_skip_tls_verify);
    CHECK_THAT(config_error(at(s.write("c", config(u,
                                                   "    server: https://10.0.0.1:6443\n"
                                                   "    insecure-skip-tls-verify: true\n")))),
               Catch::Contains("insecure-skip-tls-verify") && Catch::Contains("10.0.0.1") &&
                   Catch::Contains("not loopback"));
    CHECK_THAT(config_error(at(s.write("d", config(u,
                                                   "    server: https://127.0.0.1:6443\n"
                                                   "    insecure-skip-tls-verify: true\n"
                                                   "    certificate-authority-data: Q0E=\n")))),
               Catch::Contains("both insecure-skip-tls-verify and a certificate authority"));
    CHECK_THAT(config_error(at(s.write("e", config(u, "    server: http://127.0.0.1:8080\n")))),
               Catch::Contains("not https://"));
    CHECK_THAT(config_error(at(s.write("f", config(u,
                                                   "    certificate-authority: nope.crt\n"
                                                   "    server: https://127.0.0.1:1\n")))),
               Catch::Contains("cannot read its `certificate-authority` file"));
}

TEST_CASE(
    "kubeconfig: removed auth-providers, basic auth, interactive plugins, a certificate "
    "without its key are refused, naming what to use instead",
    "[kubernetes][kubeconfig]") {
    Scratch s;
    std::string e = config_error(at(s.write(
        "a",
        config(std::string("    auth-provider:\n      name: gcp\n      config: {access-token: ") +
               kSecret + "}\n"))));
    CHECK_THAT(e, Catch::Contains("auth-provider \"gcp\"") && Catch::Contains("1.26") &&
                      Catch::Contains("gke-gcloud-auth-plugin"));
    CHECK_THAT(e, !Catch::Contains(kSecret));
    e = config_error(at(
        s.write("b", config(std::string("    username: admin\n    password: ") + kSecret + "\n"))));
    CHECK_THAT(e, Catch::Contains("basic authentication") && !Catch::Contains(kSecret));
    CHECK_THAT(config_error(at(s.write("c", config(exec_user("client.authentication.k8s.io/v1",
                                                             "      interactiveMode: Always\n"))))),
               Catch::Contains("interactive") && Catch::Contains("Always"));
    CHECK_THAT(config_error(at(s.write("d", config(exec_user("client.authentication.k8s.io/v1"))))),
               Catch::Contains("must set interactiveMode"));
    CHECK_THAT(
        config_error(at(s.write("e", config(exec_user("client.authentication.k8s.io/v1alpha1"))))),
        Catch::Contains("v1alpha1"));
    CHECK_THAT(config_error(at(s.write("f", config("    client-certificate-data: Q0VSVA==\n")))),
               Catch::Contains("without its key"));
}

TEST_CASE(
    "kubeconfig: a v1 exec plugin gets KUBERNETES_EXEC_INFO and its env, its token is "
    "cached until expirationTimestamp and asked again after a 401",
    "[kubernetes][kubeconfig]") {
    Scratch s;
    const auto script = plugin(s, "client.authentication.k8s.io/v1", "2999-01-01T00:00:00Z");
    const auto p = s.write("config", config(exec_user("client.authentication.k8s.io/v1",
                                                      "      interactiveMode: IfAvailable\n"
                                                      "      provideClusterInfo: true\n"),
                                            "    server: https://127.0.0.1:6443\n"
                                            "    certificate-authority-data: Q0E=\n"));
    const auto t = load_kubeconfig(at(p));
    REQUIRE(t.exec);
    CHECK(t.exec->command == (s.dir() / "./plugin.sh").string());
    CredentialSource creds(t);
    const auto first = creds.current();
    CHECK(first.bearer_token == "tok-1");
    CHECK(creds.current().bearer_token == "tok-1");
    CHECK(*sky::detail::read_file(script.string() + ".count") == "1\n");
    const std::string info = *sky::detail::read_file(script.string() + ".info");
    CHECK_THAT(info, Catch::Contains("\"apiVersion\":\"client.authentication.k8s.io/v1\"") &&
                         Catch::Contains("\"interactive\":false") &&
                         Catch::Contains("\"server\":\"https://127.0.0.1:6443\"") &&
                         Catch::Contains("\"certificate-authority-data\":\"Q0E=\""));
    CHECK(*sky::detail::read_file(script.string() + ".env") == "from-kubeconfig\n");
    creds.unauthorized(first);
    CHECK(creds.current().bearer_token == "tok-2");
}

TEST_CASE(
    "kubeconfig: an exec plugin's expired credential runs the plugin again, v1beta1 with "
    "a client certificate",
    "[kubernetes][kubeconfig]") {
    Scratch s;
    plugin(s, "client.authentication.k8s.io/v1beta1", "2000-01-01T00:00:00Z");
    const auto p = s.write("config", config(exec_user("client.authentication.k8s.io/v1beta1")));
    CredentialSource creds(load_kubeconfig(at(p)));
    CHECK(creds.current().bearer_token == "tok-1");
    CHECK(creds.current().bearer_token == "tok-2");
    Scratch s2;
    plugin(s2, "client.authentication.k8s.io/v1beta1", "",
           R"("clientCertificateData": "CERT", "clientKeyData": "KEY")");
    CredentialSource cert(load_kubeconfig(
        at(s2.write("config", config(exec_user("client.authentication.k8s.io/v1beta1"))))));
    const auto c = cert.current();
    CHECK(c.client_cert_pem == "CERT");
    CHECK(c.client_key_pem == "KEY");
    CHECK(c.bearer_token.empty());
}

TEST_CASE(
    "kubeconfig: a failing or wrong exec plugin is a ConfigError naming the plugin, never "
    "its output",
    "[kubernetes][kubeconfig]") {
    Scratch s;
    const auto p = s.write("config", config(exec_user("client.authentication.k8s.io/v1beta1")));
    auto error_of = [&] {
        try {
            CredentialSource(load_kubeconfig(at(p))).current();
        } catch (const sky::ConfigError& e) {
            return std::string(e.what());
        }
        return std::string("(no error)");
    };
    s.write("plugin.sh",
            std::string("#!/bin/sh\necho '") + kSecret + "'\necho '" + kSecret + "' >&2\nexit 7\n",
            0700);
    std::string e = error_of();
    CHECK_THAT(e, Catch::Contains("plugin.sh") && Catch::Contains("status 7"));
    CHECK_THAT(e, !Catch::Contains(kSecret));
    s.write("plugin.sh", std::string("#!/bin/sh\necho '") + kSecret + "'\n", 0700);
    e = error_of();
    CHECK_THAT(e, Catch::Contains("not an ExecCredential") && !Catch::Contains(kSecret));
    plugin(s, "client.authentication.k8s.io/v1", "");
    CHECK_THAT(error_of(), Catch::Contains("answered in apiVersion"));
    plugin(s, "client.authentication.k8s.io/v1beta1", "", R"("clientCertificateData": "CERT")");
    CHECK_THAT(error_of(), Catch::Contains("without its key"));
    plugin(s, "client.authentication.k8s.io/v1beta1", "tomorrow");
    CHECK_THAT(error_of(), Catch::Contains("expirationTimestamp"));
    fs::remove(s.dir() / "plugin.sh");
    CHECK_THAT(error_of(), Catch::Contains("plugin.sh"));
}

TEST_CASE("kubeconfig: RFC 3339 times", "[kubernetes][kubeconfig]") {
    using namespace std::chrono;
    const auto t = parse_rfc3339("2026-12-01T21:00:00Z");
    REQUIRE(t);
    CHECK(duration_cast<seconds>(t->time_since_epoch()).count() == 1796158800);
    CHECK(*parse_rfc3339("2026-12-01T23:00:00+02:00") == *t);
    CHECK(*parse_rfc3339("2026-12-01T20:00:00-01:00") == *t);
    CHECK(*parse_rfc3339("2026-12-01T21:00:00.250Z") - *t == milliseconds(250));
    CHECK_FALSE(parse_rfc3339("2026-12-01"));
    CHECK_FALSE(parse_rfc3339("2026-12-01T21:00:00"));
    CHECK_FALSE(parse_rfc3339("2026-13-01T21:00:00Z"));
    CHECK_FALSE(parse_rfc3339("2026-12-01T21:00:00Zjunk"));
}

TEST_CASE(
    "kubeconfig: the files a pool's ledger recorded are merged in order without the "
    "environment, missing ones skipped, none at all a ConfigError naming them",
    "[kubernetes][kubeconfig]") {
    Scratch s;
    const auto first = s.write("a/config", config("    token: from-a\n"));
    const auto second =
        s.write("b/config", "apiVersion: v1\nkind: Config\ncurrent-context: other\n");
    ::setenv("KUBECONFIG", (s.dir() / "nowhere").c_str(), 1);  // never read
    KubeconfigRequest r;
    r.files = {s.dir() / "gone", first, second};
    const auto t = load_kubeconfig(r);
    CHECK(t.context == "main");  // the first file that sets current-context wins
    CHECK(t.token == "from-a");
    CHECK(t.files == std::vector<fs::path>{first, second});
    r.files = {s.dir() / "gone", s.dir() / "also-gone"};
    CHECK_THAT(config_error(r),
               Catch::Contains((s.dir() / "gone").string()) && Catch::Contains("do not exist"));
}
