/* Unit tests for the workloads' building blocks (no root, no network).
 * Prints every failure and ends with "N passed, N failed"; exits non-zero on any failure. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "json.h"
#include "message.h"
#include "options.h"
#include "sysctl.h"
#include "zerocopy.h"

#include "check.h"

/* ---- message layout ------------------------------------------------------- */

static void test_layout(void)
{
	static const size_t sizes[] = { 8, 9, 15, 16, 63, 64, 65, 1000, 1024, 65536, 65537,
					64u << 20, (64u << 20) - 1 };
	size_t k;

	for (k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t size = sizes[k], sum = 0;
		int i;

		for (i = 0; i < WL_FIELDS; i++) {
			size_t want = size / 8 + (i == 7 ? size % 8 : 0);

			CHECK(wl_field_len(size, i) == want, "size %zu field %d: %zu != %zu", size, i,
			      wl_field_len(size, i), want);
			CHECK(wl_field_offset(size, i) == sum, "size %zu field %d offset %zu != %zu",
			      size, i, wl_field_offset(size, i), sum);
			sum += wl_field_len(size, i);
		}
		CHECK(sum == size, "size %zu: fields add up to %zu", size, sum);
	}
	CHECK(wl_field_len(15, 7) == 8, "15 bytes: last field %zu", wl_field_len(15, 7));
	CHECK(wl_field_len(15, 0) == 1, "15 bytes: first field %zu", wl_field_len(15, 0));
}

static void test_message_alloc(void)
{
	static const size_t sizes[] = { 8, 13, 1024, 64u << 20 };
	struct wl_message m;
	size_t k;
	int i, j, distinct = 1;

	for (k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		CHECK(wl_message_init(&m, sizes[k]) == 0, "init %zu: %s", sizes[k], strerror(errno));
		CHECK(m.size == sizes[k], "size %zu", m.size);
		for (i = 0; i < WL_FIELDS; i++) {
			CHECK(m.field[i] != NULL, "field %d", i);
			CHECK(m.len[i] == wl_field_len(sizes[k], i), "len %d", i);
			for (j = 0; j < i; j++)
				if (m.field[i] == m.field[j])
					distinct = 0;
		}
		CHECK(distinct, "size %zu: fields are separate allocations", sizes[k]);
		wl_message_free(&m);
		for (i = 0; i < WL_FIELDS; i++)
			CHECK(m.field[i] == NULL, "freed field %d", i);
	}
	errno = 0;
	CHECK(wl_message_init(&m, 7) == -1 && errno == EINVAL, "7 bytes must be refused");
	CHECK(wl_message_init(&m, 0) == -1, "0 bytes must be refused");
}

/* ---- pattern -------------------------------------------------------------- */

static void test_pattern(void)
{
	uint8_t buf[300], buf2[300];
	size_t off, len, i;
	int same;

	/* fill agrees with the per-byte definition at every alignment */
	for (off = 0; off < 17; off++) {
		for (len = 0; len < 40; len++) {
			int ok = 1;

			wl_pattern_fill(buf, len, 3, 77, 5, off);
			for (i = 0; i < len; i++)
				if (buf[i] != wl_pattern_byte(3, 77, 5, off + i))
					ok = 0;
			CHECK(ok, "fill off %zu len %zu disagrees with wl_pattern_byte", off, len);
			CHECK(wl_pattern_check(buf, len, 3, 77, 5, off) == 0, "check off %zu len %zu", off,
			      len);
		}
	}
	/* a fill in two pieces equals one fill */
	wl_pattern_fill(buf, 300, 1, 2, 3, 0);
	wl_pattern_fill(buf2, 101, 1, 2, 3, 0);
	wl_pattern_fill(buf2 + 101, 199, 1, 2, 3, 101);
	CHECK(memcmp(buf, buf2, 300) == 0, "split fill differs");

	/* every single flipped byte, or single flipped bit, is found */
	for (i = 0; i < 300; i++) {
		wl_pattern_fill(buf, 300, 9, 1000, 7, 3);
		buf[i] ^= (uint8_t)(1u << (i % 8));
		CHECK(wl_pattern_check(buf, 300, 9, 1000, 7, 3) == 1, "flipped byte %zu: %zu", i,
		      wl_pattern_check(buf, 300, 9, 1000, 7, 3));
	}
	/* two bytes in one word count as two */
	wl_pattern_fill(buf, 64, 0, 0, 0, 0);
	buf[8] ^= 1;
	buf[15] ^= 0x80;
	CHECK(wl_pattern_check(buf, 64, 0, 0, 0, 0) == 2, "two bytes in a word");

	/* (connection, message, field) each change the bytes */
	wl_pattern_fill(buf, 64, 1, 5, 2, 0);
	CHECK(wl_pattern_check(buf, 64, 2, 5, 2, 0) > 48, "another connection looks the same");
	CHECK(wl_pattern_check(buf, 64, 1, 6, 2, 0) > 48, "the next message looks the same");
	CHECK(wl_pattern_check(buf, 64, 1, 5, 3, 0) > 48, "another field looks the same");
	CHECK(wl_pattern_check(buf + 8, 56, 1, 5, 2, 0) > 40, "shifted data looks the same");
	/* message n and n + ring size (a zero-copy buffer reused too early) differ */
	wl_pattern_fill(buf, 64, 0, 3, 0, 0);
	wl_pattern_fill(buf2, 64, 0, 3 + 128, 0, 0);
	same = memcmp(buf, buf2, 64) == 0;
	CHECK(!same, "message 3 and 131 are equal");
}

