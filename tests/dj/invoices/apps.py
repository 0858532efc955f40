from django.apps import AppConfig


class InvoicesConfig(AppConfig):
    name = "tests.dj.invoices"
    label = "invoices"
    default_auto_field = "django.db.models.BigAutoField"
