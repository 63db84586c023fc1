"""The safetensors side of tests/test_io_ckpt.c, in NumPy, without tpuloop.

  ckpt_ref.py check CKPT EXPECTED.json
      Reads CKPT as the safetensors format says (8-byte little-endian header
      length, JSON header padded with spaces to a multiple of 8, contiguous
      data) and every tensor with numpy.frombuffer, and compares dtype, shape
      and every value with EXPECTED.json, which the C test wrote:
          {"metadata": {"key": "value", ...},
           "tensors": [{"name": .., "dtype": "F32", "shape": [..], "values": [..]}, ..]}
      Values are numbers; for F16, BF16, F8_* they are the raw bit patterns.
      Also checks tpuloop's metadata: format, format_version, and both
      CRC-32C checksums, computed here in pure Python. If the `safetensors`
      package is installed, its safe_open reads the file too and must agree
      (on every dtype NumPy has).
  ckpt_ref.py write OUT
      Writes a safetensors file the way the reference writer lays it out
      (tensors sorted by alignment then name, header padded to 8), with
      NumPy only, for the C reader to read; and OUT.ref with
      safetensors.numpy.save_file when that package is installed.

Prints one JSON line; exits 1 with the reason on any mismatch.
"""
import json
import struct
import sys

import numpy as np

RAW = {"F64": "<f8", "F32": "<f4", "F16": "<u2", "BF16": "<u2", "F8_E5M2": "u1", "F8_E4M3": "u1",
       "I64": "<i8", "U64": "<u8", "I32": "<i4", "U32": "<u4", "I16": "<i2", "U16": "<u2",
       "I8": "i1", "U8": "u1", "BOOL": "?"}


def crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


TABLE = crc32c_table()


def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    for b in data:
        crc = TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def fail(msg):
    print(json.dumps({"ok": False, "error": msg}))
    sys.exit(1)


def check(path, expected_path):
    with open(path, "rb") as f:
        buf = f.read()
    with open(expected_path) as f:
        expected = json.load(f)
    (n,) = struct.unpack("<Q", buf[:8])
    if n % 8 != 0:
        fail("header length %d is not a multiple of 8" % n)
    raw_header = buf[8:8 + n]
    text = raw_header.decode("utf-8")
    stripped = text.rstrip(" ")
    if not text.startswith("{") or not stripped.endswith("}") or len(text) - len(stripped) >= 8:
        fail("header is not a JSON object padded with fewer than 8 spaces")
    header = json.loads(text)
    data = buf[8 + n:]
    meta = header.pop("__metadata__", {})
    if meta.get("format") != "tpuloop-ckpt" or meta.get("format_version") != "1":
        fail("metadata format/version: %r" % meta)
    if int(meta["crc32c"], 16) != crc32c(data) or len(meta["crc32c"]) != 8:
        fail("crc32c %s, data has %08x" % (meta["crc32c"], crc32c(data)))
    pat = b'"header_crc32c":"' + meta["header_crc32c"].encode() + b'"'
    at = raw_header.index(pat) + len(b'"header_crc32c":"')
    zeroed = buf[:8] + raw_header[:at] + b"00000000" + raw_header[at + 8:]
    if int(meta["header_crc32c"], 16) != crc32c(zeroed):
        fail("header_crc32c %s, header has %08x" % (meta["header_crc32c"], crc32c(zeroed)))
    for k, v in expected["metadata"].items():
        if meta.get(k) != v:
            fail("metadata %r: %r, expected %r" % (k, meta.get(k), v))
    # contiguous coverage, in offset order
    spans = sorted((v["data_offsets"][0], v["data_offsets"][1], k) for k, v in header.items())
    at = 0
    for b, e, k in spans:
        if b != at:
            fail("tensor %r starts at %d, expected %d" % (k, b, at))
        at = e
    if at != len(data):
        fail("tensors cover %d of %d data bytes" % (at, len(data)))
    if set(header) != {t["name"] for t in expected["tensors"]}:
        fail("tensor names %r, expected %r" % (sorted(header), sorted(t["name"] for t in expected["tensors"])))
    arrays = {}
    for t in expected["tensors"]:
        h = header[t["name"]]
        if h["dtype"] != t["dtype"] or h["shape"] != t["shape"]:
            fail("%r: %s %r, expected %s %r" % (t["name"], h["dtype"], h["shape"], t["dtype"], t["shape"]))
        b, e = h["data_offsets"]
        a = np.frombuffer(data[b:e], dtype=np.dtype(RAW[t["dtype"]])).reshape(t["shape"])
        want = np.array(t["values"], dtype=np.dtype(RAW[t["dtype"]])).reshape(t["shape"])
        if not np.array_equal(a, want):
            fail("%r: values differ: %r vs %r" % (t["name"], a.ravel()[:8], want.ravel()[:8]))
        arrays[t["name"]] = a
    used = "not installed"
    try:
        from safetensors import safe_open
    except ImportError:
        safe_open = None
    if safe_open is not None:
        with safe_open(path, framework="numpy") as f:
            if f.metadata() != meta:
                fail("safetensors reads the metadata as %r" % f.metadata())
            if set(f.keys()) != set(arrays):
                fail("safetensors lists %r" % sorted(f.keys()))
            for name, a in arrays.items():
                dt = header[name]["dtype"]
                if dt in ("BF16", "F8_E5M2", "F8_E4M3"):
                    continue  # NumPy has no such dtype; the raw check above covers them
                got = f.get_tensor(name)
                if dt == "F16":
                    got = got.view("<u2")
                if got.shape != a.shape or not np.array_equal(got, a):
                    fail("safetensors disagrees on %r" % name)
        used = "agrees"
    print(json.dumps({"ok": True, "tensors": len(arrays), "safetensors": used}))


FOREIGN = {  # name: (dtype, array)
    "b_ids": ("I64", np.array([-1, 2 ** 40, 7], dtype="<i8")),
    "a_weights": ("F32", (np.arange(6, dtype="<f4") * 0.5).reshape(2, 3)),
    "c_mask": ("U8", np.array([1, 0, 1, 1, 0], dtype="u1")),
    "scalar": ("F64", np.array(3.141592653589793, dtype="<f8")),
    "empty": ("F32", np.zeros((0, 4), dtype="<f4")),
}


def write(out):
    size = {"F64": 8, "I64": 8, "F32": 4, "U8": 1}
    order = sorted(FOREIGN, key=lambda k: (-size[FOREIGN[k][0]], k))
    header, at, blobs = {"__metadata__": {"source": "numpy"}}, 0, []
    for k in order:
        dt, a = FOREIGN[k]
        blob = a.tobytes()
        header[k] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [at, at + len(blob)]}
        at += len(blob)
        blobs.append(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(out, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    ref = "not installed"
    try:
        from safetensors.numpy import save_file
    except ImportError:
        save_file = None
    if save_file is not None:
        save_file({k: a for k, (_, a) in FOREIGN.items()}, out + ".ref", metadata={"source": "numpy"})
        ref = "written"
    print(json.dumps({"ok": True, "safetensors": ref}))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "check":
        check(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 3 and sys.argv[1] == "write":
        write(sys.argv[2])
    else:
        fail("usage: ckpt_ref.py check CKPT EXPECTED.json | write OUT")
