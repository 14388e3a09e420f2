/*
 * sockets_client_conn.h - the sockets kernel client's connections
 * (sockets_client_conn.c): the client's state, the control connection to the
 * server and the data connections of each size.
 */
#ifndef HPCNET_SOCKETS_CLIENT_CONN_H
#define HPCNET_SOCKETS_CLIENT_CONN_H
#include "sockets_options.h"
#include "sockets_protocol.h"

struct client {
    const struct opts *o;
    struct ctrl ctl;
    struct sockaddr_storage server; /* control peer; data connects here */
    char server_str[NI_MAXHOST + 16];
    char server_host[256];
    char cookie[17];
    int udp_fd;
    /* effective buffer sizes: client data socket and server data socket */
    int snd, rcv, srv_snd, srv_rcv;
    int have_bufs;
    int mss; /* TCP_MAXSEG of the last TCP data connection */
};

void client_fail(struct client *c, const char *fmt, ...) __attribute__((noreturn, format(printf, 2, 3)));
void client_expect(struct client *c, char *out, size_t outlen, const char *word, const char *what);
void client_connect(struct client *c);
int client_data_connect(struct client *c, int nodelay);
void note_bufs(struct client *c, int fd, const char *result);

#endif
