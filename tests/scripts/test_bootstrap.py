"""scripts/bootstrap.sh picks the torch index: PyTorch's CPU index without a working
nvidia-smi, the default index with a GPU or when the CPU index cannot be reached.

The script runs against a fake ``.venv/bin/python`` that records every call, and a fake
``nvidia-smi`` that succeeds (GPU) or fails (no GPU)."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FAKE_PYTHON = r"""#!/usr/bin/env bash
echo "$*" >> "$FAKE_LOG"
if [[ "$1" == -W ]]; then shift 2; fi  # python -W ignore -c ...
case "$1" in
  -c) if [[ "$2" == *print* ]]; then echo "2.13.0+cpu CPU"; exit 0; fi
      if [[ "$2" == "import torch" && -f "$FAKE_STATE/torch" ]]; then exit 0; fi
      exit 1 ;;
  -m) if [[ "$*" == *torch==* ]]; then touch "$FAKE_STATE/torch"; fi
      if [[ "$*" == *--index-url* && "$FAKE_CPU_INSTALL_FAILS" == 1 ]]; then exit 1; fi
      exit 0 ;;
  -) cat > /dev/null; [[ "$FAKE_REACHABLE" == 1 ]] ;;
esac
"""


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize(
    "gpu, reachable, cpu_fails, expect_cpu_index",
    [
        (False, True, False, True),
        (False, False, False, False),
        (True, True, False, False),
        (False, True, True, True),
    ],
)
def test_bootstrap_chooses_the_torch_index(tmp_path, gpu, reachable, cpu_fails, expect_cpu_index):
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "bootstrap.sh", tmp_path / "scripts" / "bootstrap.sh")
    venv_bin = tmp_path / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "python").write_text(FAKE_PYTHON)
    (venv_bin / "python").chmod(0o755)
    fake_bin = tmp_path / "fakebin"
    fake_bin.mkdir()
    (fake_bin / "nvidia-smi").write_text(f"#!/usr/bin/env bash\nexit {0 if gpu else 1}\n")
    (fake_bin / "nvidia-smi").chmod(0o755)
    log = tmp_path / "calls.log"
    env = {
        **os.environ,
        "PATH": f"{fake_bin}:{os.environ['PATH']}",
        "FAKE_LOG": str(log),
        "FAKE_STATE": str(tmp_path),
        "FAKE_REACHABLE": "1" if reachable else "0",
        "FAKE_CPU_INSTALL_FAILS": "1" if cpu_fails else "0",
    }
    env.pop("SEQREC_TORCH_INDEX", None)
    res = subprocess.run(
        ["bash", "scripts/bootstrap.sh"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    installs = [ln for ln in log.read_text().splitlines() if ln.startswith("-m pip install")]
    torch_installs = [ln for ln in installs if "torch==2.13.0" in ln]
    cpu = [ln for ln in torch_installs if "--index-url https://download.pytorch.org/whl/cpu" in ln]
    assert bool(cpu) == expect_cpu_index, installs
    if cpu:
        assert "--no-deps" in cpu[0]
    # torch always ends with a plain install from the default index (its dependencies, or the
    # fallback), then the project
    assert "--index-url" not in torch_installs[-1]
    assert installs[-1].endswith("-e .[test,serve,plot,export,tune,excel,live,ann]")
    out = res.stdout
    assert ("no NVIDIA GPU" in out) != gpu
    if not gpu and not reachable:
        assert "cannot be reached: falling back to the default index" in out
    if cpu_fails:
        assert "failed: falling back" in out


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize(
    "version_ok, venv_ok, expect",
    [
        (False, True, "needs Python >= 3.10; '{py}' is Python 3.8.10: set PYTHON="),
        (True, False, "sudo apt install python3-venv"),
    ],
)
def test_bootstrap_names_an_old_python_or_a_missing_venv_module(
    tmp_path, version_ok, venv_ok, expect
):
    """The first two things that fail on a fresh machine, each in one line that says what to do."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "bootstrap.sh", tmp_path / "scripts" / "bootstrap.sh")
    py = tmp_path / "python3"
    py.write_text(
        "#!/usr/bin/env bash\n"
        'case "$1" in --version) echo "Python 3.8.10" ;;\n'
        f"  -c) exit {0 if version_ok else 1} ;;\n"
        # Debian's python3 without python3-venv: "ensurepip is not available"
        f"  -m) mkdir -p .venv/bin; {'touch .venv/bin/python; chmod +x .venv/bin/python' if venv_ok else 'exit 1'} ;;\n"
        "esac\n"
    )
    py.chmod(0o755)
    res = subprocess.run(
        ["bash", "scripts/bootstrap.sh"],
        cwd=tmp_path,
        env={**os.environ, "PYTHON": str(py)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 1 and expect.format(py=py) in res.stdout, res.stdout + res.stderr
    assert not (tmp_path / ".venv").exists()  # nothing half-made for the next run to trust


# torch's version is printed before NumPy is installed: without -W ignore its 'Failed to
# initialize NumPy' warning landed in a fresh set-up's output
def test_every_torch_version_print_silences_the_numpy_warning():
    lines = [
        ln
        for ln in (ROOT / "scripts" / "bootstrap.sh").read_text().splitlines()
        if "import torch; print" in ln
    ]
    assert len(lines) >= 2
    assert all(re.search(r"python -W ignore -c 'import torch; print", ln) for ln in lines), lines
