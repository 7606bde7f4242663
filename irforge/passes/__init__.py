"""Passes and the pass manager: what a pass author and a pipeline user import.

    from irforge.passes import Pass, PassContext, PassManager, PassResult

    pm = PassManager.parse("-O2")                 # the installed passes and plugins
    pm = PassManager.from_passes([Cse(), Dce()])  # the same object, built in Python
    pm.run(model)

``PassManager(..., rewrite_checker=RewriteChecker())`` checks every rewrite numerically as it is
made (``irforge optimize --validate-rewrites``); :func:`bisect` finds the first pass, then the
first rewrite, after which a model's outputs differ (``irforge bisect``).

A pattern pass is a :class:`Pass` whose ``run`` calls :func:`run_patterns` with patterns made by
:func:`pattern` (or :class:`Pattern`) over a :class:`PatternBuilder`, checked on a :class:`Match`.
"""

from ..core_ir.pattern import Match, Pattern, PatternBuilder, pattern
from ..core_ir.rewrite_check import Rejection, RewriteChecker, RewriteRejected
from .base import Pass, PassContext, PassError, PassResult, run_patterns
from .bisect import BisectResult, bisect
from .instrumentation import ChangedCheck, DishonestPassError, Instrument, PrintIR, Statistics, Timing, VerifyEach
from .manager import (
    OscillationWarning,
    PassFailedError,
    PassManager,
    PassSkippedWarning,
    PassTimeoutError,
    RewriteRejectedWarning,
)
from .pipeline import Fixpoint, Pipeline

__all__ = [
    "BisectResult", "ChangedCheck", "DishonestPassError", "Fixpoint", "Instrument", "Match", "OscillationWarning",
    "Pass", "PassContext", "PassError", "PassFailedError", "PassManager", "PassResult",
    "PassSkippedWarning", "PassTimeoutError", "Pattern", "PatternBuilder", "Pipeline", "PrintIR", "Rejection",
    "RewriteChecker", "RewriteRejected", "RewriteRejectedWarning", "Statistics", "Timing", "VerifyEach", "bisect",
    "pattern", "run_patterns",
]  # fmt: skip
