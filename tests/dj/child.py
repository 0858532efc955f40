"""A Django process of its own that saves one invoice with a file on the tests' SQLite
database and store, and dies (SIGKILL) at the failpoint it is given:

    python -m tests.dj.child DB_PATH BLOBLEDGER_JSON NUMBER POINT
"""

from __future__ import annotations

import json
import sys

import django
from django.conf import settings

from tests.dj import settings as test_settings


def main(db_path: str, block: str, number: str, point: str) -> None:
    databases = {"default": {**test_settings.SETTINGS["DATABASES"]["default"], "NAME": db_path}}
    settings.configure(**{**test_settings.SETTINGS, "DATABASES": databases,
                          "DATABASE_ROUTERS": [], "BLOBLEDGER": json.loads(block)})
    django.setup()
    from django.core.files.base import ContentFile

    from blobledger import failpoints
    from tests.dj.invoices.models import Invoice

    failpoints.configure(f"{point}=kill")
    Invoice.objects.create(number=number, pdf=ContentFile(b"killed on sqlite", name="k.pdf"))
    print("saved, not killed", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:5])
