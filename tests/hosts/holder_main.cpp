// A program that holds test hosts until it is killed, as a test program does when ctest's time
// limit or a signal ends it: it makes two hosts, starts a process of its own in the first one
// (in a session of its own, so only the hosts' reaper can end it), prints what exists, and
// sleeps. tests/hosts/test_reaper.cpp kills it and checks that nothing is left.
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "hosts/test_hosts.hpp"

int main() {
    sky::test::TestHosts hosts(2);
    for (int i = 0; i < hosts.size(); ++i) std::printf("netns %s\n", hosts.netns(i).c_str());
    std::printf("bridge %s\n", hosts.bridge().c_str());
    std::printf("dir %s\n", hosts.dir().c_str());
    const pid_t stray = ::fork();
    if (stray == 0) {
        const int ns = ::open(("/run/netns/" + hosts.netns(0)).c_str(), O_RDONLY | O_CLOEXEC);
        if (ns < 0 || ::setns(ns, CLONE_NEWNET) != 0) ::_exit(126);
        ::setsid();
        ::execl("/bin/sleep", "sleep", "600", static_cast<char*>(nullptr));
        ::_exit(127);
    }
    std::printf("stray %d\n", static_cast<int>(stray));
    std::printf("ready\n");
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::minutes(5));  // bounded: the test kills it long before
    return 0;
}
