/* The machine's PMUs as sysfs lists them (/sys/bus/event_source/devices/NAME/type): the one
 * place the tracer looks them up, for the perf counters, the stack sampler and the probe. */
#ifndef NETIO_PMU_H
#define NETIO_PMU_H
#include <stdint.h>

/* Most core PMUs a hybrid CPU has (cpu_core, cpu_atom, cpu_lowpower). */
#define PMU_MAX_CORE 4

/* The perf type of PMU NAME ("kprobe", "uprobe", "cpu_core", ...), or -1 if there is none. */
int pmu_type(const char *name);

/* The types of a hybrid CPU's core PMUs, one per CPU type, for the extended event type
 * (type << PERF_PMU_TYPE_SHIFT). How many were found: 0 or 1 on a CPU that is not hybrid,
 * where the legacy PERF_TYPE_HARDWARE reaches the one core PMU. */
int pmu_hybrid_core_types(uint32_t types[PMU_MAX_CORE]);

#endif
