// SPDX-License-Identifier: GPL-2.0
/* PMU types from sysfs: see pmu.h. */
#include <stdio.h>

#include "pmu.h"

int pmu_type(const char *name)
{
	char path[128];
	int type = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/bus/event_source/devices/%s/type", name);
	f = fopen(path, "re");
	if (!f)
		return -1;
	if (fscanf(f, "%d", &type) != 1 || type < 0)
		type = -1;
	fclose(f);
	return type;
}

int pmu_hybrid_core_types(uint32_t types[PMU_MAX_CORE])
{
	static const char *const names[] = { "cpu_core", "cpu_atom", "cpu_lowpower" };
	int n = 0;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && n < PMU_MAX_CORE; i++) {
		int t = pmu_type(names[i]);

		if (t >= 0)
			types[n++] = (uint32_t)t;
	}
	return n;
}
