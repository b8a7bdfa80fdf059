#include "e2e/volumes/s3_server.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <regex>
#include <stdexcept>

#include "aws/ec2_protocol.hpp"
#include "aws/sigv4.hpp"
#include "http/http_client.hpp"
#include "util/digest.hpp"

namespace volumes_test {

namespace fs = std::filesystem;
using namespace sky::detail;

fs::path S3Server::program(std::string* why) {
    const fs::path p = fs::path(SKY_BINARY_DIR) / "npm/node_modules/.bin/s3rver";
    if (::access(p.c_str(), X_OK) != 0) {
        *why = "no s3rver at " + p.string() +
               " (scripts/test.sh installs it: npm install --prefix build/npm s3rver)";
        return {};
    }
    if (::access("/usr/bin/node", X_OK) != 0) {
        *why = "no node (Debian's nodejs) to run s3rver";
        return {};
    }
    return p;
}

S3Server::S3Server(const std::string& address, const std::vector<std::string>& buckets) {
    std::string why;
    const fs::path prog = program(&why);
    if (prog.empty()) throw std::runtime_error(why);
    char tmpl[] = "/tmp/sky-s3rver-XXXXXX";
    if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
    dir_ = tmpl;
    std::vector<std::string> args = {prog.string(), "-d", (dir_ / "data").string(), "-a", address,
                                     "-p",          "0"};
    for (const auto& b : buckets) {
        args.emplace_back("--configure-bucket");
        args.push_back(b);
    }
    fs::create_directories(dir_ / "data");
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    // Its log is a file (a pipe nobody reads would stall or break it), read for the port.
    const std::string log = (dir_ / "s3rver.log").string();
    pid_ = ::fork();
    if (pid_ == 0) {
        ::setpgid(0, 0);
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlives the test
        int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        ::dup2(fd, 1);
        ::dup2(fd, 2);
        int null = ::open("/dev/null", O_RDONLY);
        ::dup2(null, 0);
        ::execv(argv[0], argv.data());
        ::_exit(127);
    }
    // "S3rver listening on 10.1.2.1:41234", within 30 s.
    std::string seen;
    static const std::regex listening(R"(listening on (\S+):(\d+))");
    std::smatch m;
    for (int i = 0; i < 300 && pid_ > 0; ++i) {
        std::ifstream in(log);
        seen.assign(std::istreambuf_iterator<char>(in), {});
        if (std::regex_search(seen, m, listening)) {
            endpoint_ = "http://" + address + ":" + m[2].str();
            break;
        }
        int status = 0;
        if (::waitpid(pid_, &status, WNOHANG) == pid_) {
            pid_ = -1;
            break;
        }
        ::usleep(100000);
    }
    if (endpoint_.empty()) {
        stop();
        throw std::runtime_error("s3rver did not start listening: " + seen);
    }
}

S3Server::~S3Server() { stop(); }

void S3Server::stop() noexcept {
    if (pid_ > 0) {
        ::kill(-pid_, SIGTERM);
        int status = 0;
        for (int i = 0; i < 50 && ::waitpid(pid_, &status, WNOHANG) == 0; ++i) ::usleep(100000);
        ::kill(-pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        pid_ = -1;
    }
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
    dir_.clear();
}

namespace {

HttpResponse s3_request(const std::string& endpoint, const std::string& method,
                        const std::string& bucket, const std::string& key,
                        const std::string& body) {
    HttpRequest r;
    r.method = method;
    r.url = endpoint + "/" + bucket + "/" + key;
    r.body = body;
    aws::SignableRequest signable{
        method,
        "/" + bucket + "/" + key,
        {{"Host", aws::host_header_for_url(r.url)}, {"x-amz-content-sha256", sha256_hex(body)}},
        body};
    aws::sign_request(
        signable, {S3Server::access_key_id, S3Server::secret_access_key, ""},
        aws::SigningParams{.region = "us-east-1", .service = "s3", .normalize_path = false});
    for (const auto& [name, value] : signable.headers)
        if (name != "Host") r.set_header(name, value);
    HttpOptions o;
    o.throw_on_http_error = false;
    o.retry.max_attempts = 1;
    return http_send(r, o);
}

}  // namespace

void S3Server::put(const std::string& bucket, const std::string& key,
                   const std::string& body) const {
    auto r = s3_request(endpoint_, "PUT", bucket, key, body);
    if (r.status != 200)
        throw std::runtime_error("PUT " + bucket + "/" + key + ": " + std::to_string(r.status) +
                                 " " + r.body);
}

std::optional<std::string> S3Server::get(const std::string& bucket, const std::string& key) const {
    auto r = s3_request(endpoint_, "GET", bucket, key, "");
    if (r.status == 404) return std::nullopt;
    if (r.status != 200)
        throw std::runtime_error("GET " + bucket + "/" + key + ": " + std::to_string(r.status) +
                                 " " + r.body);
    return r.body;
}

}  // namespace volumes_test
