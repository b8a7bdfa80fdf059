// The launcher's settings (runtime/worker/launcher.hpp): what a bring-up writes on the launcher's
// stdin is what the launcher reads, whatever the values hold, and a malformed text is refused
// with the setting's name, never its value.
#include <catch2/catch.hpp>
#include <string>

#include "runtime/worker/launcher.hpp"
#include "sky/errors.hpp"

using sky::detail::LaunchSettings;

TEST_CASE("launcher settings: every value comes back as it was written", "[launcher]") {
    LaunchSettings s;
    s.token = "0123abcd";
    s.run_dir = "/home/u/.sky/run/p/0";
    s.image_env = "/home/u/.sky/image-x/env.sh";
    s.lib_dir = "/home/u/.sky/prog/id/lib";
    s.env = {{"A", "one\ntwo"}, {"B", "back\\slash=and equals"}, {"EMPTY", ""}};
    s.listen = "unix:/home/u/.sky/run/p/0/worker.sock";
    s.allow_from_variable = "SLURM_LAUNCH_NODE_IPADDR";
    s.accept_timeout_s = 30;
    s.idle_timeout_s = 7;
    s.hard_timeout_s = 3600;
    s.power_off = true;
    s.probe = {"bash", "-c", "test -f /x && echo 'a b'"};
    s.probe_period_s = 3;
    s.notice_signal = 10;  // SIGUSR1
    s.notice_lead_s = 30;
    s.notice_reason = "slurm: job 7 ends in 30 s\n(--signal=USR1@30)";
    s.release_on_idle = {"scancel", "42"};
    s.current_file = "/home/u/.sky/run/p/0.current";
    s.superseded_grace_s = 30;
    s.unmount_script = "/home/u/.sky/run/p/0/volumes/unmount.sh";
    s.detach = false;
    s.remove_run_dir_at_end = true;
    const auto back = LaunchSettings::parse(s.to_text());
    CHECK(back.token == s.token);
    CHECK(back.run_dir == s.run_dir);
    CHECK(back.image_env == s.image_env);
    CHECK(back.lib_dir == s.lib_dir);
    CHECK(back.env == s.env);
    CHECK(back.listen == s.listen);
    CHECK(back.allow_from_variable == s.allow_from_variable);
    CHECK(back.accept_timeout_s == 30);
    CHECK(back.idle_timeout_s == 7);
    CHECK(back.hard_timeout_s == 3600);
    CHECK(back.power_off);
    CHECK(back.probe == s.probe);
    CHECK(back.probe_period_s == 3);
    CHECK(back.notice_signal == 10);
    CHECK(back.notice_lead_s == 30);
    CHECK(back.notice_reason == s.notice_reason);
    CHECK(back.release_on_idle == s.release_on_idle);
    CHECK(back.current_file == s.current_file);
    CHECK(back.unmount_script == s.unmount_script);
    CHECK_FALSE(back.detach);
    CHECK(back.remove_run_dir_at_end);
    // One line per setting: a value's line break cannot start a setting of its own.
    CHECK(s.to_text().find("\nrun_dir /evil") == std::string::npos);
}

TEST_CASE("launcher settings: a malformed text is refused, naming the setting and not its value",
          "[launcher]") {
    LaunchSettings s;
    s.token = "secret-token-value";
    s.run_dir = "/r";
    s.listen = "unix:/r/w.sock";
    const std::string good = s.to_text();
    // Cut short: no end line.
    CHECK_THROWS_AS(LaunchSettings::parse(good.substr(0, good.size() - 4)), sky::ConfigError);
    CHECK_THROWS_AS(LaunchSettings::parse("nonsense x\n" + good), sky::ConfigError);
    try {
        LaunchSettings::parse("idle_timeout secret-token-value\n" + good);
        FAIL("a non-number idle_timeout was read");
    } catch (const sky::ConfigError& e) {
        CHECK(std::string(e.what()).find("idle_timeout") != std::string::npos);
        CHECK(std::string(e.what()).find("secret-token-value") == std::string::npos);
    }
    LaunchSettings relative = s;
    relative.run_dir = "run";
    CHECK_THROWS_AS(LaunchSettings::parse(relative.to_text()), sky::ConfigError);
    LaunchSettings no_token = s;
    no_token.token.clear();
    CHECK_THROWS_AS(LaunchSettings::parse(no_token.to_text()), sky::ConfigError);
    // A notice signal must be one the launcher can catch and does not use itself.
    for (int sig : {9, 15, 2, 1, 17, 19, 13, 65}) {
        INFO("signal " << sig);
        LaunchSettings bad = s;
        bad.notice_signal = sig;
        CHECK_THROWS_AS(LaunchSettings::parse(bad.to_text()), sky::ConfigError);
    }
}
