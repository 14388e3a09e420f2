/* The sockets kernel client's TCP tests: tcp_stream, tcp_bidir, tcp_rr. */
#include "sockets_client_tcp.h"
#include "sockets_util.h"

/* One window of a TCP stream test on a new connection: writes its row, returns
 * its receive rate (MB/s; tcp_bidir: both directions). */
static double client_tcp_stream(struct client *c, size_t size, char *row, size_t row_len)
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

static void tcp_transaction(struct client *c, int fd, unsigned char *sbuf, unsigned char *rbuf, size_t size,
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
