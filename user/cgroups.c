// SPDX-License-Identifier: GPL-2.0
/* cgroup v2 directories for --cgroup: their ids, and the processes already in them. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>
#include "cgroups.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

/* The id is the kernfs node id, which the file handle of the directory carries (as
 * libbpf-tools and bpftool find it); on 64-bit kernels it is also st_ino. */
int cgroup_dir_id(const char *dir, uint64_t *id, char *err, size_t errlen)
{
	struct {
		struct file_handle fh;
		uint64_t id;
	} h = { .fh.handle_bytes = sizeof(uint64_t) };
	struct statfs fs;
	struct stat st;
	int mount_id;

	if (stat(dir, &st) || !S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "--cgroup %s: not a directory", dir);
		return -1;
	}
	if (statfs(dir, &fs) || fs.f_type != CGROUP2_SUPER_MAGIC) {
		snprintf(err, errlen, "--cgroup %s: not a cgroup v2 directory", dir);
		return -1;
	}
	if (name_to_handle_at(AT_FDCWD, dir, &h.fh, &mount_id, 0) == 0 &&
	    h.fh.handle_bytes == sizeof(uint64_t)) {
		memcpy(id, h.fh.f_handle, sizeof(*id));
		return 0;
	}
	*id = st.st_ino;
	return 0;
}

static int procs_of(const char *dir, int (*fn)(pid_t, void *), void *ctx)
{
	char path[PATH_MAX];
	FILE *f;
	long pid;
	int ret = 0;

	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	f = fopen(path, "re");
	if (!f)
		return 0;	/* removed meanwhile */
	while (!ret && fscanf(f, "%ld", &pid) == 1)
		ret = fn((pid_t)pid, ctx);
	fclose(f);
	return ret;
}

int cgroup_for_each_proc(const char *dir, int (*fn)(pid_t pid, void *ctx), void *ctx)
{
	char sub[PATH_MAX];
	struct dirent *e;
	DIR *d;
	int ret = procs_of(dir, fn, ctx);

	d = ret ? NULL : opendir(dir);
	while (d && !ret && (e = readdir(d))) {
		if (e->d_type != DT_DIR || e->d_name[0] == '.')
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", dir, e->d_name);
		ret = cgroup_for_each_proc(sub, fn, ctx);
	}
	if (d)
		closedir(d);
	return ret;
}

/* The cgroup2 mount point (from /proc/self/mountinfo) into root; 0, or -1. */
int cgroup2_root(char *root, size_t len)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[1024], mnt[PATH_MAX], fstype[64];
	int found = -1;

	if (!f)
		return -1;
	while (found && fgets(line, sizeof(line), f)) {
		/* id parent maj:min root mountpoint options [optional...] - fstype source ... */
		const char *dash = strstr(line, " - ");

		if (!dash || sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1 ||
		    sscanf(dash + 3, "%63s", fstype) != 1 || strcmp(fstype, "cgroup2"))
			continue;
		snprintf(root, len, "%s", mnt);
		found = 0;
	}
	fclose(f);
	return found;
}

/* Whether pid lives in the cgroup (path below the cgroup2 root) or below it. */
int pid_in_cgroup(pid_t pid, const char *cgroup)
{
	char path[64], line[PATH_MAX + 8];
	size_t n = strlen(cgroup);
	int in = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/cgroup", pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		char *rel;

		if (strncmp(line, "0::", 3))
			continue;	/* a cgroup v1 hierarchy */
		rel = line + 3;
		rel[strcspn(rel, "\n")] = 0;
		in = !strcmp(cgroup, "/") ||	/* the root holds every process */
		     (!strncmp(rel, cgroup, n) && (rel[n] == 0 || rel[n] == '/'));
	}
	fclose(f);
	return in;
}
