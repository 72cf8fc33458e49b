"""Why a sweep's report has no traced run to show, from what the sweep asked for: it asked for
none (`--no-trace`), or its traced runs failed, or it stopped before the first. A report never
claims `--no-trace` for a sweep that asked for the tracer."""
import json
import os

from analysis import passes, results

SWEEP_FILE = "sweep.json"


def read_sweep(out_dir):
    """sweep.json of out_dir as a dict, or None where it is missing or unreadable (the run
    records then say which passes were asked for)."""
    try:
        with open(os.path.join(out_dir, SWEEP_FILE)) as f:
            d = json.load(f)
    except (OSError, ValueError):
        return None
    return d if isinstance(d, dict) else None


def why_untraced(runs, sweep=None):
    """Why no traced run succeeded, as a Markdown clause starting in lower case (None when one
    did)."""
    if any(results.ok(r) and results.traced(r) for r in runs):
        return None
    if "traced" not in passes.asked(runs, sweep):
        return "measured without the tracer (`--no-trace`)"
    failed = passes.traced_failures(runs)
    if not failed:
        return ("the sweep asked for the tracer, but no traced run was recorded (it stopped "
                "before the first; `netio-trace run --resume DIR` runs what is missing)")
    first = str(failed[0].get("error") or "no error recorded").replace("`", "'")
    return (f"the sweep asked for the tracer, but its {len(failed)} traced run(s) all failed "
            f"(the first error: `{first}`)")


def one_pass_why(runs, sweep=None):
    """Why no configuration ran in both passes, a Markdown parenthesis."""
    asked = passes.asked(runs, sweep)
    if "traced" not in asked:
        return "(`--no-trace`)"
    if "untraced" not in asked:
        return "(`--trace-only`)"
    return "(the sweep asked for both passes: the runs of one failed or were not recorded)"


def short_why(runs, sweep=None):
    """why_untraced in a few plain words (for a plot), or None when a traced run succeeded."""
    if any(results.ok(r) and results.traced(r) for r in runs):
        return None
    if "traced" not in passes.asked(runs, sweep):
        return "--no-trace"
    return "every traced run failed" if passes.traced_failures(runs) else "no traced run recorded"
