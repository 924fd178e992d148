"""Runs the leak check from the command line: ``python -m course_site.leaks DIR``."""

import sys

from course_site.leaks.cli import main

if __name__ == "__main__":
    sys.exit(main())
