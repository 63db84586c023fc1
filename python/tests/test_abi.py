"""The ctypes mirrors of the C structs (tpuloop._lib's and tpuloop.distribution's) have the C compiler's layout:
a program compiled against the headers prints each struct's size, alignment and field offsets, so a header
change that is not made in Python fails here instead of corrupting memory."""
import ctypes
import os
import subprocess

import pytest

from conftest import ROOT
from tpuloop import _lib, distribution


def _c_program(structs):
    lines = ["#include <stddef.h>", "#include <stdio.h>", "#include <tpuloop/tpuloop.h>", "int main(void) {"]
    for cname, mirror in structs.items():
        lines.append('printf("%s %%zu %%zu\\n", sizeof(%s), _Alignof(%s));' % (cname, cname, cname))
        for field, _ in mirror._fields_:
            lines.append('printf("%s.%s %%zu\\n", offsetof(%s, %s));' % (cname, field, cname, field))
    lines += ["return 0;", "}"]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("module", [_lib, distribution], ids=["_lib", "distribution"])
def test_struct_layouts_match_the_headers(tmp_path, module):
    src = tmp_path / "abi.c"
    src.write_text(_c_program(module.STRUCTS))
    exe = tmp_path / "abi"
    cc = os.environ.get("CC", "cc")
    r = subprocess.run([cc, "-std=c11", "-I", os.path.join(ROOT, "include"), "-I", os.path.join(ROOT, "build", "gen"),
                        str(src), "-o", str(exe)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.fail("the layout program does not compile (a field renamed in C?):\n" + r.stderr[-3000:])
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split("\n")
    c = {}
    for line in out:
        if line:
            parts = line.split()
            c[parts[0]] = [int(v) for v in parts[1:]]
    bad = []
    for cname, mirror in module.STRUCTS.items():
        size, align = c[cname]
        if ctypes.sizeof(mirror) != size or ctypes.alignment(mirror) != align:
            bad.append("%s: C size %d align %d, ctypes %d %d" % (cname, size, align, ctypes.sizeof(mirror),
                                                                  ctypes.alignment(mirror)))
        for field, _ in mirror._fields_:
            off = getattr(mirror, field).offset
            if c["%s.%s" % (cname, field)][0] != off:
                bad.append("%s.%s: C offset %d, ctypes %d" % (cname, field, c["%s.%s" % (cname, field)][0], off))
    assert not bad, "\n".join(bad)


def test_import_from_the_source_trees_root():
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TPULOOP_LIBRARY")}
    r = subprocess.run([os.environ.get("PYTHON", "/usr/bin/python3"), "-B", "-c",
                        "import tpuloop, tpuloop._lib as l; print(l._find_library())"],
                       cwd=ROOT, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == os.path.join(ROOT, "build", "lib", "libtpuloop.so")
