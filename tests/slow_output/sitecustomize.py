"""A deliberately slower shell output path, for showing that scripts/bench_all catches it.

With this folder first on PYTHONPATH, every Python process imports this module at start (as
`sitecustomize`); in the daemon, once tools/shell/output.py is loaded, OutputCapture.feed (which
every chunk of a command's output goes through) burns SLOW_OUTPUT_EXTRA times the CPU time the
process spent since the previous chunk: the output path then costs that much more CPU, and,
where CPU bounds it, that much more time. Other processes are left as they are.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
import time
from types import ModuleType
from typing import Any

TARGET = "tools.shell.output"
EXTRA = float(os.environ.get("SLOW_OUTPUT_EXTRA", "0.3"))
# A gap longer than this between two chunks is another call: nothing owed for it.
SAME_STREAM_SECONDS = 0.5


def slow_down(module: ModuleType) -> None:
    original = module.OutputCapture.feed
    last = {"cpu": 0.0, "wall": -1.0}

    def feed(self: Any, stream: str, data: bytes) -> str:
        cpu, wall = time.process_time(), time.monotonic()
        if wall - last["wall"] < SAME_STREAM_SECONDS:
            # What the process used since the previous chunk, that chunk's feed included.
            until = cpu + EXTRA * (cpu - last["cpu"])
            while time.process_time() < until:
                pass
        last["cpu"], last["wall"] = time.process_time(), time.monotonic()
        text: str = original(self, stream, data)
        return text

    module.OutputCapture.feed = feed


class PatchAfterImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != TARGET:
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        load = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            load(module)
            slow_down(module)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


sys.meta_path.insert(0, PatchAfterImport())
