"""A benchmark script (benchmarks/NAME.py) loaded as a module for the tests, with
benchmarks/ on sys.path while it imports (as when it runs as a script, so that it finds
the benchmark modules beside it)."""

import importlib.util
import os
import sys

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          'benchmarks')


def benchmark_module(name):
    """benchmarks/`name`.py as a fresh module."""
    spec = importlib.util.spec_from_file_location(f'benchmark_{name}',
                                                  os.path.join(BENCHMARKS, f'{name}.py'))
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, BENCHMARKS)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(BENCHMARKS)
    return module
