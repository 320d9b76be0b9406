"""Turning model replies (structured JSON, fenced JSON, fenced code plus settings) into proposals."""

from __future__ import annotations

import json

import pytest

from cudaopt_mcp.client.proposal import NoProposal, Proposal
from cudaopt_mcp.client.proposers.llm_reply import REPLY_SCHEMA, parse_reply, response_format

KERNEL = 'extern "C" __global__ void transpose(const float* in, float* out, int rows, int cols)\n{\n}\n'
SETTINGS = '{"note": "tiles", "launch": {"grid": ["ceil_div(cols, 32)", "ceil_div(rows, 8)"], "block": [32, 8]}}'


def unusable(reply: str | None) -> str:
    result = parse_reply(reply)
    assert isinstance(result, NoProposal) and result.kind == "unusable", result
    return result.reason


def test_structured_json_reply():
    reply = json.dumps({"note": "n", "source": KERNEL, "launch": None, "defines": [], "options": []})
    result = parse_reply(reply)
    assert result == Proposal(source=KERNEL, note="n")


def test_numeric_strings_become_numbers_and_expressions_stay_strings():
    reply = json.dumps({"note": "", "source": KERNEL, "options": ["-use_fast_math"],
                        "launch": {"grid": ["ceil_div(cols, TILE)", "4"], "block": ["256"], "shared_mem": "TILE * 4"},
                        "defines": [{"name": "TILE", "value": "64"}, {"name": "SCALE", "value": "0.5"},
                                    {"name": "MODE", "value": "fast"}]})
    result = parse_reply(reply)
    assert isinstance(result, Proposal)
    assert result.launch.grid == ["ceil_div(cols, TILE)", 4] and result.launch.block == [256]
    assert result.launch.shared_mem == "TILE * 4"
    assert result.defines == {"TILE": 64, "SCALE": 0.5, "MODE": "fast"} and result.options == ["-use_fast_math"]


def test_json_in_a_fenced_block_with_prose_around_it():
    reply = "Here is the candidate:\n```json\n" + json.dumps({"source": KERNEL, "note": "x"}) + "\n```\nGood luck."
    assert isinstance(parse_reply(reply), Proposal)


def test_json_followed_by_stray_text():
    assert isinstance(parse_reply(json.dumps({"source": KERNEL}) + "\n\nThat is all."), Proposal)


@pytest.mark.parametrize("lang", ["cuda", "cpp", "c++", "cu", ""])
def test_fenced_code_with_settings_block(lang):
    reply = f"Idea: tiles.\n```{lang}\n{KERNEL}```\n\n```json\n{SETTINGS}\n```\n"
    result = parse_reply(reply)
    assert isinstance(result, Proposal)
    assert result.source == KERNEL and result.note == "tiles"
    assert result.launch.grid == ["ceil_div(cols, 32)", "ceil_div(rows, 8)"] and result.launch.block == [32, 8]


def test_fenced_code_alone_keeps_the_baseline_launch():
    result = parse_reply(f"```cuda\n{KERNEL}```")
    assert isinstance(result, Proposal) and result.launch is None and result.defines is None and result.note == ""


def test_the_kernel_block_is_chosen_over_a_snippet():
    reply = f"First a helper idea:\n```cuda\nfloat x = 0;\n```\nThe kernel:\n```cuda\n{KERNEL}```"
    assert parse_reply(reply).source == KERNEL


def test_defines_as_object_and_long_note_is_cut_to_one_line():
    reply = json.dumps({"source": KERNEL, "defines": {"BLOCK": 128}, "note": "a\nb " + "x" * 600})
    result = parse_reply(reply)
    assert result.defines == {"BLOCK": 128}
    assert result.note.startswith("a b x") and len(result.note) == 500


def test_empty_reply():
    assert "empty" in unusable("   ")
    assert "empty" in unusable(None)


def test_invalid_json():
    reason = unusable('{"source": "extern \\"C\\" __global__ void k() {}", "note": ')
    assert reason.startswith("the reply's JSON is invalid:")


