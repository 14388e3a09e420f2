/* The client role of the sockets kernel: runs the tests, prints the results. */
#include "sockets.h"

/* ------------------------------------------------------------------------ */
/* client                                                                    */


void client_expect(struct client *c, char *out, size_t outlen, const char *word, const char *what)
{
    int r = ctrl_getline(&c->ctl, out, outlen, -1);
    if (r == 0)
        die("server closed the control connection while the client waited for %s", what);
    if (r == -1)
        die("timed out waiting for %s from the server (--timeout)", what);
    if (r < 0)
        die("control connection error while waiting for %s: %s", what, io_strerror(errno));
    if (line_is(out, "error"))
        die("server: %s", out[5] ? out + 6 : "unknown error");
    if (!line_is(out, word))
        die("protocol error: expected %s, got '%.80s'", what, out);
}

/* A data transfer failed.  If the server said why (it sends "error ..."
 * before it exits), that is the better message. */
void client_fail(struct client *c, const char *fmt, ...)
{
    char msg[1024], line[LINE_MAX_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (ctrl_getline(&c->ctl, line, sizeof line, 500) == 1 && line_is(line, "error"))
        die("server: %s (client: %s)", line[5] ? line + 6 : "unknown error", msg);
    die("%s", msg);
}

/* host:port or [v6]:port -> host, port.  0 ok, -1 malformed */
int parse_hostport(const char *s, char *host, size_t hl, int *port)
{
    const char *colon;
    if (*s == '[') {
        const char *rb = strchr(s, ']');
        if (!rb || rb[1] != ':' || (size_t)(rb - s - 1) >= hl || rb == s + 1)
            return -1;
        memcpy(host, s + 1, (size_t)(rb - s - 1));
        host[rb - s - 1] = '\0';
        colon = rb + 1;
    } else {
        colon = strrchr(s, ':');
        if (!colon || colon == s || (size_t)(colon - s) >= hl)
            return -1;
        memcpy(host, s, (size_t)(colon - s));
        host[colon - s] = '\0';
        if (strchr(host, ':'))
            return -1;
    }
    char *end = NULL;
    long p = strtol(colon + 1, &end, 10);
    if (!isdigit((unsigned char)colon[1]) || *end || p < 1 || p > 65535)
        return -1;
    *port = (int)p;
    return 0;
}

/* 1: address read; 0: file absent/empty; -1: malformed (message in err) */
int read_rendezvous(const char *path, char *host, size_t hl, int *port, char *err, size_t el)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char buf[512];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    while (n > 0 && isspace((unsigned char)buf[n - 1]))
        buf[--n] = '\0';
    if (n == 0)
        return 0;
    if (parse_hostport(buf, host, hl, port) != 0) {
        snprintf(err, el, "rendezvous file '%s' does not hold host:port ('%.60s')", path, buf);
        return -1;
    }
    return 1;
}

void client_connect(struct client *c)
{
    const struct opts *o = c->o;
    uint64_t deadline = now_ns() + (uint64_t)(o->connect_timeout * 1e9);
    char last[512] = "no attempt";
    int saw_file = 0;
    if (!o->rendezvous && o->port == 0)
        usage_error("the client needs --port (not 0) or --rendezvous");
    for (;;) {
        char host[256];
        int port = 0, have = 0;
        if (o->rendezvous) {
            int r = read_rendezvous(o->rendezvous, host, sizeof host, &port, last, sizeof last);
            if (r != 0)
                saw_file = 1;
            have = r == 1;
        } else {
            snprintf(host, sizeof host, "%s", o->server_addr);
            port = (int)o->port;
            have = 1;
        }
        if (have) {
            struct addrinfo hints, *res = NULL;
            memset(&hints, 0, sizeof hints);
            hints.ai_family = AF_UNSPEC;
            hints.ai_socktype = SOCK_STREAM;
            hints.ai_flags = AI_NUMERICSERV;
            char ps[16];
            snprintf(ps, sizeof ps, "%d", port);
            int gai = getaddrinfo(host, ps, &hints, &res);
            if (gai != 0) {
                snprintf(last, sizeof last, "cannot resolve '%s': %s", host, gai_strerror(gai));
            } else {
                for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
                    int ms = ms_until(deadline);
                    if (ms > 2000)
                        ms = 2000;
                    if (ms < 50)
                        ms = 50;
                    int fd = tcp_connect(ai->ai_addr, ai->ai_addrlen, 0, 0, 1, ms);
                    char as[NI_MAXHOST + 16];
                    addr_to_str(ai->ai_addr, as, sizeof as);
                    if (fd >= 0) {
                        memcpy(&c->server, ai->ai_addr, ai->ai_addrlen);
                        snprintf(c->server_str, sizeof c->server_str, "%s", as);
                        set_stall_timeouts(fd, o->connect_timeout);
                        c->ctl.fd = fd;
                        c->ctl.len = 0;
                        freeaddrinfo(res);
                        return;
                    }
                    if (snprintf(last, sizeof last, "connect to %s: %s", as, strerror(errno)) >= (int)sizeof last)
                        last[sizeof last - 1] = '\0';
                }
                freeaddrinfo(res);
            }
        }
        if (now_ns() >= deadline)
            break;
        int ms = ms_until(deadline);
        struct timespec ts = {0, (long)(ms < 100 ? ms : 100) * 1000000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
    }
    if (o->rendezvous && !saw_file)
        die("rendezvous file '%s' did not appear within %g s (--connect-timeout); is the server running?",
            o->rendezvous, o->connect_timeout);
    die("could not connect to the server within %g s (--connect-timeout): %s", o->connect_timeout, last);
}

