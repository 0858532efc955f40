"""Source images for the variant tests, made with Pillow in memory."""

from __future__ import annotations

import io
import struct
import zlib

from PIL import Image

#: the variants the tests configure: a box wider than tall, and a square one
VARIANTS = "thumb=64x32,square=48x48"


def png(width: int = 200, height: int = 100, color: tuple[int, ...] = (200, 30, 30),
        mode: str = "RGB") -> bytes:
    buffer = io.BytesIO()
    Image.new(mode, (width, height), color).save(buffer, "PNG")
    return buffer.getvalue()


def jpeg_rotated(width: int = 200, height: int = 100) -> bytes:
    """A JPEG stored ``width`` x ``height`` whose EXIF says: rotate 90 degrees to show it
    (orientation 6), so it shows ``height`` x ``width``."""
    image = Image.new("RGB", (width, height), (10, 120, 200))
    exif = Image.Exif()
    exif[0x0112] = 6
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", exif=exif.tobytes())
    return buffer.getvalue()


def bomb(width: int = 40_000, height: int = 40_000) -> bytes:
    """A tiny PNG whose header claims ``width`` x ``height`` pixels (a decompression bomb:
    decoding it would allocate gigabytes); only its header is ever read."""
    data = png(8, 8)
    ihdr = struct.pack(">II", width, height) + data[24:29]
    chunk = b"IHDR" + ihdr
    return data[:12] + chunk + struct.pack(">I", zlib.crc32(chunk)) + data[33:]


def size_of(data: bytes) -> tuple[int, int]:
    with Image.open(io.BytesIO(data)) as image:
        return image.size


def format_of(data: bytes) -> str | None:
    with Image.open(io.BytesIO(data)) as image:
        return image.format
