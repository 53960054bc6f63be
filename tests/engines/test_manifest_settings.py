"""The manifest stores the run's `RunSettings` as that object, and rejudge gets it back.

`bineval evaluate` against the scripted OpenAI-compatible endpoint (tests/fake_endpoint.py)
with settings other than the defaults, then `bineval rejudge`: the settings rejudge judges
with are the run's, field for field; the manifest holds them once (no copy in ``config``)
and never the key. A manifest of the older form (settings as ``config`` keys, ``threads``)
still reads.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from binaryeval_dspy.cli import rejudge_command
from binaryeval_dspy.cli.main import cli
from binaryeval_dspy.errors import InputError
from binaryeval_dspy.schemas.run_manifest import RunManifest
from binaryeval_dspy.settings import RunSettings
from tests.engines.test_rejudge_failures import edit_item
from tests.engines.test_remote_faults import evaluate, write_inputs

SECRET = "sk-test-never-written-0123456789"
#: names ``config`` must not hold: the settings live in ``settings`` only (``threads`` and a
#: panel's name were older copies). ``adapter`` stays: it is the adapter the policy chose.
COPIES = (set(RunSettings.model_fields) - {"adapter"}) | {"threads", "panel"}


def manifest_of(run: Path) -> dict:
    return json.loads((run / "manifest.json").read_text(encoding="utf-8"))


def test_rejudge_judges_with_exactly_the_settings_the_run_used(tmp_path, fake_endpoint, monkeypatch):
    monkeypatch.setenv("TEST_ENDPOINT_KEY", SECRET)
    qs_path, items = write_inputs(tmp_path)
    first = tmp_path / "run"
    result = evaluate(fake_endpoint, qs_path, items, first, "--concurrency", "3", "--timeout", "42",
                      "--adapter", "json", "--cache-padding", "off", "--no-warm-prefix",
                      "--api-key-env", "TEST_ENDPOINT_KEY")
    assert result.exit_code == 0, result.output
    given = RunSettings(engine="live", concurrency=3, timeout=42.0, adapter="json", cache_padding="off",
                        warm_prefix=False)  # what the options said, the engine resolved (auto -> live)
    manifest = manifest_of(first)
    assert RunSettings.model_validate(manifest["settings"]) == given
    assert not set(manifest["config"]) & COPIES, manifest["config"]  # no second copy
    assert SECRET not in (first / "manifest.json").read_text(encoding="utf-8")

    seen: list[RunSettings] = []
    real = rejudge_command.rejudge_items

    def recording(*args, settings, **kwargs):
        seen.append(settings)
        return real(*args, settings=settings, **kwargs)

    monkeypatch.setattr(rejudge_command, "rejudge_items", recording)
    again = tmp_path / "again"
    result = CliRunner().invoke(cli, ["rejudge", str(first), str(edit_item(items, tmp_path)), "--out", str(again)])
    assert result.exit_code == 0, result.output
    assert seen == [given]  # the very settings of the run, not a rebuilt subset of them
    rejudged = manifest_of(again)
    assert RunSettings.model_validate(rejudged["settings"]) == given
    assert not set(rejudged["config"]) & COPIES, rejudged["config"]
    assert SECRET not in (again / "manifest.json").read_text(encoding="utf-8")


def test_rejudge_options_override_only_what_they_name():
    from binaryeval_dspy.runs.rejudge import rejudge_settings

    used = RunSettings(engine="live", concurrency=3, timeout=42.0, max_cost=2.0, cache_padding="off")
    assert rejudge_settings(used) == used
    assert rejudge_settings(used, concurrency=8) == used.model_copy(update={"concurrency": 8})
    assert rejudge_settings(used.model_copy(update={"engine": "batch"})).engine == "auto"  # re-judged live


def older_manifest(config: dict) -> RunManifest:
    return RunManifest(command="evaluate", lm="openai/m", question_set_hash="h", question_set_path="q.json",
                       items_path="items.jsonl", config=config)


def test_a_manifest_of_the_older_form_reads_as_the_same_settings_object():
    old = older_manifest({"input_field": "input", "threads": 4, "adapter": "chat", "cache_padding": "off",
                          "engine": "live", "judges": ["openai/a", "openai/b"], "panel": "majority(a, b)",
                          "panel_rule": "any-no"})
    assert RunSettings.of_manifest(old) == RunSettings(concurrency=4, adapter="chat", cache_padding="off",
                                                       engine="live", judges=("openai/a", "openai/b"),
                                                       panel_rule="any-no")
    replayed = older_manifest({"concurrency": 2, "engine": "replay", "replay_verdicts": "v.jsonl",
                               "replay_judge": "judge-a"})
    assert RunSettings.of_manifest(replayed) == RunSettings(engine="replay", concurrency=2,
                                                            replay_verdicts="v.jsonl", replay_judge="judge-a")
    assert RunSettings.of_manifest(older_manifest({})) == RunSettings()


def test_damaged_stored_settings_are_named_by_file_and_field(tmp_path):
    damaged = older_manifest({}).model_copy(update={"settings": {"concurrency": "many"}})
    with pytest.raises(InputError) as caught:
        RunSettings.of_manifest(damaged, path=tmp_path / "manifest.json")
    assert caught.value.field == "settings.concurrency" and "manifest.json" in str(caught.value)


def test_rejudge_of_a_run_with_an_older_manifest_still_works(tmp_path, fake_endpoint):
    qs_path, items = write_inputs(tmp_path)
    first = tmp_path / "run"
    assert evaluate(fake_endpoint, qs_path, items, first, "--concurrency", "2").exit_code == 0
    manifest = manifest_of(first)  # rewritten as the older form: settings as config keys, `threads`
    manifest["config"].update(threads=2, engine="live", cache_padding="auto")
    del manifest["settings"]
    (first / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    again = tmp_path / "again"
    result = CliRunner().invoke(cli, ["rejudge", str(first), str(edit_item(items, tmp_path)), "--out", str(again)])
    assert result.exit_code == 0, result.output
    rejudged = manifest_of(again)
    # an older manifest's `adapter` is the adapter its policy chose: rejudge keeps using it, as it did
    assert RunSettings.model_validate(rejudged["settings"]) == RunSettings(engine="live", concurrency=2,
                                                                           adapter=manifest["config"]["adapter"])
    assert not set(rejudged["config"]) & COPIES, rejudged["config"]


def test_an_unknown_stored_setting_is_named_with_its_file_and_one_fix(tmp_path):
    edited = older_manifest({}).model_copy(update={"settings": {**RunSettings().recorded(None), "turbo": True}})
    with pytest.raises(InputError) as caught:
        RunSettings.of_manifest(edited, path=tmp_path / "manifest.json")
    said = str(caught.value)
    assert caught.value.field == "settings.turbo" and "manifest.json" in said
    assert "unknown run setting 'turbo'" in said and "Extra inputs are not permitted" not in said
    assert said.count("Fix:") == 1 and "turbo=..." not in said, said


def test_a_message_quoting_another_error_says_fix_once():
    from binaryeval_dspy.errors import ConfigError

    inner = ConfigError("bad value", fix="pass a number.")
    outer = InputError(f"the file is not valid: {inner}", path="x.json", fix="restore the file.")
    assert str(outer) == "x.json: the file is not valid: bad value. Fix: pass a number. Restore the file."


def test_a_manifest_without_its_config_is_said_to_be_damaged_not_a_mismatch(tmp_path, fake_endpoint):
    qs, items = write_inputs(tmp_path)
    out = tmp_path / "run"
    assert evaluate(fake_endpoint, qs, items, out).exit_code == 0
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    del manifest["config"]
    (out / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    again = evaluate(fake_endpoint, qs, items, out)
    said = " ".join(again.output.split())
    assert again.exit_code != 0
    assert "manifest.json has no `config`" in said or "manifest.json has no config" in said, said
    assert "input_field=None" not in said
