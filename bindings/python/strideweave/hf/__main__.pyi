# Type stubs of strideweave.hf.__main__, `python -m strideweave.hf`.
from collections.abc import Sequence

def main(argv: Sequence[str] | None = None) -> int: ...
