// SPDX-License-Identifier: GPL-2.0
/* Which build of the BPF objects this kernel takes (builds.h, bpf/compat.bpf.h). */
#include <stdio.h>
#include <string.h>
#include <bpf/btf.h>
#include "builds.h"
#include "trace_helpers.h"

/* What the storage build uses, and the kernel that brought it; each is an enumerator of the
 * kernel's own BTF where the kernel has it. Atomic exchange (5.12) has no enumerator: every
 * kernel with the later ones has it. */
static const struct need {
	const char *what, *since, *enum_name, *enumerator;
} storage_needs[] = {
	{ "task-local storage", "5.11", "bpf_map_type", "BPF_MAP_TYPE_TASK_STORAGE" },
	{ "bpf_get_current_task_btf", "5.11", "bpf_func_id", "BPF_FUNC_get_current_task_btf" },
	{ "bpf_for_each_map_elem", "5.13", "bpf_func_id", "BPF_FUNC_for_each_map_elem" },
	{ "bpf_task_pt_regs", "5.15", "bpf_func_id", "BPF_FUNC_task_pt_regs" },
	{ "bpf_loop", "5.17", "bpf_func_id", "BPF_FUNC_loop" },
};
#define NNEEDS (sizeof(storage_needs) / sizeof(storage_needs[0]))

const char *bpf_build_missing(char *buf, size_t len)
{
	const struct btf *btf = vmlinux_btf();
	size_t off = 0;

	buf[0] = 0;
	for (size_t i = 0; i < NNEEDS && off < len; i++) {
		const struct need *n = &storage_needs[i];

		if (btf_enum_has(btf, n->enum_name, n->enumerator))
			continue;
		off += snprintf(buf + off, len - off, "%s%s (%s)", off ? ", " : "", n->what,
				n->since);
	}
	return buf;
}

enum bpf_build bpf_build(void)
{
	static int chosen = -1;
	const char *forced = getenv("NETIO_BPF_BUILD");
	char missing[256];

	if (chosen >= 0)
		return chosen;
	if (forced && !strcmp(forced, "compat"))
		chosen = BUILD_COMPAT;
	else if (forced && !strcmp(forced, "storage"))
		chosen = BUILD_STORAGE;
	else
		chosen = bpf_build_missing(missing, sizeof(missing))[0] ? BUILD_COMPAT :
									   BUILD_STORAGE;
	return chosen;
}

const char *bpf_build_name(enum bpf_build b)
{
	return b == BUILD_COMPAT ? "compat" : "storage";
}

int open_skeleton_in_build(struct bpf_object_skeleton *s, const void *compat, size_t compat_sz)
{
	if (bpf_build() == BUILD_COMPAT) {
		s->data = (void *)compat;
		s->data_sz = compat_sz;
	}
	return bpf_object__open_skeleton(s, NULL);
}
