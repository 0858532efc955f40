"""Invoices with a PDF each, on SQLite and local disk under ``$EXAMPLE_VAR``
(./var/django_example by default): docs/django.md's five lines, and what a project needs
around them."""

from __future__ import annotations

import os
from pathlib import Path

VAR = Path(os.environ.get("EXAMPLE_VAR", "var/django_example")).resolve()
VAR.mkdir(parents=True, exist_ok=True)

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "example-only-not-secret")
DEBUG = os.environ.get("DJANGO_DEBUG", "1") == "1"
ALLOWED_HOSTS = ["localhost", "127.0.0.1"]
USE_TZ = True
ROOT_URLCONF = "examples.django_invoices.urls"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
STATIC_URL = "static/"

INSTALLED_APPS = [
    "django.contrib.admin", "django.contrib.auth", "django.contrib.contenttypes",
    "django.contrib.sessions", "django.contrib.messages", "django.contrib.staticfiles",
    "blobledger.django",
    "examples.django_invoices.invoices",
]
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
TEMPLATES = [{
    "BACKEND": "django.template.backends.django.DjangoTemplates", "APP_DIRS": True,
    "OPTIONS": {"context_processors": [
        "django.template.context_processors.request",
        "django.contrib.auth.context_processors.auth",
        "django.contrib.messages.context_processors.messages"]},
}]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": str(VAR / "db.sqlite3")}}
STORAGES = {
    "default": {"BACKEND": "blobledger.django.LedgerStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
BLOBLEDGER = {"STORE_URL": os.environ.get("BLOBLEDGER_STORE_URL", f"file://{VAR / 'blobs'}")}
