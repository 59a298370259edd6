"""Running processes: the one module of slurm-dsl that imports ``subprocess``.

Contract: ``run_script`` feeds a rendered script to ``/bin/sh`` on stdin and
``run_argv`` runs an argv directly; neither builds a shell string.  Each child
gets a new session (so a process group of its own), a fixed environment, and
an outer guard: at ``timeout`` seconds the whole group gets TERM, then KILL
after ``kill_grace``; the child is always reaped, and anything left in its
group when it exits is killed too, so nothing outlives a call.  stdout and
stderr are each kept up to ``cap`` bytes; the rest is read and dropped (so the
child never blocks on a full pipe) and ``truncated`` says so.

Statuses are shell-style: 0-255, 128+N for death by signal N, 127 when the
program is missing and 126 when it cannot be executed (SPEC §4).
"""

from __future__ import annotations

import errno
import os
import selectors
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

CAP = 1 << 20  # bytes kept of each of stdout and stderr
KILL_GRACE = 1.0  # seconds between the guard's TERM and its KILL
SH = "/bin/sh"
SAFE_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
# Passed through when set: where a site keeps slurm.conf (configless and test setups).
PASS_THROUGH = ("SLURM_CONF",)


@dataclass(frozen=True)
class Completed:
    argv: Tuple[str, ...]
    returncode: int
    stdout: bytes
    stderr: bytes
    timed_out: bool
    truncated: bool


def fixed_env(environ: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """The environment every child gets: C locale, a safe PATH, and SLURM_CONF if set."""
    source = os.environ if environ is None else environ
    env = {"PATH": SAFE_PATH, "LC_ALL": "C", "LANG": "C"}
    env.update({k: source[k] for k in PASS_THROUGH if k in source})
    return env


def run_script(script: str, *, timeout: float, cap: int = CAP, kill_grace: float = KILL_GRACE) -> Completed:
    """Run ``script`` with ``/bin/sh``, the script on stdin."""
    return _run((SH, "-s"), script.encode("utf-8"), timeout, cap, kill_grace)


def run_argv(argv: Sequence[str], *, timeout: float, cap: int = CAP, kill_grace: float = KILL_GRACE) -> Completed:
    """Run ``argv`` directly (no shell), stdin from /dev/null."""
    return _run(tuple(argv), None, timeout, cap, kill_grace)


def _run(argv: Tuple[str, ...], stdin: Optional[bytes], timeout: float, cap: int, kill_grace: float) -> Completed:
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=fixed_env(),
            start_new_session=True,
            close_fds=True,
        )
    except OSError as exc:
        # The shell's convention: 127 not found, 126 found but not executable.
        code = 127 if exc.errno == errno.ENOENT else 126
        return Completed(argv, code, b"", f"{argv[0]}: {exc.strerror}\n".encode(), False, False)
    try:
        return _supervise(proc, argv, stdin, start + max(timeout, 0.0), cap, kill_grace)
    finally:
        _kill_group(proc.pid, signal.SIGKILL)
        proc.wait()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def _supervise(
    proc: subprocess.Popen[bytes],
    argv: Tuple[str, ...],
    stdin: Optional[bytes],
    guard_at: float,
    cap: int,
    kill_grace: float,
) -> Completed:
    assert proc.stdout is not None and proc.stderr is not None
    kept: Dict[int, List[bytes]] = {proc.stdout.fileno(): [], proc.stderr.fileno(): []}
    size = dict.fromkeys(kept, 0)
    truncated = timed_out = False
    sel = selectors.DefaultSelector()
    for fd in kept:
        sel.register(fd, selectors.EVENT_READ)
    pending = memoryview(stdin) if stdin is not None else None
    if proc.stdin is not None:
        os.set_blocking(proc.stdin.fileno(), False)
        sel.register(proc.stdin.fileno(), selectors.EVENT_WRITE)
    # A pidfd becomes readable when the child exits, so the loop sleeps in select()
    # until there is output, an exit, or a guard instant: no polling.
    pidfd = _pidfd(proc.pid)
    if pidfd is not None:
        sel.register(pidfd, selectors.EVENT_READ)
    exited = False
    kill_at: Optional[float] = None
    try:
        while True:
            exited = exited or _exited(proc.pid)
            if exited:
                # The child is done; whatever is left in its group is a straggler.
                # Killing before reaping keeps the group id from being reused meanwhile.
                _kill_group(proc.pid, signal.SIGKILL)
                if pidfd is not None and pidfd in sel.get_map():
                    sel.unregister(pidfd)
            if exited and not any(fd in kept for fd in sel.get_map()):
                break
            now = time.monotonic()
            if not timed_out and now >= guard_at:
                timed_out = True
                _kill_group(proc.pid, signal.SIGTERM)
                kill_at = now + kill_grace
            if kill_at is not None and now >= kill_at:
                _kill_group(proc.pid, signal.SIGKILL)
                kill_at = float("inf")
            wake = min(guard_at if not timed_out else float("inf"), kill_at or float("inf"))
            wait = max(wake - now, 0.0)
            if pidfd is None or exited:
                wait = min(wait, 0.01)  # no pidfd: poll for the exit
            if not sel.get_map():
                time.sleep(wait)
                continue
            for key, _ in sel.select(timeout=wait):
                fd = key.fd
                if fd == pidfd:
                    exited = True
                elif fd not in kept:
                    pending = _feed(fd, pending, sel, proc)
                else:
                    chunk = os.read(fd, 65536)
                    if not chunk:
                        sel.unregister(fd)
                        continue
                    room = cap - size[fd]
                    if len(chunk) > room:
                        truncated = True
                        chunk = chunk[: max(room, 0)]
                    size[fd] += len(chunk)
                    kept[fd].append(chunk)
    finally:
        sel.close()
        if pidfd is not None:
            os.close(pidfd)
    code = proc.wait()
    returncode = 128 - code if code < 0 else code
    out, err = (b"".join(kept[s.fileno()]) for s in (proc.stdout, proc.stderr))
    return Completed(argv, returncode, out, err, timed_out, truncated)


def _feed(
    fd: int, pending: Optional[memoryview], sel: selectors.BaseSelector, proc: subprocess.Popen[bytes]
) -> Optional[memoryview]:
    """Write what is left of stdin; close it when done or when the reader has gone."""
    try:
        if pending:
            pending = pending[os.write(fd, pending) :]
    except BrokenPipeError:
        pending = None
    if not pending:
        sel.unregister(fd)
        assert proc.stdin is not None
        proc.stdin.close()
    return pending


def _pidfd(pid: int) -> Optional[int]:
    """A pidfd for the child (Linux 5.3+), or None where there is none."""
    try:
        return os.pidfd_open(pid)  # type: ignore[attr-defined,unused-ignore]
    except (AttributeError, OSError):
        return None


def _exited(pid: int) -> bool:
    """Whether the child has exited, without reaping it (WNOWAIT)."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return info is not None


def _kill_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
