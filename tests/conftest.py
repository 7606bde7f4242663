import collections
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

COUNTS: collections.Counter = collections.Counter()


def pytest_terminal_summary(terminalreporter):
    if COUNTS:
        terminalreporter.section("irforge conformance counts")
        for key in sorted(COUNTS):
            terminalreporter.write_line(f"{key}: {COUNTS[key]}")
