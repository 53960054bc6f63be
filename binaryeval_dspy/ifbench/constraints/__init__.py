"""IFBench's 58 out-of-distribution constraint checkers, one module per id family.

Importing this package registers every checker in
`binaryeval_dspy.ifbench.registry.CONSTRAINTS`. The checkers reproduce the
behaviour of the IFBench release whose results ship with its sample outputs
(allenai/IFBench, October 2025), quirks included, so that scores stay comparable
with published IFBench numbers; see each function's docstring.
"""

from binaryeval_dspy.ifbench.constraints import (
    count,
    custom,
    format,
    ratio,
    repeat,
    sentence,
    words,
)

__all__ = ["count", "custom", "format", "ratio", "repeat", "sentence", "words"]
