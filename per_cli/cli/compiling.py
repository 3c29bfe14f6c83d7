"""The note a run prints when it starts compiling kernels (per_cli/compiled_cache.py says where they are kept)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from numba.core import event

from per_cli.compiled_cache import COLD_COMPILE_S, PACKAGE

COMPILE_NOTE = (
    f"compiling kernels (once for this version of the code in this checkout, up to {COLD_COMPILE_S}); "
    "later runs load them in seconds"
)


def cached_kernel_of_the_package(dispatcher: Any) -> bool:
    """True for a ``cache=True`` kernel defined in this package, wherever the package is; a kernel without a
    cache compiles on every run, and no later run would be faster."""
    if dispatcher is None or type(getattr(dispatcher, "_cache", None)).__name__ == "NullCache":
        return False
    module = getattr(getattr(dispatcher, "py_func", None), "__module__", None) or ""
    return module == PACKAGE.name or module.startswith(PACKAGE.name + ".")


class FirstCompile(event.Listener):
    """Calls ``say(COMPILE_NOTE)`` at the first compile of one of the package's cached kernels."""

    def __init__(self, say: Callable[[str], None]):
        self.say = say
        self.said = False

    def on_start(self, ev: event.Event) -> None:
        if self.said or not cached_kernel_of_the_package((ev.data or {}).get("dispatcher")):
            return
        self.said = True
        with contextlib.suppress(OSError):  # (inside numba's compile: a closed stderr must not fail it)
            self.say(COMPILE_NOTE)

    def on_end(self, ev: event.Event) -> None:
        pass


@contextlib.contextmanager
def compile_note(say: Callable[[str], None]) -> Iterator[FirstCompile]:
    """While open, the first compile of a cached kernel of the package calls ``say(COMPILE_NOTE)``, once."""
    listener = FirstCompile(say)
    event.register("numba:compile", listener)
    try:
        yield listener
    finally:
        event.unregister("numba:compile", listener)
