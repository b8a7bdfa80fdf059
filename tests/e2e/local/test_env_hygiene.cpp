// Local workers do not inherit the client's cloud credentials (AWS_*, RUNPOD_API_KEY, ...): only
// what PoolSpec::env or Image::env pass explicitly reaches them.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>

#include "e2e/local/functions.hpp"
#include "sky/sky.hpp"

namespace env_hygiene {
std::string env_value(std::string name) {
    const char* v = std::getenv(name.c_str());
    return v ? std::string(v) : std::string("<unset>");
}
}  // namespace env_hygiene

TEST_CASE("local workers get the client's environment minus provider credentials", "[env]") {
    struct Vars {
        Vars() {
            ::setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", 1);
            ::setenv("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE", 1);
            ::setenv("RUNPOD_API_KEY", "rp-client-key", 1);
            ::setenv("VERDA_CLIENT_SECRET", "verda-secret", 1);
            ::setenv("DO_TOKEN", "do-token", 1);
            ::setenv("DIGITALOCEAN_TOKEN", "do-token", 1);
            ::setenv("SKY_E2E_ORDINARY", "kept", 1);
        }
        ~Vars() {
            for (const char* n :
                 {"AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "RUNPOD_API_KEY",
                  "VERDA_CLIENT_SECRET", "DO_TOKEN", "DIGITALOCEAN_TOKEN", "SKY_E2E_ORDINARY"})
                ::unsetenv(n);
        }
    } vars;
    auto spec = e2e::quiet(1);
    spec.env = {{"RUNPOD_API_KEY", "rp-passed-on-purpose"}};
    spec.image.env = {{"AWS_REGION", "eu-west-1"}};
    sky::ComputePool pool{spec};
    using env_hygiene::env_value;
    for (const char* hidden : {"AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "VERDA_CLIENT_SECRET",
                               "DO_TOKEN", "DIGITALOCEAN_TOKEN"}) {
        INFO(hidden);
        CHECK((sky::compute<env_value>(std::string(hidden)) >> pool) == "<unset>");
    }
    // Passed explicitly: there, with the pool's value.
    CHECK((sky::compute<env_value>(std::string("RUNPOD_API_KEY")) >> pool) ==
          "rp-passed-on-purpose");
    CHECK((sky::compute<env_value>(std::string("AWS_REGION")) >> pool) == "eu-west-1");
    // Everything else is inherited as before.
    CHECK((sky::compute<env_value>(std::string("SKY_E2E_ORDINARY")) >> pool) == "kept");
    CHECK((sky::compute<env_value>(std::string("PATH")) >> pool) == env_value("PATH"));
}