static void test_message_fill_check(void)
{
	struct wl_message m;
	int i;

	CHECK(wl_message_init(&m, 1027) == 0, "init");
	wl_message_fill(&m, 4, 123456789);
	CHECK(wl_message_check(&m, 4, 123456789) == 0, "fresh message has errors");
	CHECK(wl_message_check(&m, 4, 123456790) > 900, "wrong message number not seen");
	for (i = 0; i < WL_FIELDS; i++) {
		size_t at = m.len[i] - 1;

		m.field[i][at] ^= 0x10;
		CHECK(wl_message_check(&m, 4, 123456789) == 1, "flip in field %d", i);
		m.field[i][at] ^= 0x10;
	}
	wl_message_free(&m);
}

/* ---- serialization, iovec, stream verifier --------------------------------- */

static void test_serialize_iov(void)
{
	static const size_t sizes[] = { 8, 15, 1024, 1031, 65536 };
	size_t k;

	for (k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t size = sizes[k], total = 0;
		struct wl_message m;
		struct iovec iov[WL_FIELDS];
		uint8_t *flat = malloc(size), *p;
		int i, ok = 1;

		CHECK(wl_message_init(&m, size) == 0 && flat, "init %zu", size);
		wl_message_fill(&m, 2, 9);
		wl_message_serialize(&m, flat);
		for (i = 0, p = flat; i < WL_FIELDS; p += m.len[i], i++)
			if (memcmp(p, m.field[i], m.len[i]) != 0)
				ok = 0;
		CHECK(ok, "size %zu: serialized fields out of order", size);
		wl_message_iov(&m, iov);
		ok = 1;
		for (i = 0; i < WL_FIELDS; i++) {
			if (iov[i].iov_base != m.field[i] || iov[i].iov_len != m.len[i])
				ok = 0;
			total += iov[i].iov_len;
		}
		CHECK(ok, "size %zu: iovec does not point at the fields", size);
		CHECK(total == size, "size %zu: iovec holds %zu bytes", size, total);
		/* the serialized message is what a receiver checks */
		{
			struct wl_verifier v;

			wl_verifier_init(&v, size, 2);
			v.msg = 9;
			wl_verifier_feed(&v, flat, size);
			CHECK(v.bad_bytes == 0 && v.msg == 10 && wl_verifier_partial(&v) == 0,
			      "size %zu: verifier on a serialized message: bad %llu msg %llu", size,
			      (unsigned long long)v.bad_bytes, (unsigned long long)v.msg);
		}
		wl_message_free(&m);
		free(flat);
	}
}

/* Resuming partial sends: every split point of a message, in one or many steps, gathers
 * exactly the bytes not yet sent, in order. */
static void test_iov_advance(void)
{
	static const size_t sizes[] = { 8, 15, 1031 };
	size_t k;

	for (k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t size = sizes[k], cut, step;
		struct wl_message m;
		uint8_t *flat = malloc(size);
		int ok = 1;

		CHECK(wl_message_init(&m, size) == 0 && flat, "init");
		wl_message_fill(&m, 1, 2);
		wl_message_serialize(&m, flat);
		for (step = 1; step <= size; step = step * 2 + 1) {
			for (cut = 0; cut < size; cut += step) {
				struct iovec base[WL_FIELDS], *iov = base;
				size_t cnt = WL_FIELDS, pos = cut, i, total = 0;

				wl_message_iov(&m, base);
				/* advance in two pieces: cut/2, then the rest */
				wl_iov_advance(&iov, &cnt, cut / 2);
				wl_iov_advance(&iov, &cnt, cut - cut / 2);
				for (i = 0; i < cnt; i++) {
					if (iov[i].iov_len == 0 ||
					    memcmp(iov[i].iov_base, flat + pos, iov[i].iov_len) != 0)
						ok = 0;
					pos += iov[i].iov_len;
					total += iov[i].iov_len;
				}
				if (total != size - cut || pos != size || cnt > WL_FIELDS)
					ok = 0;
			}
		}
		CHECK(ok, "size %zu: advanced iovec does not hold the unsent bytes", size);
		wl_message_free(&m);
		free(flat);
	}
}

