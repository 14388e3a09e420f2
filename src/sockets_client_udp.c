/* The sockets kernel client's UDP tests: udp_stream, udp_rr. */
#include "sockets_client_udp.h"
#include "sockets_util.h"

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

static void sleep_until_ns(uint64_t target)
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
static uint64_t udp_transaction(struct client *c, unsigned char *sbuf, unsigned char *rbuf, size_t size,
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