def test_invalid_json_in_a_fenced_block():
    assert "invalid" in unusable('```json\n{"source": oops}\n```')


def test_prose_without_code():
    assert "neither a JSON object nor a fenced" in unusable("I would use shared memory tiling here.")


def test_settings_without_source():
    assert "no 'source'" in unusable(f"```json\n{SETTINGS}\n```")


def test_source_without_a_kernel():
    assert "no __global__ kernel" in unusable(json.dumps({"source": "I cannot do that."}))
    assert "no kernel source" in unusable(json.dumps({"source": "", "note": "x"}))


@pytest.mark.parametrize("launch, words", [
    ({"grid": [], "block": [256]}, "grid:"),
    ({"grid": [1, 2, 3, 4], "block": [256]}, "grid:"),
    ({"grid": [1]}, "block: Field required"),
    ("256 threads", "launch must be an object"),
])
def test_invalid_launch(launch, words):
    reason = unusable(json.dumps({"source": KERNEL, "launch": launch}))
    assert words in reason


def test_bad_define_name_and_bad_options():
    assert "not a C identifier" in unusable(json.dumps({"source": KERNEL, "defines": {"2X": 1}}))
    assert "options" in unusable(json.dumps({"source": KERNEL, "options": "-O3"}))


def test_schema_is_strict_everywhere():
    """OpenAI's strict mode: every object lists all its properties as required and allows no others."""
    assert response_format()["json_schema"]["strict"] is True

    def objects(node):
        if isinstance(node, dict):
            if node.get("type") == "object":
                yield node
            for value in node.values():
                yield from objects(value)
        elif isinstance(node, list):
            for value in node:
                yield from objects(value)

    found = list(objects(REPLY_SCHEMA))
    assert len(found) == 6  # the reply, launch, a launch step, a computed argument, a scratch buffer, a define
    for node in found:
        assert node["additionalProperties"] is False and set(node["required"]) == set(node["properties"])


def test_a_launch_sequence_with_scratch_and_a_computed_argument():
    steps = [{"kernel": "partial", "grid": ["ceil_div(n, 256)"], "block": ["256"], "shared_mem": "0",
              "args": ["x", "sums", "n"]},
             {"kernel": "final", "grid": ["1"], "block": ["64"], "shared_mem": "",
              "args": ["sums", "out", {"value": "ceil_div(n, 256)", "dtype": "int32"}]}]
    reply = json.dumps({"note": "two passes", "source": KERNEL, "launch": None, "launches": steps,
                        "scratch": [{"name": "sums", "dtype": "float32", "count": "ceil_div(n, 256)"}],
                        "defines": [], "options": []})
    result = parse_reply(reply)
    assert isinstance(result, Proposal) and result.launch is None
    assert [s.kernel for s in result.launches] == ["partial", "final"]
    assert result.launches[0].block == [256] and result.launches[1].args[2].value == "ceil_div(n, 256)"
    assert result.scratch[0].name == "sums"
    args = result.tool_arguments()
    assert args["launches"][1]["args"][2] == {"value": "ceil_div(n, 256)", "dtype": "int32"} and "launch" not in args


@pytest.mark.parametrize("fields, words", [
    ({"launches": [{"kernel": "k", "grid": [], "block": [1]}]}, "grid:"),
    ({"launches": [{"kernel": "bad name", "grid": [1], "block": [1]}]}, "invalid launches.0"),
    ({"launches": "two"}, "launches must be a list"),
    ({"launch": {"grid": [1], "block": [1]}, "launches": [{"kernel": "k", "grid": [1], "block": [1]}]},
     "either launch or launches"),
    ({"scratch": [{"name": "s", "dtype": "float33", "count": 4}]}, "invalid scratch"),
])
def test_invalid_launch_sequences(fields, words):
    assert words in unusable(json.dumps({"source": KERNEL, **fields}))
