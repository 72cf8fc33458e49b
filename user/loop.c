// SPDX-License-Identifier: GPL-2.0
/* What both modes share while they wait (control.c, oneshot.c): the signals that stop them,
 * and the work done every few tens of ms. Apart from tracer.c, so that the modes call down
 * into this file and never back into main's. */
#include <signal.h>
#include "tracer.h"

volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

void install_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal };

	sigemptyset(&sa.sa_mask);
	sa.sa_flags = 0;	/* no SA_RESTART: a blocking read returns EINTR */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

/* Both modes call it while they wait (every 20 to 50 ms): the sampled stats windows open and
 * close, and the on-demand programs attach once their condition holds. */
void periodic(struct tracer *tr)
{
	if (tr->prof)
		profiler_poll(tr->prof);	/* new process images: their maps, while they live */
	if (tr->detached)
		return;
	stats_tick(tr);
	tracer_bpf_poll(&tr->bpf);
}