/* nmsg messages of connection 7 back to back in stream, message n carrying the bytes of
 * message n % ring (ring = nmsg: each its own). */
static void write_stream(struct wl_message *m, uint8_t *stream, size_t nmsg, size_t ring)
{
	for (size_t n = 0; n < nmsg; n++) {
		wl_message_fill(m, 7, n % ring);
		wl_message_serialize(m, stream + n * m->size);
	}
}

/* v made for connection conn, then fed len bytes of stream, chunk bytes at a time. */
static void feed(struct wl_verifier *v, size_t size, uint32_t conn, const uint8_t *stream,
		 size_t len, size_t chunk)
{
	wl_verifier_init(v, size, conn);
	for (size_t pos = 0; pos < len; pos += chunk)
		wl_verifier_feed(v, stream + pos, pos + chunk <= len ? chunk : len - pos);
}

static void test_verifier_stream(void)
{
	const size_t size = 1000, nmsg = 20, len = size * nmsg;
	uint8_t *stream = malloc(len);
	struct wl_message m;
	struct wl_verifier v;
	size_t chunk;

	CHECK(wl_message_init(&m, size) == 0 && stream, "init");
	write_stream(&m, stream, nmsg, nmsg);
	/* any chunking gives the same answer */
	for (chunk = 1; chunk < 2100; chunk = chunk * 3 + 1) {
		feed(&v, size, 7, stream, len, chunk);
		CHECK(v.bad_bytes == 0 && v.msg == nmsg, "chunk %zu: bad %llu, messages %llu", chunk,
		      (unsigned long long)v.bad_bytes, (unsigned long long)v.msg);
	}
	/* a stream stopping mid-message says how far it got */
	feed(&v, size, 7, stream, size + 130, len);
	CHECK(v.msg == 1 && wl_verifier_partial(&v) == 130, "partial %zu",
	      wl_verifier_partial(&v));
	/* one flipped byte: one bad byte, one bad message */
	stream[5 * size + 999] ^= 1;
	feed(&v, size, 7, stream, len, len);
	CHECK(v.bad_bytes == 1 && v.bad_messages == 1, "flip: %llu bytes %llu messages",
	      (unsigned long long)v.bad_bytes, (unsigned long long)v.bad_messages);
	stream[5 * size + 999] ^= 1;
	/* the wrong connection's stream */
	feed(&v, size, 8, stream, len, len);
	CHECK(v.bad_messages == nmsg, "another connection: %llu bad messages",
	      (unsigned long long)v.bad_messages);
	CHECK(!wl_verifier_resends(&v), "another connection's bytes taken for resent messages");
	/* two messages swapped (a buffer reused out of order) */
	memcpy(stream, stream + 3 * size, size);
	feed(&v, size, 7, stream, len, len);
	CHECK(v.bad_messages == 1, "message 3 in place of 0: %llu bad messages",
	      (unsigned long long)v.bad_messages);
	CHECK(!wl_verifier_resends(&v), "message 3 in place of 0 taken for a resend");
	wl_message_free(&m);
	free(stream);
}

/* A server without --verify fills its messages once: one message, or a ring of R sent in
 * turn (message n carries message n % R's bytes). The verifier tells that from corruption. */
static void test_verifier_resends(void)
{
	const size_t size = 1000, nmsg = 20, len = size * nmsg;
	uint8_t *stream = malloc(len);
	struct wl_message m;
	struct wl_verifier v;
	size_t ring, chunk;

	CHECK(wl_message_init(&m, size) == 0 && stream, "init");
	for (ring = 1; ring <= 4; ring++) {
		write_stream(&m, stream, nmsg, ring);
		for (chunk = 1; chunk < 2100; chunk = chunk * 3 + 1) {
			feed(&v, size, 7, stream, len, chunk);
			CHECK(v.bad_messages == nmsg - ring && wl_verifier_resends(&v) &&
			      v.period == ring, "ring %zu, chunk %zu: %llu bad, resends %d, period %llu",
			      ring, chunk, (unsigned long long)v.bad_messages, wl_verifier_resends(&v),
			      (unsigned long long)v.period);
		}
	}
	/* the same with one byte corrupted: not only resent messages any more */
	stream[17 * size + 3] ^= 0x40;
	feed(&v, size, 7, stream, len, len);
	CHECK(v.bad_bytes && !wl_verifier_resends(&v), "a corrupted resend taken for a clean one");
	/* nothing wrong: nothing resent */
	write_stream(&m, stream, nmsg, nmsg);
	feed(&v, size, 7, stream, len, len);
	CHECK(!v.bad_bytes && !wl_verifier_resends(&v), "a good stream called a resend");
	wl_message_free(&m);
	free(stream);
}

