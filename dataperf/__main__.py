"""`python -m dataperf` entry point; torchrun launches ranks through it (`torchrun -m dataperf`)."""

from dataperf.cli import main

main()
