// Credential loading and the EC2 client's configuration checks (its calls are exercised against the
// fake EC2 in tests/fakes/ec2).
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>

#include "aws/ec2_client.hpp"
#include "http/endpoint.hpp"

using namespace sky::detail::aws;
namespace fs = std::filesystem;

namespace {

// Sets environment variables for one test and restores them after.
class ScopedEnv {
public:
    void set(const std::string& name, const std::string& value) {
        remember(name);
        ::setenv(name.c_str(), value.c_str(), 1);
    }
    void unset(const std::string& name) {
        remember(name);
        ::unsetenv(name.c_str());
    }
    ~ScopedEnv() {
        for (const auto& [name, value] : saved_) {
            if (value) {
                ::setenv(name.c_str(), value->c_str(), 1);
            } else {
                ::unsetenv(name.c_str());
            }
        }
    }

private:
    void remember(const std::string& name) {
        if (saved_.count(name)) return;
        const char* old = std::getenv(name.c_str());
        saved_[name] = old ? std::optional<std::string>(old) : std::nullopt;
    }
    std::map<std::string, std::optional<std::string>> saved_;
};

}  // namespace

TEST_CASE("aws credentials: environment first, then the shared file's profile", "[aws]") {
    ScopedEnv env;
    const fs::path file =
        fs::temp_directory_path() / ("sky-aws-creds-" + std::to_string(::getpid()));
    {
        std::ofstream out(file);
        out << "# comment\n[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = "
               "defaultsecret\n\n[work]\naws_access_key_id=AKIDWORK\naws_secret_access_key="
               "worksecret\n"
               "aws_session_token = worktoken\n";
    }
    env.set("AWS_SHARED_CREDENTIALS_FILE", file.string());
    env.unset("AWS_PROFILE");
    env.unset("AWS_SESSION_TOKEN");
    env.set("AWS_ACCESS_KEY_ID", "AKIDENV");
    env.set("AWS_SECRET_ACCESS_KEY", "envsecret");
    auto from_env = load_default_credentials();
    REQUIRE(from_env);
    CHECK(from_env->access_key_id == "AKIDENV");
    CHECK(from_env->secret_access_key == "envsecret");

    env.unset("AWS_ACCESS_KEY_ID");
    env.unset("AWS_SECRET_ACCESS_KEY");
    auto from_default = load_default_credentials();
    REQUIRE(from_default);
    CHECK(from_default->access_key_id == "AKIDDEFAULT");
    CHECK(from_default->session_token.empty());

    env.set("AWS_PROFILE", "work");
    auto from_profile = load_default_credentials();
    REQUIRE(from_profile);
    CHECK(from_profile->access_key_id == "AKIDWORK");
    CHECK(from_profile->secret_access_key == "worksecret");
    CHECK(from_profile->session_token == "worktoken");

    env.set("AWS_PROFILE", "absent");
    CHECK_FALSE(load_default_credentials());
    fs::remove(file);
}

TEST_CASE("aws client: refuses to start without credentials, default endpoint", "[aws]") {
    CHECK_THROWS_AS(Ec2Client(Ec2ClientConfig{}), sky::ConfigError);
    Ec2ClientConfig config;
    config.region = "eu-west-1";
    config.credentials = {"AKID", "secret", ""};
    CHECK(Ec2Client(config).endpoint() == "https://ec2.eu-west-1.amazonaws.com");
    config.endpoint = "http://127.0.0.1:9/";
    CHECK(Ec2Client(config).endpoint() == "http://127.0.0.1:9");
}

TEST_CASE("aws endpoint: plain http only to loopback unless SKY_ALLOW_INSECURE_ENDPOINT=1",
          "[aws]") {
    ScopedEnv env;
    env.unset("SKY_ALLOW_INSECURE_ENDPOINT");
    Ec2ClientConfig config;
    config.credentials = {"AKID", "secret", ""};
    auto accepted = [&](const std::string& url) {
        config.endpoint = url;
        config.endpoint_source = "AWS_ENDPOINT_URL_EC2";
        try {
            (void)Ec2Client(config);
            return std::string();
        } catch (const sky::ConfigError& e) {
            return std::string(e.what());
        }
    };
    for (const char* ok : {"https://ec2.example.com", "https://10.1.2.3:8443/",
                           "http://127.0.0.1:9", "http://127.45.6.7/", "http://[::1]:8080",
                           "http://localhost:4566", "http://LOCALHOST", "HTTP://127.0.0.1"}) {
        INFO(ok);
        CHECK(accepted(ok).empty());
    }
    for (const char* refused :
         {"http://10.1.2.3:8080", "http://ec2.example.com", "http://127.0.0.1.evil.example/",
          "http://[::2]:80", "http://user:pw@198.51.100.1/", "ftp://127.0.0.1/", "127.0.0.1:80"}) {
        INFO(refused);
        const std::string why = accepted(refused);
        CHECK_FALSE(why.empty());
        CHECK(why.find("AWS_ENDPOINT_URL_EC2") != std::string::npos);  // names the variable
        CHECK(why.find("pw@") == std::string::npos);                   // never a password
    }
    CHECK(accepted("http://10.1.2.3:8080").find("SKY_ALLOW_INSECURE_ENDPOINT") !=
          std::string::npos);
    env.set("SKY_ALLOW_INSECURE_ENDPOINT", "1");
    CHECK(accepted("http://10.1.2.3:8080").empty());
    CHECK_FALSE(accepted("ftp://10.1.2.3/").empty());  // still only http and https
}

TEST_CASE("aws endpoint: the override's source, and the notice about it", "[aws]") {
    ScopedEnv env;
    env.unset("AWS_ENDPOINT_URL_EC2");
    env.unset("AWS_ENDPOINT_URL");
    CHECK(choose_endpoint().url.empty());
    CHECK(choose_endpoint().source.empty());
    env.set("AWS_ENDPOINT_URL", "https://a.example");
    CHECK(choose_endpoint().source == "AWS_ENDPOINT_URL");
    env.set("AWS_ENDPOINT_URL_EC2", "https://b.example");
    CHECK(choose_endpoint().url == "https://b.example");
    CHECK(choose_endpoint().source == "AWS_ENDPOINT_URL_EC2");
    CHECK(choose_endpoint("https://c.example").source == "AWS{.endpoint}");
    CHECK(sky::detail::url_for_display("https://user:pw@host.example:1/x") ==
          "https://host.example:1/x");

    Ec2ClientConfig config;
    config.credentials = {"AKID", "secret", ""};
    CHECK_FALSE(Ec2Client(config).custom_endpoint());
    CHECK(Ec2Client(config).endpoint_notice().empty());
    config.endpoint = "https://b.example";
    config.endpoint_source = "AWS_ENDPOINT_URL_EC2";
    Ec2Client custom(config);
    CHECK(custom.custom_endpoint());
    CHECK(custom.endpoint_notice().find("https://b.example") != std::string::npos);
    CHECK(custom.endpoint_notice().find("AWS_ENDPOINT_URL_EC2") != std::string::npos);
    CHECK(custom.endpoint_notice().find("secret") == std::string::npos);
}
