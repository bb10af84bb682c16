"""How a worker is launched and confined: the one place that starts untrusted code.

Two modes: `bwrap` (default where it works: a bubblewrap jail with every namespace unshared,
the worker as its pid 1 under rlimits and a seccomp filter, as an unprivileged uid) and
`process` (the same worker, rlimits and seccomp in a plain child, with Landlock where the
kernel has it, for hosts without user namespaces). What each mode confines, and what neither
protects against (a worker owns its reply channel, so the parent trusts no reply): docs/sandbox.md.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.markup import escape

MODES = ("auto", "bwrap", "process")
LANDLOCK_CREATE_RULESET = 444  # the same syscall number on every architecture
UNPRIVILEGED_UID = 65534
SANDBOX_MAIN = Path(__file__).with_name("sandbox_main.py")  # the program a worker runs inside
_stderr = Console(stderr=True)


class SandboxUnavailable(RuntimeError):
    """The requested sandbox mode cannot run on this host."""


@dataclass(frozen=True)
class LaunchPlan:
    mode: str
    python: str
    python_prefix: str
    seccomp_lib: str | None
    drop_to_uid: int | None  # set when we run as root: workers run as nobody
    requested: str = ""  # the mode asked for (auto, bwrap, process)
    fallback: str | None = None  # why `auto` could not use bwrap, when it fell back
    landlock_abi: int = 0  # process mode: the Landlock ABI the worker restricts itself with (0: none)

    @property
    def jail(self) -> str:
        """The jail in one word, as verdicts and manifests record it."""
        if self.mode == "process" and self.landlock_abi:
            return "process+landlock"
        return self.mode

    def record(self) -> dict:
        return {
            "jail": self.jail,
            "requested": self.requested or self.mode,
            "fallback": self.fallback,
            "seccomp": self.seccomp_lib is not None,
            "landlock_abi": self.landlock_abi,
            "uid": self.drop_to_uid if self.drop_to_uid is not None else os.geteuid(),
        }


_resolved: dict[str, LaunchPlan] = {}


def resolved_plans() -> list[dict]:
    """The jails this process has used so far (for manifests): which one judged what."""
    return [plan.record() for plan in _resolved.values()]


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 where Landlock is absent or disabled."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        abi = libc.syscall(LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    except (OSError, AttributeError):
        return 0
    return max(0, int(abi))


def _world_readable(path: str) -> bool:
    p = Path(path).resolve()
    try:
        if not p.stat().st_mode & stat.S_IROTH:
            return False
        for parent in p.parents:
            if not parent.stat().st_mode & stat.S_IXOTH:
                return False
    except OSError:
        return False
    return True


def _python_prefix(python: str) -> str:
    out = subprocess.run(
        [python, "-S", "-c", "import sys; print(sys.base_prefix)"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return out.stdout.strip()


def _pick_python(need_world_readable: bool) -> str:
    """An interpreter the worker's uid can read; the worker needs only the standard library."""
    candidates = [os.path.realpath(sys.executable)]
    for name in ("/usr/bin/python3", shutil.which("python3") or ""):
        if name and name not in candidates:
            candidates.append(os.path.realpath(name))
    for candidate in candidates:
        if not os.path.exists(candidate):
            continue
        if not need_world_readable or _world_readable(candidate):
            return candidate
    raise SandboxUnavailable(
        "no Python interpreter readable by an unprivileged user (tried "
        + ", ".join(candidates)
        + "); install python3 system-wide or run as a normal user"
    )


def _seccomp_lib() -> str | None:
    for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib", "/lib"):
        p = Path(d) / "libseccomp.so.2"
        if p.exists():
            return str(p)
    found = ctypes.util.find_library("seccomp")
    if found:
        for d in ("/usr/lib", "/lib", "/usr/lib64"):
            for p in Path(d).rglob(found):
                return str(p)
    return None


def _bwrap_works(plan_python: str, drop: int | None) -> str | None:
    """None if a trivial jail starts, else the reason."""
    if not shutil.which("bwrap"):
        return "bubblewrap (bwrap) is not installed"
    with tempfile.TemporaryDirectory(prefix="evoenv-probe-") as d:
        os.chmod(d, 0o755)
        argv = _bwrap_argv(plan_python, _python_prefix(plan_python), Path(d), drop) + [
            plan_python,
            "-S",
            "-c",
            "print('ok')",
        ]
        try:
            r = subprocess.run(argv, capture_output=True, text=True, timeout=30, env={})
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bwrap failed to start: {exc}"
        if r.returncode != 0 or r.stdout.strip() != "ok":
            return "bwrap cannot create a jail here: " + (r.stderr.strip().splitlines() or ["?"])[-1]
    return None


@functools.cache
def resolve(mode: str = "auto") -> LaunchPlan:
    """Choose and check the launch plan once per process. A fallback from `auto` to the weaker
    `process` mode is said loudly on stderr and recorded in the plan (and so in manifests)."""
    if mode not in MODES:
        raise SandboxUnavailable(f"unknown sandbox mode {mode!r} (choose from {', '.join(MODES)})")
    is_root = os.geteuid() == 0
    drop = UNPRIVILEGED_UID if is_root and shutil.which("setpriv") else None
    python = _pick_python(need_world_readable=drop is not None)
    lib = _seccomp_lib()
    fallback = None
    if mode in ("auto", "bwrap"):
        reason = _bwrap_works(python, drop)
        if reason is None:
            plan = LaunchPlan("bwrap", python, _python_prefix(python), lib, drop, requested=mode)
            _resolved[mode] = plan
            return plan
        if mode == "bwrap":
            raise SandboxUnavailable(reason)
        fallback = reason
    abi = landlock_abi()
    plan = LaunchPlan(
        "process", python, _python_prefix(python), lib, drop, requested=mode, fallback=fallback, landlock_abi=abi
    )
    if fallback:
        _stderr.print(
            f"[bold yellow]WARNING:[/] {escape(fallback)}: environments run in the WEAKER "
            f"'{plan.jail}' sandbox (rlimits + seccomp{' + Landlock' if abi else ''}, no namespaces); "
            "manifests and verdicts record it. Install bubblewrap for full isolation, or pass "
            "--sandbox process to choose this on purpose.",
            soft_wrap=True,
        )
    if lib is None:
        _stderr.print("[bold yellow]WARNING:[/] libseccomp not found: workers run without a seccomp filter")
    if not abi:
        _stderr.print(
            "[bold yellow]WARNING:[/] Landlock is not available: 'process' workers can read "
            "every file and write wherever their uid can",
            soft_wrap=True,
        )
    _resolved[mode] = plan
    return plan