/* ---- zero-copy completions ------------------------------------------------- */

static void test_zc_ranges(void)
{
	CHECK(wl_zc_range_len(5, 5) == 1, "5..5");
	CHECK(wl_zc_range_len(0, 9) == 10, "0..9");
	CHECK(wl_zc_range_len(0xfffffffeu, 1) == 4, "wrap: %llu",
	      (unsigned long long)wl_zc_range_len(0xfffffffeu, 1));
	CHECK(wl_zc_range_len(0xffffffffu, 0) == 2, "wrap at the edge");
	CHECK(wl_zc_range_len(0, 0xffffffffu) == (1ULL << 32), "all ids");
	CHECK(wl_zc_range_len(1, 0) == (1ULL << 32), "1..0 is every id");
}

static void test_zc_tracker(void)
{
	struct wl_zc_tracker t;
	uint32_t i;

	/* in order, with COPIED and plain ranges, across the 32-bit wrap */
	CHECK(wl_zc_init(&t, 4, 40, 0xfffffff0u) == 0, "init");
	CHECK(t.cap == 64, "cap rounded to %u", t.cap);
	for (i = 0; i < 32; i++)
		wl_zc_sent(&t, i % 4);
	CHECK(t.c.sends == 32 && wl_zc_inflight(&t) == 32, "in flight %u", wl_zc_inflight(&t));
	CHECK(t.pending[0] == 8 && wl_zc_slot_busy(&t, 3), "pending %u", t.pending[0]);
	CHECK(wl_zc_complete(&t, 0xfffffff0u, 0xfffffff7u, 1) == 8, "first 8");
	CHECK(t.oldest == 0xfffffff8u, "oldest %#x", t.oldest);
	CHECK(wl_zc_complete(&t, 0xfffffff8u, 7, 0) == 16, "range across the wrap");
	CHECK(t.c.completions == 24 && t.c.copied == 8, "completions %llu copied %llu",
	      (unsigned long long)t.c.completions, (unsigned long long)t.c.copied);
	CHECK(t.oldest == 8 && wl_zc_inflight(&t) == 8, "oldest %#x", t.oldest);
	CHECK(t.pending[0] == 2 && t.pending[3] == 2, "pending %u %u", t.pending[0], t.pending[3]);
	CHECK(wl_zc_complete(&t, 8, 15, 1) == 8, "last 8");
	CHECK(t.c.completions == t.c.sends && t.c.copied == 16 && t.c.unexpected == 0,
	      "completions %llu sends %llu copied %llu", (unsigned long long)t.c.completions,
	      (unsigned long long)t.c.sends, (unsigned long long)t.c.copied);
	CHECK(wl_zc_inflight(&t) == 0 && !wl_zc_slot_busy(&t, 0) && !wl_zc_slot_busy(&t, 3),
	      "all done");
	CHECK(t.c.notifications == 3, "notifications %llu", (unsigned long long)t.c.notifications);

	/* a duplicate and a stray range are counted as unexpected, never freeing a slot */
	CHECK(wl_zc_complete(&t, 8, 9, 0) == 0, "duplicate");
	CHECK(t.c.unexpected == 2, "unexpected %llu", (unsigned long long)t.c.unexpected);
	wl_zc_sent(&t, 1);
	CHECK(wl_zc_complete(&t, 100, 100, 0) == 0 && t.pending[1] == 1, "stray id freed a slot");
	/* a range that starts before the window and runs into it */
	CHECK(wl_zc_complete(&t, 14, 16, 0) == 1 && t.pending[1] == 0, "overlapping range");
	CHECK(t.c.unexpected == 5, "unexpected %llu", (unsigned long long)t.c.unexpected);
	wl_zc_free(&t);

	/* out of order: a later range first keeps the oldest in place */
	CHECK(wl_zc_init(&t, 2, 8, 0) == 0, "init");
	for (i = 0; i < 8; i++)
		wl_zc_sent(&t, i < 4 ? 0 : 1);
	CHECK(wl_zc_window_full(&t), "window of 8 is full");
	CHECK(wl_zc_complete(&t, 4, 7, 0) == 4, "later range");
	CHECK(t.oldest == 0 && wl_zc_inflight(&t) == 8 && !wl_zc_slot_busy(&t, 1) &&
	      wl_zc_slot_busy(&t, 0), "oldest %u", t.oldest);
	CHECK(wl_zc_complete(&t, 0, 3, 1) == 4, "earlier range");
	CHECK(t.oldest == 8 && wl_zc_inflight(&t) == 0 && !wl_zc_window_full(&t), "oldest %u",
	      t.oldest);
	CHECK(t.c.completions == 8 && t.c.copied == 4, "copied %llu",
	      (unsigned long long)t.c.copied);
	wl_zc_free(&t);

	/* partial sends: one message, several ids, free only after the last */
	CHECK(wl_zc_init(&t, 1, 16, 0xfffffffeu) == 0, "init");
	wl_zc_sent(&t, 0);
	wl_zc_sent(&t, 0);
	wl_zc_sent(&t, 0);
	CHECK(wl_zc_complete(&t, 0xfffffffeu, 0xffffffffu, 0) == 2 && wl_zc_slot_busy(&t, 0),
	      "slot freed too early");
	CHECK(wl_zc_complete(&t, 0, 0, 0) == 1 && !wl_zc_slot_busy(&t, 0), "slot not freed");
	wl_zc_free(&t);
	CHECK(wl_zc_init(&t, 0, 16, 0) == -1, "0 slots must be refused");
}

