/*
 * sockets_server.h - the server role of the sockets kernel (sockets_server.c).
 */
#ifndef HPCNET_SOCKETS_SERVER_H
#define HPCNET_SOCKETS_SERVER_H
#include "sockets_options.h"

int run_server(const struct opts *o);

#endif
