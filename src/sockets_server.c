/* The server role of the sockets kernel. */
#include "sockets.h"

/* ------------------------------------------------------------------------ */
/* server                                                                    */


void vlog(const struct opts *o, const char *fmt, ...)
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

void write_rendezvous(const char *path, const char *content)
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

/* The next connection on listening socket lfd, before the session's
 * deadline; dies with 'late' (the message) when the deadline passes. */
static int accept_by_deadline(int lfd, const char *late)
{
    for (;;) {
        struct pollfd p = {lfd, POLLIN, 0};
        int ms = ms_until(g_deadline_ns);
        if (ms <= 0)
            die("%s", late);
        int r = poll(&p, 1, ms);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            die("poll: %s", strerror(errno));
        if (r == 0)
            continue;
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd >= 0)
            return fd;
        if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED)
            die("accept: %s", strerror(errno));
    }
}

/* Accepts the data connection of the current size: checks the greeting
 * (cookie) and ignores strangers.  Sets buffers and timeouts. */
int accept_data(struct session *s, uint64_t *t_hello)
{
    for (;;) {
        int fd = accept_by_deadline(s->listen_fd, "timed out waiting for the client's data connection");
        set_timeo_ns(fd, SO_RCVTIMEO, 5000000000ull);
        char hello[DATA_HELLO_LEN + 1];
        char want[DATA_HELLO_LEN + 1];
        snprintf(want, sizeof want, "HPCNETDATA %s ", s->cookie);
        memset(want + strlen(want), '.', DATA_HELLO_LEN - strlen(want));
        want[DATA_HELLO_LEN - 1] = '\n';
        want[DATA_HELLO_LEN] = '\0';
        if (recv_full(fd, hello, DATA_HELLO_LEN) != 1 || memcmp(hello, want, DATA_HELLO_LEN) != 0) {
            close(fd); /* not our client: ignore */
            continue;
        }
        *t_hello = now_ns();
        set_bufs(fd, s->sndbuf, s->rcvbuf);
        if (s->nodelay || is_rr(s->test))
            set_int_opt(fd, IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY");
        set_stall_timeouts(fd, s->stall_s);
        return fd;
    }
}

void server_tcp_size(struct session *s, size_t size, uint64_t dur_ns)
{
    ctrl_send(s->ctl.fd, "ready");
    uint64_t t0 = 0;
    int fd = accept_data(s, &t0);
    int snd = get_int_opt(fd, SOL_SOCKET, SO_SNDBUF), rcv = get_int_opt(fd, SOL_SOCKET, SO_RCVBUF);
    size_t rsz = stream_recv_size(s->recv_size, size);
    if (s->test == T_TCP_STREAM || s->test == T_TCP_BIDIR) {
        unsigned char *sbuf = (unsigned char *)xalloc(size, 0);
        unsigned char *rbuf = (unsigned char *)xalloc(rsz, 0);
        unsigned char *ref = NULL;
        fill_pattern(sbuf, size);
        if (s->validate)
            ref = make_stream_ref(sbuf, size, rsz);
        struct stream_recv rv = {fd, rbuf, rsz, t0, ref, size, 0, 0, 0, 0};
        struct stream_send sd = {fd, sbuf, size, dur_ns, 0, 0, 0};
        pthread_t th;
        int threaded = 0;
        if (s->test == T_TCP_BIDIR) {
            int e = pthread_create(&th, NULL, stream_sender, &sd);
            if (e)
                die("pthread_create: %s", strerror(e));
            threaded = 1;
        }
        stream_receiver(&rv);
        if (threaded)
            pthread_join(th, NULL);
        if (rv.err)
            die("%s size %zu: receive failed: %s", test_names[s->test], size, io_strerror(rv.err));
        if (sd.err)
            die("%s size %zu: send failed: %s", test_names[s->test], size, io_strerror(sd.err));
        if (rv.corrupt)
            die("%s size %zu: received payload differs from what was sent (--validate)", test_names[s->test],
                size);
        /* values after the transfer: autotuning may have grown them */
        snd = get_int_opt(fd, SOL_SOCKET, SO_SNDBUF);
        rcv = get_int_opt(fd, SOL_SOCKET, SO_RCVBUF);
        close(fd);
        ctrl_send(s->ctl.fd,
                  "result recv=%" PRIu64 " recv_span=%.9f sent=%" PRIu64 " send_span=%.9f sndbuf=%d rcvbuf=%d",
                  rv.bytes, rv.span_ns * 1e-9, sd.bytes, sd.span_ns * 1e-9, snd, rcv);
        free(sbuf);
        free(rbuf);
        free(ref);
        return;
    }
    /* tcp_rr: echo size-byte messages until EOF */
    unsigned char *buf = (unsigned char *)xalloc(size, 0);
    uint64_t echoed = 0;
    for (;;) {
        int r = recv_full(fd, buf, size);
        if (r == 0)
            break;
        if (r == -2)
            die("tcp_rr size %zu: client closed the connection in the middle of a message", size);
        if (r < 0)
            die("tcp_rr size %zu: receive failed: %s", size, io_strerror(errno));
        if (send_all(fd, buf, size) != 0)
            die("tcp_rr size %zu: send failed: %s", size, io_strerror(errno));
        echoed++;
    }
    close(fd);
    ctrl_send(s->ctl.fd, "result echoed=%" PRIu64 " sndbuf=%d rcvbuf=%d", echoed, snd, rcv);
    free(buf);
}

/* Waits for the client's "end sent=N" while serving UDP.  Returns 1 when
 * the line was read (sets *sent), 0 when nothing is waiting. */
int server_check_end(struct session *s, uint64_t *sent)
{
    if (!ctrl_ready(&s->ctl))
        return 0;
    char line[LINE_MAX_LEN];
    int r = ctrl_getline(&s->ctl, line, sizeof line, 5000);
    if (r == 0)
        die("client closed the control connection");
    if (r < 0)
        die("control connection: %s", r == -1 ? "timed out" : strerror(errno));
    if (!line_is(line, "end") || kv_u64(line, "sent", sent) != 0)
        die("protocol error: expected 'end sent=N', got '%.80s'", line);
    return 1;
}

void server_udp_stream_size(struct session *s, size_t size)
{
    static unsigned char *bufs;
    static struct mmsghdr msgs[UDP_VLEN];
    static struct iovec iov[UDP_VLEN];
    if (!bufs) {
        bufs = (unsigned char *)xalloc((size_t)UDP_VLEN * 65536u, 0);
        for (int k = 0; k < UDP_VLEN; k++) {
            iov[k].iov_base = bufs + (size_t)k * 65536u;
            iov[k].iov_len = 65536u;
        }
    }
    set_timeo_ns(s->udp_fd, SO_RCVTIMEO, (uint64_t)UDP_POLL_MS * 1000000ull);
    ctrl_send(s->ctl.fd, "ready");
    uint64_t recvd = 0, ooo = 0, maxseq = 0, sent = 0, first_ns = 0, last_ns = 0, end_ns = 0;
    uint64_t mask = seq_mask(size), half = mask / 2 + 1;
    int have_seq = 0, ended = 0, corrupt = 0;
    uint64_t last_check = now_ns();
    for (;;) {
        for (int k = 0; k < UDP_VLEN; k++) {
            memset(&msgs[k].msg_hdr, 0, sizeof msgs[k].msg_hdr);
            msgs[k].msg_hdr.msg_iov = &iov[k];
            msgs[k].msg_hdr.msg_iovlen = 1;
        }
        int n = recvmmsg(s->udp_fd, msgs, UDP_VLEN, MSG_WAITFORONE, NULL);
        uint64_t t = now_ns();
        if (n > 0) {
            for (int k = 0; k < n; k++) {
                if (msgs[k].msg_len != size)
                    continue; /* stale datagram of another size, or a stranger */
                const unsigned char *d = (const unsigned char *)iov[k].iov_base;
                uint64_t seq = get_seq(d, size);
                if (!have_seq) {
                    maxseq = seq;
                    have_seq = 1;
                } else {
                    uint64_t diff = (seq - maxseq) & mask;
                    if (diff != 0 && diff < half)
                        maxseq = seq;
                    else
                        ooo++; /* late (reordered) or duplicate */
                }
                if (s->validate && size > 8 && memcmp(d + 8, s->pattern + 8, size - 8) != 0)
                    corrupt = 1;
                recvd++;
                if (!first_ns)
                    first_ns = t;
                last_ns = t;
            }
        } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            die("udp_stream size %zu: receive failed: %s", size, strerror(errno));
        }
        if (t >= g_deadline_ns)
            die("udp_stream size %zu: overall timeout exceeded", size);
        if (!ended && (n <= 0 || t - last_check > 50000000ull)) {
            last_check = t;
            if (server_check_end(s, &sent)) {
                ended = 1;
                end_ns = now_ns();
            }
        }
        if (ended && (recvd >= sent || now_ns() - end_ns > (uint64_t)UDP_GRACE_MS * 1000000ull))
            break;
    }
    if (corrupt)
        die("udp_stream size %zu: received payload differs from what was sent (--validate)", size);
    ctrl_send(s->ctl.fd, "result recv=%" PRIu64 " span=%.9f ooo=%" PRIu64 " sndbuf=%d rcvbuf=%d", recvd,
              (last_ns - first_ns) * 1e-9, ooo, get_int_opt(s->udp_fd, SOL_SOCKET, SO_SNDBUF),
              get_int_opt(s->udp_fd, SOL_SOCKET, SO_RCVBUF));
}

