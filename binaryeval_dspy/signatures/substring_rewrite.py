"""Substring rewrite: prompt + lesson -> an exact substring of the prompt and its replacement.

The updater never rewrites the whole prompt: it names a piece of the prompt, copied
character for character, and the text to put in its place; the caller applies
``prompt.replace(substring, replacement)`` (paper 3.3, step 5). Keeping edits local is
what makes every change reviewable as a diff.
"""

from __future__ import annotations

import dspy


class RewriteSubstring(dspy.Signature):
    """You edit a prompt so that it teaches one lesson. Choose the part of the prompt the
    lesson concerns: a phrase or sentence copied exactly, character for character, that
    occurs only once in the prompt. Then write the text that should replace it: the same
    part revised to carry the lesson, kept short and in the prompt's own style. To add new
    guidance, pick a nearby sentence and return it followed by the new sentence. Do not
    change anything the lesson does not concern."""

    prompt: str = dspy.InputField(desc="the current prompt, to be edited in one place")
    lesson: str = dspy.InputField(desc="the lesson the edit must carry")
    previous_attempt: str = dspy.InputField(
        desc="why the previous attempt could not be applied (empty on the first attempt)"
    )
    substring: str = dspy.OutputField(desc="an exact, unique piece of the prompt to replace")
    replacement: str = dspy.OutputField(desc="the text to put in its place")
