import sys

from agents.cudaprobe.cli import main

sys.exit(main())
