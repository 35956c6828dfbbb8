"""spark-submit entry point for every stage: ``run_stage.py [--force] '<resolved stage JSON>'``."""

import sys

from dagspec.exits import exit_now
from dagspec.job.main import main

if __name__ == "__main__":
    exit_now(main(sys.argv[1:]))
