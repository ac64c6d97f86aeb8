"""A process's resident memory as Linux counts it (/proc/<pid>/status), and its peak."""

from __future__ import annotations

from pathlib import Path

MB = 1024 * 1024


def resident_bytes(pid: int, *, peak: bool = False, peak_from_now: bool = False) -> int:
    """The process's resident memory (VmRSS), or its peak (VmHWM) since it was reset.

    `peak_from_now` resets the peak first (writing 5 to /proc/<pid>/clear_refs).
    """
    proc = Path(f"/proc/{pid}")
    if peak_from_now:
        (proc / "clear_refs").write_text("5")
    field = "VmHWM:" if peak else "VmRSS:"
    status = (proc / "status").read_text().splitlines()
    return int(next(line for line in status if line.startswith(field)).split()[1]) * 1024
