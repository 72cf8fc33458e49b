/* The running kernel's tick, for the tick sampling source (user/tick.c). */
#ifndef NETIO_TICK_H
#define NETIO_TICK_H
#include <stdint.h>

/* The kernel's CONFIG_HZ from /proc/config.gz or /boot/config-$(uname -r); 0 if unknown. */
int kernel_config_hz(void);
/* The address of the tick's hrtimer handler (tick_nohz_handler from 6.9, tick_sched_timer
 * before); 0 when neither has an address in /proc/kallsyms. */
uint64_t tick_handler_addr(void);
/* 1 when some CPU's tick is not run by an hrtimer (low-resolution mode), per
 * /proc/timer_list; 0 when every CPU is in high-resolution mode or it cannot be read. */
int tick_lowres(void);

#endif
