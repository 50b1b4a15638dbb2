"""Whether a file's POSIX mode bits say other users can reach it: the one rule for every secret.

The signing key files, their directory, the task store and the HTTP tokens file are refused
when their mode lets other users in. That rule means something only where the mode is what the
kernel enforces (``os.name == "posix"``: Linux, macOS, the BSDs). On Windows ``st_mode`` is
made up by Python from one attribute (read-only or not: 0o444 or 0o666 for every file), so the
bits say nothing about who may read it; what protects the file there is the ACL of the
directory it lives in (the user profile: %LOCALAPPDATA%, the checkout under it), which new
files inherit. So on Windows the mode check is skipped, and said to be.

Standard library only, and the platform is a parameter, so each branch is tested anywhere.
"""

from __future__ import annotations

import os
import stat

__all__ = ("mode_bits_enforced", "open_to_others")


def mode_bits_enforced(platform: str = os.name) -> bool:
    """Whether POSIX mode bits are what the system enforces on `platform` (an ``os.name``)."""
    return platform == "posix"


def open_to_others(mode: int, mask: int, *, platform: str = os.name) -> str | None:
    """The octal mode when ``mode & mask`` lets other users in on `platform`; None when not
    (or when the platform's mode bits mean nothing)."""
    if not mode_bits_enforced(platform) or not mode & mask:
        return None
    return oct(stat.S_IMODE(mode))
