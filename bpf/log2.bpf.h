/* SPDX-License-Identifier: GPL-2.0 */
#ifndef NETIO_LOG2_H
#define NETIO_LOG2_H

/* floor(log2(v)) (0 for v = 0), without loops: the slot of a log2 histogram. */
static __always_inline u32 log2_slot(u64 v)
{
	u32 r = 0, shift;

	shift = (v > 0xFFFFFFFF) << 5; v >>= shift; r = shift;
	shift = (v > 0xFFFF) << 4; v >>= shift; r |= shift;
	shift = (v > 0xFF) << 3; v >>= shift; r |= shift;
	shift = (v > 0xF) << 2; v >>= shift; r |= shift;
	shift = (v > 0x3) << 1; v >>= shift; r |= shift;
	r |= (v >> 1);
	return r;
}

#endif
