"""The ctypes mirrors of the C structs have the C compiler's layout."""
import ctypes
import os
import subprocess

import pytest

from conftest import ROOT
from tpuloop import _lib


def _c_program():
    lines = ["#include <stddef.h>", "#include <stdio.h>", "#include <tpuloop/tpuloop.h>",
             "#include <tpuloop/dataset.h>", "#include <tpuloop/estimator.h>", "int main(void) {"]
    for cname, mirror in _lib.STRUCTS.items():
        lines.append('printf("%s %%zu %%zu\\n", sizeof(%s), _Alignof(%s));' % (cname, cname, cname))
        for field, _ in mirror._fields_:
            lines.append('printf("%s.%s %%zu\\n", offsetof(%s, %s));' % (cname, field, cname, field))
    lines += ["return 0;", "}"]
    return "\n".join(lines) + "\n"


def test_struct_layouts_match_the_headers(tmp_path):
    src = tmp_path / "abi.c"
    src.write_text(_c_program())
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
    for cname, mirror in _lib.STRUCTS.items():
        size, align = c[cname]
        if ctypes.sizeof(mirror) != size or ctypes.alignment(mirror) != align:
            bad.append("%s: C size %d align %d, ctypes %d %d" % (cname, size, align, ctypes.sizeof(mirror),
                                                                  ctypes.alignment(mirror)))
        for field, _ in mirror._fields_:
            off = getattr(mirror, field).offset
            if c["%s.%s" % (cname, field)][0] != off:
                bad.append("%s.%s: C offset %d, ctypes %d" % (cname, field, c["%s.%s" % (cname, field)][0], off))
    assert not bad, "\n".join(bad)
