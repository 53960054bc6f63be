"""LLMBar (Zeng et al., ICLR 2024): the authors' published accuracies, reproduced exactly by
`bineval agreement --labels` on the packaged slice (binaryeval_dspy/benchmark_data/llmbar/).

`PUBLISHED` is copied verbatim from the authors' ``statistics.json`` files
(``Dataset/LLMBar/<subset>/evaluators/<LM>/<strategy>/statistics.json`` at commit
900616bff90b6c6c8e1681f7d079250637c55992; the README says they are the results reported in
the paper): per evaluator, its accuracy with Output 1 shown first (``correct_False``), with
Output 2 shown first (``correct_True``) and their mean (``correct_average``, the paper's
"Acc."). An unparsed verdict counts as wrong there, which is our strict accuracy.
"""

from __future__ import annotations

import json
import re
from fractions import Fraction
from importlib import resources

import pytest
from click.testing import CliRunner

from binaryeval_dspy.cli.main import cli

DATA = resources.files("binaryeval_dspy") / "benchmark_data/llmbar"

PUBLISHED = {
    ("natural", "GPT-4/Vanilla"): ("95 / 100 = 95.0%", "96 / 100 = 96.0%", "95.5%"),
    ("natural", "GPT-4/Metrics_Reference"): ("95 / 100 = 95.0%", "97 / 100 = 97.0%", "96.0%"),
    ("natural", "ChatGPT/Vanilla"): ("80 / 100 = 80.0%", "83 / 100 = 83.0%", "81.5%"),
    ("natural", "ChatGPT/Metrics_Reference"): ("82 / 100 = 82.0%", "83 / 100 = 83.0%", "82.5%"),
    ("natural", "ChatGPT-0301/Vanilla"): ("84 / 100 = 84.0%", "84 / 100 = 84.0%", "84.0%"),
    ("natural", "ChatGPT-0301/Metrics_Reference"): ("80 / 100 = 80.0%", "80 / 100 = 80.0%", "80.0%"),
    ("natural", "PaLM2/Vanilla"): ("78 / 100 = 78.0%", "88 / 100 = 88.0%", "83.0%"),
    ("natural", "PaLM2/Metrics_Reference"): ("86 / 100 = 86.0%", "87 / 100 = 87.0%", "86.5%"),
    ("natural", "LLaMA2/Vanilla"): ("79 / 100 = 79.0%", "82 / 100 = 82.0%", "80.5%"),
    ("natural", "LLaMA2/Metrics_Reference"): ("74 / 100 = 74.0%", "78 / 100 = 78.0%", "76.0%"),
    ("natural", "Falcon/Vanilla"): ("71 / 100 = 71.0%", "77 / 100 = 77.0%", "74.0%"),
    ("natural", "Falcon/Metrics_Reference"): ("59 / 100 = 59.0%", "66 / 100 = 66.0%", "62.5%"),
    ("neighbor", "GPT-4/Vanilla"): ("104 / 134 = 77.61194029850746%", "107 / 134 = 79.8507462686567%", "78.73134328358209%"),
    ("neighbor", "GPT-4/Metrics_Reference"): ("115 / 134 = 85.82089552238806%", "114 / 134 = 85.07462686567165%", "85.44776119402985%"),
    ("neighbor", "ChatGPT/Vanilla"): ("30 / 134 = 22.388059701492537%", "22 / 134 = 16.417910447761194%", "19.402985074626866%"),
    ("neighbor", "ChatGPT/Metrics_Reference"): ("54 / 134 = 40.298507462686565%", "48 / 134 = 35.82089552238806%", "38.059701492537314%"),
    ("neighbor", "ChatGPT-0301/Vanilla"): ("42 / 134 = 31.343283582089555%", "35 / 134 = 26.119402985074625%", "28.73134328358209%"),
    ("neighbor", "ChatGPT-0301/Metrics_Reference"): ("57 / 134 = 42.53731343283582%", "53 / 134 = 39.55223880597015%", "41.04477611940299%"),
    ("neighbor", "PaLM2/Vanilla"): ("82 / 134 = 61.19402985074627%", "86 / 134 = 64.17910447761194%", "62.68656716417911%"),
    ("neighbor", "PaLM2/Metrics_Reference"): ("91 / 134 = 67.91044776119402%", "96 / 134 = 71.64179104477611%", "69.77611940298507%"),
    ("neighbor", "LLaMA2/Vanilla"): ("34 / 134 = 25.37313432835821%", "32 / 134 = 23.88059701492537%", "24.62686567164179%"),
    ("neighbor", "LLaMA2/Metrics_Reference"): ("47 / 134 = 35.07462686567165%", "49 / 134 = 36.56716417910448%", "35.82089552238806%"),
    ("neighbor", "Falcon/Vanilla"): ("70 / 134 = 52.23880597014925%", "65 / 134 = 48.507462686567166%", "50.373134328358205%"),
    ("neighbor", "Falcon/Metrics_Reference"): ("74 / 134 = 55.223880597014926%", "64 / 134 = 47.76119402985074%", "51.49253731343284%"),
    ("gptinst", "GPT-4/Vanilla"): ("78 / 92 = 84.78260869565217%", "81 / 92 = 88.04347826086956%", "86.41304347826086%"),
    ("gptinst", "GPT-4/Metrics_Reference"): ("80 / 92 = 86.95652173913044%", "85 / 92 = 92.3913043478261%", "89.67391304347827%"),
    ("gptinst", "ChatGPT/Vanilla"): ("25 / 92 = 27.173913043478258%", "24 / 92 = 26.08695652173913%", "26.6304347826087%"),
    ("gptinst", "ChatGPT/Metrics_Reference"): ("30 / 92 = 32.608695652173914%", "36 / 92 = 39.130434782608695%", "35.869565217391305%"),
    ("gptinst", "ChatGPT-0301/Vanilla"): ("33 / 92 = 35.869565217391305%", "36 / 92 = 39.130434782608695%", "37.5%"),
    ("gptinst", "ChatGPT-0301/Metrics_Reference"): ("36 / 92 = 39.130434782608695%", "39 / 92 = 42.391304347826086%", "40.76086956521739%"),
    ("gptinst", "PaLM2/Vanilla"): ("66 / 92 = 71.73913043478261%", "69 / 92 = 75.0%", "73.36956521739131%"),
    ("gptinst", "PaLM2/Metrics_Reference"): ("74 / 92 = 80.43478260869566%", "68 / 92 = 73.91304347826086%", "77.17391304347827%"),
    ("gptinst", "LLaMA2/Vanilla"): ("28 / 92 = 30.434782608695656%", "28 / 92 = 30.434782608695656%", "30.434782608695656%"),
    ("gptinst", "LLaMA2/Metrics_Reference"): ("34 / 92 = 36.95652173913043%", "30 / 92 = 32.608695652173914%", "34.78260869565217%"),
    ("gptinst", "Falcon/Vanilla"): ("44 / 92 = 47.82608695652174%", "48 / 92 = 52.17391304347826%", "50.0%"),
    ("gptinst", "Falcon/Metrics_Reference"): ("43 / 92 = 46.73913043478261%", "48 / 92 = 52.17391304347826%", "49.45652173913043%"),
    ("gptout", "GPT-4/Vanilla"): ("35 / 47 = 74.46808510638297%", "38 / 47 = 80.85106382978722%", "77.6595744680851%"),
    ("gptout", "GPT-4/Metrics_Reference"): ("34 / 47 = 72.3404255319149%", "34 / 47 = 72.3404255319149%", "72.3404255319149%"),
    ("gptout", "ChatGPT/Vanilla"): ("17 / 47 = 36.17021276595745%", "22 / 47 = 46.808510638297875%", "41.48936170212766%"),
    ("gptout", "ChatGPT/Metrics_Reference"): ("18 / 47 = 38.297872340425535%", "18 / 47 = 38.297872340425535%", "38.297872340425535%"),
    ("gptout", "ChatGPT-0301/Vanilla"): ("22 / 47 = 46.808510638297875%", "26 / 47 = 55.319148936170215%", "51.06382978723404%"),
    ("gptout", "ChatGPT-0301/Metrics_Reference"): ("23 / 47 = 48.93617021276596%", "22 / 47 = 46.808510638297875%", "47.87234042553192%"),
    ("gptout", "PaLM2/Vanilla"): ("27 / 47 = 57.446808510638306%", "29 / 47 = 61.702127659574465%", "59.57446808510638%"),
    ("gptout", "PaLM2/Metrics_Reference"): ("30 / 47 = 63.829787234042556%", "30 / 47 = 63.829787234042556%", "63.829787234042556%"),
    ("gptout", "LLaMA2/Vanilla"): ("27 / 47 = 57.446808510638306%", "26 / 47 = 55.319148936170215%", "56.38297872340425%"),
    ("gptout", "LLaMA2/Metrics_Reference"): ("30 / 47 = 63.829787234042556%", "26 / 47 = 55.319148936170215%", "59.57446808510638%"),
    ("gptout", "Falcon/Vanilla"): ("26 / 47 = 55.319148936170215%", "25 / 47 = 53.191489361702125%", "54.25531914893617%"),
    ("gptout", "Falcon/Metrics_Reference"): ("23 / 47 = 48.93617021276596%", "26 / 47 = 55.319148936170215%", "52.12765957446809%"),
    ("manual", "GPT-4/Vanilla"): ("35 / 46 = 76.08695652173914%", "39 / 46 = 84.78260869565217%", "80.43478260869566%"),
    ("manual", "GPT-4/Metrics_Reference"): ("37 / 46 = 80.43478260869566%", "40 / 46 = 86.95652173913044%", "83.69565217391305%"),
    ("manual", "ChatGPT/Vanilla"): ("18 / 46 = 39.130434782608695%", "14 / 46 = 30.434782608695656%", "34.78260869565217%"),
    ("manual", "ChatGPT/Metrics_Reference"): ("19 / 46 = 41.30434782608695%", "21 / 46 = 45.65217391304348%", "43.47826086956522%"),
    ("manual", "ChatGPT-0301/Vanilla"): ("24 / 46 = 52.17391304347826%", "17 / 46 = 36.95652173913043%", "44.565217391304344%"),
    ("manual", "ChatGPT-0301/Metrics_Reference"): ("22 / 46 = 47.82608695652174%", "21 / 46 = 45.65217391304348%", "46.73913043478261%"),
    ("manual", "PaLM2/Vanilla"): ("32 / 46 = 69.56521739130434%", "28 / 46 = 60.86956521739131%", "65.21739130434783%"),
    ("manual", "PaLM2/Metrics_Reference"): ("31 / 46 = 67.3913043478261%", "31 / 46 = 67.3913043478261%", "67.3913043478261%"),
    ("manual", "LLaMA2/Vanilla"): ("17 / 46 = 36.95652173913043%", "17 / 46 = 36.95652173913043%", "36.95652173913043%"),
    ("manual", "LLaMA2/Metrics_Reference"): ("18 / 46 = 39.130434782608695%", "22 / 46 = 47.82608695652174%", "43.47826086956522%"),
    ("manual", "Falcon/Vanilla"): ("22 / 46 = 47.82608695652174%", "25 / 46 = 54.347826086956516%", "51.08695652173913%"),
    ("manual", "Falcon/Metrics_Reference"): ("24 / 46 = 52.17391304347826%", "24 / 46 = 52.17391304347826%", "52.17391304347826%"),
}