int client_data_connect(struct client *c, int nodelay)
{
    const struct opts *o = c->o;
    int ms = ms_until(g_deadline_ns);
    int cto = (int)(o->connect_timeout * 1000.0);
    if (cto < ms)
        ms = cto;
    int fd = tcp_connect((struct sockaddr *)&c->server, sa_len(&c->server), o->sndbuf, o->rcvbuf, nodelay,
                         ms > 0 ? ms : 1);
    if (fd < 0)
        client_fail(c, "data connection to %s: %s", c->server_str, strerror(errno));
    set_stall_timeouts(fd, o->connect_timeout);
    char hello[DATA_HELLO_LEN + 1];
    snprintf(hello, sizeof hello, "HPCNETDATA %s ", c->cookie);
    memset(hello + strlen(hello), '.', DATA_HELLO_LEN - strlen(hello));
    hello[DATA_HELLO_LEN - 1] = '\n';
    if (send_all(fd, hello, DATA_HELLO_LEN) != 0)
        die("data connection: send failed: %s", io_strerror(errno));
    return fd;
}

void note_bufs(struct client *c, int fd, const char *result)
{
    uint64_t v;
    c->snd = get_int_opt(fd, SOL_SOCKET, SO_SNDBUF);
    c->rcv = get_int_opt(fd, SOL_SOCKET, SO_RCVBUF);
    c->srv_snd = kv_u64(result, "sndbuf", &v) == 0 ? (int)v : -1;
    c->srv_rcv = kv_u64(result, "rcvbuf", &v) == 0 ? (int)v : -1;
    c->have_bufs = 1;
    if (!is_udp(c->o->test))
        c->mss = get_int_opt(fd, IPPROTO_TCP, TCP_MAXSEG);
}

double mbps(uint64_t bytes, double secs) { return secs > 0 ? (double)bytes / secs / 1e6 : 0.0; }


/* Stream tests: remember the size with the highest throughput. */
void stream_best(struct rowbuf *rb, size_t size, double rate)
{
    if (rate > rb->best) {
        rb->best = rate;
        rb->best_size = size;
    }
}

/* One window of a TCP stream test on a new connection: writes its row, returns
 * its receive rate (MB/s; tcp_bidir: both directions). */
