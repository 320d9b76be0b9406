"""Opening a file a worker wrote (check.worker_files): a FIFO or a link in its place is refused at once, never
waited on: a worker runs candidate code, and a FIFO named as an output would hang the server's open()."""

from __future__ import annotations

import os
import threading

from harness_tools.check.worker_files import open_worker_file


def test_a_fifo_or_a_link_in_place_of_an_output_is_refused_without_blocking(tmp_path):
    (tmp_path / "y.npy").write_bytes(b"data")
    os.mkfifo(tmp_path / "fifo.npy")
    os.symlink("/etc/hostname", tmp_path / "link.npy")
    results: dict[str, object] = {}

    def open_all() -> None:
        for name in ("fifo.npy", "link.npy", "y.npy"):
            handle = open_worker_file(tmp_path / name, tmp_path)
            results[name] = handle.read() if handle else None
            if handle:
                handle.close()

    opener = threading.Thread(target=open_all, daemon=True)
    opener.start()
    opener.join(10)
    assert not opener.is_alive(), "open() waited on the FIFO for a writer"
    assert results == {"fifo.npy": None, "link.npy": None, "y.npy": b"data"}
