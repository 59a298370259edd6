"""Running processes: the one module of slurm-dsl that imports ``subprocess``.

Contract: ``run_script`` feeds a rendered script to ``/bin/sh`` on stdin and
``run_argv`` runs an argv directly; neither builds a shell string.  Each child
gets a new session (so a process group of its own), a fixed environment, and
a guard that is also the deadline's clock: at ``timeout`` seconds (monotonic,
counted from just before the spawn) the whole group gets TERM, then KILL after
``kill_grace``; the child is always reaped, and anything left in its group
when it exits is killed too, so nothing outlives a call.  A rendered script
traps that TERM (docs/contract.md §2): no call starts after it, a call it cuts
short reports 124, and the script exits by itself; ``timed_out`` says the TERM
was sent.  stdout and stderr are each kept up to ``cap`` bytes; the rest is
read and dropped (so the child never blocks on a full pipe) and ``truncated``
says so.

Reading stops at EOF on both pipes, or ``DRAIN`` seconds after the child has
exited (it exits at the latest when the guard's KILL lands), whichever comes
first: a process that escaped the call by leaving its session (``setsid``)
and still holds stdout or stderr must not keep the caller for as long as it
lives.  Before giving up, whatever is left in the call's session outside its
group (``setpgid``) is killed too, and its pipes get one more ``DRAIN``.  An
escaped process is out of reach (no kill can name it safely); we close our
ends of the pipes and leave it: its next write gets SIGPIPE or EPIPE.
``pipes_held`` then says output may be missing, so callers must not read it
as complete.

Statuses are shell-style: 0-255, 128+N for death by signal N, 127 when the
program is missing and 126 when it cannot be executed (docs/contract.md §4);
``killed_by`` tells death by signal N (N) from an exit with 128+N (None), and
``started`` a spawn that failed (127, 126: it never ran) from a program that
exited 127 or 126 itself.
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

from .script import KILL_GRACE  # seconds from the TERM at the deadline to the KILL, as each script says

CAP = 1 << 20  # bytes kept of each of stdout and stderr
# Seconds reading goes on after the child has exited, for its pipes to close.  The
# child's own output needs no time: a write to a pipe returns only once its bytes are
# in the pipe (a writer facing a full pipe blocks, so it has not exited), and the final
# drain reads what is buffered whatever the clock says, so the status line a script
# prints just before it exits is never lost to this bound.  What the window waits for
# is EOF: the stragglers of the child's group, KILLed when it exits, close the pipes
# as the kernel tears them down, in milliseconds; a quarter second leaves room for a
# loaded host.  A holder still there after that has left the group and may stay as
# long as it likes: we stop reading and say so (``pipes_held``).
DRAIN = 0.25
# Bytes of one read in the final drain, and at most how many: more than a pipe can
# hold (fs.pipe-max-size is 1 MiB by default), so a pipe whose writers are all gone
# always reaches EOF, and one still being written to cannot keep us.
_DRAIN_READ = 1 << 20
_DRAIN_READS = 8
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
    # stdout or stderr was still open (held by a process that escaped the call) when
    # reading stopped: output may be missing, so it must not be read as complete.
    pipes_held: bool = False
    # The signal that ended the child (``returncode`` is then 128 + it), or None if it exited.
    killed_by: Optional[int] = None
    # Whether the program was started at all.  False only when the spawn itself failed
    # (``returncode`` 127 or 126): then it certainly did not run.  A started program may
    # exit 127 or 126 itself, which says nothing of the kind (docs/contract.md §4).
    started: bool = True


def fixed_env(environ: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """The environment every child gets: C locale, a safe PATH, and SLURM_CONF if set."""
    source = os.environ if environ is None else environ
    env = {"PATH": SAFE_PATH, "LC_ALL": "C", "LANG": "C"}
    env.update({k: source[k] for k in PASS_THROUGH if k in source})
    return env


def run_script(script: str, *, timeout: float, cap: int = CAP, kill_grace: float = KILL_GRACE) -> Completed:
    """Run ``script`` with ``/bin/sh``, the script on stdin; ``timeout`` is its deadline, in
    seconds from now: TERM to its process group then, KILL ``kill_grace`` seconds later."""
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
        return Completed(argv, code, b"", f"{argv[0]}: {exc.strerror}\n".encode(), False, False, started=False)
    try:
        return _supervise(proc, argv, stdin, start + max(timeout, 0.0), cap, kill_grace, DRAIN)
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
    drain: float,
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
    stop_at: Optional[float] = None  # once the child has exited: when reading stops, EOF or not
    session_killed = False
    held = False  # a pipe still open when reading stopped

    def read(fd: int, limit: int) -> bool:
        """One read of ``fd`` into what is kept; False at EOF (``fd`` then unregistered)."""
        nonlocal truncated
        chunk = os.read(fd, limit)
        if not chunk:
            sel.unregister(fd)
            return False
        room = cap - size[fd]
        if len(chunk) > room:
            truncated = True
            chunk = chunk[: max(room, 0)]
        size[fd] += len(chunk)
        kept[fd].append(chunk)
        return True

    try:
        while True:
            exited = exited or _exited(proc.pid)
            now = time.monotonic()
            if exited:
                # The child is done; whatever is left in its group is a straggler.
                # Killing before reaping keeps the group id from being reused meanwhile.
                _kill_group(proc.pid, signal.SIGKILL)
                if pidfd is not None and pidfd in sel.get_map():
                    sel.unregister(pidfd)
                if stop_at is None:
                    stop_at = now + drain
            if exited and not any(fd in kept for fd in sel.get_map()):
                break
            if stop_at is not None and now >= stop_at:
                # A pipe is still held.  A holder left in the session (a group of its
                # own) can still be killed; give its pipes one more window, once.
                if session_killed or not _kill_session(proc.pid):
                    break
                session_killed = True
                stop_at = now + drain
            if not exited and not timed_out and now >= guard_at:
                timed_out = True
                _kill_group(proc.pid, signal.SIGTERM)
                kill_at = now + kill_grace
            if not exited and kill_at is not None and now >= kill_at:
                _kill_group(proc.pid, signal.SIGKILL)
                kill_at = float("inf")
            wake = min(guard_at if not timed_out else float("inf"), kill_at or float("inf"), stop_at or float("inf"))
            # Nothing due (the KILL is sent, its exit not seen yet): sleep until the pidfd wakes us.
            wait: Optional[float] = None if wake == float("inf") else max(wake - now, 0.0)
            if pidfd is None or exited:
                wait = 0.01 if wait is None else min(wait, 0.01)  # no pidfd: poll for the exit
            if not sel.get_map():
                time.sleep(0.01 if wait is None else wait)
                continue
            for key, _ in sel.select(timeout=wait):
                fd = key.fd
                if fd == pidfd:
                    exited = True
                elif fd not in kept:
                    pending = _feed(fd, pending, sel, proc)
                else:
                    read(fd, 65536)
        # Reading stopped with a pipe still open: take what is already buffered (the
        # child's last words among it), and whether its writers are all gone after all.
        for fd in [fd for fd in kept if fd in sel.get_map()]:
            os.set_blocking(fd, False)
            try:
                held = all(read(fd, _DRAIN_READ) for _ in range(_DRAIN_READS)) or held
            except BlockingIOError:
                held = True  # empty, and a writer still holds it
    finally:
        sel.close()
        if pidfd is not None:
            os.close(pidfd)
    code = proc.wait()
    returncode = 128 - code if code < 0 else code
    out, err = (b"".join(kept[s.fileno()]) for s in (proc.stdout, proc.stderr))
    return Completed(argv, returncode, out, err, timed_out, truncated, held, -code if code < 0 else None)


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


def _kill_session(sid: int) -> bool:
    """KILL what is left in the child's session outside its group; whether anything was.

    Safe only before the child is reaped: until then no other session can have its id.
    Each process is named by a pidfd taken before its session is read, so a pid that
    is reused meanwhile is never signalled.  Without /proc or pidfds, nothing is found.
    """
    found = False
    try:
        entries = [int(e) for e in os.listdir("/proc") if e.isdigit() and int(e) != sid]
    except OSError:
        return False
    for pid in entries:
        pidfd = _pidfd(pid)
        if pidfd is None:
            continue
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            if fields[0] != b"Z" and int(fields[3]) == sid:
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)  # type: ignore[attr-defined,unused-ignore]
                found = True
        except (OSError, IndexError, ValueError):
            pass
        finally:
            os.close(pidfd)
    return found


def _kill_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
