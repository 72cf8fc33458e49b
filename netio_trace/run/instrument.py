"""The sweep's tracer across the two passes: loaded once, attached for a traced run, detached
(no program link, no sampling event of ours anywhere) for an untraced one; started again if it
dies. The cgroup its sampling events watch lives as long as it does."""
import os

from netio_trace.system import cgroup
from netio_trace.system.signals import critical
from netio_trace.tracer import (ControlTracer, TracerError, samples_on_perf_events,
                                start_failure)

# The sweep knows each run's sender: before one that may make zero-copy skbs it asks for the
# per-skb programs (runner._follow_topology, ControlTracer.skb_programs_for), so every other
# run's skbs pass no program of ours, at either level (docs/tracer.md, "The per-skb programs").
SKB_PROGRAMS = ("--skb-programs", "on-demand")


class Instrument:
    def __init__(self, params, out_dir):
        self.params = params
        self.log_path = os.path.join(out_dir, "tracer.log")
        self.cg = None
        self.tracer = None
        self.error = None        # why there is no tracer, for the runs that needed it
        self.attached = False

    def open(self):
        """Start the tracer (detached), once, before the sweep's first run. Raises TracerError
        with the tracer's own one-line reason when it cannot load: every traced run would fail
        the same way."""
        if not self.params.trace:
            return
        # stack samples on perf events come from one event per CPU on the workloads' cgroup
        if samples_on_perf_events(self.params.sample_source):
            self.cg = cgroup.WorkloadCgroup.create()
        self.tracer = self._start()

    def _start(self):
        for sample_cgroup in ([self.cg.path, None] if self.cg is not None else [None]):
            t = ControlTracer(attach=self.params.attach, freq=self.params.freq,
                              sample_source=self.params.sample_source,
                              log_path=self.log_path,
                              extra_args=[*SKB_PROGRAMS, *(["--sample-cgroup", sample_cgroup]
                                                           if sample_cgroup else []),
                                          *self._latency_args()])
            try:
                t.start()
                t.detach_probes()
                self.attached = False
                return t
            except TracerError as e:
                why = start_failure(t, e)
                with critical():
                    t.close()
                if sample_cgroup is None:
                    raise TracerError(why) from None
            except BaseException:      # interrupted while loading: stop it by its pid
                with critical():
                    t.close()
                raise

    def _latency_args(self):
        n = self.params.latency_sample
        return ["--latency-sample", str(n)] if n else []

    def describe(self):
        """One line for the console: the rungs and the sampling, or why there is no tracer."""
        if self.tracer is None:
            return f"tracer: {self.error}" if self.error else None
        smp = self.tracer.samples or {}
        return ("tracer ready: attach " + ", ".join(
            f"{k}={v}" for k, v in (self.tracer.attach or {}).items())
            + (f"; samples on {smp.get('source')} at "
               + (f"{smp['freq']:g} Hz" if smp.get("freq") else "an unknown rate")
               + (", one event per CPU on the workloads' cgroup"
                  if smp.get("scope") == "cgroup" else "")
               if smp else "; no stack samples"))

    def for_run(self, traced):
        """The tracer, attached, for a traced run; None, with everything of ours detached, for
        an untraced one. Raises TracerError when a traced run cannot have it."""
        if not traced:
            if self.tracer is not None and self.attached:
                self.tracer.detach_probes()
                self.attached = False
            return None
        self._revive()
        if self.tracer is None:
            raise TracerError(f"tracer could not attach: {self.error}")
        if not self.attached:
            self.tracer.attach_probes()
            self.attached = True
        return self.tracer

    def _revive(self):
        if self.tracer is not None and self.tracer.alive():
            return
        if self.tracer is not None:
            self.tracer.close()
            self.tracer = None
        try:
            self.tracer = self._start()
            self.error = None
        except TracerError as e:
            self.error = str(e)

    def close(self):
        if self.tracer is not None:
            self.tracer.close()
            self.tracer = None
        if self.cg is not None:
            self.cg.remove()
            self.cg = None

    @property
    def cgroup(self):
        return self.cg
