"""The list with an upload form (a model form: the PDF is staged during the save and
attached in the row's transaction) and a download that redirects to the file's signed URL."""

from __future__ import annotations

from django import forms
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_http_methods

from examples.django_invoices.invoices.models import Invoice


class InvoiceForm(forms.ModelForm):  # type: ignore[type-arg]
    class Meta:
        model = Invoice
        fields = ["number", "pdf"]


@require_http_methods(["GET", "POST"])
def index(request: HttpRequest) -> HttpResponse:
    form = InvoiceForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        invoice = form.save()
        return HttpResponse(invoice.pdf.name, status=201) \
            if request.headers.get("Accept") == "text/plain" else HttpResponseRedirect("/")
    return render(request, "invoices/index.html",
                  {"form": form, "invoices": Invoice.objects.order_by("-id")[:50]})


def download(request: HttpRequest, pk: int) -> HttpResponseRedirect:
    return HttpResponseRedirect(get_object_or_404(Invoice, pk=pk).pdf.url)
