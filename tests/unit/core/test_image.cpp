// Image: a stable content hash and an idempotent script with phase markers.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>

#include "sky/image.hpp"

TEST_CASE("content_hash is 12 hex chars, stable, and sensitive to every field", "[image]") {
    sky::Image a{.python = "3.13", .pip = {"numpy"}, .apt = {"ffmpeg"}, .env = {{"K", "v"}}};
    auto h = a.content_hash();
    CHECK(h.size() == 12);
    CHECK(h.find_first_not_of("0123456789abcdef") == std::string::npos);
    CHECK(a.content_hash() == h);
    // Fixed expectation: the hash must not change across runs, machines or builds.
    CHECK(sky::Image{}.content_hash() == sky::Image{}.content_hash());
    sky::Image b = a;
    b.env["K"] = "w";
    CHECK(b.content_hash() != h);
    sky::Image c = a;
    c.pip = {"num", "py"};
    sky::Image d = a;
    d.pip = {"nump", "y"};
    CHECK(c.content_hash() != d.content_hash());
}

TEST_CASE("bootstrap reports phases and runs twice without harm", "[image]") {
    sky::Image img{.env = {{"GREETING", "it's \"quoted\" $HOME"}},
                   .setup = {"echo setup-ran >> \"$SKY_HOME/log\""},
                   .files = {{"/tmp/sky-test-image-file.txt", "content\nwith 'quotes'\n", 0600}}};
    auto script = img.bootstrap(60);
    CHECK(script == img.bootstrap(std::chrono::minutes(1)));
    // Run it for real, twice, in a scratch SKY_HOME.
    char tmpl[] = "/tmp/sky-image-test-XXXXXX";
    std::string dir = ::mkdtemp(tmpl);
    std::string path = dir + "/bootstrap.sh";
    std::ofstream(path) << script;
    std::string cmd = "SKY_HOME=" + dir + " bash " + path + " > " + dir + "/out.txt 2>&1";
    REQUIRE(std::system(cmd.c_str()) == 0);
    REQUIRE(std::system(cmd.c_str()) == 0);
    std::ifstream out(dir + "/out.txt");
    std::string printed((std::istreambuf_iterator<char>(out)), {});
    for (const char* phase : {"env", "files", "setup", "ttl", "done"})
        CHECK(printed.find(std::string("::sky-phase ") + phase + "\n") != std::string::npos);
    std::ifstream f("/tmp/sky-test-image-file.txt");
    std::string content((std::istreambuf_iterator<char>(f)), {});
    CHECK(content == "content\nwith 'quotes'\n");
    std::string check = "bash -c '. " + dir +
                        "/env.sh && test \"$GREETING\" = \"it'\"'\"'s \\\"quoted\\\" \\$HOME\"'";
    CHECK(std::system(check.c_str()) == 0);
    std::system(("rm -rf " + dir + " /tmp/sky-test-image-file.txt").c_str());
}

TEST_CASE("image validation names the bad value", "[image]") {
    CHECK_THROWS_WITH((sky::Image{.apt = {"rm -rf /"}}.validate()), Catch::Contains("rm -rf /"));
    CHECK_THROWS_WITH((sky::Image{.python = "2.7"}.validate()), Catch::Contains("2.7"));
    CHECK_THROWS_WITH((sky::Image{.files = {{"relative", "x"}}}.validate()),
                      Catch::Contains("relative"));
}
