#define CATCH_CONFIG_RUNNER
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "sky/sky.hpp"

namespace ssh_pool {
int orphan_client(const char* spec_file);

// A worker that listens where the node expects it and lets the client in, then never says a
// word (a hung or hostile worker): the pool must give up on it within its bound.
int silent_worker() {
    const char* listen = std::getenv("SKY_WORKER_LISTEN");
    const char* port_file = std::getenv("SKY_WORKER_PORT_FILE");
    if (!listen || std::strncmp(listen, "unix:", 5) != 0 || !port_file) return 2;
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::strncpy(sa.sun_path, listen + 5, sizeof sa.sun_path - 1);
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 ||
        ::listen(fd, 4) != 0)
        return 2;
    std::ofstream(port_file) << "unix\n";
    // Its launcher learns that it listens from the pipe it gave (SKY_WORKER_READY_FD).
    if (const char* ready = std::getenv("SKY_WORKER_READY_FD")) {
        const int r = std::atoi(ready);
        if (::write(r, "unix\n", 5) != 5) return 2;
        ::close(r);
    }
    int c = ::accept(fd, nullptr, nullptr);
    std::this_thread::sleep_for(std::chrono::seconds(60));
    if (c >= 0) ::close(c);
    return 0;
}
}  // namespace ssh_pool

int main(int argc, char** argv) {
    if (argc == 2 && std::strcmp(argv[1], "--sky-worker") == 0 &&
        std::getenv("SKY_E2E_SILENT_WORKER"))
        return ssh_pool::silent_worker();
    sky::init(argc, argv);
    if (argc == 3 && std::strcmp(argv[1], "--orphan-ssh-client") == 0)
        return ssh_pool::orphan_client(argv[2]);
    return Catch::Session().run(argc, argv);
}
