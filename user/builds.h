/* The two builds of every BPF object (bpf/compat.bpf.h): the storage build where the kernel has
 * what it needs, else the compat build; chosen once, from the kernel's BTF. Every skeleton is
 * opened in the chosen build through OPEN_IN_BUILD's <x>_open_build(). */
#ifndef NETIO_BUILDS_H
#define NETIO_BUILDS_H
#include <stdbool.h>
#include <stdlib.h>
#include <errno.h>
#include <bpf/libbpf.h>

enum bpf_build { BUILD_STORAGE, BUILD_COMPAT };

/* The build for this kernel. NETIO_BPF_BUILD=compat (or storage) forces one: the tests run
 * the compat build on a kernel that has everything. */
enum bpf_build bpf_build(void);
const char *bpf_build_name(enum bpf_build b);
/* What this kernel lacks of the storage build's needs, "feature (version), ..." ("" if
 * nothing), into buf. */
const char *bpf_build_missing(char *buf, size_t len);
/* Open skeleton s (made by its object's __create_skeleton) from the compat build's ELF
 * (compat, compat_sz) or, in the storage build, from its own. 0 or -errno. */
int open_skeleton_in_build(struct bpf_object_skeleton *s, const void *compat, size_t compat_sz);

/* <x>_open_build(): skeleton x (x.skel.h and x.compat.skel.h included) opened in the build
 * bpf_build() chose; NULL with errno set on failure, like <x>_bpf__open(). */
#define OPEN_IN_BUILD(x)								\
static inline struct x##_bpf *x##_open_build(void)					\
{											\
	struct x##_bpf *obj = (struct x##_bpf *)calloc(1, sizeof(*obj));		\
	const void *compat;								\
	size_t compat_sz;								\
	int err;									\
											\
	if (!obj) {									\
		errno = ENOMEM;								\
		return NULL;								\
	}										\
	err = x##_bpf__create_skeleton(obj);						\
	if (!err) {									\
		compat = x##_compat_bpf__elf_bytes(&compat_sz);				\
		err = open_skeleton_in_build(obj->skeleton, compat, compat_sz);		\
	}										\
	if (err) {									\
		x##_bpf__destroy(obj);							\
		errno = -err;								\
		return NULL;								\
	}										\
	return obj;									\
}

#endif
