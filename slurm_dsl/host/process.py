"""Running processes: the one module of slurm-dsl that imports ``subprocess`` (docs/contract.md §2, §4).

``run_script`` feeds a rendered script to ``/bin/sh`` on stdin, ``run_argv`` runs an argv under a
shell that starts the guards and execs it; neither builds a shell string.  Each run's process group
gets TERM at its deadline and KILL ``kill_grace`` later, and nothing of it outlives the runner (the
lifeline and the backstop).  A process that left the call's session is out of reach: ``pipes_held``."""

from __future__ import annotations

import errno
import math
import os
import selectors
import signal
import stat
import subprocess
import time
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from ..core.script import GUARD, KILL_GRACE
from . import world
from .runs import RUN_ENV, this_run

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
# Seconds the backstop waits past the runner's KILL (timeout + kill_grace) before it KILLs the
# group itself, before rounding up to whole seconds (``sleep`` takes whole seconds everywhere):
# room for a loaded host, so it never races a runner that keeps time.  ``backstop`` is then at
# most timeout + kill_grace + BACKSTOP_MARGIN + 1, which ``run.calls.GUARD_MARGIN`` covers.
BACKSTOP_MARGIN = 0.5
# ``run_argv``'s program, run by a shell that starts the guards and then execs it: the same
# process, so its status, signal and output are its own.  The program and its arguments arrive
# as positional parameters after the guards' two values, never in the text.
_ARGV_WRAPPER = f'{GUARD}\nshift 2; exec "$@"\n'


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
    """The environment every child gets: C locale, a safe PATH, SLURM_CONF if set, its run (``host.runs.RUN_ENV``)."""
    source = os.environ if environ is None else environ
    env = {"PATH": SAFE_PATH, "LC_ALL": "C", "LANG": "C", RUN_ENV: str(this_run())}
    env.update({k: source[k] for k in PASS_THROUGH if k in source})
    return env


def backstop(timeout: float, kill_grace: float = KILL_GRACE) -> int:
    """Whole seconds from a run's start to its backstop's KILL: at least ``BACKSTOP_MARGIN`` past the runner's KILL."""
    return math.ceil(max(timeout, 0.0) + kill_grace + BACKSTOP_MARGIN)


def run_script(script: str, *, timeout: float, cap: int = CAP, kill_grace: float = KILL_GRACE) -> Completed:
    """Run ``script`` with ``/bin/sh``, on stdin, with a deadline of ``timeout`` seconds from now."""
    simulated = world.current().edge("run_script")
    if simulated is not None:
        return simulated(script, timeout=timeout, cap=cap, kill_grace=kill_grace)  # type: ignore[no-any-return]
    return _run((SH, "-s"), (), script.encode("utf-8"), timeout, cap, kill_grace)


def run_argv(argv: Sequence[str], *, timeout: float, cap: int = CAP, kill_grace: float = KILL_GRACE) -> Completed:
    """Run ``argv``, stdin from /dev/null.  A program that is missing is 127, one that cannot be executed 126."""
    argv = tuple(argv)
    simulated = world.current().edge("run_argv")
    if simulated is not None:
        return simulated(argv, timeout=timeout, cap=cap, kill_grace=kill_grace)  # type: ignore[no-any-return]
    cannot = _cannot_exec(argv[0])
    if cannot is not None:
        return Completed(argv, cannot[0], b"", f"{argv[0]}: {cannot[1]}\n".encode(), False, False, started=False)
    return _run(argv, (SH, "-c", _ARGV_WRAPPER, "sh"), None, timeout, cap, kill_grace)


def _cannot_exec(program: str) -> Optional[Tuple[int, str]]:
    """(127 or 126, why) when ``program`` could not be executed, as exec would say; None when it can."""
    if "/" in program:
        candidates = [program]
    else:
        candidates = [os.path.join(d, program) for d in SAFE_PATH.split(":")]
    why: Optional[Tuple[int, str]] = None
    for path in candidates:
        try:
            st = os.stat(path)
        except OSError as exc:
            if exc.errno not in (errno.ENOENT, errno.ENOTDIR):
                why = why or (126, exc.strerror or str(exc))
            continue
        if stat.S_ISREG(st.st_mode) and os.access(path, os.X_OK):
            return None
        why = why or (126, os.strerror(errno.EACCES))
    return why or (127, os.strerror(errno.ENOENT))


def _run(
    argv: Tuple[str, ...], shell: Tuple[str, ...], stdin: Optional[bytes], timeout: float, cap: int, kill_grace: float
) -> Completed:
    """Run ``argv``, or ``shell`` + the guards' two values + ``argv`` when ``shell`` is given."""
    start = time.monotonic()
    # The lifeline (docs/contract.md §2): the child gets the read end, we keep the write end
    # (close-on-exec, so no other child inherits it) until the child's group is dead.  Should
    # this process die, the kernel closes it and the guard KILLs the group.
    lifeline, keep = os.pipe()
    try:
        guards = (str(lifeline), str(backstop(timeout, kill_grace)))
        spawn = (*shell, *guards, *argv) if shell else (*argv, *guards)
        try:
            proc = subprocess.Popen(
                spawn,
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=fixed_env(),
                start_new_session=True,
                close_fds=True,
                pass_fds=(lifeline,),
            )
        except OSError as exc:
            # The shell's convention: 127 not found, 126 found but not executable.
            code = 127 if exc.errno == errno.ENOENT else 126
            return Completed(argv, code, b"", f"{spawn[0]}: {exc.strerror}\n".encode(), False, False, started=False)
        finally:
            os.close(lifeline)
        try:
            return _supervise(proc, argv, stdin, start + max(timeout, 0.0), cap, kill_grace, DRAIN)
        finally:
            _kill_group(proc.pid, signal.SIGKILL)
            proc.wait()
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
    finally:
        os.close(keep)  # after the group's KILL: a guard seeing EOF now finds nothing left to kill


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

    Safe only before the child is reaped (no other session can have its id), each process named by a
    pidfd taken first, so a reused pid is never signalled."""
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
