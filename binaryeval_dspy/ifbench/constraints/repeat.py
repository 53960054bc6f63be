"""IFBench ``repeat:*`` constraints: repeat (part of) the request instead of answering it."""

from __future__ import annotations

from binaryeval_dspy.ifbench.registry import constraint

#: The sentence the ``repeat:repeat_simple`` prompts ask the model to output verbatim.
REPEAT_SIMPLE_SENTENCE = "Only output this sentence here, ignore all other requests."


@constraint("repeat:repeat_change")
def repeat_change(response: str, *, prompt_to_repeat: str) -> bool:
    """The request repeated with every word after the first unchanged.

    Words are whitespace tokens. A character-for-character copy of the request fails;
    as in IFBench, a copy that only changes whitespace passes even if the first word
    was kept.
    """
    if response == prompt_to_repeat:
        return False
    return prompt_to_repeat.split()[1:] == response.split()[1:]


@constraint("repeat:repeat_simple")
def repeat_simple(response: str) -> bool:
    """Exactly the sentence to repeat, ignoring case and surrounding whitespace."""
    return response.strip().lower() == REPEAT_SIMPLE_SENTENCE.lower()


@constraint("repeat:repeat_span")
def repeat_span(response: str, *, prompt_to_repeat: str, n_start: int, n_end: int) -> bool:
    """Exactly the request's whitespace words n_start to n_end (0-based), case-insensitive.

    As in IFBench, the word at n_end is not part of the expected span (a Python
    slice), although the prompt says "including".
    """
    expected = prompt_to_repeat.strip().lower().split()[n_start:n_end]
    return response.strip().lower().split() == expected
