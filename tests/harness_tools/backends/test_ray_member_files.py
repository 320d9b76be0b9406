"""What a Ray actor (outside the jail) sends back of a case's outputs: only files its worker wrote in the case's
own folder. A worker runs candidate code and may name any path, or swap its file for a link."""

from __future__ import annotations

import os

from harness_tools.backends.ray_members import _outputs_in


def test_only_regular_files_in_the_cases_folder_are_read_whatever_the_worker_names(tmp_path):
    out, elsewhere = tmp_path / "out", tmp_path / "node"
    out.mkdir()
    elsewhere.mkdir()
    secret = elsewhere / "id_rsa"
    secret.write_text("PRIVATE KEY")
    (out / "y.npy").write_bytes(b"\x93NUMPY output")
    os.symlink(secret, out / "z.npy")  # a link swapped in for an output
    os.mkfifo(out / "w.npy")  # not a regular file: reading it would block
    claimed = {"y": str(out / "y.npy"), "z": str(out / "z.npy"), "w": str(out / "w.npy"), "key": str(secret),
               "up": str(out / ".." / "node" / "id_rsa"), "dots": str(out / ".."), "etc": "/etc/hostname"}
    assert _outputs_in(claimed, out) == {"y": ("y.npy", b"\x93NUMPY output")}
