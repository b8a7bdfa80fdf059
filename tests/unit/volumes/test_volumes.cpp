// Volumes without a node: the checks of PoolSpec::volumes, the s3fs arguments, and the scripts
// and credentials file the volume phase writes on a node (tests/e2e/volumes runs them there).
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>

#include "fakes/ec2/fake_ec2.hpp"
#include "sky/sky.hpp"
#include "volumes/volumes.hpp"

using sky::S3Volume;
using namespace sky::detail;

namespace sky::test_env {
// Sets (or with nullptr unsets) an environment variable for a scope, then puts it back.
class Var {
public:
    Var(const char* name, const char* value) : name_(name) {
        if (const char* v = std::getenv(name)) old_ = v;
        if (value)
            ::setenv(name, value, 1);
        else
            ::unsetenv(name);
    }
    ~Var() {
        if (old_)
            ::setenv(name_, old_->c_str(), 1);
        else
            ::unsetenv(name_);
    }

private:
    const char* name_;
    std::optional<std::string> old_;
};
}  // namespace sky::test_env

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
    const VolumeCredentials own{"AKIAOWNKEY0000000002", "OWNSECRET", ""};
    const auto plan = plan_volumes(volumes, "/root/.sky/run/p/0/volumes", {c, own});
    for (const std::string* script : {&plan.mount_script, &plan.unmount_script}) {
        for (const char* secret : {"AKIAEXAMPLEKEYID0001", "SECRETVALUE", "SESSIONTOKENVALUE",
                                   "AKIAOWNKEY", "OWNSECRET"})
            CHECK(script->find(secret) == std::string::npos);
    }
    for (const auto& v : volumes)
        for (const auto& a : s3fs_arguments(std::get<S3Volume>(v))) {
            CHECK(a.find("SECRETVALUE") == std::string::npos);
            CHECK(a.find("passwd") == std::string::npos);
        }
    // One file per volume, with that volume's keys, as shell words that survive any character.
    REQUIRE(plan.credentials.size() == 2);
    CHECK(plan.credentials[0].find("export AWS_ACCESS_KEY_ID='AKIAEXAMPLEKEYID0001'") !=
          std::string::npos);
    CHECK(plan.credentials[0].find(
              R"(export AWS_SECRET_ACCESS_KEY='secret/with'\''quote+SECRETVALUE')") !=
          std::string::npos);
    CHECK(plan.credentials[0].find("export AWS_SESSION_TOKEN='SESSIONTOKENVALUE'") !=
          std::string::npos);
    CHECK(plan.credentials[1].find("AKIAOWNKEY0000000002") != std::string::npos);
    CHECK(plan.credentials[1].find("SESSION") == std::string::npos);
    CHECK(plan.credentials[1].find("AKIAEXAMPLE") == std::string::npos);
    // The mount script reads a volume's file only in the subshell that becomes its s3fs,
    // removes them once every volume is mounted, and the unmount script removes them too.
    CHECK(plan.mount_script.find(". \"$dir/credentials.$i\"") != std::string::npos);
    CHECK(plan.mount_script.find("exec setsid s3fs \"$src\" \"$real\" \"$@\"") !=
          std::string::npos);
    CHECK(plan.mount_script.find("rm -f \"$dir\"/credentials.*\necho \"$sky_mounted_mark\"") !=
          std::string::npos);
    CHECK(plan.mount_script.find("sky_mounted_mark='::sky-volumes-mounted'\n") !=
          std::string::npos);
    CHECK(plan.unmount_script.find("rm -f \"$dir\"/credentials.*") != std::string::npos);
    CHECK(plan.mount_script.find("sky_volume_0=('/data' 'ds:/datasets' '-f'") != std::string::npos);
    CHECK(plan.mount_script.find("mount_one \"$i\" \"${volume[@]}\"") != std::string::npos);
    // Unmounted in reverse order, each only when mount.sh started its s3fs.
    CHECK(plan.unmount_script.find("sky_volumes=2\n") != std::string::npos);
    CHECK(plan.unmount_script.find("for ((i = sky_volumes - 1; i >= 0; i--)); do unmount_one "
                                   "\"$i\"; done") != std::string::npos);
    CHECK(unmount_script_path("/r") == "/r/volumes/unmount.sh");
}

