/*
 * sockets_client_tcp.h - the sockets kernel client's TCP tests
 * (sockets_client_tcp.c): one size of tcp_stream / tcp_bidir and of tcp_rr.
 */
#ifndef HPCNET_SOCKETS_CLIENT_TCP_H
#define HPCNET_SOCKETS_CLIENT_TCP_H
#include "sockets_client_conn.h"
#include "sockets_client_rows.h"

void client_tcp_stream_windows(struct client *c, size_t size, struct rowbuf *rb);
void client_tcp_rr(struct client *c, size_t size, struct rowbuf *rb);

#endif