double client_tcp_stream(struct client *c, size_t size, char *row, size_t row_len)
{
    const struct opts *o = c->o;
    char line[LINE_MAX_LEN];
    int bidir = o->test == T_TCP_BIDIR;
    ctrl_send(c->ctl.fd, "run size=%zu dur=%ld", size, o->duration_ms);
    client_expect(c, line, sizeof line, "ready", "ready");
    size_t rsz = stream_recv_size(o->recv_size, size);
    unsigned char *sbuf = (unsigned char *)xalloc(size, 0);
    fill_pattern(sbuf, size);
    unsigned char *rbuf = NULL, *ref = NULL;
    int fd = client_data_connect(c, o->nodelay);
    uint64_t t0 = now_ns();
    struct stream_send sd = {fd, sbuf, size, (uint64_t)o->duration_ms * 1000000ull, 0, 0, 0};
    struct stream_recv rv = {fd, NULL, rsz, t0, NULL, size, 0, 0, 0, 0};
    if (bidir) {
        rbuf = (unsigned char *)xalloc(rsz, 0);
        if (o->validate)
            ref = make_stream_ref(sbuf, size, rsz);
        rv.buf = rbuf;
        rv.ref = ref;
        pthread_t th;
        int e = pthread_create(&th, NULL, stream_receiver, &rv);
        if (e)
            die("pthread_create: %s", strerror(e));
        stream_sender(&sd);
        pthread_join(th, NULL);
    } else {
        stream_sender(&sd);
    }
    if (sd.err)
        client_fail(c, "%s size %zu: send failed: %s", test_names[o->test], size, io_strerror(sd.err));
    if (rv.err)
        client_fail(c, "%s size %zu: receive failed: %s", test_names[o->test], size, io_strerror(rv.err));
    if (rv.corrupt)
        die("%s size %zu: received payload differs from what was sent (--validate)", test_names[o->test], size);
    client_expect(c, line, sizeof line, "result", "the server's result");
    note_bufs(c, fd, line);
    close(fd);
    uint64_t srecv = 0, ssent = 0;
    double srspan = 0, ssspan = 0;
    if (kv_u64(line, "recv", &srecv) || kv_dbl(line, "recv_span", &srspan) || kv_u64(line, "sent", &ssent) ||
        kv_dbl(line, "send_span", &ssspan))
        die("protocol error: malformed result '%.100s'", line);
    if (srecv != sd.bytes)
        die("%s size %zu: client sent %" PRIu64 " bytes but the server received %" PRIu64, test_names[o->test],
            size, sd.bytes, srecv);
    double send_s = sd.span_ns * 1e-9, rate;
    if (!bidir) {
        rate = mbps(srecv, srspan);
        snprintf(row, row_len, "%zu %.6f %.6f %" PRIu64 " %" PRIu64 " %.3f %.3f %.3f %.3f", size, send_s, srspan,
                 sd.bytes, srecv, mbps(sd.bytes, send_s), rate, mbps(sd.bytes, send_s) * 8.0, rate * 8.0);
    } else {
        if (ssent != rv.bytes)
            die("tcp_bidir size %zu: server sent %" PRIu64 " bytes but the client received %" PRIu64, size, ssent,
                rv.bytes);
        double recv_s = rv.span_ns * 1e-9;
        double c2s_r = mbps(srecv, srspan), s2c_r = mbps(rv.bytes, recv_s);
        rate = c2s_r + s2c_r;
        snprintf(row, row_len, "%zu %.6f %" PRIu64 " %" PRIu64 " %.3f %.3f %.3f %.3f %.3f %.3f", size, send_s,
                 sd.bytes, rv.bytes, mbps(sd.bytes, send_s), c2s_r, mbps(ssent, ssspan), s2c_r, rate, rate * 8.0);
    }
    free(sbuf);
    free(rbuf);
    free(ref);
    return rate;
}

/* A TCP stream size measured in --windows windows: the row of the window with
 * the median rate (the lower of the middle two when even) is the size's row,
 * so one stall of the host costs one window, not the figure. */
void client_tcp_stream_windows(struct client *c, size_t size, struct rowbuf *rb)
{
    long n = c->o->windows;
    char rows[MAX_WINDOWS][sizeof rb->rows[0]];
    double rates[MAX_WINDOWS], sorted[MAX_WINDOWS];
    for (long w = 0; w < n; w++)
        sorted[w] = rates[w] = client_tcp_stream(c, size, rows[w], sizeof rows[w]);
    qsort(sorted, (size_t)n, sizeof sorted[0], hc_cmp_double);
    double median = sorted[(n - 1) / 2];
    long pick = 0;
    while (rates[pick] != median)
        pick++;
    if (n > 1) {
        char *w = rb->windows[rb->n];
        int len = snprintf(w, sizeof rb->windows[0], "%zu B:", size);
        for (long k = 0; k < n; k++)
            len += snprintf(w + len, sizeof rb->windows[0] - (size_t)len, " %.3f", rates[k]);
        snprintf(w + len, sizeof rb->windows[0] - (size_t)len, " MB/s, reported window %ld", pick + 1);
    }
    memcpy(rb->rows[rb->n++], rows[pick], sizeof rows[pick]);
    stream_best(rb, size, median);
    if (c->o->validate)
        rb->validated++;
}


void samples_push(struct samples *s, double x)
{
    if (s->n == s->cap) {
        long nc = s->cap ? 2 * s->cap : 4096;
        double *nv = (double *)realloc(s->v, (size_t)nc * sizeof *nv);
        if (!nv)
            die("out of memory");
        s->v = nv;
        s->cap = nc;
    }
    s->v[s->n++] = x;
}

void tcp_transaction(struct client *c, int fd, unsigned char *sbuf, unsigned char *rbuf, size_t size,
                            int validate)
{
    if (send_all(fd, sbuf, size) != 0)
        client_fail(c, "tcp_rr size %zu: send failed: %s", size, io_strerror(errno));
    int r = recv_full(fd, rbuf, size);
    if (r != 1)
        client_fail(c, "tcp_rr size %zu: receive failed: %s", size,
                    r == 0 || r == -2 ? "server closed the connection" : io_strerror(errno));
    if (validate && memcmp(sbuf, rbuf, size) != 0)
        die("tcp_rr size %zu: echoed payload differs from what was sent (--validate)", size);
}

/* Book-keeping shared by the round-trip tests after a size's row is written. */
void rr_done(struct rowbuf *rb, const struct opts *o, size_t size, double first_us,
                    double median_us)
{
    if (rb->n == 1)
        rb->first_rtt = first_us;
    if (rb->best == 0 || median_us < rb->best) {
        rb->best = median_us;
        rb->best_size = size;
    }
    if (o->validate)
        rb->validated++;
}

