"""A process's peak resident memory, counted afresh from a chosen moment (Linux), so that one item or one run
measures its own peak and not an earlier one's."""

from __future__ import annotations

import logging
from pathlib import Path

logger = logging.getLogger(__name__)


def reset_peak_rss() -> bool:
    """Start this process's peak-RSS count afresh (Linux: 5 written to clear_refs), so that an item or a run
    measures its own peak, not that of an earlier one in the same process (a worker runs many items, a bench
    several runs). True when the count now starts
    from the present (read back: the peak no longer stands above what the process holds); some kernels and
    sandboxes refuse the write or ignore it."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass
    status = _status_kib()
    took = "VmHWM" in status and "VmRSS" in status and status["VmHWM"] - status["VmRSS"] < _RESET_SLACK_KIB
    if not took:
        logger.debug("cannot reset the peak RSS count; the peak is the process's lifetime peak")
    return took


_RESET_SLACK_KIB = 32 * 1024  # what other threads may add between the reset and its reading back


def _status_kib() -> dict[str, int]:
    try:
        lines = Path("/proc/self/status").read_text().splitlines()
    except OSError:
        return {}
    fields = {}
    for line in lines:
        name, _, value = line.partition(":")
        if name in ("VmHWM", "VmRSS") and value.strip().endswith("kB"):
            fields[name] = int(value.split()[0])
    return fields


def peak_rss_bytes() -> int | None:
    """This process's peak resident memory since `reset_peak_rss` (VmHWM), else its lifetime peak."""
    hwm = _status_kib().get("VmHWM")
    if hwm is not None:
        return hwm * 1024
    try:
        import resource
    except ImportError:  # not a POSIX system
        return None
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
