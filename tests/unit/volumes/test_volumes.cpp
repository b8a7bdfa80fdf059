// Volumes without a node: the checks of PoolSpec::volumes, the s3fs arguments, and the scripts
// and credentials file the volume phase writes on a node (tests/e2e/volumes runs them there).
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "sky/sky.hpp"
#include "volumes/volumes.hpp"

using sky::S3Volume;
using namespace sky::detail;

namespace {

std::string problem_of(const std::vector<sky::Volume>& volumes) {
    std::vector<std::string> problems;
    check_volumes(volumes, problems);
    return problems.empty() ? std::string() : problems.front();
}

bool has(const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

TEST_CASE("volume checks name the volume and what is wrong with it", "[volumes]") {
    CHECK(problem_of({S3Volume{.mount_path = "/data", .bucket = "my-bucket"}}).empty());
    CHECK(problem_of({S3Volume{.mount_path = "data", .bucket = "my-bucket"}})
              .find("mount_path must be absolute") != std::string::npos);
    CHECK(problem_of({S3Volume{.mount_path = "/", .bucket = "my-bucket"}}).find("s3://my-bucket") !=
          std::string::npos);
    CHECK(problem_of({S3Volume{.mount_path = "/a/../etc", .bucket = "my-bucket"}}).find("\"..\"") !=
          std::string::npos);
    CHECK(problem_of({S3Volume{.mount_path = "/data", .bucket = ""}}).find("needs a bucket") !=
          std::string::npos);
    CHECK(problem_of({S3Volume{.mount_path = "/data", .bucket = "bad:bucket"}})
              .find("\"bad:bucket\" is not an S3 bucket name") != std::string::npos);
    CHECK(problem_of({S3Volume{.mount_path = "/data", .bucket = "b", .prefix = "a\nb"}})
              .find("control character") != std::string::npos);
    CHECK(problem_of({S3Volume{.mount_path = "/data", .bucket = "b", .region = "eu west"}})
              .find("region") != std::string::npos);
    // Two volumes in one place, or one inside the other.
    CHECK(problem_of({S3Volume{.mount_path = "/data", .bucket = "a"},
                      S3Volume{.mount_path = "/data/", .bucket = "b"}})
              .find("one inside the other") != std::string::npos);
    CHECK(problem_of({S3Volume{.mount_path = "/data", .bucket = "a"},
                      S3Volume{.mount_path = "/data/sub", .bucket = "b"}})
              .find("one inside the other") != std::string::npos);
    CHECK(problem_of({S3Volume{.mount_path = "/data", .bucket = "a"},
                      S3Volume{.mount_path = "/database", .bucket = "b"}})
              .empty());
}

TEST_CASE("a volume endpoint in clear text to another machine is refused unless allowed",
          "[volumes]") {
    ::unsetenv("SKY_ALLOW_INSECURE_ENDPOINT");
    const std::vector<sky::Volume> v = {
        S3Volume{.mount_path = "/data", .bucket = "b", .endpoint = "http://10.1.2.3:9000"}};
    const std::string p = problem_of(v);
    CHECK(p.find("s3://b") != std::string::npos);
    CHECK(p.find("SKY_ALLOW_INSECURE_ENDPOINT") != std::string::npos);
    CHECK(problem_of({S3Volume{.mount_path = "/data", .bucket = "b", .endpoint = "ftp://10.1.2.3"}})
              .find("s3://b") != std::string::npos);
    CHECK(problem_of(
              {S3Volume{
                  .mount_path = "/data", .bucket = "b", .endpoint = "https://minio.example:9000"}})
              .empty());
    ::setenv("SKY_ALLOW_INSECURE_ENDPOINT", "1", 1);
    CHECK(problem_of(v).empty());
    ::unsetenv("SKY_ALLOW_INSECURE_ENDPOINT");
}

TEST_CASE("Local and Simulated pools with volumes are refused naming the volume", "[volumes]") {
    const std::vector<sky::Volume> v = {
        S3Volume{.mount_path = "/data", .bucket = "my-bucket", .prefix = "datasets/"}};
    for (sky::Provider p : {sky::Provider(sky::Local{}), sky::Provider(sky::Simulated{})}) {
        try {
            sky::PoolSpec{.provider = p, .volumes = v}.validate();
            FAIL("validated");
        } catch (const sky::ConfigError& e) {
            const std::string what = e.what();
            INFO(what);
            CHECK(what.find("s3://my-bucket/datasets") != std::string::npos);
            CHECK(what.find("/data") != std::string::npos);
        }
    }
    CHECK_NOTHROW(
        sky::PoolSpec{.provider = sky::SSH{.hosts = {"10.0.0.1"}}, .volumes = v}.validate());
}

TEST_CASE(
    "s3fs arguments: the prefix as the bucket path and read-only and path-style for an endpoint",
    "[volumes]") {
    auto ro = s3fs_arguments(S3Volume{.mount_path = "/data",
                                      .bucket = "ds",
                                      .prefix = "/datasets/v1/",
                                      .read_only = true,
                                      .endpoint = "http://10.0.0.1:4568/",
                                      .region = "eu-west-1"});
    REQUIRE(ro.size() >= 2);
    CHECK(ro[0] == "ds:/datasets/v1");
    CHECK(ro[1] == "/data");
    CHECK(has(ro, "-f"));
    CHECK(has(ro, "ro"));
    CHECK(has(ro, "url=http://10.0.0.1:4568"));
    CHECK(has(ro, "use_path_request_style"));
    CHECK(has(ro, "endpoint=eu-west-1"));
    auto rw = s3fs_arguments(S3Volume{.mount_path = "/ckpt", .bucket = "ck", .read_only = false});
    CHECK(rw[0] == "ck");
    CHECK_FALSE(has(rw, "ro"));
    CHECK_FALSE(has(rw, "use_path_request_style"));
    for (const auto& a : rw) CHECK(a.rfind("url=", 0) != 0);  // AWS S3 itself
    auto regional =
        s3fs_arguments(S3Volume{.mount_path = "/x", .bucket = "b", .region = "us-west-2"});
    CHECK(has(regional, "url=https://s3.us-west-2.amazonaws.com"));
    CHECK(volume_name(S3Volume{.mount_path = "/x", .bucket = "b", .prefix = "p/q/"}) ==
          "s3://b/p/q");
}

TEST_CASE("no credential in the mount or unmount script or on s3fs's command line", "[volumes]") {
    const std::vector<sky::Volume> volumes = {
        S3Volume{.mount_path = "/data", .bucket = "ds", .prefix = "datasets", .read_only = true},
        S3Volume{.mount_path = "/ck",
                 .bucket = "ck",
                 .read_only = false,
                 .endpoint = "https://s3.example"}};
    const VolumeCredentials c{"AKIAEXAMPLEKEYID0001", "secret/with'quote+SECRETVALUE",
                              "SESSIONTOKENVALUE"};
    const auto plan = plan_volumes(volumes, "/root/.sky/run/p/0/volumes", c);
    for (const std::string* script : {&plan.mount_script, &plan.unmount_script}) {
        CHECK(script->find("AKIAEXAMPLEKEYID0001") == std::string::npos);
        CHECK(script->find("SECRETVALUE") == std::string::npos);
        CHECK(script->find("SESSIONTOKENVALUE") == std::string::npos);
    }
    for (const auto& v : volumes)
        for (const auto& a : s3fs_arguments(std::get<S3Volume>(v))) {
            CHECK(a.find("SECRETVALUE") == std::string::npos);
            CHECK(a.find("passwd") == std::string::npos);
        }
    // The keys are in the credentials file, as shell words that survive any character.
    CHECK(plan.credentials.find("export AWS_ACCESS_KEY_ID='AKIAEXAMPLEKEYID0001'") !=
          std::string::npos);
    CHECK(plan.credentials.find(
              R"(export AWS_SECRET_ACCESS_KEY='secret/with'\''quote+SECRETVALUE')") !=
          std::string::npos);
    CHECK(plan.credentials.find("export AWS_SESSION_TOKEN='SESSIONTOKENVALUE'") !=
          std::string::npos);
    CHECK(plan_volumes(volumes, "/d", {"A", "B", ""}).credentials.find("SESSION") ==
          std::string::npos);
    // The mount script reads that file only in the subshell that becomes s3fs, removes it once
    // every volume is mounted, and the unmount script removes it too.
    CHECK(plan.mount_script.find(". \"$dir/credentials\"") != std::string::npos);
    CHECK(plan.mount_script.find("exec setsid s3fs \"$@\"") != std::string::npos);
    CHECK(plan.mount_script.find("rm -f \"$dir/credentials\"\necho ::sky-volumes-mounted") !=
          std::string::npos);
    CHECK(plan.unmount_script.find("rm -f \"$dir/credentials\"") != std::string::npos);
    CHECK(plan.mount_script.find("'ds:/datasets' '/data' '-f'") != std::string::npos);
    // Unmounted in reverse order, each only when mount.sh started its s3fs.
    CHECK(plan.unmount_script.find("unmount_one 1 '/ck'\nunmount_one 0 '/data'") !=
          std::string::npos);
    CHECK(unmount_command("/r") ==
          "[ -f '/r/volumes/unmount.sh' ] && bash '/r/volumes/unmount.sh' > /dev/null 2>&1; ");
}

namespace {
// Sets (or with nullptr unsets) an environment variable for a scope, then puts it back.
class EnvVar {
public:
    EnvVar(const char* name, const char* value) : name_(name) {
        if (const char* v = std::getenv(name)) old_ = v;
        if (value)
            ::setenv(name, value, 1);
        else
            ::unsetenv(name);
    }
    ~EnvVar() {
        if (old_)
            ::setenv(name_, old_->c_str(), 1);
        else
            ::unsetenv(name_);
    }

private:
    const char* name_;
    std::optional<std::string> old_;
};
}  // namespace

TEST_CASE("volume credentials are the pool's AWS credentials: environment then shared file",
          "[volumes]") {
    char dir_tmpl[] = "/tmp/sky-volcreds-XXXXXX";
    REQUIRE(::mkdtemp(dir_tmpl));
    const std::string file = std::string(dir_tmpl) + "/credentials";
    {
        std::ofstream f(file);
        f << "[default]\naws_access_key_id = AKIADEFAULT\naws_secret_access_key = sdefault\n"
             "[team]\naws_access_key_id=AKIATEAM\naws_secret_access_key=steam\n"
             "aws_session_token=ttoken\n";
    }
    EnvVar id("AWS_ACCESS_KEY_ID", nullptr), secret("AWS_SECRET_ACCESS_KEY", nullptr),
        token("AWS_SESSION_TOKEN", nullptr), shared("AWS_SHARED_CREDENTIALS_FILE", file.c_str()),
        profile("AWS_PROFILE", nullptr);
    const sky::PoolSpec ssh{.provider = sky::SSH{.hosts = {"10.0.0.1"}}};
    auto c = volume_credentials(ssh);
    REQUIRE(c);
    CHECK(c->access_key_id == "AKIADEFAULT");
    CHECK(c->secret_access_key == "sdefault");
    CHECK(c->session_token.empty());
    {
        EnvVar team("AWS_PROFILE", "team");
        c = volume_credentials(ssh);
        REQUIRE(c);
        CHECK(c->access_key_id == "AKIATEAM");
        CHECK(c->session_token == "ttoken");
        // An AWS pool's own profile wins over AWS_PROFILE, as for its EC2 calls.
        c = volume_credentials(sky::PoolSpec{.provider = sky::AWS{.profile = "default"}});
        REQUIRE(c);
        CHECK(c->access_key_id == "AKIADEFAULT");
    }
    {
        EnvVar eid("AWS_ACCESS_KEY_ID", "AKIAENV"), esecret("AWS_SECRET_ACCESS_KEY", "senv"),
            etoken("AWS_SESSION_TOKEN", "tenv");
        c = volume_credentials(ssh);
        REQUIRE(c);
        CHECK(c->access_key_id == "AKIAENV");
        CHECK(c->session_token == "tenv");
    }
    std::filesystem::remove_all(dir_tmpl);
    CHECK_FALSE(volume_credentials(ssh).has_value());
}
