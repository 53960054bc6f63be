"""One judging plan, several engines (issue 22): settings, engine choice, and the same results per engine.

Every run here is judged by a scripted OpenAI-compatible endpoint (tests/fake_endpoint.py)
whose verdict depends on the item and the question; nothing here is a model's judgment.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from binaryeval_dspy.cli.error_handling import with_flag_names
from binaryeval_dspy.engines.base import make_engine
from binaryeval_dspy.errors import BinEvalError, ConfigError
from binaryeval_dspy.lm.factory import LMHandle, make_lm
from binaryeval_dspy.settings import RunSettings
from tests.engines.test_remote_faults import evaluate, stored, write_inputs
from tests.fake_endpoint import format_fields, request_field


def mixed_verdicts(body: dict) -> str | dict:
    """A verdict fixed by the output and the question: about one in four is "no"."""
    question, output = request_field(body, "question"), request_field(body, "output")
    verdict = "no" if hashlib.sha256(f"{output}|{question}".encode()).digest()[0] < 64 else "yes"
    return format_fields(body, {"verdict": verdict, "explanation": f"scripted {verdict}"})


def comparable(out: Path) -> dict:
    """Per item: status, verdicts and scores; and summary.json's scores (timings and usage aside)."""
    rows = {r["item_id"]: (r.get("status"), sorted((v["question_id"], v["verdict"]) for v in r["verdicts"]),
                           (r.get("score_card") or {}).get("dimension_scores"), (r.get("score_card") or {}).get("overall"))
            for r in stored(out)}
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    return {"items": rows, "summary": {k: summary.get(k) for k in ("dimensions", "overall", "items_by_status")}}


# --------------------------------------------------------------------------- settings


def test_settings_are_validated_and_name_the_field():
    with pytest.raises(ConfigError, match="bad run setting concurrency"):
        RunSettings(concurrency=0)
    with pytest.raises(ConfigError, match="bad run setting engine"):
        RunSettings(engine="spark")
    with pytest.raises(ConfigError, match="bad run setting max_cost"):
        RunSettings(max_cost=-1)
    with pytest.raises(ConfigError, match="unknown_field"):
        RunSettings(unknown_field=1)
    assert RunSettings(price_model="  ").price_model is None


def test_library_messages_name_settings_and_the_cli_shows_flags():
    text = "item x has failed LM calls and fail_on_errors is set; bad run setting concurrency; the live engine"
    shown = with_flag_names(text)
    assert "--fail-on-errors is set" in shown and "bad run setting --concurrency" in shown
    assert "the live engine" in shown  # an ordinary word is never taken for a setting


def test_backticked_parameter_names_become_flags_and_a_command_can_rename_one():
    from binaryeval_dspy.lm.factory import make_lm

    with pytest.raises(BinEvalError) as err:
        make_lm("   ")
    assert str(err.value).startswith("`spec` must be a non-empty string") and "--" not in str(err.value)
    shown = with_flag_names(str(err.value))
    assert shown.startswith("--lm must be a non-empty string") and "e.g. --lm local" in shown
    assert with_flag_names("`max_cost` 2.5; `out_dir`; `not_a_name`") == "--max-cost 2.5; --out; `not_a_name`"
    assert with_flag_names("`spec` x: GGUF file not found", {"spec": "--source-lm"}) == (
        "--source-lm x: GGUF file not found")

def test_the_engine_follows_the_settings_and_the_lm():
    served = make_lm("http://127.0.0.1:9/v1", model="m", cache=False)  # never contacted
    embedded = LMHandle(lm=served.lm, adapter=None, name="x.gguf", embedded=True)
    assert make_engine(RunSettings(), served).name == "live"
    assert make_engine(RunSettings(concurrency=8), embedded).name == "local"
    assert RunSettings(concurrency=8).in_flight(embedded) == 1  # the one place the embedded cap lives
    assert RunSettings(concurrency=8, engine="local").in_flight(served) == 1
    assert make_engine(RunSettings(concurrency=8), served).in_flight == 8
    with pytest.raises(ConfigError, match="embedded model"):
        make_engine(RunSettings(engine="live"), embedded)
    assert make_engine(RunSettings(engine="batch"), served).name == "batch"  # one choice for every engine
    with pytest.raises(ConfigError, match="embedded model"):
        make_engine(RunSettings(engine="batch"), embedded)
    with pytest.raises(ConfigError, match="max_cost cannot be enforced by the ray engine"):
        make_engine(RunSettings(engine="ray", max_cost=1.0), served)  # refused before Ray is imported or started


# --------------------------------------------------------------------------- same results per engine


def test_local_and_live_engines_store_the_same_results(tmp_path, fake_endpoint):
    fake_endpoint.reply = mixed_verdicts
    qs, items = write_inputs(tmp_path, n_items=5)
    runs = {}
    for engine, extra in (("local", []), ("live", ["--concurrency", "6"])):
        out = tmp_path / engine
        result = evaluate(fake_endpoint, qs, items, out, "--engine", engine, *extra)
        assert result.exit_code == 0, result.output
        assert f"{engine} engine" in " ".join(result.output.split())
        runs[engine] = comparable(out)
    assert runs["local"] == runs["live"]
    verdicts = [v for _, vs, _, _ in runs["live"]["items"].values() for _, v in vs]
    assert "no" in verdicts and "yes" in verdicts  # the comparison is not of identical constant rows


def test_the_manifest_records_the_engine_and_a_resume_may_switch_engines(tmp_path, fake_endpoint):
    fake_endpoint.reply = mixed_verdicts
    qs, items = write_inputs(tmp_path, n_items=3)
    out = tmp_path / "run"
    first = evaluate(fake_endpoint, qs, items, out, "--engine", "local", "--limit", "2")
    assert first.exit_code == 0, first.output
    assert json.loads((out / "manifest.json").read_text())["settings"]["engine"] == "local"
    before = len(fake_endpoint.requests)
    second = evaluate(fake_endpoint, qs, items, out, "--engine", "live", "--concurrency", "4")
    assert second.exit_code == 0, second.output
    assert len(fake_endpoint.requests) - before == 6  # only the third item's six questions
    assert [r["item_id"] for r in stored(out)] == ["item-0", "item-1", "item-2"]


def test_an_impossible_engine_is_refused_before_any_request(tmp_path, fake_endpoint):
    qs, items = write_inputs(tmp_path, n_items=1)
    result = evaluate(fake_endpoint, qs, items, tmp_path / "run", "--engine", "live", "--concurrency", "0")
    assert result.exit_code == 2 and "--concurrency" in result.output
    assert fake_endpoint.requests == []
