/* The sockets kernel client's result rows and round-trip samples. */
#include "sockets_client_rows.h"
#include "sockets_util.h"

double mbps(uint64_t bytes, double secs) { return secs > 0 ? (double)bytes / secs / 1e6 : 0.0; }

/* Stream tests: remember the size with the highest throughput. */
void stream_best(struct rowbuf *rb, size_t size, double rate)
{
    if (rate > rb->best) {
        rb->best = rate;
        rb->best_size = size;
    }
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
