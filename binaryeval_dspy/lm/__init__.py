"""The LM factory: LiteLLM ids, OpenAI-compatible URLs and the embedded llama.cpp engine."""

from binaryeval_dspy.lm.factory import LOCAL, LMHandle, make_lm
from binaryeval_dspy.lm.llama_engine import LlamaCppEngine
from binaryeval_dspy.lm.smollm2 import find_smollm2_gguf

__all__ = ["LOCAL", "LMHandle", "LlamaCppEngine", "find_smollm2_gguf", "make_lm"]
