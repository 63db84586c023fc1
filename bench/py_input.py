"""py_input.py — the Python peer of bench/bench_input.c: Python's protobuf
parsing the Criteo-shaped tf.Example records that bench_input wrote.

    /usr/bin/python3 bench/py_input.py FILE [CHECKSUM_INTS CHECKSUM_FLOATS]

example_pb2 is generated at run time from proto/tpuloop/example.proto with
protoc --python_out into a temporary folder (the messages are TensorFlow's,
field for field). The TFRecord framing is read with struct from the whole file
in memory, without checking either CRC, so Python does less than tpuloop's
reader does. Per record: Example.FromString, then each feature's value pulled
out of the map into Python lists (label, the 13 floats I1..I13, the 26 int64s
C1..C26), as a Python input pipeline would. One warm-up pass, then REPS timed
ones; prints one JSON line per figure, with the median (records/s), the
protobuf implementation in use (api_implementation.Type(): "cpp", "upb" or
"python") and whether the values' checksums match the ones bench_input
computed when writing.
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

REPS = 3
DENSE = ["I%d" % i for i in range(1, 14)]
CAT = ["C%d" % i for i in range(1, 27)]


def skip(why):
    print(json.dumps({"bench": "py_input", "skipped": why}), flush=True)
    sys.exit(0)


def load_example_pb2(tmp):
    proto_root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "proto")
    proto = os.path.join(proto_root, "tpuloop", "example.proto")
    protoc = shutil.which("protoc")
    if protoc is None:
        skip("protoc not found")
    subprocess.run([protoc, "--python_out=" + tmp, "-I" + proto_root, proto], check=True)
    sys.path.insert(0, tmp)
    from tpuloop import example_pb2  # noqa: E402  (made just above)
    return example_pb2


def records(data):
    """The payloads of the TFRecord framing in data, CRCs unchecked."""
    out = []
    at, end = 0, len(data)
    unpack = struct.unpack_from
    while at < end:
        (n,) = unpack("<Q", data, at)
        out.append(data[at + 12:at + 12 + n])
        at += 16 + n
    return out


def parse_pass(path, Example):
    """Reads path, parses every record and pulls its values out; returns
    (records, int checksum, float checksum)."""
    with open(path, "rb") as f:
        data = f.read()
    from_string = Example.FromString
    ints = 0
    floats = 0.0
    at, end = 0, len(data)
    unpack = struct.unpack_from
    count = 0
    while at < end:
        (n,) = unpack("<Q", data, at)
        ex = from_string(data[at + 12:at + 12 + n])
        at += 16 + n
        fm = ex.features.feature
        label = fm["label"].int64_list.value[0]
        dense = [fm[k].float_list.value[0] for k in DENSE]
        cat = [fm[k].int64_list.value[0] for k in CAT]
        ints += label + sum(cat)
        floats += sum(dense)
        count += 1
    return count, ints % (1 << 64), floats


def fromstring_pass(path, Example):
    """Reads path and only parses every record."""
    with open(path, "rb") as f:
        data = f.read()
    from_string = Example.FromString
    count = 0
    for rec in records(data):
        from_string(rec)
        count += 1
    return count


def line(what, per_s, n, extra):
    reps = [round(n / t, 1) for t in per_s]
    t = sorted(per_s)[len(per_s) // 2]
    out = {"bench": "py_input", "what": what, "file": "criteo", "records": n, "unit": "records/s", "reps": reps,
           "median": round(n / t, 1), "us_per_record": round(t / n * 1e6, 3)}
    out.update(extra)
    print(json.dumps(out), flush=True)


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: py_input.py FILE [CHECKSUM_INTS CHECKSUM_FLOATS]")
    path = sys.argv[1]
    want = (int(sys.argv[2]), float(sys.argv[3])) if len(sys.argv) >= 4 else None
    try:
        import google.protobuf
        from google.protobuf.internal import api_implementation
    except ImportError:
        skip("%s cannot import google.protobuf (Debian's python3-protobuf)" % sys.executable)
    tmp = tempfile.mkdtemp(prefix="tpuloop-py-input-")
    try:
        Example = load_example_pb2(tmp).Example
        info = {"protobuf_version": google.protobuf.__version__, "api_implementation": api_implementation.Type(),
                "python": sys.version.split()[0]}
        secs = []
        for r in range(-1, REPS):
            t0 = time.perf_counter()
            n, ints, floats = parse_pass(path, Example)
            if r >= 0:
                secs.append(time.perf_counter() - t0)
        extra = dict(info)
        extra["checksum_ints"] = ints
        extra["checksum_floats"] = floats
        extra["checksums_match"] = None if want is None else (ints == want[0] and floats == want[1])
        line("parse_features", secs, n, extra)
        secs = []
        for r in range(-1, REPS):
            t0 = time.perf_counter()
            n = fromstring_pass(path, Example)
            if r >= 0:
                secs.append(time.perf_counter() - t0)
        line("parse_example", secs, n, info)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
