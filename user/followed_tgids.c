// SPDX-License-Identifier: GPL-2.0
/* The followed processes as the tracer changes them (`pid add`, --cgroup, `clear`,
 * --prune-exited): followed_tgids, and beside it the count of followed tgids in each bucket
 * (struct follow_buckets in bpf/netio.h), which lets an event of any other process leave on
 * one load (bpf/filter.bpf.h, surely_unfollowed). A bucket is raised before its map gains a
 * tgid and lowered after it lost one, here as on the BPF side (follow.bpf.c), so that it
 * never reads 0 while a tgid of it is followed. Mapped into the tracer: the BPF side adds to
 * the same words at a fork. */
#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include "attach_internal.h"
#include "netio.h"

static size_t buckets_size(void)
{
	size_t page = sysconf(_SC_PAGESIZE);

	return (sizeof(struct follow_buckets) + page - 1) / page * page;
}

/* After the objects loaded: the buckets mapped and switched on. Where they cannot be, they
 * stay off, and every event looks followed_tgids up as before. */
void followed_tgids_open(struct tracer_bpf *t, int buckets_fd)
{
	void *m;

	if (buckets_fd < 0)
		return;
	m = mmap(NULL, buckets_size(), PROT_READ | PROT_WRITE, MAP_SHARED, buckets_fd, 0);
	if (m == MAP_FAILED)
		return;
	t->buckets = m;
	__atomic_store_n(&t->buckets->on, 1, __ATOMIC_SEQ_CST);
}

void followed_tgids_close(struct tracer_bpf *t)
{
	if (t->buckets)
		munmap(t->buckets, buckets_size());
	t->buckets = NULL;
}

static void bucket_add(const struct tracer_bpf *t, u32 tgid, int d)
{
	if (t->buckets)
		__atomic_fetch_add(&t->buckets->n[tgid % NETIO_FOLLOW_BUCKETS], d, __ATOMIC_SEQ_CST);
}

int tracer_bpf_follow_tgid(const struct tracer_bpf *t, u32 tgid, u64 since)
{
	int err;

	bucket_add(t, tgid, 1);
	if (!bpf_map_update_elem(t->followed_tgids, &tgid, &since, BPF_NOEXIST))
		return 0;
	err = errno;
	bucket_add(t, tgid, -1);
	if (err != EEXIST) {
		errno = err;
		return -1;
	}
	/* followed already: from now on, as a new `pid add` says */
	return bpf_map_update_elem(t->followed_tgids, &tgid, &since, BPF_EXIST);
}

int tracer_bpf_unfollow_tgid(const struct tracer_bpf *t, u32 tgid)
{
	if (bpf_map_delete_elem(t->followed_tgids, &tgid))
		return -1;
	bucket_add(t, tgid, -1);
	return 0;
}

void tracer_bpf_cgroups_followed(const struct tracer_bpf *t)
{
	if (t->buckets)
		__atomic_store_n(&t->buckets->cgroups, 1, __ATOMIC_SEQ_CST);
}

void tracer_bpf_unfollow_all(const struct tracer_bpf *t)
{
	u32 tgid;

	while (t->followed_tgids >= 0 && !bpf_map_get_next_key(t->followed_tgids, NULL, &tgid))
		if (tracer_bpf_unfollow_tgid(t, tgid))
			break;
}
