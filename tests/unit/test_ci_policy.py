"""A model that is right passes CI (issue 40): ranges of sizes, --fail-on, baselines, [tool.bcast].

The verdicts at the edges of a range are onnxruntime's: the model with a 512-row position
table runs at seq=512 and fails at seq=513 there, so ``--dim seq=1..512`` must pass and
``--dim seq=1..513`` must fail, at the Gather, at 513.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from click.testing import CliRunner, Result

import bcast
from bcast.cli import main
from bcast.cli._output import load_schema
from bcast.models import ModelError

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"
BERT = str(REAL / "bert_torchscript.onnx")  # one warning: fails when seq > 64


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def _position_model(rows: int = 512) -> onnx.ModelProto:
    """Token embeddings plus positions 0..seq-1 read from a table of ``rows`` rows."""
    nodes = [
        helper.make_node("Shape", ["input_ids"], ["shape"]),
        helper.make_node("Gather", ["shape", "one"], ["seq"], axis=0),
        helper.make_node("Range", ["zero", "seq", "one"], ["positions"]),
        helper.make_node("Gather", ["pos_table", "positions"], ["pos"], name="position_gather"),
        helper.make_node("Gather", ["tok_table", "input_ids"], ["tok"], name="token_gather"),
        helper.make_node("Add", ["tok", "pos"], ["out"], name="position_add"),
    ]
    inits = [
        numpy_helper.from_array(np.array(1, np.int64), "one"),
        numpy_helper.from_array(np.array(0, np.int64), "zero"),
        numpy_helper.from_array(np.zeros((rows, 8), np.float32), "pos_table"),
        numpy_helper.from_array(np.zeros((100, 8), np.float32), "tok_table"),
    ]
    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, None)
    graph = helper.make_graph(nodes, "m", [ids], [out], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@pytest.fixture(scope="module")
def positions(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("ranges") / "positions.onnx"
    onnx.save(_position_model(), str(path))
    return str(path)


def _runs(path: str, seq: int) -> bool:
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    try:
        session.run(None, {"input_ids": np.zeros((2, seq), np.int64)})
    except Exception:  # onnxruntime's own error types
        return False
    return True


# -- ranges --------------------------------------------------------------------------------


def test_a_512_row_position_table_passes_for_1_to_512_and_fails_at_513(positions: str) -> None:
    assert _runs(positions, 512) and not _runs(positions, 513)  # the peer's verdicts
    assert run("check", positions, "--dim", "seq=1..512").exit_code == 0
    result = run("check", positions, "--dim", "seq=1..513", "--json")
    assert result.exit_code == 1
    (model,) = json.loads(result.stdout)["models"]
    (finding,) = model["findings"]
    assert (finding["kind"], finding["severity"]) == ("fails-in-range", "error")
    assert finding["node"] == "position_gather"
    assert finding["reason"].startswith("fails at seq=513, inside --dim seq=1..513")
    jsonschema.validate(json.loads(result.stdout), load_schema("check"))
    unbounded = run("check", positions, "--dim", "seq=8..")
    assert unbounded.exit_code == 1 and "fails at seq=513" in unbounded.stdout


def test_the_range_decides_a_conditional_finding_of_a_real_bert() -> None:
    # tests/unit/test_domain.py runs this fixture in onnxruntime: seq 64 runs, 65 fails.
    assert run("check", BERT).exit_code == 1  # warning: fails when seq > 64
    assert run("check", BERT, "--dim", "seq=1..64", "--dim", "batch=1..8").exit_code == 0
    result = run("check", BERT, "--dim", "seq=1..65")
    assert result.exit_code == 1
    assert "error[fails-in-range] /model/embeddings/Add_1" in result.stdout
    assert "fails at seq=65, inside --dim seq=1..65" in " ".join(result.stdout.split())


def test_a_condition_on_a_dim_without_a_range_stays_and_says_why() -> None:
    # GPT-2 (dynamo): the mask's own dims s43, s53 meet the sequence s70 at two Adds. Ranges
    # on s70 and the batch s72 alone cannot decide them: the warnings stay, saying why.
    path = str(REAL / "gpt2_dynamo.onnx")
    report = bcast.check(path, dims={"s70": (1, 64), "s72": (1, 8)})
    assert [(f.kind, f.node) for f in report.findings] == [
        ("conditional", "node_add_168"),
        ("conditional", "node_add_347"),
    ]
    for finding in report.findings:
        assert finding.reason.endswith(
            "(not decided over the --dim ranges: it also depends on s43, s53, which no --dim "
            "range bounds)"
        )


def test_the_python_api_takes_ranges(positions: str) -> None:
    assert bcast.check(positions, dims={"seq": (1, 512)}).ok
    assert bcast.check(positions, dims={"seq": "1..512", "batch": 3}).ok
    report = bcast.check(positions, dims={"seq": (1, 513)})
    assert [f.kind for f in report.findings] == ["fails-in-range"]
    with pytest.raises(ValueError, match="range of sizes from 1"):
        bcast.check(positions, dims={"seq": (0, 5)})


@pytest.mark.parametrize("value", [True, -1, 2**64, (5, 2), (0, 5), "seq", "?", 1.5, (1, 2, 3)])
def test_the_python_api_refuses_what_is_no_size_or_range(positions: str, value: object) -> None:
    with pytest.raises(ValueError, match=r"dims\['seq'\]: expected a size"):
        bcast.check(positions, dims={"seq": value})


def test_numpy_integers_are_sizes_and_ends_of_ranges(positions: str) -> None:
    assert bcast.check(positions, dims={"seq": (np.int64(1), np.int32(512))}).ok
    assert not bcast.check(positions, dims={"seq": [1, np.int64(513)]}).ok


@pytest.mark.parametrize("text", ["seq=0..5", "seq=9..3", "seq=..5", "seq=1..x", "seq=1..2..3"])
def test_a_bad_range_is_a_usage_error(positions: str, text: str) -> None:
    result = run("check", positions, "--dim", text)
    assert result.exit_code == 2
    assert "Traceback" not in result.output


def test_domain_and_verify_take_ranges(positions: str) -> None:
    assert run("domain", positions, "--dim", "seq=1..512").exit_code == 0
    outside = run("domain", positions, "--dim", "seq=1..513")
    assert outside.exit_code == 1 and "seq=513" in outside.stdout
    doc = json.loads(run("domain", positions, "--dim", "seq=1..513", "--json").stdout)
    jsonschema.validate(doc, load_schema("domain"))
    assert doc["point"]["inside"] is False and doc["point"]["fails_at"]["node"] == "position_gather"


# -- --fail-on -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("threshold", "code"), [("error", 0), ("warning", 1), ("info", 1), ("never", 0), ("ERROR", 0)]
)
def test_fail_on_decides_the_exit_status_of_a_warning(threshold: str, code: int) -> None:
    assert run("check", BERT, "--fail-on", threshold).exit_code == code


def test_fail_on_never_still_exits_2_on_an_unreadable_model(tmp_path: Path) -> None:
    assert run("check", str(tmp_path / "missing.onnx"), "--fail-on", "never").exit_code == 2


def test_the_python_api_raises_at_the_threshold() -> None:
    assert bcast.check(BERT, fail_on="error").findings  # a warning: no raise
    with pytest.raises(ModelError, match=r"warning\[conditional\] node /model/embeddings/Add_1"):
        bcast.check(BERT, fail_on="warning")
    with pytest.raises(ValueError, match="fail_on takes"):
        bcast.check(BERT, fail_on="warnings")


# -- baselines -----------------------------------------------------------------------------


def _two_adds() -> onnx.ModelProto:
    """Two Adds that cannot broadcast: two findings of one rule in one model."""
    nodes = [
        helper.make_node("Add", ["x", "y"], ["a"], name="first"),
        helper.make_node("Add", ["x", "y"], ["b"], name="second"),
    ]
    f = TensorProto.FLOAT
    inputs = [
        helper.make_tensor_value_info("x", f, [2, 3]),
        helper.make_tensor_value_info("y", f, [4]),
    ]
    outputs = [helper.make_tensor_value_info(n, f, None) for n in ("a", "b")]
    model = helper.make_model(
        helper.make_graph(nodes, "m", inputs, outputs), opset_imports=[helper.make_opsetid("", 17)]
    )
    model.ir_version = 8
    return model


def test_a_baseline_lets_known_findings_pass_and_new_ones_fail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    onnx.save(_two_adds(), "two.onnx")
    written = run("check", BERT, "--write-baseline", "known.json")
    assert written.exit_code == 0
    doc = json.loads(Path("known.json").read_text())
    jsonschema.validate(doc, load_schema("baseline"))
    assert [(f["node"], f["kind"]) for f in doc["findings"]] == [
        ("/model/embeddings/Add_1", "conditional")
    ]
    known = run("check", BERT, "--baseline", "known.json", "--json")
    assert known.exit_code == 0
    assert json.loads(known.stdout)["summary"]["baselined"] == 1
    assert json.loads(known.stdout)["models"][0]["findings"] == []
    new = run("check", BERT, "two.onnx", "--baseline", "known.json")
    assert new.exit_code == 1 and "error[incompatible] first" in new.stdout
    assert "1 in the baseline" in new.stdout
    # Two findings of one rule in one model are two entries, each known on its own.
    run("check", "two.onnx", "--write-baseline", "two.json")
    entries = json.loads(Path("two.json").read_text())["findings"]
    assert len({e["fingerprint"] for e in entries}) == 2
    Path("one.json").write_text(json.dumps({**doc, "findings": entries[:1]}))
    partial = run("check", "two.onnx", "--baseline", "one.json", "--json")
    assert partial.exit_code == 1
    assert [f["node"] for f in json.loads(partial.stdout)["models"][0]["findings"]] == ["second"]
    assert bcast.check("two.onnx", baseline="two.json").ok


@pytest.mark.parametrize("content", ["{not json", '{"schema_version": 2, "findings": []}', ""])
def test_a_bad_baseline_is_a_usage_error(tmp_path: Path, content: str) -> None:
    path = tmp_path / "bad.json"
    if content:
        path.write_text(content)
    result = run("check", BERT, "--baseline", str(path))
    assert result.exit_code == 2
    assert str(path) in result.output and "Traceback" not in result.output


# -- [tool.bcast] --------------------------------------------------------------------------


def test_pyproject_settings_apply_from_a_subfolder_and_the_command_line_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.bcast]\nfail-on = "error"\n'
    )
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    assert run("check", BERT).exit_code == 0
    assert run("check", BERT, "--fail-on", "warning").exit_code == 1
    (tmp_path / "pyproject.toml").write_text('[tool.bcast]\ndims = { seq = "1..65" }\n')
    assert run("check", BERT).exit_code == 1
    assert run("check", BERT, "--dim", "seq=1..64").exit_code == 0
    (tmp_path / "pyproject.toml").write_text('[tool.bcast]\ndims = { seq = "1..64" }\n')
    assert run("check", BERT).exit_code == 0


def test_pyproject_baseline_is_relative_to_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ci").mkdir()
    assert run("check", BERT, "--write-baseline", "ci/known.json").exit_code == 0
    (tmp_path / "pyproject.toml").write_text('[tool.bcast]\nbaseline = "ci/known.json"\n')
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    assert run("check", BERT).exit_code == 0


def test_domain_and_verify_read_the_dims_of_the_table(
    positions: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.bcast]\ndims = { seq = "1..513" }\n')
    assert run("domain", positions).exit_code == 1  # seq=513 is outside
    assert run("domain", positions, "--dim", "seq=1..512").exit_code == 0  # the command wins
    doc = json.loads(run("verify", positions, "--json").stdout)
    assert doc["nodes"][0]["inputs"][0]["shape"] == "[2,513,8]"  # the range's largest size
    (tmp_path / "pyproject.toml").write_text('[tool.bcast]\ndims = { seq = "x" }\n')
    for command in ("domain", "verify"):
        result = run(command, positions)
        assert result.exit_code == 2 and "pyproject.toml" in result.output


@pytest.mark.parametrize(
    "table",
    ['fail-on = "warnings"', 'failon = "error"', "dims = 3", 'dims = { seq = "0..9" }', "[[x"],
)
def test_a_bad_pyproject_table_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, table: str
) -> None:
    (tmp_path / "pyproject.toml").write_text(f"[tool.bcast]\n{table}\n")
    monkeypatch.chdir(tmp_path)
    result = run("check", BERT)
    assert result.exit_code == 2
    assert "pyproject.toml" in result.output and "Traceback" not in result.output


# -- verify: a node that fails everywhere --------------------------------------------------


def test_verify_reports_a_node_that_fails_in_bcast_and_every_runtime(tmp_path: Path) -> None:
    pytest.importorskip("openvino")
    f = TensorProto.FLOAT
    add = helper.make_node("Add", ["x", "pos"], ["y"], name="position_add")
    x = helper.make_tensor_value_info("x", f, ["batch", "seq", 8])
    y = helper.make_tensor_value_info("y", f, None)
    table = numpy_helper.from_array(np.zeros((16, 8), np.float32), "pos")
    model = helper.make_model(
        helper.make_graph([add], "m", [x], [y], [table]),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    model.ir_version = 8
    path = str(tmp_path / "pos16.onnx")
    onnx.save(model, path)
    result = run("verify", path, "--dim", "seq=32", "--json")
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    jsonschema.validate(doc, load_schema("verify"))
    (node,) = doc["nodes"]
    # Each side's own error: the runtimes reject the Add at seq=32 themselves.
    assert all(node["results"][side]["error"] for side in ("bcast", "onnxruntime", "openvino"))
    assert node["fails_everywhere"] is True
    assert doc["summary"]["failing"] == 1 and doc["summary"]["disagreements"] == 0
    text = " ".join(run("verify", path, "--dim", "seq=32").stdout.split())
    assert "1 node fails in bcast and in every runtime at these sizes: position_add (Add)" in text
    assert f"bcast check {path} --dim NAME=LO..HI" in text
    inside = run("verify", path, "--dim", "seq=1..16", "--json")
    assert inside.exit_code == 0
    assert json.loads(inside.stdout)["nodes"][0]["inputs"][0]["shape"] == "[2,16,8]"
    # a node failing everywhere is an error: --fail-on never lets it pass, nothing else does
    for threshold, code in (("error", 1), ("info", 1), ("never", 0)):
        assert run("verify", path, "--dim", "seq=32", "--fail-on", threshold).exit_code == code


@pytest.mark.parametrize(("threshold", "code"), [("error", 1), ("warning", 1), ("never", 0)])
def test_domain_outside_its_point_is_an_error_for_fail_on(
    positions: str, threshold: str, code: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outside = ["domain", positions, "--dim", "seq=1..513"]
    assert run(*outside, "--fail-on", threshold).exit_code == code
    assert run("domain", positions, "--dim", "seq=1..512", "--fail-on", threshold).exit_code == 0
    monkeypatch.chdir(tmp_path)  # the table's fail-on applies; the command line wins
    (tmp_path / "pyproject.toml").write_text(f'[tool.bcast]\nfail-on = "{threshold}"\n')
    assert run(*outside).exit_code == code
    assert run(*outside, "--fail-on", "error").exit_code == 1
    (tmp_path / "pyproject.toml").write_text('[tool.bcast]\nfail-on = "sometimes"\n')
    assert run(*outside).exit_code == 2


# -- SARIF ---------------------------------------------------------------------------------
# No SARIF 2.1.0 schema ships in an installed package here (checked: none in site-packages),
# so the structure GitHub code scanning reads is checked member by member.


def _sarif(*paths: str) -> dict:
    result = run("check", *paths, "--format", "sarif")
    return json.loads(result.stdout)


def test_sarif_names_the_node_fingerprints_each_finding_and_lists_unreadable_models(
    tmp_path: Path,
) -> None:
    two = str(tmp_path / "two.onnx")
    onnx.save(_two_adds(), two)
    missing = str(tmp_path / "missing.onnx")
    log = _sarif(two, BERT, missing)
    assert log["version"] == "2.1.0"
    (sarif_run,) = log["runs"]
    rules = sarif_run["tool"]["driver"]["rules"]
    for rule in rules:  # help for the alert's "Rule help" panel
        assert rule["help"]["text"] and rule["help"]["markdown"].startswith(f"**{rule['id']}**")
        assert rule["shortDescription"]["text"] and rule["fullDescription"]["text"]
    first, second, conditional, unreadable = sarif_run["results"]
    for result in sarif_run["results"]:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        assert result["level"] in {"error", "warning", "note"}
        (key,) = result["partialFingerprints"]
        assert key == "bcastFinding/v1"
    # The node and the condition are in the message itself (the alert view shows only it).
    assert first["message"]["text"].startswith("first (Add, axis 1): cannot broadcast")
    assert second["message"]["text"].startswith("second (Add, axis 1): cannot broadcast")
    assert conditional["message"]["text"].startswith(
        "/model/embeddings/Add_1 (Add, axis 1): fails when seq > 64"
    )
    # Two findings of one rule in one model never merge; a finding keeps its fingerprint.
    prints = [r["partialFingerprints"]["bcastFinding/v1"] for r in (first, second)]
    assert prints[0] != prints[1]
    again = _sarif(two)["runs"][0]["results"]
    assert [r["partialFingerprints"]["bcastFinding/v1"] for r in again] == prints
    # The node as a logical location, the model as the physical one.
    (location,) = first["locations"]
    (logical,) = location["logicalLocations"]
    assert logical["name"] == "first" and logical["fullyQualifiedName"] == f"{two}::first"
    assert location["physicalLocation"]["artifactLocation"]["uri"] == two
    # The unreadable model: a result (an alert on the file) and a tool execution notification.
    assert unreadable["ruleId"] == "unreadable"
    (invocation,) = sarif_run["invocations"]
    assert invocation["executionSuccessful"] is False
    (note,) = invocation["toolExecutionNotifications"]
    assert note["level"] == "error" and "no such file" in note["message"]["text"]
    assert note["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == missing
    clean = _sarif(two)["runs"][0]["invocations"]
    assert clean == [{"executionSuccessful": True, "toolExecutionNotifications": []}]


def test_json_sarif_and_the_baseline_share_each_findings_fingerprint(tmp_path: Path) -> None:
    two = str(tmp_path / "two.onnx")
    onnx.save(_two_adds(), two)
    listed = json.loads(run("check", two, "--json").stdout)
    jsonschema.validate(listed, load_schema("check"))
    from_json = [f["fingerprint"] for f in listed["models"][0]["findings"]]
    from_sarif = [
        r["partialFingerprints"]["bcastFinding/v1"] for r in _sarif(two)["runs"][0]["results"]
    ]
    run("check", two, "--write-baseline", str(tmp_path / "b.json"))
    written = json.loads((tmp_path / "b.json").read_text())["findings"]
    assert from_json == from_sarif == [e["fingerprint"] for e in written]
    assert len(set(from_json)) == 2
