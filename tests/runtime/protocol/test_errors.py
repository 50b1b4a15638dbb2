"""One root for what the runtime raises (`_errors.MrtrError`): every exception class the runtime
defines derives from it, but the two the root's docstring names, and each keeps the builtin class
code may already catch it as."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import mrtr_runtime
from mrtr_runtime import MrtrError
from mrtr_runtime._context import StartTask
from mrtr_runtime._jsonrpc import RpcError
from mrtr_runtime._tokens import SigningConfigError
from mrtr_runtime._wings import WingMissing
from mrtr_runtime.testing._rounds import UnexpectedInput

#: Apart on purpose (see _errors): control flow, and the by-path modules' own errors.
APART = {"StartTask", "ArtifactRefused"}


def runtime_exception_classes() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for module_info in pkgutil.walk_packages(mrtr_runtime.__path__, "mrtr_runtime."):
        module = importlib.import_module(module_info.name)
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == module.__name__
            ):
                found[f"{module.__name__}.{name}"] = value
    return found


def test_every_exception_the_runtime_defines_derives_from_the_root() -> None:
    classes = runtime_exception_classes()
    assert len(classes) >= 20  # every wing of a full bake is here
    outside = sorted(name for name, cls in classes.items() if not issubclass(cls, MrtrError))
    assert sorted(name.rpartition(".")[2] for name in outside) == sorted(APART)


def test_the_root_keeps_the_builtin_classes_code_catches() -> None:
    assert issubclass(SigningConfigError, ValueError)
    assert issubclass(WingMissing, RuntimeError)
    assert issubclass(UnexpectedInput, LookupError)
    assert issubclass(RpcError, MrtrError) and not issubclass(RpcError, ValueError)
    # Control flow stays out of `except Exception` (and so out of the root).
    assert not issubclass(StartTask, Exception)