void client_tcp_rr(struct client *c, size_t size, struct rowbuf *rb)
{
    const struct opts *o = c->o;
    char line[LINE_MAX_LEN];
    ctrl_send(c->ctl.fd, "run size=%zu dur=%ld", size, o->duration_ms);
    client_expect(c, line, sizeof line, "ready", "ready");
    unsigned char *sbuf = (unsigned char *)xalloc(size, 0), *rbuf = (unsigned char *)xalloc(size, 0);
    fill_pattern(sbuf, size);
    int fd = client_data_connect(c, 1);
    uint64_t t = now_ns();
    tcp_transaction(c, fd, sbuf, rbuf, size, o->validate);
    double first_us = (now_ns() - t) * 1e-3;
    for (long k = 0; k < o->warmup; k++)
        tcp_transaction(c, fd, sbuf, rbuf, size, 0);
    struct samples sm = {NULL, 0, 0};
    uint64_t start = now_ns(), end = start + (uint64_t)o->duration_ms * 1000000ull, t1 = start;
    for (long k = 0;; k++) {
        if (o->iters ? k >= o->iters : (t1 >= end || k >= ADAPTIVE_CAP))
            break;
        if (t1 >= g_deadline_ns)
            die("tcp_rr size %zu: overall timeout exceeded after %ld transactions (--timeout, --iters)", size, k);
        uint64_t t0 = t1;
        tcp_transaction(c, fd, sbuf, rbuf, size, o->validate);
        t1 = now_ns();
        samples_push(&sm, (t1 - t0) * 1e-3);
    }
    double elapsed = (t1 - start) * 1e-9;
    if (shutdown(fd, SHUT_WR) != 0)
        die("tcp_rr: shutdown: %s", strerror(errno));
    client_expect(c, line, sizeof line, "result", "the server's result");
    note_bufs(c, fd, line);
    close(fd);
    uint64_t echoed = 0;
    if (kv_u64(line, "echoed", &echoed) != 0)
        die("protocol error: malformed result '%.100s'", line);
    uint64_t total = 1 + (uint64_t)o->warmup + (uint64_t)sm.n;
    if (echoed != total)
        die("tcp_rr size %zu: server echoed %" PRIu64 " messages, client sent %" PRIu64, size, echoed, total);
    hc_stats st = hc_compute_stats(sm.v, sm.n);
    snprintf(rb->rows[rb->n++], sizeof rb->rows[0], "%zu %ld %.3f %.3f %.3f %.3f %.3f %.3f %.3f %.1f", size, sm.n,
             first_us, st.min, st.median, st.mean, st.max, st.stddev, st.p99, elapsed > 0 ? sm.n / elapsed : 0.0);
    rr_done(rb, o, size, first_us, st.median);
    free(sm.v);
    free(sbuf);
    free(rbuf);
}

