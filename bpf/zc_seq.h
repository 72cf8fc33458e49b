/* Which bytes of a zerocopy TCP socket's stream were counted, by sequence number: shared by
 * the tracepoint rung's xmit and receive programs (zc_skb.bpf.c) and its unit test
 * (tests/unit/test_zc_seq.c). Sequence numbers compare as TCP's do (within 2^31). */
#ifndef NETIO_ZC_SEQ_H
#define NETIO_ZC_SEQ_H

struct zc_seq {
	__u32 max_end;		/* the highest end counted */
	__u32 valid;		/* max_end is set */
	__u32 gap_start;	/* the range the last jump of max_end passed over, which xmit */
	__u32 gap_end;		/* never saw (empty: none) */
};

/* The bytes of a TCP skb [seq, seq + len) leaving a device not counted before: a retransmit
 * is not new zerocopy data. A skb that starts past the highest end counted leaves a gap:
 * bytes that reached the device without passing xmit's program (bench/NOTES.md, the end of
 * "Drops"), which zc_seq_unseen counts when they are received. */
static inline __u32 zc_seq_fresh(struct zc_seq *z, __u32 seq, __u32 len)
{
	__u32 end = seq + len;

	if (!z->valid) {
		z->valid = 1;
		z->max_end = end;
		return len;
	}
	if ((__s32)(end - z->max_end) <= 0)
		return 0;
	if ((__s32)(seq - z->max_end) > 0) {
		z->gap_start = z->max_end;
		z->gap_end = seq;
	}
	len = (__s32)(seq - z->max_end) < 0 ? end - z->max_end : len;
	z->max_end = end;
	return len;
}

/* The bytes of a received zerocopy TCP skb [seq, seq + len) that xmit never counted: past the
 * highest end it counted, or in the gap its last jump left; they are counted now, once (the
 * gap shrinks, the highest end moves). A skb is received after it was transmitted, so one
 * xmit counted is never past that end. Only the last gap is kept: a second one before the
 * first arrives replaces it. */
static inline __u32 zc_seq_unseen(struct zc_seq *z, __u32 seq, __u32 len)
{
	__u32 end = seq + len, lo, hi;

	if (!z->valid)
		return 0;	/* xmit counted nothing of it: nothing to compare with */
	if ((__s32)(end - z->max_end) > 0) {
		lo = (__s32)(seq - z->max_end) > 0 ? seq : z->max_end;
		if (lo != z->max_end) {
			z->gap_start = z->max_end;
			z->gap_end = lo;
		}
		z->max_end = end;
		return end - lo;
	}
	/* no gap, or one left 1 GiB behind (never received: a range not sent zerocopy); an
	 * empty or stale one would wrap the comparisons below */
	if (z->gap_start == z->gap_end || z->max_end - z->gap_end > (1U << 30)) {
		z->gap_start = z->gap_end;
		return 0;
	}
	lo = (__s32)(seq - z->gap_start) > 0 ? seq : z->gap_start;
	hi = (__s32)(end - z->gap_end) < 0 ? end : z->gap_end;
	if ((__s32)(hi - lo) <= 0)
		return 0;
	if (lo == z->gap_start)
		z->gap_start = hi;
	else
		z->gap_end = lo;	/* from its middle: the rest of its tail is given up */
	return hi - lo;
}

/* The receive side's own record, of the bytes a socket's zerocopy skbs were received (or
 * copied) with: the bytes of [seq, seq + len) received before, copied again (a retransmit of a
 * segment that had arrived). Bytes past the highest end, or in the gap its last jump left (not
 * received yet: lost on the way), are new; the first skb seen starts the record. The limits
 * are zc_seq_unseen's: one gap, and a skb received from its middle gives up the rest of its
 * tail (a later skb there counts as again). */
static inline __u32 zc_seq_again(struct zc_seq *z, __u32 seq, __u32 len)
{
	if (!z->valid) {
		z->valid = 1;
		z->max_end = seq + len;
		z->gap_start = z->gap_end = 0;
		return 0;
	}
	return len - zc_seq_unseen(z, seq, len);
}

#endif
