"""Folded stacks as a gzipped pprof profile, which `go tool pprof`, speedscope and
Grafana Pyroscope open. The messages are those of pprof's profile.proto
(github.com/google/pprof/proto/profile.proto), built at run time from a descriptor by the
protobuf library: no wire format written by hand."""
import gzip

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_F = descriptor_pb2.FieldDescriptorProto
# (message, [(field, number, type, repeated, message type)]) of the parts of profile.proto used
_SCHEMA = (
    ("ValueType", [("type", 1, _F.TYPE_INT64, False, None), ("unit", 2, _F.TYPE_INT64, False, None)]),
    ("Sample", [("location_id", 1, _F.TYPE_UINT64, True, None),
                ("value", 2, _F.TYPE_INT64, True, None)]),
    ("Line", [("function_id", 1, _F.TYPE_UINT64, False, None), ("line", 2, _F.TYPE_INT64, False, None)]),
    ("Location", [("id", 1, _F.TYPE_UINT64, False, None), ("mapping_id", 2, _F.TYPE_UINT64, False, None),
                  ("address", 3, _F.TYPE_UINT64, False, None),
                  ("line", 4, _F.TYPE_MESSAGE, True, "Line")]),
    ("Function", [("id", 1, _F.TYPE_UINT64, False, None), ("name", 2, _F.TYPE_INT64, False, None),
                  ("system_name", 3, _F.TYPE_INT64, False, None),
                  ("filename", 4, _F.TYPE_INT64, False, None)]),
    ("Profile", [("sample_type", 1, _F.TYPE_MESSAGE, True, "ValueType"),
                 ("sample", 2, _F.TYPE_MESSAGE, True, "Sample"),
                 ("location", 4, _F.TYPE_MESSAGE, True, "Location"),
                 ("function", 5, _F.TYPE_MESSAGE, True, "Function"),
                 ("string_table", 6, _F.TYPE_STRING, True, None),
                 ("period_type", 11, _F.TYPE_MESSAGE, False, "ValueType"),
                 ("period", 12, _F.TYPE_INT64, False, None)]),
)
PACKAGE = "perftools.profiles"


def _file_descriptor():
    fd = descriptor_pb2.FileDescriptorProto(name="netio_profile.proto", package=PACKAGE,
                                            syntax="proto3")
    for name, fields in _SCHEMA:
        m = fd.message_type.add(name=name)
        for fname, number, ftype, repeated, mtype in fields:
            f = m.field.add(name=fname, number=number, type=ftype,
                            label=_F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL)
            if mtype:
                f.type_name = f".{PACKAGE}.{mtype}"
    return fd


def profile_class():
    """The Profile message class (a pool of its own, so it never clashes with another)."""
    pool = descriptor_pool.DescriptorPool()
    pool.Add(_file_descriptor())
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{PACKAGE}.Profile"))


def read_folded(path):
    """[(frames outermost first, count)] of a folded stack file."""
    out = []
    with open(path) as f:
        for line in f:
            stack, _, n = line.rstrip("\n").rpartition(" ")
            if stack and n.isdigit():
                out.append((stack.split(";"), int(n)))
    return out


class _Strings:
    def __init__(self):
        self.table, self.index = [""], {"": 0}

    def __call__(self, s):
        if s not in self.index:
            self.index[s] = len(self.table)
            self.table.append(s)
        return self.index[s]


def build(stacks, period_ns=None):
    """A Profile from [(frames, count)]: one location per distinct frame name, samples with
    their leaf first (pprof's order), values in "samples"."""
    prof = profile_class()()
    strings = _Strings()
    prof.sample_type.add(type=strings("samples"), unit=strings("count"))
    locations = {}
    for frames, n in stacks:
        ids = []
        for frame in reversed(frames):          # pprof: leaf first
            if frame not in locations:
                fid = len(locations) + 1
                prof.function.add(id=fid, name=strings(frame), system_name=strings(frame))
                loc = prof.location.add(id=fid)
                loc.line.add(function_id=fid)
                locations[frame] = fid
            ids.append(locations[frame])
        prof.sample.add(location_id=ids, value=[n])
    if period_ns:
        prof.period_type.type, prof.period_type.unit = strings("cpu"), strings("nanoseconds")
        prof.period = int(period_ns)
    prof.string_table.extend(strings.table)
    return prof


def write(folded_path, path, period_ns=None):
    """The folded stacks of folded_path as a gzipped pprof profile at path."""
    data = build(read_folded(folded_path), period_ns).SerializeToString()
    with gzip.open(path, "wb") as f:
        f.write(data)
