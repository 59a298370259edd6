"""What real scontrol prints, byte for byte (docs/slurm-behaviour.md §1-§3, §6;
docs/slurm-24.11-26.05.md §0-§4).

Tests build stderr from these, never from invented text.
"""

from __future__ import annotations

from typing import List, Sequence, Tuple

INVALID_JOB_ID = "Invalid job id specified"
ALREADY_FINISHED = "Job has already finished"
INVALID_USER_ID = "Invalid user id"
ACCESS_DENIED = "Access/permission denied"
DISABLED = "Requested operation is presently disabled"
PENDING_EXECUTION = "Job is pending execution"
ONLY_BATCH = "Only batch jobs are accepted or processed"
RATE_LIMITED = "Rate limit exceeded, please retry later"
DB_INDEX = "Job update not available right now, the DB index is being set, try again in a bit"
UNEXPECTED = "Unexpected message received"  # slurmctld down, control RPCs (docs/slurm-behaviour.md §6)


def plain(message: str, job_id: str) -> bytes:
    """update / requeue refusal: one line (docs/slurm-behaviour.md §1.2)."""
    return f"{message} for job {job_id}\n".encode()


def suspend(message: str, job_id: str, space: bool = True) -> bytes:
    """hold / release refusal: the same text again after 'slurm_suspend error:' (docs/slurm-behaviour.md §1.3;
    26.05 drops the space: docs/slurm-24.11-26.05.md §0, D1)."""
    sep = " " if space else ""
    return f"{message} for job {job_id}\nslurm_suspend error:{sep}{message}\n".encode()


def frame(nonce: str, calls: Sequence[Tuple[bytes, object, object]]) -> bytes:
    """A script's stderr: each call's own stderr, then its status line."""
    out: List[bytes] = []
    for own, number, status in calls:
        out.append(own)
        out.append(f"\x1eDSL {nonce} call {number} {status}\n".encode())
    return b"".join(out)


NONCE = "9f3c2a7b1e4d5f60718293a4b5c6d7e8"
OTHER_NONCE = "0123456789abcdef0123456789abcdef"
