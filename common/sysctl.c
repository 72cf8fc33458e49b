#include <stdio.h>
#include "sysctl.h"

int sysctl_read_int(const char *name)
{
	char path[256];
	FILE *f;
	int v = -1;

	snprintf(path, sizeof(path), "/proc/sys/%s", name);
	f = fopen(path, "r");
	if (f) {
		if (fscanf(f, "%d", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}
