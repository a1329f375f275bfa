"""`python -m dataperf` entry point; torchrun launches ranks through it (`torchrun -m dataperf`)."""

import os
import sys

try:
    from dataperf.cli import main
except KeyboardInterrupt:  # a Ctrl-C while torch imports (a second or two; every rank of --nproc starts here)
    if "LOCAL_RANK" not in os.environ:  # a rank's launcher says it, once for all
        print("interrupted", file=sys.stderr)  # as the command's own Ctrl-C says it, not a traceback
    sys.exit(130)

main()
