"""The `baseline` fixture of the trace tests: a `run --preset zerocopy` results directory of
this machine (its hostname and CPU), so that `trace --report` need not run the short form."""
import json

import pytest

from netio_trace.system import machine


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    """Zero-copy behind its copy up to 16K and ahead at 63K on forward, in every round."""
    d = tmp_path_factory.mktemp("baseline")
    m = machine.info()
    runs = []
    for rep in range(3):
        for size, ratio in ((1024, 0.6), (4096, 0.7), (16384, 0.85), (64512, 1.3)):
            for copy, zcs in (("one-copy", "zero-copy"), ("io-uring", "io-uring-zc")):
                for st, gbps in ((copy, 10.0), (zcs, 10.0 * ratio)):
                    runs.append({"strategy": st, "msg_size": size, "threads": 1,
                                 "transport": "forward", "repeat": rep, "traced": False,
                                 "status": "ok", "throughput_gbps": gbps, "machine": m})
    (d / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in runs))
    return d