TEST_CASE("minted volume credentials may list, read and (unless read-only) write only the volumes",
          "[volumes][security]") {
    const S3Volume ro{.mount_path = "/data", .bucket = "ds", .prefix = "/sets/v1/"};
    const S3Volume rw{.mount_path = "/ck", .bucket = "ck", .read_only = false};
    const auto policy = nlohmann::json::parse(volume_policy({&ro, &rw}));
    CHECK(policy["Version"] == "2012-10-17");
    const auto& st = policy["Statement"];
    REQUIRE(st.size() == 4);
    std::set<std::string> actions;
    for (const auto& s : st) {
        CHECK(s["Effect"] == "Allow");
        for (const auto& a : s["Action"]) actions.insert(a.get<std::string>());
    }
    // Nothing but S3, and nothing of S3 beyond these.
    CHECK(actions == std::set<std::string>{"s3:ListBucket", "s3:GetBucketLocation", "s3:GetObject",
                                           "s3:PutObject", "s3:DeleteObject",
                                           "s3:AbortMultipartUpload",
                                           "s3:ListMultipartUploadParts"});
    CHECK(st[0]["Resource"] == "arn:aws:s3:::ds");
    CHECK(st[0]["Condition"]["StringLike"]["s3:prefix"].dump().find("sets/v1/*") !=
          std::string::npos);
    CHECK(st[1]["Resource"] == "arn:aws:s3:::ds/sets/v1/*");
    CHECK(st[1]["Action"] == nlohmann::json::array({"s3:GetObject"}));  // read-only
    CHECK(st[2]["Resource"] == "arn:aws:s3:::ck");
    CHECK_FALSE(st[2].contains("Condition"));
    CHECK(st[3]["Resource"] == "arn:aws:s3:::ck/*");
    CHECK(st[3]["Action"].size() == 5);
}

TEST_CASE("a volume with credentials of its own gets them, and never the pool's",
          "[volumes][security]") {
    sky::test_env::Var id("AWS_ACCESS_KEY_ID", "AKIAPOOLLAUNCHKEY000"),
        secret("AWS_SECRET_ACCESS_KEY", "poolsecret"), token("AWS_SESSION_TOKEN", nullptr);
    const sky::PoolSpec spec{.provider = sky::SSH{.hosts = {"10.0.0.1"}},
                             .volumes = {S3Volume{.mount_path = "/data",
                                                  .bucket = "ds",
                                                  .access_key_id = "AKIAVOLUMEONLY000001",
                                                  .secret_access_key = "volsecret",
                                                  .session_token = "voltoken"}}};
    const auto c = resolve_volume_credentials(spec, "0123abcd");
    REQUIRE(c.size() == 1);
    CHECK(c[0].access_key_id == "AKIAVOLUMEONLY000001");
    CHECK(c[0].secret_access_key == "volsecret");
    CHECK(c[0].session_token == "voltoken");
}

TEST_CASE("temporary pool credentials are never sent to nodes: a volume needs its own then",
          "[volumes][security]") {
    sky::test_env::Var id("AWS_ACCESS_KEY_ID", "ASIATEMPORARY0000001"),
        secret("AWS_SECRET_ACCESS_KEY", "tempsecret"), token("AWS_SESSION_TOKEN", "temptoken");
    const sky::PoolSpec spec{.provider = sky::SSH{.hosts = {"10.0.0.1"}},
                             .volumes = {S3Volume{.mount_path = "/data", .bucket = "ds"}}};
    try {
        (void)resolve_volume_credentials(spec, "0123abcd");
        FAIL("resolved");
    } catch (const VolumeFailure& e) {
        const std::string what = e.what();
        INFO(what);
        CHECK(what.find("s3://ds") != std::string::npos);
        CHECK(what.find("temporary") != std::string::npos);
        CHECK(what.find("S3Volume::access_key_id") != std::string::npos);
        CHECK(what.find("tempsecret") == std::string::npos);
        CHECK(what.find("temptoken") == std::string::npos);
    }
}

TEST_CASE("volume checks: an endpoint with a comma, half a key pair", "[volumes][security]") {
    // Review r4 I3: "-o url=<endpoint>" and FUSE splits options at commas.
    CHECK(problem_of({S3Volume{.mount_path = "/data",
                               .bucket = "b",
                               .endpoint = "https://s3.example,allow_other"}})
              .find("comma") != std::string::npos);
    CHECK(problem_of({S3Volume{.mount_path = "/data", .bucket = "b", .access_key_id = "AKIA"}})
              .find("both access_key_id and secret_access_key") != std::string::npos);
    CHECK(problem_of({S3Volume{.mount_path = "/data",
                               .bucket = "b",
                               .access_key_id = "AKIA",
                               .secret_access_key = "s"}})
              .empty());
}

