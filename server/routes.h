/* routes.h - the route table (routes.c): every endpoint, its role, body rule and handler.  Only
 * main.c (which hands it to the server as server.routes) and the tests read it by name: the
 * dispatcher, the gate, the metrics and the OpenAPI document reach it through the server, so no
 * module that a handler calls depends on the handlers. */
#ifndef GANTRY_ROUTES_H
#define GANTRY_ROUTES_H

#include "server/route.h"

extern const route routes[];
extern const int routes_count;

#endif