void server_udp_rr_size(struct session *s, size_t size)
{
    static unsigned char *buf;
    if (!buf)
        buf = (unsigned char *)xalloc(65536u, 0);
    set_timeo_ns(s->udp_fd, SO_RCVTIMEO, (uint64_t)UDP_POLL_MS * 1000000ull);
    ctrl_send(s->ctl.fd, "ready");
    uint64_t echoed = 0, sent = 0, last_check = now_ns();
    for (;;) {
        struct sockaddr_storage from;
        socklen_t fl = sizeof from;
        ssize_t n = recvfrom(s->udp_fd, buf, 65536u, 0, (struct sockaddr *)&from, &fl);
        uint64_t t = now_ns();
        if (n >= 0) {
            if ((size_t)n == size) {
                for (;;) {
                    ssize_t w = sendto(s->udp_fd, buf, size, 0, (struct sockaddr *)&from, fl);
                    if (w < 0 && errno == EINTR)
                        continue;
                    if (w < 0 && errno != ENOBUFS && errno != EAGAIN && errno != EWOULDBLOCK)
                        die("udp_rr size %zu: send failed: %s", size, strerror(errno));
                    break; /* a dropped reply is a lost transaction for the client */
                }
                echoed++;
            }
        } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            die("udp_rr size %zu: receive failed: %s", size, strerror(errno));
        }
        if (t >= g_deadline_ns)
            die("udp_rr size %zu: overall timeout exceeded", size);
        if (n < 0 || t - last_check > 100000000ull) {
            last_check = t;
            if (server_check_end(s, &sent))
                break;
        }
    }
    ctrl_send(s->ctl.fd, "result echoed=%" PRIu64 " sndbuf=%d rcvbuf=%d", echoed,
              get_int_opt(s->udp_fd, SOL_SOCKET, SO_SNDBUF), get_int_opt(s->udp_fd, SOL_SOCKET, SO_RCVBUF));
}