TEST_CASE("minting credentials are the pool's AWS credentials: environment then shared file",
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
    sky::test_env::Var id("AWS_ACCESS_KEY_ID", nullptr), secret("AWS_SECRET_ACCESS_KEY", nullptr),
        token("AWS_SESSION_TOKEN", nullptr), shared("AWS_SHARED_CREDENTIALS_FILE", file.c_str()),
        profile("AWS_PROFILE", nullptr);
    const sky::PoolSpec ssh{.provider = sky::SSH{.hosts = {"10.0.0.1"}}};
    auto c = minting_credentials(ssh);
    REQUIRE(c);
    CHECK(c->access_key_id == "AKIADEFAULT");
    CHECK(c->secret_access_key == "sdefault");
    CHECK(c->session_token.empty());
    {
        sky::test_env::Var team("AWS_PROFILE", "team");
        c = minting_credentials(ssh);
        REQUIRE(c);
        CHECK(c->access_key_id == "AKIATEAM");
        CHECK(c->session_token == "ttoken");
        // An AWS pool's own profile wins over AWS_PROFILE, as for its EC2 calls.
        c = minting_credentials(sky::PoolSpec{.provider = sky::AWS{.profile = "default"}});
        REQUIRE(c);
        CHECK(c->access_key_id == "AKIADEFAULT");
    }
    {
        sky::test_env::Var eid("AWS_ACCESS_KEY_ID", "AKIAENV"),
            esecret("AWS_SECRET_ACCESS_KEY", "senv"), etoken("AWS_SESSION_TOKEN", "tenv");
        c = minting_credentials(ssh);
        REQUIRE(c);
        CHECK(c->access_key_id == "AKIAENV");
        CHECK(c->session_token == "tenv");
    }
    std::filesystem::remove_all(dir_tmpl);
    CHECK_FALSE(minting_credentials(ssh).has_value());
}

TEST_CASE("volumes without credentials of their own get STS credentials scoped to them",
          "[volumes][security]") {
    const std::string model = std::string(SKY_TESTDATA_DIR) + "/ec2-model/service-2.json";
    sky::test::FakeEc2Options o;
    o.access_key_id = "AKIDFAKEEC2EXAMPLE";
    o.secret_access_key = "fakeSecretKey/For+The+VolumeTest00000000";  // made up for the test
    o.model_path = model;
    o.sts_issued = {"ASIAMINTEDFORVOLUMES", "mintedsecret", "mintedtoken"};
    sky::test::FakeEc2 fake(o);
    sky::test_env::Var id("AWS_ACCESS_KEY_ID", o.access_key_id.c_str()),
        secret("AWS_SECRET_ACCESS_KEY", o.secret_access_key.c_str()),
        token("AWS_SESSION_TOKEN", nullptr), sts("AWS_ENDPOINT_URL_STS", fake.endpoint().c_str());
    const S3Volume minted{.mount_path = "/data", .bucket = "ds", .prefix = "sets"};
    const S3Volume own{.mount_path = "/own",
                       .bucket = "own",
                       .access_key_id = "AKIAVOLUMEONLY000001",
                       .secret_access_key = "volsecret"};
    const sky::PoolSpec spec{.provider = sky::SSH{.hosts = {"10.0.0.1"}},
                             .volumes = {minted, own},
                             .timeout = std::chrono::hours(2)};
    const auto c = resolve_volume_credentials(spec, "0123abcd");
    REQUIRE(c.size() == 2);
    CHECK(c[0].access_key_id == "ASIAMINTEDFORVOLUMES");
    CHECK(c[0].secret_access_key == "mintedsecret");
    CHECK(c[0].session_token == "mintedtoken");
    CHECK(c[1].access_key_id == "AKIAVOLUMEONLY000001");
    const auto requests = fake.federation_requests();
    REQUIRE(requests.size() == 1);
    CHECK(requests[0].name == "sky-0123abcd");
    CHECK(requests[0].duration_seconds == 2 * 3600 + 600);  // the pool's timeout, and a margin
    CHECK(requests[0].policy == volume_policy({&minted}));  // the other volume is not in it
}