/* ---- options ---------------------------------------------------------------- */

static void test_parse_values(void)
{
	static const char *bad_sizes[] = { "0", "7", "abc", "", "-8", "+8", " 8", "8 ", "1.5K",
					   "64KB", "67108865", "65M", "65536K1", "0x40",
					   "99999999999999999999999", "64MiBs" };
	static const struct { const char *s; size_t v; } good_sizes[] = {
		{ "8", 8 }, { "1024", 1024 }, { "1K", 1024 }, { "64k", 65536 }, { "64KiB", 65536 },
		{ "1M", 1 << 20 }, { "64MiB", 64u << 20 }, { "67108864", 64u << 20 }, { "9B", 9 },
	};
	static const char *bad_threads[] = { "0", "257", "abc", "-1", "1x", "", "1e2" };
	static const char *bad_durations[] = { "0", "-1", "abc", "inf", "nan", "1e3", "", ".",
					       "0x10", "1.5.2", "100000", "2ms" };
	static const char *bad_strategies[] = { "zerocopy", "Two-copy", "", "copy", "one-copy " };
	char err[200];
	size_t k, sz;
	int n;
	double d;
	uint64_t c;
	enum wl_strategy st;

	for (k = 0; k < sizeof(bad_sizes) / sizeof(bad_sizes[0]); k++) {
		err[0] = 0;
		CHECK(wl_parse_size(bad_sizes[k], &sz, err, sizeof(err)) == -1, "size '%s' accepted",
		      bad_sizes[k]);
		CHECK(err[0] && !strchr(err, '\n'), "size '%s': no one-line reason", bad_sizes[k]);
	}
	for (k = 0; k < sizeof(good_sizes) / sizeof(good_sizes[0]); k++) {
		sz = 0;
		CHECK(wl_parse_size(good_sizes[k].s, &sz, err, sizeof(err)) == 0 &&
		      sz == good_sizes[k].v, "size '%s' -> %zu (%s)", good_sizes[k].s, sz, err);
	}
	for (k = 0; k < sizeof(bad_threads) / sizeof(bad_threads[0]); k++)
		CHECK(wl_parse_threads(bad_threads[k], &n, err, sizeof(err)) == -1,
		      "threads '%s' accepted", bad_threads[k]);
	CHECK(wl_parse_threads("1", &n, err, sizeof(err)) == 0 && n == 1, "threads 1");
	CHECK(wl_parse_threads("256", &n, err, sizeof(err)) == 0 && n == 256, "threads 256");
	for (k = 0; k < sizeof(bad_durations) / sizeof(bad_durations[0]); k++)
		CHECK(wl_parse_duration(bad_durations[k], &d, err, sizeof(err)) == -1,
		      "duration '%s' accepted", bad_durations[k]);
	CHECK(wl_parse_duration("0.5", &d, err, sizeof(err)) == 0 && d == 0.5, "0.5");
	CHECK(wl_parse_duration("2s", &d, err, sizeof(err)) == 0 && d == 2, "2s");
	CHECK(wl_parse_duration(".25", &d, err, sizeof(err)) == 0 && d == 0.25, ".25");
	CHECK(wl_parse_count("0", &c, err, sizeof(err)) == -1, "count 0 accepted");
	CHECK(wl_parse_count("12x", &c, err, sizeof(err)) == -1, "count 12x accepted");
	CHECK(wl_parse_count("1000", &c, err, sizeof(err)) == 0 && c == 1000, "count 1000");
	for (k = 0; k < sizeof(bad_strategies) / sizeof(bad_strategies[0]); k++)
		CHECK(wl_parse_strategy(bad_strategies[k], &st, err, sizeof(err)) == -1,
		      "strategy '%s' accepted", bad_strategies[k]);
	CHECK(wl_parse_strategy("two-copy", &st, err, sizeof(err)) == 0 && st == STRAT_TWO_COPY, "2c");
	CHECK(wl_parse_strategy("one-copy", &st, err, sizeof(err)) == 0 && st == STRAT_ONE_COPY, "1c");
	CHECK(wl_parse_strategy("zero-copy", &st, err, sizeof(err)) == 0 && st == STRAT_ZERO_COPY,
	      "zc");
	CHECK(wl_parse_strategy("per-field", &st, err, sizeof(err)) == 0 && st == STRAT_PER_FIELD,
	      "pf");
	CHECK(wl_parse_port("0", 1, &n, err, sizeof(err)) == 0 && n == 0, "server port 0");
	CHECK(wl_parse_port("0", 0, &n, err, sizeof(err)) == -1, "client port 0 accepted");
	CHECK(wl_parse_port("65536", 1, &n, err, sizeof(err)) == -1, "port 65536 accepted");
	/* the whole-number options give their two reasons alike */
	wl_parse_port("0", 0, &n, err, sizeof(err));
	CHECK(strcmp(err, "--port 0: must be between 1 and 65535") == 0, "port 0: %s", err);
	wl_parse_threads("4x", &n, err, sizeof(err));
	CHECK(strcmp(err, "--threads '4x': not a number") == 0, "threads 4x: %s", err);
	wl_parse_count("0", &c, err, sizeof(err));
	CHECK(strcmp(err, "--count 0: must be between 1 and 1099511627776") == 0, "count 0: %s",
	      err);
	CHECK(wl_parse_cc("cubic", &(const char *){ 0 }, err, sizeof(err)) == 0, "cc cubic");
	CHECK(wl_parse_cc("a/b", &(const char *){ 0 }, err, sizeof(err)) == -1, "cc a/b accepted");
	CHECK(wl_parse_cc("", &(const char *){ 0 }, err, sizeof(err)) == -1, "empty cc accepted");
}

