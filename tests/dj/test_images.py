"""An ImageField on the ledger: Django reads the dimensions from the staged file before the
row commits; the file is attached with the row; an async view saves through ``asave``."""

from __future__ import annotations

import io

from asgiref.sync import async_to_sync
from django.core.files.base import ContentFile
from PIL import Image

from tests.dj.conftest import state
from tests.dj.invoices.models import Photo


def png(width: int, height: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), "red").save(out, "PNG")
    return out.getvalue()


def test_an_image_field(backend: str) -> None:
    photo = Photo.objects.create(image=ContentFile(png(7, 3), name="p.png"))
    assert (photo.width, photo.height) == (7, 3)
    assert state(photo.image.name) == "attached"
    again = Photo.objects.get(pk=photo.pk)
    assert (again.image.width, again.image.height) == (7, 3)
    with again.image.open() as handle:  # reading the dimensions closed it, as on disk
        assert handle.read() == png(7, 3)


def test_an_async_save(backend: str) -> None:
    async def view() -> Photo:
        photo = Photo(image=ContentFile(png(2, 2), name="a.png"))
        await photo.asave()
        return photo

    photo = async_to_sync(view)()
    assert state(photo.image.name) == "attached" and photo.width == 2