def _drop_prefix(drop: int | None) -> list[str]:
    if drop is None:
        return []
    return ["setpriv", f"--reuid={drop}", f"--regid={drop}", "--clear-groups", "--inh-caps=-all"]


def _bwrap_argv(
    python: str, prefix: str, workdir: Path, drop: int | None, tmp_mb: int = 16, packages: tuple[Path, ...] = ()
) -> list[str]:
    argv = _drop_prefix(drop) + [
        "bwrap",
        "--unshare-user",
        "--unshare-pid",
        "--as-pid-1",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--clearenv",
        "--setenv",
        "PYTHONDONTWRITEBYTECODE",
        "1",
        "--tmpfs",
        "/",
        "--ro-bind",
        "/usr",
        "/usr",
    ]
    for link in ("lib", "lib64", "bin", "sbin"):
        if Path(f"/{link}").is_symlink():
            argv += ["--symlink", os.readlink(f"/{link}"), f"/{link}"]
        elif Path(f"/{link}").is_dir():
            argv += ["--ro-bind", f"/{link}", f"/{link}"]
    if not prefix.startswith("/usr/"):
        argv += ["--ro-bind", prefix, prefix]
    for entry in packages:  # an imported environment's granted packages (runtime/packages.py)
        argv += ["--ro-bind", str(entry), f"/evoenv-packages/{entry.name}"]
    argv += [
        "--ro-bind",
        str(workdir),
        "/sandbox",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--remount-ro",
        "/dev",
        "--size",
        str(tmp_mb * 1024 * 1024),
        "--tmpfs",
        "/tmp",
        "--chdir",
        "/tmp",
        "--remount-ro",
        "/",
    ]
    return argv


def landlock_rules(plan: LaunchPlan, workdir: Path, packages: tuple[Path, ...] = ()) -> dict | None:
    """What a `process` worker may still read once it restricts itself (nothing is writable):
    the interpreter and its prefix, the system libraries, its own folder, and an imported
    environment's granted package entries."""
    if plan.mode != "process" or not plan.landlock_abi:
        return None
    read = {plan.python_prefix, os.path.dirname(plan.python), "/usr", str(workdir), *map(str, packages)}
    if plan.seccomp_lib:
        read.add(os.path.dirname(plan.seccomp_lib))
    for top in ("/lib", "/lib64", "/bin"):
        if os.path.isdir(top):
            read.add(os.path.realpath(top))
    return {"abi": plan.landlock_abi, "read": sorted(read)}


def launch_argv(
    plan: LaunchPlan, workdir: Path, config_json: str, hash_seed: int, tmp_mb: int, packages: tuple[Path, ...] = ()
) -> tuple[list[str], dict, str]:
    """argv, environment and cwd for one worker; `workdir` holds sandbox_main.py and env.py."""
    py_flags = ["-S", "-B", "-u"]
    if plan.mode == "bwrap":
        argv = _bwrap_argv(plan.python, plan.python_prefix, workdir, plan.drop_to_uid, tmp_mb, packages)
        argv[argv.index("--clearenv") + 1 : argv.index("--clearenv") + 1] = [
            "--setenv",
            "PYTHONHASHSEED",
            str(hash_seed),
        ]
        argv += [plan.python, *py_flags, "/sandbox/sandbox_main.py", config_json]
        return argv, {}, "/"
    env = {"PYTHONHASHSEED": str(hash_seed), "PYTHONDONTWRITEBYTECODE": "1"}
    argv = _drop_prefix(plan.drop_to_uid) + [plan.python, *py_flags, str(workdir / "sandbox_main.py"), config_json]
    return argv, env, str(workdir)


def prepare_workdir(root: Path, env_id: str, source: bytes) -> Path:
    """A read-only folder holding the worker program and one environment's exact source."""
    d = root / env_id
    if d.exists():
        return d
    tmp = Path(tempfile.mkdtemp(dir=root, prefix=".tmp-"))
    (tmp / "sandbox_main.py").write_bytes(SANDBOX_MAIN.read_bytes())
    (tmp / "env.py").write_bytes(source)
    for f in tmp.iterdir():
        f.chmod(0o644)
    tmp.chmod(0o755)
    try:
        tmp.rename(d)
    except OSError:  # another thread won the race; use its copy
        shutil.rmtree(tmp, ignore_errors=True)
    return d


def env_path_in_worker(plan: LaunchPlan, workdir: Path) -> str:
    return "/sandbox/env.py" if plan.mode == "bwrap" else str(workdir / "env.py")


def packages_path_in_worker(plan: LaunchPlan, workdir: Path) -> str:
    """Where a worker with granted packages finds them (prepare_workdir's symlinks in `process`)."""
    return "/evoenv-packages" if plan.mode == "bwrap" else str(workdir / "packages")
