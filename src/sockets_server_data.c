/* The sockets kernel server's data path: per-size TCP and UDP service. */
#include "sockets_server_data.h"
#include "sockets_util.h"

/* The next connection on listening socket lfd, before the session's
 * deadline; dies with 'late' (the message) when the deadline passes. */
int accept_by_deadline(int lfd, const char *late)
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
static int accept_data(struct session *s, uint64_t *t_hello)
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
static int server_check_end(struct session *s, uint64_t *sent)
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
