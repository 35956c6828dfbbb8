"""spark-submit entry point for every stage: ``run_stage.py '<resolved stage JSON>'``."""

import sys

from dagspec.runtime import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
