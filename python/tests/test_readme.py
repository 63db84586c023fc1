"""The README's Python blocks run as printed, in order, in one namespace
(/tmp/tpuloop-demo replaced by a scratch directory)."""
import contextlib
import io
import os
import re

from conftest import ROOT


def python_blocks():
    text = open(os.path.join(ROOT, "README.md")).read()
    return re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)


def test_every_python_block_runs(tmp_path):
    blocks = python_blocks()
    assert len(blocks) >= 2
    ns = {"__name__": "readme"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for i, block in enumerate(blocks):
            code = compile(block.replace("/tmp/tpuloop-demo", str(tmp_path)), "README.md python block %d" % i, "exec")
            exec(code, ns)
    printed = out.getvalue()
    assert "'global_step': 500" in printed and "'accuracy'" in printed, printed
    ev = ns["est"].evaluate(ns["eval_input_fn"], steps=20)
    assert ev["accuracy"] > 0.8, ev
