"""The `gmshim` command of the Python package (and `python -m gmshim`): runs the gmshim CLI shipped
inside the package, which finds the libgmshim.so beside it, as an installed one finds ../lib."""

import os
import sys


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    exe = os.path.join(here, "_native", "gmshim")
    if not os.access(exe, os.X_OK):
        sys.stderr.write("gmshim: %s is missing: this gmshim package was not installed from a wheel\n" % exe)
        return 2
    sys.stdout.flush()
    sys.stderr.flush()
    # exec, not a child: the job's exit status and signals stay the CLI's own.
    os.execv(exe, ["gmshim"] + sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