static int parse(enum wl_role role, struct wl_options *o, char *err, size_t errlen, ...)
{
	char *argv[32];
	int argc = 0;
	va_list ap;
	char *a;

	argv[argc++] = "prog";
	va_start(ap, errlen);
	while ((a = va_arg(ap, char *)) && argc < 31)
		argv[argc++] = a;
	va_end(ap);
	argv[argc] = NULL;
	err[0] = 0;
	return wl_options_parse(role, argc, argv, o, err, errlen);
}

#define SRV(...) parse(WL_SERVER, &o, err, sizeof(err), __VA_ARGS__, (char *)NULL)
#define CLI(...) parse(WL_CLIENT, &o, err, sizeof(err), __VA_ARGS__, (char *)NULL)

static void test_parse_argv(void)
{
	struct wl_options o;
	char err[200];

	CHECK(SRV("--strategy", "zero-copy", "--size", "64K", "--threads", "2", "--port", "5000",
		  "--count", "10", "--verify", "--cc", "reno", "--netns", "x", "--addr", "::1") == 0,
	      "full server line: %s", err);
	CHECK(o.strategy == STRAT_ZERO_COPY && o.size == 65536 && o.threads == 2 && o.port == 5000 &&
	      o.count == 10 && o.verify && !strcmp(o.cc, "reno") && !strcmp(o.netns, "x") &&
	      !strcmp(o.addr, "::1") && o.duration == 0, "values");
	CHECK(SRV("--strategy=one-copy", "--size=8", "--threads=1", "--port=0", "--duration=0.5") == 0,
	      "--opt=value form: %s", err);
	CHECK(o.duration == 0.5 && o.size == 8 && !o.verify && !o.cc && !o.netns, "defaults");
	CHECK(SRV("--size", "64K", "--threads", "1", "--port", "1", "--count", "1") == -1 &&
	      strstr(err, "--strategy"), "missing strategy: %s", err);
	CHECK(SRV("--strategy", "one-copy", "--size", "64K", "--threads", "1", "--port", "1") == -1 &&
	      strstr(err, "duration"), "neither duration nor count: %s", err);
	CHECK(SRV("--strategy", "one-copy", "--size", "64K", "--threads", "1", "--port", "1",
		  "--count", "1", "--duration", "1") == -1, "both duration and count");
	CHECK(SRV("--strategy", "one-copy", "--size", "64K", "--size", "1K", "--threads", "1",
		  "--port", "1", "--count", "1") == -1 && strstr(err, "twice"), "duplicate: %s", err);
	CHECK(SRV("--strategy", "one-copy", "--size", "64K", "--threads", "1", "--port", "1",
		  "--count", "1", "--bogus") == -1 && strstr(err, "--bogus"), "unknown: %s", err);
	CHECK(SRV("--strategy", "one-copy", "--size", "64K", "--threads", "1", "--port", "1",
		  "--count", "1", "extra") == -1, "positional argument accepted");
	CHECK(SRV("--strategy", "one-copy", "--size", "64K", "--threads", "1", "--port", "1",
		  "--count") == -1 && strstr(err, "value"), "missing value: %s", err);
	CHECK(SRV("--strategy", "one-copy", "--siz", "64K", "--threads", "1", "--port", "1",
		  "--count", "1") == -1, "abbreviation accepted");
	CHECK(SRV("--strategy", "one-copy", "--size", "64K", "--threads", "1", "--port", "1",
		  "--count", "1", "--verify=1") == -1, "--verify=1 accepted");
	CHECK(SRV("--strategy", "one-copy", "--size", "64K", "--threads", "1", "--port", "1",
		  "--count", "1", "--netns", "../x") == -1, "netns path accepted");
	CHECK(SRV("--help") == 1, "--help");
	{
		int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
		char num[16];

		snprintf(num, sizeof(num), "%d", fd);
		CHECK(SRV("--strategy", "one-copy", "--size", "1K", "--threads", "1", "--port", "0",
			  "--count", "1", "--ready-fd", num) == 0 && o.ready_fd == fd,
		      "--ready-fd %s: %s", num, err);
		close(fd);
		CHECK(SRV("--strategy", "one-copy", "--size", "1K", "--threads", "1", "--port", "0",
			  "--count", "1", "--ready-fd", num) == -1 && strstr(err, "not an open"),
		      "a closed --ready-fd accepted: %s", err);
		CHECK(SRV("--strategy", "one-copy", "--size", "1K", "--threads", "1", "--port", "0",
			  "--count", "1", "--ready-fd", "2") == -1 && strstr(err, "--ready-fd"),
		      "--ready-fd 2 (stderr) accepted: %s", err);
		CHECK(SRV("--strategy", "one-copy", "--size", "1K", "--threads", "1", "--port", "0",
			  "--count", "1") == 0 && o.ready_fd == -1, "no --ready-fd: %d", o.ready_fd);
		CHECK(SRV("--strategy", "one-copy", "--size", "1K", "--threads", "1", "--port", "5",
			  "--addr", "10.0.0.1", "--count", "1", "--udp", "--ready-fd", "3") == -1,
		      "--ready-fd over --udp accepted");
	}

	CHECK(CLI("--addr", "10.0.0.1", "--port", "5201", "--threads", "4", "--size", "1K",
		  "--verify") == 0, "client: %s", err);
	CHECK(o.threads == 4 && o.size == 1024 && o.verify && !strcmp(o.addr, "10.0.0.1"), "client");
	CHECK(CLI("--port", "5201", "--threads", "4", "--size", "1K") == -1 && strstr(err, "--addr"),
	      "client without addr: %s", err);
	CHECK(CLI("--addr", "a", "--port", "1", "--threads", "1", "--size", "1K", "--strategy",
		  "one-copy") == -1, "client accepts --strategy");
	CHECK(CLI("--addr", "a", "--port", "1", "--threads", "1", "--size", "1K", "--count", "5") ==
	      -1, "client accepts --count");
	CHECK(CLI("--addr", "a", "--port", "0", "--threads", "1", "--size", "1K") == -1,
	      "client accepts port 0");
	CHECK(CLI("--addr", "a", "--port", "1", "--threads", "0", "--size", "1K") == -1 &&
	      strstr(err, "--threads"), "threads 0: %s", err);
	/* --receive and --mss */
	CHECK(CLI("--addr", "a", "--port", "1", "--threads", "1", "--size", "1K") == 0 &&
	      o.receive == RECV_COPY && o.mss == 0, "client defaults: receive %d mss %d",
	      o.receive, o.mss);
	CHECK(CLI("--addr", "a", "--port", "1", "--threads", "1", "--size", "1K", "--receive",
		  "mmap", "--mss", "4108") == 0 && o.receive == RECV_MMAP && o.mss == 4108,
	      "--receive mmap --mss 4108: %s", err);
	CHECK(CLI("--addr", "a", "--port", "1", "--threads", "1", "--size", "1K", "--receive",
		  "splice") == 0 && o.receive == RECV_SPLICE && !strcmp(wl_receive_name(o.receive),
		  "splice"), "--receive splice: %s", err);
	CHECK(CLI("--addr", "a", "--port", "1", "--threads", "1", "--size", "1K", "--receive",
		  "zerocopy") == -1 && strstr(err, "--receive 'zerocopy': unknown"),
	      "unknown --receive: %s", err);
	CHECK(CLI("--addr", "a", "--port", "1", "--threads", "1", "--size", "1K", "--mss", "87") ==
	      -1 && strstr(err, "between 88 and 32767"), "--mss 87: %s", err);
	CHECK(CLI("--addr", "a", "--port", "1", "--threads", "1", "--size", "1K", "--mss",
		  "32768") == -1, "--mss 32768 accepted");
	CHECK(SRV("--strategy", "one-copy", "--size", "1K", "--threads", "1", "--port", "0",
		  "--count", "1", "--mss", "4108") == 0 && o.mss == 4108, "server --mss: %s", err);
	CHECK(SRV("--strategy", "one-copy", "--size", "1K", "--threads", "1", "--port", "0",
		  "--count", "1", "--receive", "copy") == -1, "server accepts --receive");
	CHECK(SRV("--strategy", "one-copy", "--size", "1K", "--threads", "1", "--port", "5",
		  "--addr", "10.0.0.1", "--count", "1", "--udp", "--mss", "1000") == -1 &&
	      strstr(err, "--mss is for TCP"), "--mss over --udp: %s", err);
	/* --align: page-aligned heap fields, off by default */
	CHECK(SRV("--strategy", "zero-copy", "--size", "1K", "--threads", "1", "--port", "0",
		  "--count", "1") == 0 && !o.align_page, "server --align default: %s", err);
	CHECK(SRV("--strategy", "zero-copy", "--size", "1K", "--threads", "1", "--port", "0",
		  "--count", "1", "--align", "page") == 0 && o.align_page, "--align page: %s", err);
	CHECK(SRV("--strategy", "zero-copy", "--size", "1K", "--threads", "1", "--port", "0",
		  "--count", "1", "--align", "64") == -1 && strstr(err, "--align '64': unknown"),
	      "--align 64: %s", err);
	CHECK(SRV("--strategy", "sendfile", "--size", "1K", "--threads", "1", "--port", "0",
		  "--count", "1", "--align", "page") == -1 && strstr(err, "sendfile"),
	      "--align page with sendfile: %s", err);
	CHECK(CLI("--addr", "a", "--port", "1", "--threads", "1", "--size", "1K", "--align",
		  "page") == -1, "client accepts --align");
}

