# torch-cuda-stubs.py — makes PyPI's Linux x86_64 torch wheel, installed with
# --no-deps, import and run on the CPU without NVIDIA's CUDA wheels.
#
# That wheel is one build for CPU and CUDA: libtorch.so, libtorch_cuda.so,
# libtorch_python.so and libtorch_global_deps.so name CUDA's libraries
# (libcudart.so.13, libcublas.so.13, libcudnn.so.9, libnccl.so.2, ...) as
# DT_NEEDED, and those come from nvidia-* wheels of several GB. For every
# DT_NEEDED library of torch's shared objects that neither torch nor the
# system has, this writes a stub of that name into torch/lib (on the RPATH of
# every torch library as $ORIGIN): a shared object that defines each symbol
# torch's objects take from it and finds nowhere else — functions that
# return 100 (cudaErrorNoDevice for the runtime; an error status for the
# others), the error-string functions a fixed string, objects and TLS
# variables zero-filled — under the version nodes torch's objects ask for.
# CUDA then reports no device (torch.cuda.is_available() is False) and
# every CPU kernel is PyPI's own, unchanged.
#
# Usage: PYTHON torch-cuda-stubs.py SITE_PACKAGES  (needs readelf and cc)
# Prints one line: the stubs written, or that none were needed.
import glob
import os
import re
import subprocess
import sys
import tempfile


MARK = "no CUDA: torch-cuda-stubs"
# NVIDIA's libraries: libcudart, libcublas, libcudnn, libcufft, libcusparse, libcusolver, libcupti,
# libcufile, libcuda, libnvrtc, libnvshmem_host, libnccl, ...
CUDA = re.compile(r"lib(cu|nv|nccl)")


def run(*cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def needed(path):
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", run("readelf", "-d", "-W", path))


def verneed_files(path):
    """version name -> the file (soname) readelf -V says it is needed from."""
    out, cur = {}, None
    for line in run("readelf", "-V", "-W", path).splitlines():
        m = re.search(r"File: (\S+)", line)
        if m:
            cur = m.group(1)
            continue
        m = re.search(r"Name: (\S+)\s+Flags", line)
        if m and cur:
            out[m.group(1)] = cur
    return out


SYM = re.compile(r"^\s*\d+:\s+[0-9a-f]+\s+\d+\s+(\w+)\s+(\w+)\s+\w+\s+(\S+)\s+(\S+)")


def dynsyms(path):
    """(undefined [(name, version, type, binding)], defined {name})"""
    und, dfn = [], set()
    for line in run("readelf", "--dyn-syms", "-W", path).splitlines():
        m = SYM.match(line)
        if not m:
            continue
        typ, bind, ndx, name = m.groups()
        ver = None
        if "@" in name:
            name, _, ver = name.partition("@")
            ver = ver.lstrip("@").split()[0]
        if ndx == "UND":
            if name and bind != "WEAK":
                und.append((name, ver, typ))
        else:
            dfn.add(name)
    return und, dfn


def system_libs():
    libs = {}
    for line in run("ldconfig", "-p").splitlines():
        m = re.match(r"\s*(\S+) \(([^)]*)\) => (\S+)", line)
        if m and "x86-64" in m.group(2) and m.group(1) not in libs:
            libs[m.group(1)] = m.group(3)
    return libs


def main():
    site = sys.argv[1]
    lib = os.path.join(site, "torch", "lib")
    for p in glob.glob(os.path.join(lib, "*.so*")):  # this script's stubs of an earlier run: made anew
        if os.path.getsize(p) < (4 << 20):
            with open(p, "rb") as f:
                if MARK.encode() in f.read():
                    os.remove(p)
    objs = sorted(set(glob.glob(os.path.join(lib, "*.so*")) + glob.glob(os.path.join(site, "torch", "*.so"))))
    own = {os.path.basename(p) for p in objs}
    sysl = system_libs()
    nvidia = [os.path.dirname(p) for p in glob.glob(os.path.join(site, "nvidia", "*", "lib", "*.so*"))]
    missing, deps = set(), {}
    for p in objs:
        deps[p] = needed(p)
        for n in deps[p]:
            # CUDA's are stubbed even where the machine has a CUDA toolkit on ld.so's path: torch's RPATH
            # finds torch/lib first, so every machine runs the same CPU-only torch.
            if n in own or any(os.path.exists(os.path.join(d, n)) for d in nvidia):
                continue
            if n in sysl and not CUDA.match(n):
                continue
            missing.add(n)
    if not missing:
        print("torch-cuda-stubs: no stub needed")
        return
    defined = set()
    for p in objs:
        defined |= dynsyms(p)[1]
    for n in {n for p in objs for n in deps[p]} - own - missing:
        if n in sysl:
            defined |= dynsyms(sysl[n])[1]
    want = {m: {} for m in missing}  # soname -> {symbol: type}
    for p in objs:
        stubs_here = [n for n in deps[p] if n in missing]
        if not stubs_here:
            continue
        vfile = verneed_files(p)
        for name, ver, typ in dynsyms(p)[0]:
            if ver is not None and vfile.get(ver) in missing:
                want[vfile[ver]][name] = (typ, ver)
            elif ver is None and name not in defined:
                want[stubs_here[0]][name] = (typ, None)
    written = []
    with tempfile.TemporaryDirectory() as tmp:
        for so, syms in sorted(want.items()):
            c = ['static const char msg[] = "%s (CPU-only install of the tpuloop bench peers)";' % MARK]
            nodes = {so: []}
            for name, (typ, ver) in sorted(syms.items()):
                if typ == "OBJECT":
                    c.append("char %s[256] __attribute__((aligned(64)));" % name)
                elif typ == "TLS":
                    c.append("__thread char %s[256] __attribute__((aligned(64)));" % name)
                elif re.search(r"Get(Error|Status|LastError)(String|Name)", name):
                    c.append("const char *%s(void) { return msg; }" % name)
                else:
                    c.append("long %s(void) { return 100; }" % name)
                nodes.setdefault(ver or so, []).append(name)
            src, vs = os.path.join(tmp, "stub.c"), os.path.join(tmp, "stub.map")
            with open(src, "w") as f:
                f.write("\n".join(c) + "\n")
            with open(vs, "w") as f:
                for node, names in sorted(nodes.items()):
                    f.write("%s { %s};\n" % (node, "global: %s; " % "; ".join(names) if names else ""))
            out = os.path.join(lib, so)
            subprocess.run(["cc", "-shared", "-fPIC", "-O0", "-nostdlib", "-fno-builtin", "-w", "-o", out + ".tmp",
                            "-Wl,-soname," + so, "-Wl,--version-script=" + vs, src], check=True)
            os.replace(out + ".tmp", out)
            written.append("%s (%d symbols)" % (so, len(syms)))
    print("torch-cuda-stubs: wrote %d stubs in %s: %s" % (len(written), lib, ", ".join(written)))


if __name__ == "__main__":
    main()