/* UDP socket on the address the client reached, port = TCP port if free */
int server_udp_socket(const struct session *s, long sndbuf, long rcvbuf)
{
    struct sockaddr_storage local;
    socklen_t ll = sizeof local;
    if (getsockname(s->ctl.fd, (struct sockaddr *)&local, &ll) != 0)
        die("getsockname: %s", strerror(errno));
    struct sockaddr_storage lst;
    socklen_t lstl = sizeof lst;
    if (getsockname(s->listen_fd, (struct sockaddr *)&lst, &lstl) != 0)
        die("getsockname: %s", strerror(errno));
    int fd = socket(local.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        die("socket(UDP): %s", strerror(errno));
    set_bufs(fd, sndbuf, rcvbuf);
    sa_set_port(&local, sa_port(&lst));
    if (bind(fd, (struct sockaddr *)&local, sa_len(&local)) != 0) {
        sa_set_port(&local, 0);
        if (bind(fd, (struct sockaddr *)&local, sa_len(&local)) != 0)
            die("bind(UDP): %s", strerror(errno));
    }
    return fd;
}

int run_server(const struct opts *o)
{
    g_is_server = 1;
    set_deadline(o->timeout);

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

    struct session *s = (struct session *)calloc(1, sizeof *s);
    if (!s)
        die("out of memory");
    s->listen_fd = lfd;
    s->udp_fd = -1;
    char line[LINE_MAX_LEN];

    /* the one client session: first connection that says a proper hello */
    for (;;) {
        char late[128];
        snprintf(late, sizeof late, "no client connected within %g s (--timeout)", o->timeout);
        int fd = accept_by_deadline(lfd, late);
        set_int_opt(fd, IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY");
        set_stall_timeouts(fd, o->connect_timeout);
        s->ctl.fd = fd;
        s->ctl.len = 0;
        int r = ctrl_getline(&s->ctl, line, sizeof line, 5000);
        if (r == 1 && line_is(line, "hello"))
            break;
        vlog(o, "ignoring a connection without hello");
        close(fd);
    }
    g_ctrl_fd = s->ctl.fd;

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
    {
        uint64_t a = now_ns() ^ ((uint64_t)getpid() << 32), b = (uint64_t)(uintptr_t)s;
        a ^= b * 0x9E3779B97F4A7C15ull;
        a ^= a >> 29;
        a *= 0xBF58476D1CE4E5B9ull;
        a ^= a >> 32;
        snprintf(s->cookie, sizeof s->cookie, "%016" PRIx64, a);
    }
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
    /* wait for the client to close, so our "bye" is not lost in a reset */
    {
        char tmp[64];
        struct pollfd p = {s->ctl.fd, POLLIN, 0};
        if (poll(&p, 1, 2000) > 0) {
            ssize_t n = recv(s->ctl.fd, tmp, sizeof tmp, 0);
            (void)n;
        }
    }
    g_ctrl_fd = -1;
    close(s->ctl.fd);
    if (s->udp_fd >= 0)
        close(s->udp_fd);
    close(lfd);
    remove_rendezvous();
    free(s->pattern);
    free(s);
    return 0;
}
