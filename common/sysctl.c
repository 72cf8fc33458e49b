#include <stdio.h>
#include "sysctl.h"

static FILE *sysctl_open(const char *name, const char *mode)
{
	char path[256];

	snprintf(path, sizeof(path), "/proc/sys/%s", name);
	return fopen(path, mode);
}

int sysctl_read_int(const char *name)
{
	FILE *f = sysctl_open(name, "r");
	int v = -1;

	if (f) {
		if (fscanf(f, "%d", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

int sysctl_write_int(const char *name, int v)
{
	FILE *f = sysctl_open(name, "w");
	int ok;

	if (!f)
		return -1;
	ok = fprintf(f, "%d\n", v) > 0;
	return fclose(f) == 0 && ok ? 0 : -1;
}
