/*
 * LD_PRELOAD shim for native peers that always listen on every interface
 * (agentgateway binds its listeners and stats ports to 0.0.0.0 or [::],
 * whatever the config says). Every bind() to the IPv4 or IPv6 wildcard
 * address is turned into a bind() to 127.0.0.1 or ::1, the port unchanged;
 * every other bind() passes through. The counterpart of
 * tests/interop/loopback-preload.cjs for programs that are not Node.
 *
 * bench/run builds it into bench/.work with the system's cc:
 *
 *     cc -shared -fPIC -O2 -o loopback-bind.so loopback-bind.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

typedef int (*bind_fn)(int, const struct sockaddr *, socklen_t);

int bind(int fd, const struct sockaddr *addr, socklen_t len) {
    static bind_fn real;
    if (!real) {
        real = (bind_fn)dlsym(RTLD_NEXT, "bind");
    }
    if (addr && addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
        struct sockaddr_in v4;
        memcpy(&v4, addr, sizeof v4);
        if (v4.sin_addr.s_addr == htonl(INADDR_ANY)) {
            v4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            return real(fd, (const struct sockaddr *)&v4, sizeof v4);
        }
    } else if (addr && addr->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
        struct sockaddr_in6 v6;
        memcpy(&v6, addr, sizeof v6);
        if (memcmp(&v6.sin6_addr, &in6addr_any, sizeof in6addr_any) == 0) {
            v6.sin6_addr = in6addr_loopback;
            return real(fd, (const struct sockaddr *)&v6, sizeof v6);
        }
    }
    return real(fd, addr, len);
}