/* UDP socket connected to the server's UDP port */
void client_udp_socket(struct client *c, int udp_port)
{
    struct sockaddr_storage sa = c->server;
    sa_set_port(&sa, udp_port);
    int fd = socket(sa.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        die("socket(UDP): %s", strerror(errno));
    set_bufs(fd, c->o->sndbuf, c->o->rcvbuf);
    if (connect(fd, (struct sockaddr *)&sa, sa_len(&sa)) != 0)
        die("connect(UDP) to port %d: %s", udp_port, strerror(errno));
    set_timeo_ns(fd, SO_SNDTIMEO, (uint64_t)(c->o->connect_timeout * 1e9));
    c->udp_fd = fd;
}

void sleep_until_ns(uint64_t target)
{
    struct timespec ts = {(time_t)(target / 1000000000ull), (long)(target % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

/* One udp_stream run of one size at rate_mbps (0 = unpaced).
 *
 * Pacing, as iperf3 -u -b: datagram k is due at origin + k x size x 8 / rate,
 * computed from k so that no rounding accumulates.  The sender sleeps until
 * the next datagram is due (absolute clock_nanosleep, no spinning: on a small
 * host the receiver needs the core) and then sends every datagram that is
 * due, so a late wake-up becomes a short burst at the stated average rate
 * (run_client sets the timer slack to 1 us: the default 50 us would make
 * every wake-up up to that late).  Behind by more than PACE_MAX_BEHIND_NS (a
 * stall of the host), the schedule restarts from now and the missed slots
 * are dropped (a slip), so no catch-up burst is longer than that. */
void client_udp_stream(struct client *c, size_t size, double rate_mbps, struct rowbuf *rb, uint64_t *send_fail_total,
                       uint64_t *slips_total)
{
    const struct opts *o = c->o;
    char line[LINE_MAX_LEN];
    ctrl_send(c->ctl.fd, "run size=%zu dur=%ld", size, o->duration_ms);
    client_expect(c, line, sizeof line, "ready", "ready");
    unsigned char *buf = (unsigned char *)xalloc(size, 0);
    fill_pattern(buf, size);
    double ns_per_dgram = rate_mbps > 0 ? (double)size * 8.0 * 1e3 / rate_mbps : 0.0;
    uint64_t sent = 0, failed = 0, slips = 0, k = 0;
    uint64_t t0 = now_ns(), end = t0 + (uint64_t)o->duration_ms * 1000000ull, origin = t0;
    for (;;) {
        uint64_t t = now_ns();
        if (t >= end)
            break;
        if (ns_per_dgram > 0) {
            uint64_t due = origin + (uint64_t)((double)k * ns_per_dgram);
            if (due >= end)
                break;
            if (t < due) {
                sleep_until_ns(due);
                continue;
            }
            if (t - due > PACE_MAX_BEHIND_NS) {
                origin = t;
                k = 0;
                slips++;
            }
        }
        put_seq(buf, size, sent);
        ssize_t n = send(c->udp_fd, buf, size, 0);
        if (n < 0 && errno == EINTR)
            continue; /* not sent: retry the same slot and sequence number */
        k++;
        if (n == (ssize_t)size) {
            sent++;
        } else if (n < 0 && (errno == ENOBUFS || errno == EAGAIN || errno == EWOULDBLOCK)) {
            failed++; /* not sent: not counted, the sequence number is reused */
        } else if (n < 0 && errno == ECONNREFUSED) {
            die("udp_stream size %zu: the server's UDP port is unreachable (ICMP port unreachable)", size);
        } else {
            die("udp_stream size %zu: send failed: %s", size, n < 0 ? strerror(errno) : "short datagram");
        }
    }
    uint64_t t1 = now_ns();
    ctrl_send(c->ctl.fd, "end sent=%" PRIu64, sent);
    client_expect(c, line, sizeof line, "result", "the server's result");
    note_bufs(c, c->udp_fd, line);
    uint64_t recvd = 0, ooo = 0;
    double span = 0;
    if (kv_u64(line, "recv", &recvd) || kv_dbl(line, "span", &span) || kv_u64(line, "ooo", &ooo))
        die("protocol error: malformed result '%.100s'", line);
    double send_s = (t1 - t0) * 1e-9;
    double loss = sent > 0 ? 100.0 * ((double)sent - (double)recvd) / (double)sent : 0.0;
    uint64_t lost = recvd < sent ? sent - recvd : 0;
    /* receiver rate over the intervals between the first and last datagram */
    double rr = (recvd >= 2 && span > 0) ? (double)(recvd - 1) * (double)size / span / 1e6 : 0.0;
    double sr = mbps(sent * size, send_s);
    snprintf(rb->rows[rb->n++], sizeof rb->rows[0],
             "%zu %.10g %.6f %" PRIu64 " %" PRIu64 " %" PRIu64 " %.4f %" PRIu64 " %.3f %.3f %.3f", size, rate_mbps,
             send_s, sent, recvd, lost, loss, ooo, sr, rr, rr * 8.0);
    if (rate_mbps == 0 || o->rates[o->nrates - 1] > 0)
        stream_best(rb, size, rr); /* the summary line: the receiver's capacity where measured */
    if (o->validate)
        rb->validated++;
    *send_fail_total += failed;
    *slips_total += slips;
    free(buf);
}

/* One UDP transaction.  Returns the round trip in ns, 0 when lost. */
uint64_t udp_transaction(struct client *c, unsigned char *sbuf, unsigned char *rbuf, size_t size,
                                uint64_t seq, uint64_t timeout_ns, int *corrupt)
{
    put_seq(sbuf, size, seq);
    uint64_t want = seq & seq_mask(size);
    uint64_t t0 = now_ns(), limit = t0 + timeout_ns;
    for (;;) {
        ssize_t n = send(c->udp_fd, sbuf, size, 0);
        if (n == (ssize_t)size)
            break;
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == ENOBUFS || errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (n < 0 && errno == ECONNREFUSED)
            die("udp_rr size %zu: the server's UDP port is unreachable (ICMP port unreachable)", size);
        die("udp_rr size %zu: send failed: %s", size, n < 0 ? strerror(errno) : "short datagram");
    }
    int changed = 0;
    uint64_t rtt = 0;
    for (;;) {
        ssize_t n = recv(c->udp_fd, rbuf, 65536u, 0);
        uint64_t t = now_ns();
        if (n == (ssize_t)size && get_seq(rbuf, size) == want) {
            rtt = t > t0 ? t - t0 : 1;
            if (corrupt && size > 8 && memcmp(rbuf + 8, sbuf + 8, size - 8) != 0)
                *corrupt = 1;
            break;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break; /* timed out: lost */
        if (n < 0 && errno == ECONNREFUSED)
            die("udp_rr size %zu: the server's UDP port is unreachable (ICMP port unreachable)", size);
        if (n < 0 && errno != EINTR)
            die("udp_rr size %zu: receive failed: %s", size, strerror(errno));
        /* stale reply of an earlier (lost) transaction, or EINTR: wait the rest */
        if (t >= limit)
            break;
        set_timeo_ns(c->udp_fd, SO_RCVTIMEO, limit - t);
        changed = 1;
    }
    if (changed)
        set_timeo_ns(c->udp_fd, SO_RCVTIMEO, timeout_ns);
    return rtt;
}

void client_udp_rr(struct client *c, size_t size, struct rowbuf *rb)
{
    const struct opts *o = c->o;
    char line[LINE_MAX_LEN];
    ctrl_send(c->ctl.fd, "run size=%zu dur=%ld", size, o->duration_ms);
    client_expect(c, line, sizeof line, "ready", "ready");
    unsigned char *sbuf = (unsigned char *)xalloc(size, 0), *rbuf = (unsigned char *)xalloc(65536u, 0);
    fill_pattern(sbuf, size);
    uint64_t tmo = (uint64_t)o->udp_timeout_ms * 1000000ull;
    set_timeo_ns(c->udp_fd, SO_RCVTIMEO, tmo);
    uint64_t seq = 0, sent = 0;
    int corrupt = 0;
    int *pc = o->validate ? &corrupt : NULL;
    /* first transaction: timed apart; a few tries so that one lost datagram
     * does not fail the size (tries before the first reply are not counted) */
    uint64_t first = 0;
    for (int tries = 0; tries < 5 && !first; tries++) {
        first = udp_transaction(c, sbuf, rbuf, size, seq++, tmo, pc);
        sent++;
    }
    if (!first)
        die("udp_rr size %zu: no reply from the server to 5 datagrams (%ld ms timeout each)", size,
            o->udp_timeout_ms);
    for (long k = 0; k < o->warmup; k++, sent++)
        udp_transaction(c, sbuf, rbuf, size, seq++, tmo, pc);
    struct samples sm = {NULL, 0, 0};
    uint64_t lost = 0;
    uint64_t start = now_ns(), end = start + (uint64_t)o->duration_ms * 1000000ull, t1 = start;
    for (long k = 0;; k++) {
        if (o->iters ? k >= o->iters : (t1 >= end || k >= ADAPTIVE_CAP))
            break;
        if (t1 >= g_deadline_ns)
            die("udp_rr size %zu: overall timeout exceeded after %ld transactions (--timeout, --iters)", size, k);
        uint64_t rtt = udp_transaction(c, sbuf, rbuf, size, seq++, tmo, pc);
        sent++;
        t1 = now_ns();
        if (rtt)
            samples_push(&sm, rtt * 1e-3);
        else
            lost++;
    }
    double elapsed = (t1 - start) * 1e-9;
    ctrl_send(c->ctl.fd, "end sent=%" PRIu64, sent);
    client_expect(c, line, sizeof line, "result", "the server's result");
    note_bufs(c, c->udp_fd, line);
    if (corrupt)
        die("udp_rr size %zu: echoed payload differs from what was sent (--validate)", size);
    if (sm.n == 0)
        die("udp_rr size %zu: all %" PRIu64 " timed transactions were lost", size, lost);
    hc_stats st = hc_compute_stats(sm.v, sm.n);
    double first_us = first * 1e-3;
    double attempts = (double)sm.n + (double)lost;
    snprintf(rb->rows[rb->n++], sizeof rb->rows[0],
             "%zu %ld %" PRIu64 " %.4f %.3f %.3f %.3f %.3f %.3f %.3f %.3f %.1f", size, sm.n, lost,
             100.0 * (double)lost / attempts, first_us, st.min, st.median, st.mean, st.max, st.stddev, st.p99,
             elapsed > 0 ? sm.n / elapsed : 0.0);
    rr_done(rb, o, size, first_us, st.median);
    free(sm.v);
    free(sbuf);
    free(rbuf);
}

static const char *const columns[T_COUNT] = {
    "size_bytes duration_s recv_duration_s bytes_sent bytes_received send_MBps recv_MBps send_Mbps recv_Mbps",
    ("size_bytes duration_s c2s_bytes s2c_bytes c2s_send_MBps c2s_recv_MBps s2c_send_MBps s2c_recv_MBps "
     "total_recv_MBps total_recv_Mbps"),
    "size_bytes iterations first_us min_us median_us mean_us max_us stddev_us p99_us trans_per_s",
    "size_bytes rate_mbps duration_s sent_pkts recv_pkts lost_pkts loss_pct out_of_order send_MBps recv_MBps recv_Mbps",
    "size_bytes iterations lost loss_pct first_us min_us median_us mean_us max_us stddev_us p99_us trans_per_s",
};

/* whether udp_stream runs size at rate: unpaced at every size, paced at
 * the --paced-sizes (all without the option) */
static int udp_runs_at(const struct opts *o, uint64_t size, double rate, const uint64_t *paced, int npaced)
{
    if (rate == 0 || !o->paced_sizes_arg)
        return 1;
    for (int j = 0; j < npaced; j++)
        if (paced[j] == size)
            return 1;
    return 0;
}

int run_client(const struct opts *o, const char *rank_env)
{
    uint64_t sizes[MAX_SIZES + 2], paced[MAX_SIZES];
    int nsizes = make_sizes(o, sizes), npaced = 0, runs = nsizes;
    if (o->paced_sizes_arg) {
        npaced = parse_size_list("--paced-sizes", o->paced_sizes_arg, paced);
        for (int j = 0; j < npaced; j++) {
            int found = 0;
            for (int k = 0; k < nsizes; k++)
                found |= sizes[k] == paced[j];
            if (!found)
                usage_error("--paced-sizes: %" PRIu64 " is not one of the sizes run", paced[j]);
        }
    }
    if (o->test == T_UDP_STREAM) {
        runs = 0;
        for (int k = 0; k < nsizes; k++) {
            int at = 0;
            for (int r = 0; r < o->nrates; r++)
                at += udp_runs_at(o, sizes[k], o->rates[r], paced, npaced);
            if (!at)
                usage_error("size %" PRIu64 " is not in --paced-sizes and --rate-mbps has no 0: it would not run",
                            sizes[k]);
            runs += at;
        }
    }
    if (!is_rr(o->test) || !o->iters) {
        /* rough lower bound of the run time; refuse what cannot fit */
        double est = runs * o->windows * (o->duration_ms * 1e-3 + (o->test == T_UDP_STREAM ? 0.07 : 0.002));
        if (est > o->timeout)
            usage_error("%d runs x %ld window(s) x %ld ms need about %.0f s, more than --timeout %g s", runs,
                        o->windows, o->duration_ms, est, o->timeout);
    }
    set_deadline(o->timeout);

    struct client *c = (struct client *)calloc(1, sizeof *c);
    struct rowbuf *rb = (struct rowbuf *)calloc(1, sizeof *rb);
    if (!c || !rb)
        die("out of memory");
    c->o = o;
    c->udp_fd = -1;
    client_connect(c);

    char myhost[256], line[LINE_MAX_LEN];
    hostname_token(myhost, sizeof myhost);
    ctrl_send(c->ctl.fd,
              "hello proto=%d test=%s sndbuf=%ld rcvbuf=%ld rsz=%ld nodelay=%d validate=%d timeout=%.3f stall=%.3f "
              "host=%s",
              PROTO_VERSION, test_names[o->test], o->sndbuf, o->rcvbuf, o->recv_size, o->nodelay, o->validate,
              o->timeout, o->connect_timeout, myhost);
    client_expect(c, line, sizeof line, "ok", "the server's greeting");
    uint64_t udp_port = 0;
    if (kv_str(line, "host", c->server_host, sizeof c->server_host) != 0 ||
        kv_str(line, "cookie", c->cookie, sizeof c->cookie) != 0 || strlen(c->cookie) != 16 ||
        kv_u64(line, "udp_port", &udp_port) != 0 || udp_port > 65535)
        die("protocol error: malformed greeting '%.120s'", line);
    if (is_udp(o->test)) {
        if (udp_port == 0)
            die("protocol error: the server offered no UDP port");
        client_udp_socket(c, (int)udp_port);
    }

    uint64_t send_fail = 0, slips = 0;
    if (o->rates[0] > 0) /* paced: see client_udp_stream */
        prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
    for (int k = 0; k < nsizes; k++) {
        size_t size = (size_t)sizes[k];
        switch (o->test) {
        case T_TCP_STREAM:
        case T_TCP_BIDIR:
            client_tcp_stream_windows(c, size, rb);
            break;
        case T_TCP_RR:
            client_tcp_rr(c, size, rb);
            break;
        case T_UDP_STREAM:
            for (int r = 0; r < o->nrates; r++)
                if (udp_runs_at(o, size, o->rates[r], paced, npaced))
                    client_udp_stream(c, size, o->rates[r], rb, &send_fail, &slips);
            break;
        case T_UDP_RR:
            client_udp_rr(c, size, rb);
            break;
        }
    }
    ctrl_send(c->ctl.fd, "bye");
    client_expect(c, line, sizeof line, "bye", "the server's goodbye");
    close(c->ctl.fd);
    if (c->udp_fd >= 0)
        close(c->udp_fd);

    /* output (all at the end: an aborted run prints no partial table) */
    printf("hpcnet-kernel: " KERNEL_NAME " %d\n", FORMAT_VERSION);
    /* the generic structure of the MPI kernels: no MPI library; "rank" 0 is
     * the server, 1 the client (as with --role auto) */
    printf("mpi-library: none\n");
    printf("ranks: 2\n");
    printf("host: 0 %s\n", c->server_host);
    printf("host: 1 %s\n", myhost);
    printf("test: %s\n", test_names[o->test]);
    printf("transport: %s\n", is_udp(o->test) ? "udp" : "tcp");
    printf("server: %s\n", c->server_str);
    printf("client-host: %s\n", myhost);
    printf("server-host: %s\n", c->server_host);
    if (rank_env)
        printf("role-from: %s\n", rank_env);
    if (o->sndbuf)
        printf("sndbuf-requested: %ld\n", o->sndbuf);
    else
        printf("sndbuf-requested: auto\n");
    if (o->rcvbuf)
        printf("rcvbuf-requested: %ld\n", o->rcvbuf);
    else
        printf("rcvbuf-requested: auto\n");
    printf("sndbuf: %d\n", c->snd);
    printf("rcvbuf: %d\n", c->rcv);
    printf("server-sndbuf: %d\n", c->srv_snd);
    printf("server-rcvbuf: %d\n", c->srv_rcv);
    printf("duration-ms: %ld\n", o->duration_ms);
    if (o->test == T_TCP_STREAM || o->test == T_TCP_BIDIR) {
        printf("windows: %ld\n", o->windows);
        printf("nodelay: %s\n", o->nodelay ? "on" : "off");
        if (o->recv_size)
            printf("recv-size: %ld\n", o->recv_size);
        else
            printf("recv-size: max(size,%u)\n", DEFAULT_RECV_MIN);
    }
    if (is_rr(o->test)) {
        printf("warmup: %ld\n", o->warmup);
        if (o->iters)
            printf("iters: %ld\n", o->iters);
        else
            printf("iters: adaptive\n");
    }
    if (o->test == T_UDP_STREAM) {
        printf("rate-mbps: ");
        for (int r = 0; r < o->nrates; r++)
            printf("%s%.10g", r ? "," : "", o->rates[r]);
        printf("\n");
        if (o->paced_sizes_arg) {
            printf("paced-sizes: ");
            for (int j = 0, first = 1; j < nsizes; j++)
                for (int i = 0; i < npaced; i++)
                    if (paced[i] == sizes[j]) {
                        printf("%s%" PRIu64, first ? "" : ",", sizes[j]);
                        first = 0;
                        break;
                    }
            printf("\n");
        } else if (o->rates[0] > 0) {
            printf("paced-sizes: all\n");
        }
    }
    if (o->test == T_UDP_RR)
        printf("udp-timeout-ms: %ld\n", o->udp_timeout_ms);
    printf("validate: %s\n", o->validate ? "on" : "off");
    if (is_rr(o->test))
        printf("first-rtt-us: %.3f\n", rb->first_rtt);
    printf("columns: %s\n", columns[o->test]);
    for (int k = 0; k < rb->n; k++)
        printf("row: %s\n", rb->rows[k]);
    for (int k = 0; k < rb->n && o->windows > 1; k++)
        printf("# windows at %s\n", rb->windows[k]);
    if (o->validate)
        printf("validation: passed %d\n", rb->validated);
    if (o->sndbuf && c->snd >= 0 && c->snd < o->sndbuf)
        printf("# note: effective sndbuf %d is below the requested %ld (net.core.wmem_max?)\n", c->snd, o->sndbuf);
    if (o->rcvbuf && c->rcv >= 0 && c->rcv < o->rcvbuf)
        printf("# note: effective rcvbuf %d is below the requested %ld (net.core.rmem_max?)\n", c->rcv, o->rcvbuf);
    if (o->rcvbuf && c->mss > 0 && ((c->rcv > 0 && c->rcv < 2 * c->mss) || (c->srv_rcv > 0 && c->srv_rcv < 2 * c->mss)))
        printf("# note: rcvbuf is below 2 x MSS (MSS %d bytes): the receive window cannot hold two "
               "segments; expect stalls\n",
               c->mss);
    if (slips)
        printf("# note: the paced sender fell more than %llu ms behind its schedule %" PRIu64
               " times and dropped the missed slots (the rate reached is send_MBps)\n",
               PACE_MAX_BEHIND_NS / 1000000ull, slips);
    if (send_fail)
        printf("# note: %" PRIu64 " datagram sends failed (ENOBUFS/EAGAIN) and were not counted as sent\n",
               send_fail);
    if (is_rr(o->test))
        printf("# lowest median round trip: %.3f us at %" PRIu64 " B\n", rb->best, rb->best_size);
    else
        printf("# highest %s throughput: %.1f MB/s (%.1f Mbit/s) at %" PRIu64 " B\n",
               o->test == T_TCP_BIDIR ? "aggregate received" : "received", rb->best, rb->best * 8.0, rb->best_size);
    printf("done: ok\n");
    fflush(stdout);
    free(rb);
    free(c);
    return 0;
}
