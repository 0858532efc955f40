"""The Django settings of the tests in this folder (configured by its conftest, never through
DJANGO_SETTINGS_MODULE, so that pytest-django leaves the rest of the suite alone): SQLite in
a file (``default``) and a fresh PostgreSQL database (``pg``), the test project's app, the
ledger's app and the storage."""

from __future__ import annotations

import os
import tempfile
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(tempfile.mkdtemp(prefix="blobledger-django-"))
STORE = ROOT / "store"
_pg = urlsplit(os.environ.get("BLOBLEDGER_TEST_POSTGRES_URL",
                              "postgresql://postgres@127.0.0.1:5432/test"))
PG_NAME = f"blobledger_dj_{uuid.uuid4().hex[:10]}"

SETTINGS: dict[str, Any] = dict(
    DEBUG=False,
    SECRET_KEY="blobledger-tests",
    USE_TZ=True,
    ALLOWED_HOSTS=["testserver", "localhost"],
    DATABASES={
        "default": {"ENGINE": "django.db.backends.sqlite3", "NAME": str(ROOT / "app.db"),
                    "TEST": {"NAME": str(ROOT / "test.db")}},
        "pg": {"ENGINE": "django.db.backends.postgresql", "NAME": PG_NAME,
               "USER": _pg.username or "postgres", "PASSWORD": _pg.password or "",
               "HOST": _pg.hostname or "127.0.0.1", "PORT": str(_pg.port or 5432),
               "TEST": {"NAME": f"test_{PG_NAME}", "DEPENDENCIES": []}},
    },
    DATABASE_ROUTERS=["tests.dj.routing.Router"],
    INSTALLED_APPS=[
        "django.contrib.admin", "django.contrib.auth", "django.contrib.contenttypes",
        "django.contrib.sessions", "django.contrib.messages", "django.contrib.staticfiles",
        "blobledger.django",
        "tests.dj.invoices.apps.InvoicesConfig",
    ],
    MIGRATION_MODULES={"invoices": None},
    MIDDLEWARE=[
        "django.contrib.sessions.middleware.SessionMiddleware",
        "django.middleware.common.CommonMiddleware",
        "django.middleware.csrf.CsrfViewMiddleware",
        "django.contrib.auth.middleware.AuthenticationMiddleware",
        "django.contrib.messages.middleware.MessageMiddleware",
    ],
    TEMPLATES=[{
        "BACKEND": "django.template.backends.django.DjangoTemplates", "APP_DIRS": True,
        "OPTIONS": {"context_processors": [
            "django.template.context_processors.request",
            "django.contrib.auth.context_processors.auth",
            "django.contrib.messages.context_processors.messages"]},
    }],
    ROOT_URLCONF="tests.dj.urls",
    STATIC_URL="/static/",
    STORAGES={
        "default": {"BACKEND": "blobledger.django.LedgerStorage"},
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    },
    BLOBLEDGER={"STORE_URL": f"file://{STORE}", "SWEEP_AFTER": "10m",
                "UPLOAD_DEADLINE": "1m", "DELETE_GRACE": "5m"},
    PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"],
)
