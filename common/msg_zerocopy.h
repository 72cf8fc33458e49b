/* MSG_ZEROCOPY as the kernel defines it (Documentation/networking/msg_zerocopy.rst): the
 * constants that system headers older than the kernel lack, and where a completion sits in
 * what a read of the socket's error queue returns. The kernel's interface only, no counting:
 * the workloads (workloads/zerocopy.c) and the test programs (tests/programs/msgzc.h) each
 * keep their own account of the completions. */
#ifndef NETIO_MSG_ZEROCOPY_H
#define NETIO_MSG_ZEROCOPY_H

#include <linux/errqueue.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>

#ifndef SO_EE_ORIGIN_ZEROCOPY
#define SO_EE_ORIGIN_ZEROCOPY 5
#endif
#ifndef SO_EE_CODE_ZEROCOPY_COPIED
#define SO_EE_CODE_ZEROCOPY_COPIED 1
#endif
#ifndef SO_ZEROCOPY
#define SO_ZEROCOPY 60
#endif
#ifndef MSG_ZEROCOPY
#define MSG_ZEROCOPY 0x4000000
#endif

/* The extended error a control message of an error-queue read carries: true with it in
 * *serr for IP_RECVERR and IPV6_RECVERR, false for any other control message. */
static inline bool cmsg_recverr(const struct cmsghdr *cm, struct sock_extended_err *serr)
{
	if (!((cm->cmsg_level == SOL_IP && cm->cmsg_type == IP_RECVERR) ||
	      (cm->cmsg_level == SOL_IPV6 && cm->cmsg_type == IPV6_RECVERR)))
		return false;
	memcpy(serr, CMSG_DATA(cm), sizeof(*serr));
	return true;
}

/* Is serr a zero-copy completion: the kernel done with the pages of the sends ee_info to
 * ee_data, with SO_EE_CODE_ZEROCOPY_COPIED in ee_code where it copied them after all? */
static inline bool is_zc_completion(const struct sock_extended_err *serr)
{
	return serr->ee_origin == SO_EE_ORIGIN_ZEROCOPY && serr->ee_errno == 0;
}

#endif
