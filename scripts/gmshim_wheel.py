"""Writes gmshim's wheel with nothing but the standard library, and is the PEP 517 build backend
of pyproject.toml, so that `pip install .` and `make wheel` build offline (no setuptools, nothing
downloaded). The wheel holds python/gmshim plus the built CLI and libgmshim.so in gmshim/_native/.

  python3 scripts/gmshim_wheel.py --build build --out build/dist   (what `make wheel` runs)
"""

import argparse
import base64
import csv
import hashlib
import io
import os
import re
import subprocess
import sys
import sysconfig
import time
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAME = "gmshim"
SUMMARY = "GPU-memory tool for CUDA programs and PyTorch jobs: a preloaded caching pool, event log and reports"


def version():
    with open(os.path.join(ROOT, "common", "version.h")) as f:
        m = re.search(r'#define\s+GMSHIM_VERSION_STRING\s+"([^"]+)"', f.read())
    if not m:
        raise RuntimeError("GMSHIM_VERSION_STRING not found in common/version.h")
    return m.group(1)


# The libraries a manylinux wheel may link without shipping them (PEP 599/600's list, less those
# a C program of ours could not need): everything else makes the wheel machine-specific.
MANYLINUX_LIBS = {"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1",
                  "libgcc_s.so.1", "libutil.so.1", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"}


def elf_needs(path):
    """(DT_NEEDED names, the version names it asks of each) of an ELF64 little-endian file, read
    from its section headers: .dynamic and .gnu.version_r with their string tables."""
    import struct
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise RuntimeError("%s: not a 64-bit little-endian ELF file" % path)
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    secs = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]

    def cstr(sec, off):
        base = secs[sec][4] + off
        return data[base:data.index(b"\0", base)].decode()

    needed, versions = [], {}
    for name, typ, _, _, off, size, link, _, _, entsize in secs:
        if typ == 6:  # SHT_DYNAMIC: DT_NEEDED (1) entries name the libraries
            for pos in range(off, off + size, entsize or 16):
                tag, val = struct.unpack_from("<qQ", data, pos)
                if tag == 1:
                    needed.append(cstr(link, val))
        elif typ == 0x6FFFFFFE:  # SHT_GNU_verneed: per library, the versions its symbols ask for
            pos = off
            while True:
                _, cnt, file_, aux, nxt = struct.unpack_from("<HHIII", data, pos)
                lib = cstr(link, file_)
                apos = pos + aux
                for _ in range(cnt):
                    _, _, _, vname, anext = struct.unpack_from("<IHHII", data, apos)
                    versions.setdefault(lib, set()).add(cstr(link, vname))
                    apos += anext
                if not nxt:
                    break
                pos += nxt
    return needed, versions


def glibc_floor(paths):
    """The newest GLIBC_2.N any of `paths` asks for, as N; None when one of them links a library
    outside the manylinux list (then only a plain linux tag is true)."""
    newest = 0
    for path in paths:
        needed, versions = elf_needs(path)
        if any(lib not in MANYLINUX_LIBS for lib in needed):
            return None
        for names in versions.values():
            for v in names:
                m = re.match(r"GLIBC_2\.(\d+)$", v)
                if m:
                    newest = max(newest, int(m.group(1)))
    return newest


def platform_tag(binaries=()):
    """manylinux_2_N_<arch> for the newest glibc symbol version the binaries use (PEP 600): they
    need nothing but glibc, so any index takes the wheel; linux_<arch> if that cannot be shown."""
    plat = re.sub(r"[^A-Za-z0-9]", "_", sysconfig.get_platform())
    arch = plat[len("linux_"):] if plat.startswith("linux_") else None
    floor = glibc_floor(binaries) if binaries and arch else None
    if floor is None:
        return plat
    return "manylinux_2_%d_%s" % (max(floor, 17), arch)


def metadata(ver):
    readme = ""
    path = os.path.join(ROOT, "README.md")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            readme = f.read()
    head = ["Metadata-Version: 2.1", "Name: " + NAME, "Version: " + ver, "Summary: " + SUMMARY,
            "Requires-Python: >=3.8", "Platform: linux",
            "Description-Content-Type: text/markdown"]
    return "\n".join(head) + "\n\n" + readme


