"""What every env that owns builds does at its end: ``with`` closes it, and so does garbage
collection when the user forgot (builds are processes: they must not outlive their env).

A class mixing in ``ClosesBuilds`` keeps ``self._closed`` (False while its builds are open) and
defines ``close()``; closing twice is harmless.
"""
from __future__ import annotations


class ClosesBuilds:
    """Context manager and finaliser over the class's own ``close()``."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        if not getattr(self, "_closed", True):
            self.close()
