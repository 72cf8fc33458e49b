/* Unit test of bpf/zc_seq.h: which bytes of a zerocopy TCP stream xmit counts, and which a
 * receive counts because xmit never saw them (bench/NOTES.md, the end of "Drops"), at any
 * place of the 32-bit sequence space, across 2^31 and 2^32 too. */
#include <linux/types.h>
#include <stdio.h>

#include "zc_seq.h"

#include "check.h"

/* every skb of len bytes from start, transmitted and then received: nothing unseen */
static void contiguous(__u32 start, __u32 len, int n)
{
	struct zc_seq z = { 0 };
	__u32 fresh = 0, unseen = 0;

	for (int i = 0; i < n; i++) {
		fresh += zc_seq_fresh(&z, start + i * len, len);
		unseen += zc_seq_unseen(&z, start + i * len, len);
	}
	CHECK(fresh == len * n, "start %u: fresh %u", start, fresh);
	CHECK(unseen == 0, "start %u: unseen %u", start, unseen);
}

/* skb 1 of three (len bytes each from start) never passes xmit; received after skb 2 left
 * (the gap) or before (past the highest end); then retransmitted and received again */
static void one_missed(__u32 start, __u32 len, int received_late)
{
	struct zc_seq z = { 0 };
	__u32 fresh, unseen;

	fresh = zc_seq_fresh(&z, start, len);
	unseen = zc_seq_unseen(&z, start, len);
	if (received_late) {
		fresh += zc_seq_fresh(&z, start + 2 * len, len);
		unseen += zc_seq_unseen(&z, start + len, len);
	} else {
		unseen += zc_seq_unseen(&z, start + len, len);
		fresh += zc_seq_fresh(&z, start + 2 * len, len);
	}
	unseen += zc_seq_unseen(&z, start + 2 * len, len);
	CHECK(fresh + unseen == 3 * len, "start %u late %d: fresh %u + unseen %u", start,
	      received_late, fresh, unseen);
	CHECK(unseen == len, "start %u late %d: unseen %u", start, received_late, unseen);
	/* the missed skb again (a retransmit): counted nowhere */
	CHECK(zc_seq_fresh(&z, start + len, len) == 0, "start %u: retransmit counted", start);
	CHECK(zc_seq_unseen(&z, start + len, len) == 0, "start %u: received twice", start);
}

/* what the receive side counts as received again: n skbs of len bytes from start, the third
 * received twice (a spurious retransmit), the fifth lost and received only when sent again
 * after the sixth */
static void received_again(__u32 start, __u32 len)
{
	struct zc_seq z = { 0 };
	__u32 again = 0;

	for (int i = 0; i < 4; i++)
		again += zc_seq_again(&z, start + i * len, len);
	CHECK(again == 0, "start %u: again %u in order", start, again);
	CHECK(zc_seq_again(&z, start + 2 * len, len) == len, "start %u: a duplicate", start);
	CHECK(zc_seq_again(&z, start + 5 * len, len) == 0, "start %u: past a hole", start);
	CHECK(zc_seq_again(&z, start + 4 * len, len) == 0, "start %u: the hole", start);
	CHECK(zc_seq_again(&z, start + 4 * len, len) == len, "start %u: the hole twice", start);
	/* a retransmit that reaches past what arrived: only its head again */
	CHECK(zc_seq_again(&z, start + 5 * len + len / 2, len) == len / 2, "start %u: overlap",
	      start);
}

int main(void)
{
	static const __u32 starts[] = { 0, 1000, 0x7fffff00, 0x80000000, 0xfffffe00, 0xffffffff };

	for (unsigned i = 0; i < sizeof(starts) / sizeof(starts[0]); i++) {
		contiguous(starts[i], 1280, 100);
		contiguous(starts[i], 65536, 3);
		one_missed(starts[i], 1408, 0);
		one_missed(starts[i], 1408, 1);
		received_again(starts[i], 65536);
		received_again(starts[i], 1448);
	}

	/* a gap left 1 GiB behind (a range sent without zerocopy) is forgotten, not compared
	 * across 2^31 later */
	struct zc_seq z = { 0 };
	zc_seq_fresh(&z, 0, 100);
	zc_seq_fresh(&z, 200, 100);
	for (__u32 s = 300; s < (3U << 29); s += 1U << 20)
		CHECK(zc_seq_fresh(&z, s, 1U << 20) == 1U << 20, "at %u", s);
	CHECK(zc_seq_unseen(&z, 100, 100) == 0, "the stale gap counted");
	CHECK(z.gap_start == z.gap_end, "the stale gap kept: %u..%u", z.gap_start, z.gap_end);

	/* received from the middle of a gap: counted, and the rest of its tail given up */
	struct zc_seq m = { 0 };
	zc_seq_fresh(&m, 0, 100);
	zc_seq_fresh(&m, 400, 100);
	CHECK(zc_seq_unseen(&m, 200, 100) == 100, "middle");
	CHECK(zc_seq_unseen(&m, 100, 100) == 100, "its head");
	CHECK(zc_seq_unseen(&m, 200, 200) == 0, "counted twice");
	return check_report("test_zc_seq");
}
