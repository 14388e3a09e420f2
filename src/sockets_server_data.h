/*
 * sockets_server_data.h - the sockets kernel server's data path
 * (sockets_server_data.c): the session with the client and the service of
 * one size of each test.
 */
#ifndef HPCNET_SOCKETS_SERVER_DATA_H
#define HPCNET_SOCKETS_SERVER_DATA_H
#include "sockets_options.h"
#include "sockets_protocol.h"

struct session {
    int test;
    long sndbuf, rcvbuf; /* applied to the server's data sockets */
    long recv_size;
    int nodelay;
    int validate;
    double stall_s;
    char cookie[17];
    int listen_fd;
    int udp_fd;
    struct ctrl ctl;
    unsigned char *pattern; /* 64 KiB payload pattern: UDP --validate */
};

int accept_by_deadline(int lfd, const char *late);
void server_tcp_size(struct session *s, size_t size, uint64_t dur_ns);
void server_udp_stream_size(struct session *s, size_t size);
void server_udp_rr_size(struct session *s, size_t size);
int server_udp_socket(const struct session *s, long sndbuf, long rcvbuf);

#endif
