"""Hostile images against a real ``blobledger serve`` (SQLite, a local store): small files
whose pixels cost much (a PNG at the pixel limit, EXIF-rotated, four at once) render within
the promised memory, and a PostScript file declared an image never reaches Ghostscript."""

from __future__ import annotations

import functools
import io
import os
import struct
import threading
import zlib
from pathlib import Path

import httpx
from PIL import Image

from tests.hostile.receivers import rss_kib
from tests.hostile.support import Served, serve

MIB = 1024  # in KiB, as /proc counts
#: at the default pixel limit (64 million), wider than tall
WIDE, TALL = 10_000, 6_400


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


@functools.cache
def big_png() -> bytes:
    """A ``WIDE`` x ``TALL`` RGB PNG (a few hundred KiB) whose EXIF says: rotate 90 degrees
    to show it (orientation 6), so it shows ``TALL`` x ``WIDE``."""
    exif = Image.Exif()
    exif[0x0112] = 6
    packer = zlib.compressobj(6)
    row = b"\x00" + bytes(3 * WIDE)  # filter byte, then black pixels
    idat = b"".join(packer.compress(row) for _ in range(TALL)) + packer.flush()
    return (b"\x89PNG\r\n\x1a\n"
            + _chunk(b"IHDR", struct.pack(">IIBBBBB", WIDE, TALL, 8, 2, 0, 0, 0))
            + _chunk(b"eXIf", exif.tobytes()[6:])  # without the "Exif\0\0" of a JPEG
            + _chunk(b"IDAT", idat) + _chunk(b"IEND", b""))


def _upload(srv: Served, name: str, data: bytes, content_type: str) -> str:
    created = httpx.post(f"{srv.url}/documents", params={"name": name}, content=data,
                         headers={"content-type": content_type}, timeout=60)
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


def test_four_images_at_the_pixel_limit_render_within_the_promised_memory() -> None:
    source = big_png()
    with serve(env={"BLOBLEDGER_VARIANTS": "thumb=256x256"}) as srv:
        ids = [_upload(srv, f"big-{n}.png", source, "image/png") for n in range(4)]
        _, before = rss_kib(srv.process.pid)
        answers: list[httpx.Response] = []

        def fetch(doc_id: str) -> None:
            answers.append(httpx.get(f"{srv.url}/documents/{doc_id}/variants/thumb",
                                     timeout=300))

        threads = [threading.Thread(target=fetch, args=(doc_id,)) for doc_id in ids]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        _, peak = rss_kib(srv.process.pid)
    assert [a.status_code for a in answers] == [200] * 4, [a.text[:200] for a in answers]
    for answer in answers:  # oriented: shown tall
        assert Image.open(io.BytesIO(answer.content)).size == (164, 256)
    # one source's pixels (RGB: 183 MiB) decoded at a time, turned only once shrunk: about
    # 250 MiB; the four rendered side by side about 1 GiB, each turned whole 2.9 GiB
    assert peak - before < 512 * MIB, (before, peak)


EPS = (b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 100 100\n%%EndComments\n"
       b"0 0 moveto 100 100 lineto stroke showpage\n")
#: a stand-in for Ghostscript: it says it is there, and records any other call
STAND_IN = """#!/bin/sh
if [ "$1" = "--version" ]; then echo 10.02.1; exit 0; fi
echo "$@" >> "$(dirname "$0")/called"
exit 1
"""


def test_a_postscript_file_declared_an_image_never_reaches_ghostscript(tmp_path: Path) -> None:
    gs = tmp_path / "gs"
    gs.write_text(STAND_IN)
    gs.chmod(0o755)
    path = f"{tmp_path}:{os.environ['PATH']}"
    with serve(env={"BLOBLEDGER_VARIANTS": "thumb=64x64", "PATH": path}) as srv:
        doc_id = _upload(srv, "drawing.png", EPS, "image/png")
        answer = httpx.get(f"{srv.url}/documents/{doc_id}/variants/thumb", timeout=60)
    assert not (tmp_path / "called").exists(), (tmp_path / "called").read_text()
    assert answer.status_code == 415, answer.text
    assert answer.json()["type"].endswith("unsupported-image")


def test_a_refused_image_is_not_decoded_again() -> None:
    broken = big_png()[:4096]  # its header, then its pixels cut short: they do not decode
    # serve dies the second time a source is read for a render
    with serve(env={"BLOBLEDGER_VARIANTS": "thumb=64x64",
                    "BLOBLEDGER_FAILPOINTS": "variant.after_read=kill@2"}) as srv:
        doc_id = _upload(srv, "broken.png", broken, "image/png")
        for _ in range(3):
            answer = httpx.get(f"{srv.url}/documents/{doc_id}/variants/thumb", timeout=60)
            assert answer.status_code == 422, answer.text
            assert answer.json()["type"].endswith("invalid-image")
        assert srv.process.poll() is None
