/* io_uring's report of a zero-copy send (Linux 6.2+) where the liburing headers predate it:
 * a send asks with IORING_SEND_ZC_REPORT_USAGE, its notification's res carries
 * IORING_NOTIF_USAGE_ZC_COPIED where the kernel copied the pages after all. <liburing.h>
 * first: its own copy of the kernel's io_uring.h must not come after these. */
#ifndef NETIO_URING_ZC_H
#define NETIO_URING_ZC_H

#include <liburing.h>

#ifndef IORING_SEND_ZC_REPORT_USAGE
#define IORING_SEND_ZC_REPORT_USAGE (1U << 3)
#endif
#ifndef IORING_NOTIF_USAGE_ZC_COPIED
#define IORING_NOTIF_USAGE_ZC_COPIED (1U << 31)
#endif

#endif
