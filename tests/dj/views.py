"""The test project's upload view: a model form, as a Django application writes one."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse

from tests.dj.invoices.forms import InvoiceForm


def upload(request: HttpRequest) -> HttpResponse:
    form = InvoiceForm(request.POST, request.FILES)
    if not form.is_valid():
        return HttpResponse(form.errors.as_json(), status=400)
    invoice = form.save()
    return HttpResponse(invoice.pdf.name, status=201)
