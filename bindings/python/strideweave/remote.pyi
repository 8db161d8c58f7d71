from typing import IO

from . import Runtime, _StrPath

__all__ = ["seed", "verify", "tensor_names"]

def tensor_names(path: _StrPath, pattern: str = "*") -> list[str]: ...
def seed(path: _StrPath, pattern: str, namespace: str, *, endpoints: str | list[str], user: str | None = None,
         password_file: _StrPath | None = None, allow_plaintext: bool = False, placement_seed: int = 0,
         runtime: Runtime | None = None, out: IO[str] | None = None) -> list[str]: ...
def verify(path: _StrPath, pattern: str, namespace: str, *, endpoints: str | list[str], user: str | None = None,
           password_file: _StrPath | None = None, allow_plaintext: bool = False, placement_seed: int = 0,
           runtime: Runtime | None = None, out: IO[str] | None = None) -> list[str]: ...
def main(argv: list[str] | None = None) -> int: ...