/* ---- JSON ------------------------------------------------------------------ */

static void test_json(void)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	struct json w;

	json_init(&w, f);
	json_begin_object(&w);
	json_kv_string(&w, "s", "a\"b\\c\nd");
	json_kv_uint(&w, "n", 18446744073709551615ULL);
	json_kv_double(&w, "x", 1.5);
	json_kv_double(&w, "nan", 0.0 / 0.0);
	json_key(&w, "a");
	json_begin_array(&w);
	json_begin_object(&w);
	json_kv_null(&w, "z");
	json_end_object(&w);
	json_int(&w, -3);
	json_end_array(&w);
	json_kv_string(&w, "e", NULL);
	json_kv_bool(&w, "b", 1);
	json_end_object(&w);
	json_finish(&w);
	fclose(f);
	CHECK(strcmp(out, "{\"s\":\"a\\\"b\\\\c\\nd\",\"n\":18446744073709551615,\"x\":1.5,"
			  "\"nan\":null,\"a\":[{\"z\":null},-3],\"e\":null,\"b\":true}\n") == 0,
	      "json: %s", out);
	free(out);
}

/* ---- sysctl_read_int, sysctl_write_int (common/) -------------------------------- */

static void test_sysctl(void)
{
	int pid_max = sysctl_read_int("kernel/pid_max");

	CHECK(pid_max >= 301, "kernel/pid_max read as %d", pid_max);	/* the kernel's minimum */
	CHECK(sysctl_read_int("kernel/no_such_setting") == -1, "an absent setting is -1");
	CHECK(sysctl_read_int("kernel/ostype") == -1, "a setting that is not a number is -1");
	CHECK(sysctl_write_int("kernel/no_such_setting", 1) == -1, "an absent setting is not written");
}

int main(void)
{
	test_layout();
	test_message_alloc();
	test_pattern();
	test_message_fill_check();
	test_serialize_iov();
	test_iov_advance();
	test_verifier_stream();
	test_verifier_resends();
	test_zc_ranges();
	test_zc_tracker();
	test_parse_values();
	test_parse_argv();
	test_json();
	test_sysctl();
	return check_report("test_workloads");
}
