/* `netio-tracer --probe`: what this kernel allows, each probed for real (a trivial program of
 * each kind loaded and attached, each hardware event opened, SO_ZEROCOPY set on a socket). */
#ifndef NETIO_PROBE_H
#define NETIO_PROBE_H
#include <stdio.h>

int probe_write_json(FILE *out);

#endif
