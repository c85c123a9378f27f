"""The layers (docs/architecture.md): pyproject.toml's import contracts fail the build on a
wrong-way import or a cycle, and the composition root wires the kernel's protocols."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from exec_daemon.kernel.config import DaemonConfig
from exec_daemon.kernel.sandboxing import Sandboxing
from exec_daemon.kernel.state import Daemon
from exec_daemon.server import new_daemon
from sandbox.service import SandboxService

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def project_copy(destination: Path) -> Path:
    for package in ("exec_daemon", "tools", "sandbox"):
        shutil.copytree(
            ROOT / package, destination / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copy(ROOT / "pyproject.toml", destination)
    return destination


def lint_imports(project: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=project,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(project)},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("module", "wrong_way", "named"),
    [
        # A tool reaching for the sandbox instead of the kernel's Sandboxing protocol.
        ("tools/todos.py", "from sandbox import service", "tools is not allowed to import sandbox"),
        # The kernel importing a layer above it.
        (
            "exec_daemon/kernel/wire.py",
            "from tools import todos",
            "exec_daemon.kernel is not allowed to import tools",
        ),
        # The cycle cli -> server -> guards -> cli, hidden in a function as it once was.
        (
            "exec_daemon/guards/permissions.py",
            "def _late():\n    from exec_daemon.cli import NOT_BUILT_YET\n    return NOT_BUILT_YET",
            "No cycles are allowed in exec_daemon",
        ),
        # Two sibling tool modules importing each other.
        ("tools/todos.py", "from tools import plans", "No cycles are allowed in tools"),
    ],
)
def test_a_wrong_way_import_breaks_the_contracts(
    tmp_path: Path, module: str, wrong_way: str, named: str
) -> None:
    project = project_copy(tmp_path)
    assert lint_imports(project).returncode == 0
    with (project / module).open("a") as source:
        source.write(f"\n\n{wrong_way}  # noqa\n")
    broken = lint_imports(project)
    assert broken.returncode != 0
    assert named in broken.stdout


def test_the_root_wires_the_kernel_protocols(tmp_path: Path) -> None:
    config = DaemonConfig(auth_token="t", workspace=tmp_path)
    daemon = new_daemon(config)
    assert daemon.service(Sandboxing) is daemon.service(SandboxService)
    with pytest.raises(LookupError, match="no implementation of Sandboxing"):
        Daemon(config).service(Sandboxing)
