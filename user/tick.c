/* What the tick source (user/profile.c, --sample-source tick) reads of the running kernel:
 * its CONFIG_HZ, the tick's hrtimer handler and whether the tick runs on an hrtimer. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <zlib.h>

#include "tick.h"
#include "trace_helpers.h"

/* CONFIG_HZ=N in a kernel config read through zlib (which reads plain files too). */
static int config_hz_from(const char *path)
{
	char line[256];
	gzFile f = gzopen(path, "rb");
	int hz = 0;

	if (!f)
		return 0;
	while (gzgets(f, line, sizeof(line))) {
		if (!strncmp(line, "CONFIG_HZ=", 10)) {
			hz = atoi(line + 10);
			break;
		}
	}
	gzclose(f);
	return hz > 0 ? hz : 0;
}

/* The kernel's CONFIG_HZ from /proc/config.gz or /boot/config-$(uname -r); 0 if unknown. */
int kernel_config_hz(void)
{
	struct utsname u;
	char path[128 + sizeof(u.release)];
	int hz = config_hz_from("/proc/config.gz");

	if (hz || uname(&u))
		return hz;
	snprintf(path, sizeof(path), "/boot/config-%s", u.release);
	return config_hz_from(path);
}

/* 1 when /proc/timer_list lists an hrtimer whose function is name (" #0: <...>, name, S:01"):
 * what the kernel really arms, where it is readable (a stopped tick may be missing). */
static int timer_list_has(const char *name)
{
	FILE *f = fopen("/proc/timer_list", "re");
	char line[256];
	size_t len = strlen(name);
	int found = 0;

	if (!f)
		return 0;
	while (!found && fgets(line, sizeof(line), f)) {
		char *s = strstr(line, ">, ");

		if (s && !strncmp(s + 3, name, len) && s[3 + len] == ',')
			found = 1;
	}
	fclose(f);
	return found;
}

/* The address of the tick's hrtimer handler. Up to 6.8 it is tick_sched_timer, and
 * tick_nohz_handler is the low-resolution clockevent handler (no hrtimer function); 6.9
 * renamed tick_sched_timer to tick_nohz_handler. So: the candidate /proc/timer_list shows
 * armed, else tick_sched_timer where it exists, else tick_nohz_handler. 0 when neither is
 * in /proc/kallsyms (or addresses are hidden: kptr_restrict). */
uint64_t tick_handler_addr(void)
{
	static const char *const cands[] = { "tick_sched_timer", "tick_nohz_handler" };
	uint64_t found[2] = { 0, 0 };
	char line[512], *sym, type;
	unsigned long long a;
	FILE *f = kallsyms_open();
	size_t i;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		/* text symbols (the tick is built in: a module's trailing field is ignored) */
		if (!kallsyms_line(line, &a, &type, &sym) || (type != 't' && type != 'T'))
			continue;
		for (i = 0; i < 2; i++)
			if (!found[i] && !strcmp(sym, cands[i]))
				found[i] = a;
	}
	fclose(f);
	for (i = 0; i < 2; i++)
		if (found[i] && timer_list_has(cands[i]))
			return found[i];
	for (i = 0; i < 2; i++)
		if (found[i])
			return found[i];
	return 0;
}

/* 1 when /proc/timer_list shows a CPU whose tick is not run by an hrtimer (low-resolution
 * mode: the tick handler is then called directly, and hrtimer_expire_entry never sees it).
 * 0 when every CPU is in high-resolution mode, or the file cannot be read. */
int tick_lowres(void)
{
	FILE *f = fopen("/proc/timer_list", "re");
	char line[256];
	int low = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		char *s = strstr(line, ".hres_active");

		if (s && (s = strchr(s, ':')) && atoi(s + 1) == 0)
			low = 1;
	}
	fclose(f);
	return low;
}
