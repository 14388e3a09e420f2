/*
 * sockets_protocol.h - what the sockets kernel's server and client say to each
 * other (sockets_protocol.c): the control connection's lines and their
 * key=value fields, the stream threads of the data path, sequence numbers.
 */
#ifndef HPCNET_SOCKETS_PROTOCOL_H
#define HPCNET_SOCKETS_PROTOCOL_H
#include "sockets_common.h"

struct ctrl {
    int fd;
    size_t len;
    char buf[8192];
};
struct stream_send {
    int fd;
    const unsigned char *buf;
    size_t size;
    uint64_t dur_ns;
    uint64_t bytes;
    uint64_t span_ns;
    int err; /* errno of a failure, 0 = ok */
};
struct stream_recv {
    int fd;
    unsigned char *buf;
    size_t rsz;
    uint64_t t0; /* reference start time */
    /* validation: ref[j] = pattern[j % size], length size + rsz */
    const unsigned char *ref;
    size_t size;
    uint64_t bytes;
    uint64_t span_ns;
    int err;
    int corrupt;
};

void ctrl_send(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int ctrl_has_line(const struct ctrl *c);
int ctrl_getline(struct ctrl *c, char *out, size_t outlen, int timeout_ms);
int ctrl_ready(const struct ctrl *c);
int line_is(const char *line, const char *word);
int kv_str(const char *line, const char *key, char *out, size_t outlen);
int kv_u64(const char *line, const char *key, uint64_t *out);
int kv_dbl(const char *line, const char *key, double *out);
void *stream_sender(void *arg);
void *stream_receiver(void *arg);
unsigned char *make_stream_ref(const unsigned char *pattern, size_t size, size_t rsz);
void put_seq(unsigned char *buf, size_t size, uint64_t seq);
uint64_t get_seq(const unsigned char *buf, size_t size);
uint64_t seq_mask(size_t size);
size_t stream_recv_size(long opt_rsz, size_t size);

#endif
