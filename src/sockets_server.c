/* The server role of the sockets kernel: the session with one client. */
#include "sockets_server.h"
#include "sockets_server_data.h"
#include "sockets_util.h"

static void vlog(const struct opts *o, const char *fmt, ...)
{
    if (!o->verbose)
        return;
    va_list ap;
    va_start(ap, fmt);
    fputs("# server: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static void write_rendezvous(const char *path, const char *content)
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f)
        die("--rendezvous: cannot create '%s': %s", tmp, strerror(errno));
    int bad = fprintf(f, "%s\n", content) < 0;
    bad |= fflush(f) != 0;
    bad |= fsync(fileno(f)) != 0 && errno != EINVAL;
    bad |= fclose(f) != 0;
    if (bad) {
        unlink(tmp);
        die("--rendezvous: cannot write '%s': %s", tmp, strerror(errno));
    }
    snprintf(g_rv_path, sizeof g_rv_path, "%s", path);
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        die("--rendezvous: cannot rename '%s' to '%s': %s", tmp, path, strerror(e));
    }
    g_rv_written = 1;
}

/* The listening socket of --bind and --port; says where it listens on
 * stderr and in the --rendezvous file. */
static int server_listen(const struct opts *o)
{
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    char portstr[16];
    snprintf(portstr, sizeof portstr, "%ld", o->port);
    int gai = getaddrinfo(o->bind_addr, portstr, &hints, &res);
    if (gai != 0)
        die("--bind %s: %s", o->bind_addr, gai_strerror(gai));
    int lfd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0)
        die("socket: %s", strerror(errno));
    set_int_opt(lfd, SOL_SOCKET, SO_REUSEADDR, 1, "SO_REUSEADDR");
    /* buffers given on the server's own command line are set before
     * listen(), so that accepted sockets negotiate the window scale for them */
    set_bufs(lfd, o->sndbuf, o->rcvbuf);
    if (bind(lfd, res->ai_addr, res->ai_addrlen) != 0)
        die("bind %s port %ld: %s", o->bind_addr, o->port, strerror(errno));
    freeaddrinfo(res);
    if (listen(lfd, 16) != 0)
        die("listen: %s", strerror(errno));
    struct sockaddr_storage ls;
    socklen_t lsl = sizeof ls;
    if (getsockname(lfd, (struct sockaddr *)&ls, &lsl) != 0)
        die("getsockname: %s", strerror(errno));
    char where[NI_MAXHOST + 16];
    addr_to_str((struct sockaddr *)&ls, where, sizeof where);
    int wildcard = 0;
    if (ls.ss_family == AF_INET)
        wildcard = ((struct sockaddr_in *)&ls)->sin_addr.s_addr == htonl(INADDR_ANY);
    else if (ls.ss_family == AF_INET6)
        wildcard = IN6_IS_ADDR_UNSPECIFIED(&((struct sockaddr_in6 *)&ls)->sin6_addr);
    if (wildcard) {
        char host[256];
        hostname_token(host, sizeof host);
        snprintf(where, sizeof where, "%s:%d", host, sa_port(&ls));
    }
    fprintf(stderr, "# " KERNEL_NAME " server listening on %s\n", where);
    fflush(stderr);
    if (o->rendezvous)
        write_rendezvous(o->rendezvous, where);
    return lfd;
}

/* The one client session: the first connection that says a proper hello,
 * whose line is left in line. */
