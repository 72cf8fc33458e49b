"""--pprof: the gzipped profile decodes with the pprof schema, and its samples
equal the folded stacks', stack by stack."""
import glob
import gzip
import os

from conftest import REPO
from report import pprof

FOLDED = sorted(glob.glob(os.path.join(REPO, "tests", "python", "fixtures", "folded", "*.folded")))


def test_pprof_samples_equal_the_folded_stacks(tmp_path):
    src = max(FOLDED, key=os.path.getsize)
    out = tmp_path / "p.pb.gz"
    pprof.write(src, str(out), period_ns=4_000_000)
    prof = pprof.profile_class()()
    with gzip.open(out, "rb") as f:
        prof.ParseFromString(f.read())
    names = {loc.id: prof.string_table[fn.name]
             for loc in prof.location for fn in prof.function if fn.id == loc.line[0].function_id}
    decoded = {}
    for s in prof.sample:
        key = ";".join(reversed([names[i] for i in s.location_id]))
        decoded[key] = decoded.get(key, 0) + s.value[0]
    expected = {}
    for frames, n in pprof.read_folded(src):
        expected[";".join(frames)] = expected.get(";".join(frames), 0) + n
    assert decoded == expected and sum(expected.values()) > 0
    assert prof.string_table[prof.sample_type[0].type] == "samples" and prof.period == 4_000_000