def write_wheel(build, out, ver=None):
    """Writes the wheel from `build` (a `make BUILD=...` directory); returns its file name."""
    ver = ver or version()
    tag = "py3-none-" + platform_tag([os.path.join(build, "gmshim"), os.path.join(build, "libgmshim.so")])
    dist = "%s-%s.dist-info" % (NAME, ver)
    name = "%s-%s-%s.whl" % (NAME, ver, tag)
    # Fixed times (SOURCE_DATE_EPOCH when set): the same tree gives the same wheel.
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "315532800"))
    stamp = max(epoch, 315532800)
    date = time.gmtime(stamp)[:6]

    files = []  # (archive name, bytes, mode)
    pkg = os.path.join(ROOT, "python", NAME)
    for fn in sorted(os.listdir(pkg)):
        if fn.endswith(".py"):
            with open(os.path.join(pkg, fn), "rb") as f:
                data = f.read()
            if fn == "__init__.py":
                data = re.sub(rb'__version__ = "[^"]*"', b'__version__ = "%s"' % ver.encode(), data, count=1)
            files.append((NAME + "/" + fn, data, 0o644))
    for src, dst, mode in (("gmshim", "gmshim", 0o755), ("libgmshim.so", "libgmshim.so", 0o755)):
        path = os.path.join(build, src)
        if not os.path.exists(path):
            raise RuntimeError("%s is missing: build it first (make BUILD=%s)" % (path, build))
        with open(path, "rb") as f:
            files.append((NAME + "/_native/" + dst, f.read(), mode))
    with open(os.path.join(ROOT, "shim", "gmshim.h"), "rb") as f:
        files.append((NAME + "/_native/gmshim.h", f.read(), 0o644))
    files.append((dist + "/METADATA", metadata(ver).encode("utf-8"), 0o644))
    files.append((dist + "/WHEEL", ("Wheel-Version: 1.0\nGenerator: gmshim scripts/gmshim_wheel.py\n"
                                     "Root-Is-Purelib: false\nTag: %s\n" % tag).encode(), 0o644))
    files.append((dist + "/entry_points.txt", b"[console_scripts]\ngmshim = gmshim.__main__:main\n", 0o644))
    files.append((dist + "/top_level.txt", b"gmshim\n", 0o644))

    record = io.StringIO()
    w = csv.writer(record, lineterminator="\n")
    for arc, data, _ in files:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        w.writerow([arc, "sha256=" + digest, len(data)])
    w.writerow([dist + "/RECORD", "", ""])
    files.append((dist + "/RECORD", record.getvalue().encode(), 0o644))

    os.makedirs(out, exist_ok=True)
    tmp = os.path.join(out, name + ".tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for arc, data, mode in files:
            info = zipfile.ZipInfo(arc, date)
            info.external_attr = (0o100000 | mode) << 16  # pip keeps the executable bits
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    os.replace(tmp, os.path.join(out, name))
    return name


# ---- PEP 517 hooks (pyproject.toml: build-backend = "gmshim_wheel", backend-path = ["scripts"]) --

def get_requires_for_build_wheel(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    # make builds the library and the CLI (and checks their prerequisites) and calls write_wheel.
    build = os.environ.get("GMSHIM_WHEEL_BUILD", "build/pip")
    cmd = [os.environ.get("MAKE", "make"), "--no-print-directory", "-C", ROOT, "BUILD=" + build,
           "wheel", "WHEEL_DIR=" + os.path.abspath(wheel_directory), "PYTHON=" + sys.executable]
    subprocess.run(cmd, check=True, stdout=sys.stderr)
    names = [f for f in os.listdir(wheel_directory) if f.startswith(NAME + "-" + version() + "-")
             and f.endswith(".whl")]
    if len(names) != 1:
        raise RuntimeError("make wheel left %d wheels in %s" % (len(names), wheel_directory))
    return names[0]


def main(argv=None):
    ap = argparse.ArgumentParser(description="write gmshim's wheel from a build directory")
    ap.add_argument("--build", required=True, help="the make BUILD directory holding gmshim and libgmshim.so")
    ap.add_argument("--out", required=True, help="where the .whl goes")
    args = ap.parse_args(argv)
    print(os.path.join(args.out, write_wheel(args.build, args.out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