static void accept_client(struct session *s, const struct opts *o, char *line, size_t line_len)
{
    for (;;) {
        char late[128];
        snprintf(late, sizeof late, "no client connected within %g s (--timeout)", o->timeout);
        int fd = accept_by_deadline(s->listen_fd, late);
        set_int_opt(fd, IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY");
        set_stall_timeouts(fd, o->connect_timeout);
        s->ctl.fd = fd;
        s->ctl.len = 0;
        int r = ctrl_getline(&s->ctl, line, line_len, 5000);
        if (r == 1 && line_is(line, "hello"))
            break;
        vlog(o, "ignoring a connection without hello");
        close(fd);
    }
    g_ctrl_fd = s->ctl.fd;
}

/* The session's settings from the client's hello line. */
static void read_hello(struct session *s, const struct opts *o, const char *line)
{
    uint64_t proto = 0, snd = 0, rcv = 0, rsz = 0, nodelay = 0, validate = 0;
    double ctimeout = 0, cstall = 0;
    char tname[32];
    if (kv_u64(line, "proto", &proto) != 0 || proto != PROTO_VERSION)
        die("client speaks control protocol %" PRIu64 ", this server speaks %d (same binary on both ends?)", proto,
            PROTO_VERSION);
    if (kv_str(line, "test", tname, sizeof tname) != 0 || kv_u64(line, "sndbuf", &snd) != 0 ||
        kv_u64(line, "rcvbuf", &rcv) != 0 || kv_u64(line, "rsz", &rsz) != 0 ||
        kv_u64(line, "nodelay", &nodelay) != 0 || kv_u64(line, "validate", &validate) != 0 ||
        kv_dbl(line, "timeout", &ctimeout) != 0 || kv_dbl(line, "stall", &cstall) != 0)
        die("protocol error: malformed hello '%.120s'", line);
    s->test = -1;
    for (int t = 0; t < T_COUNT; t++)
        if (!strcmp(tname, test_names[t]))
            s->test = t;
    if (s->test < 0)
        die("client asked for unknown test '%s'", tname);
    if (snd > (1u << 30) || rcv > (1u << 30) || rsz > (64u << 20) || !(ctimeout > 0) || !(cstall > 0))
        die("protocol error: bad values in hello '%.120s'", line);
    /* the server's own --sndbuf/--rcvbuf win over the client's */
    s->sndbuf = o->sndbuf ? o->sndbuf : (long)snd;
    s->rcvbuf = o->rcvbuf ? o->rcvbuf : (long)rcv;
    s->recv_size = (long)rsz;
    s->nodelay = (int)nodelay;
    s->validate = (int)validate;
    s->stall_s = cstall;
    /* the client's time budget governs the session from now on */
    if (now_ns() + (uint64_t)((ctimeout + 10.0) * 1e9) > g_deadline_ns)
        set_deadline(ctimeout + 10.0);
    set_stall_timeouts(s->ctl.fd, cstall);
}

/* The cookie the client's data connections present: 16 hex digits mixed
 * from the time, the process and the session's address. */
static void make_cookie(struct session *s)
{
    uint64_t a = now_ns() ^ ((uint64_t)getpid() << 32), b = (uint64_t)(uintptr_t)s;
    a ^= b * 0x9E3779B97F4A7C15ull;
    a ^= a >> 29;
    a *= 0xBF58476D1CE4E5B9ull;
    a ^= a >> 32;
    snprintf(s->cookie, sizeof s->cookie, "%016" PRIx64, a);
}

/* The server's greeting: its host, the cookie, and for the UDP tests the
 * port of the UDP socket it opens. */
static void greet_client(struct session *s, const struct opts *o)
{
    int udp_port = 0;
    if (is_udp(s->test)) {
        s->udp_fd = server_udp_socket(s, s->sndbuf, s->rcvbuf);
        struct sockaddr_storage us;
        socklen_t usl = sizeof us;
        if (getsockname(s->udp_fd, (struct sockaddr *)&us, &usl) != 0)
            die("getsockname: %s", strerror(errno));
        udp_port = sa_port(&us);
        s->pattern = (unsigned char *)xalloc(65536u, 0);
        fill_pattern(s->pattern, 65536u);
    }
    char host[256];
    hostname_token(host, sizeof host);
    ctrl_send(s->ctl.fd, "ok proto=%d host=%s cookie=%s udp_port=%d", PROTO_VERSION, host, s->cookie, udp_port);
    vlog(o, "session: test %s", test_names[s->test]);
}

/* Each "run size=N dur=MS" of the client served, until its "bye". */
static void serve_sizes(struct session *s, const struct opts *o)
{
    char line[LINE_MAX_LEN];
    for (;;) {
        int r = ctrl_getline(&s->ctl, line, sizeof line, -1);
        if (r == 0)
            die("client closed the control connection before the end of the test");
        if (r == -1)
            die("timed out waiting for the client");
        if (r < 0)
            die("control connection: %s", strerror(errno));
        if (line_is(line, "bye")) {
            ctrl_send(s->ctl.fd, "bye");
            break;
        }
        uint64_t size = 0, dur_ms = 0;
        if (!line_is(line, "run") || kv_u64(line, "size", &size) != 0 || kv_u64(line, "dur", &dur_ms) != 0)
            die("protocol error: unexpected '%.80s'", line);
        uint64_t limit = is_udp(s->test) ? UDP_MAX_PAYLOAD : MAX_MSG_SIZE;
        if (size < 1 || size > limit || dur_ms < 1 || dur_ms > 3600000u)
            die("protocol error: bad size or duration in '%.80s'", line);
        vlog(o, "size %" PRIu64, size);
        switch (s->test) {
        case T_UDP_STREAM:
            server_udp_stream_size(s, (size_t)size);
            break;
        case T_UDP_RR:
            server_udp_rr_size(s, (size_t)size);
            break;
        default:
            server_tcp_size(s, (size_t)size, dur_ms * 1000000ull);
            break;
        }
    }
}

/* The session's sockets closed once the client closed its end, so our "bye"
 * is not lost in a reset; the rendezvous file removed. */
static void end_session(struct session *s)
{
    char tmp[64];
    struct pollfd p = {s->ctl.fd, POLLIN, 0};
    if (poll(&p, 1, 2000) > 0) {
        ssize_t n = recv(s->ctl.fd, tmp, sizeof tmp, 0);
        (void)n;
    }
    g_ctrl_fd = -1;
    close(s->ctl.fd);
    if (s->udp_fd >= 0)
        close(s->udp_fd);
    close(s->listen_fd);
    remove_rendezvous();
}

int run_server(const struct opts *o)
{
    g_is_server = 1;
    set_deadline(o->timeout);
    int lfd = server_listen(o);

    struct session *s = (struct session *)calloc(1, sizeof *s);
    if (!s)
        die("out of memory");
    s->listen_fd = lfd;
    s->udp_fd = -1;
    char line[LINE_MAX_LEN];
    accept_client(s, o, line, sizeof line);
    read_hello(s, o, line);
    make_cookie(s);
    greet_client(s, o);
    serve_sizes(s, o);
    end_session(s);
    free(s->pattern);
    free(s);
    return 0;
}
