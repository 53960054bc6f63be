"""Code-owned checks: deterministic answers to binary questions, run before any LM.

Built-in checks (parameters in brackets; see each module for details):

* ``regex_present`` (pattern, flags, min_count) / ``regex_absent`` (pattern, flags)
* ``word_count`` / ``sentence_count`` / ``paragraph_count`` (min, max)
* ``keyword_frequency`` (keyword, min, max, case_sensitive, whole_word)
* ``max_length`` (max_chars)
* ``valid_json`` (require, strip_code_fence) / ``valid_yaml`` (require, strip_code_fence)
* ``path_exists`` (pattern, whole_text, base_dir, kind, ignore, min_found)
* ``url_well_formed`` (schemes, whole_text, min_count)
* ``language`` (expected, min_probability, min_letters, ignore_code_blocks)

User checks: ``@register_check("name")`` on ``func(text, **params)``, from Python or
from a file passed as ``--checks-module``.
"""

import binaryeval_dspy.checks.language  # noqa: F401  (registers the built-ins)
import binaryeval_dspy.checks.references  # noqa: F401  (registers the built-ins)
import binaryeval_dspy.checks.regex_checks  # noqa: F401  (registers the built-ins)
import binaryeval_dspy.checks.structured_formats  # noqa: F401  (registers the built-ins)
import binaryeval_dspy.checks.text_counts  # noqa: F401  (registers the built-ins)
from binaryeval_dspy.checks.registry import (
    CheckDefinition,
    CheckResult,
    as_check_result,
    available_checks,
    get_check,
    register_check,
    unregister_check,
)
from binaryeval_dspy.checks.user_modules import load_checks_module, module_fingerprint

__all__ = [
    "CheckDefinition",
    "CheckResult",
    "as_check_result",
    "available_checks",
    "get_check",
    "load_checks_module",
    "module_fingerprint",
    "register_check",
    "unregister_check",
]