SUBSETS = ("natural", "neighbor", "gptinst", "gptout", "manual")


def _fraction(text: str) -> tuple[int, int]:
    agree, total = re.match(r"(\d+) / (\d+) =", text).groups()
    return int(agree), int(total)


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    out = {}
    for subset in SUBSETS:
        folder = tmp_path_factory.mktemp(subset)
        result = CliRunner().invoke(cli, ["agreement", "--labels", str(DATA / "llmbar_labels.jsonl.gz"),
                                          "--verdicts", str(DATA / "llmbar_verdicts.jsonl.gz"),
                                          "--items", f"{subset}-*", "--bootstrap", "20", "--no-figures",
                                          "--out", str(folder)])
        assert result.exit_code == 0, result.output
        out[subset] = json.loads((folder / "agreement.json").read_text(encoding="utf-8"))
    return out


@pytest.mark.parametrize(("subset", "judge"), sorted(PUBLISHED))
def test_published_accuracy_reproduced_exactly(reports, subset, judge):
    first, second, average = PUBLISHED[(subset, judge)]
    ours = reports[subset]["judges"][judge]
    questions = {q["question_id"]: q for q in ours["questions"]}
    for question_id, published in (("o1_first", first), ("o2_first", second)):
        q = questions[question_id]
        assert (q["yes_yes"] + q["no_no"], q["answered"] + q["non_answers"]) == _fraction(published)
    (a1, n1), (a2, n2) = _fraction(first), _fraction(second)
    assert ours["accuracy_strict"] == pytest.approx(float(Fraction(a1 + a2, n1 + n2)), abs=1e-12)
    assert f"{ours['accuracy_strict'] * 100}%" == average or abs(ours["accuracy_strict"] * 100 - float(
        average.rstrip("%"))) < 1e-9


def test_gpt4_best_strategy_adversarial_average_is_the_papers_82_8(reports):
    """The paper's headline: GPT-4 with Rules+Metrics+Reference averages 82.8% over the four
    adversarial subsets (the mean of the subsets' accuracies)."""
    values = [reports[s]["judges"]["GPT-4/Metrics_Reference"]["accuracy_strict"] for s in SUBSETS[1:]]
    assert round(100 * sum(values) / 4, 1) == 82.8


def test_unparsed_verdicts_are_counted_not_read_as_no(reports):
    palm = reports["natural"]["judges"]["PaLM2/Vanilla"]
    assert palm["unparsed"] == 4 and palm["answered"] == 196
    assert palm["accuracy"] > palm["accuracy_strict"]
