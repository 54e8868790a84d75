"""The scoring actors' allocator: keep the memory numpy frees for the next temporary column."""

from __future__ import annotations

__all__ = ["keep_freed_memory"]

#: glibc ``mallopt`` parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


def keep_freed_memory(trim_threshold_bytes: int = 1 << 30, mmap_threshold_bytes: int = 32 << 20) -> bool:
    """Let this process's allocator reuse the memory numpy frees instead of handing it back to the OS.

    The mapping search makes and frees thousands of temporary columns of 10^4-10^5 floats per chunk. By
    default glibc serves each one above 128 KiB with a fresh ``mmap`` and trims the heap whenever 128 KiB
    lie free at its top, so the next temporary page-faults its memory in again, zeroed by the kernel
    (docs/performance.md has what that cost). With the trim threshold at 1 GiB and the mmap threshold at
    32 MiB (its 64-bit maximum) the heap stays at its peak (a few hundred MB for a chunk) and freed
    memory is reused without a fault. Called once in each scoring actor, which does nothing else; a no-op
    returning False where the C library is not glibc."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.mallopt(_M_TRIM_THRESHOLD, trim_threshold_bytes)) and bool(
            libc.mallopt(_M_MMAP_THRESHOLD, mmap_threshold_bytes))
    except (OSError, AttributeError):
        return False
