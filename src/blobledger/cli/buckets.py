"""``blobledger buckets``: create, list, show, change and delete buckets, namespaces of
documents with their own settings (docs/buckets.md), on the configured database."""

from __future__ import annotations

import sys

import click

from blobledger._base.durations import parse_size
from blobledger.cli import run_async
from blobledger.cli._output import display_name, fields, is_terminal, print_json, table
from blobledger.protocol.buckets import CANNED_ACLS, Bucket, Usage

from ._worker import worker_ledger

EXAMPLES = """\b
Examples:
  blobledger buckets create photos --content-types 'image/*' --max-object 20MiB
  blobledger buckets create tenant-a --quota-bytes 10GiB --quota-objects 100000 --hold
  blobledger buckets create avatars --acl public-read
  blobledger buckets list
  blobledger buckets show photos --json
  blobledger buckets change photos --no-quota-bytes
  blobledger buckets delete photos
"""


def _size(text: str | None, what: str) -> int | None:
    return None if text is None else parse_size(text, what=what)


def _row(bucket: Bucket, usage: Usage | None = None) -> list[str]:
    def limit(value: int | None) -> str:
        return "-" if value is None else str(value)

    row = [bucket.name, limit(bucket.max_object_bytes), ",".join(bucket.content_types) or "*",
           "yes" if bucket.hold else "no", limit(bucket.quota_bytes),
           limit(bucket.quota_objects), bucket.acl]
    if usage is not None:
        row += [str(usage.objects), str(usage.bytes)]
    return row


HEADERS = ["name", "max object", "content types", "held", "quota bytes", "quota objects",
           "acl"]


@click.group(epilog=EXAMPLES)
def command() -> None:
    """Buckets: namespaces of documents (a name is unique within its bucket), each with its
    largest object, its media types, whether its creations are held, and its quota."""


def _settings_options(func: click.decorators.FC) -> click.decorators.FC:
    for option in reversed([
        click.option("--max-object", metavar="SIZE",
                     help="the largest object (1048576, 20MiB, 5GiB)"),
        click.option("--content-types", metavar="TYPES",
                     help="the media types allowed, comma-separated (image/*,application/pdf)"),
        click.option("--quota-bytes", metavar="SIZE", help="the most bytes the bucket holds"),
        click.option("--quota-objects", type=click.IntRange(min=0),
                     help="the most documents the bucket holds"),
        click.option("--acl", type=click.Choice(CANNED_ACLS),
                     help="who reads (and writes) it without a credential: private (the "
                     "default), public-read, public-read-write, authenticated-read (any S3 "
                     "access key)"),
    ]):
        func = option(func)
    return func


@command.command("create")
@click.argument("name")
@_settings_options
@click.option("--hold", is_flag=True, help="hold every creation until the processors accept it")
@click.option("--json", "as_json", is_flag=True, help="the bucket as one JSON line")
@run_async
async def create(name: str, max_object: str | None, content_types: str | None,
                 quota_bytes: str | None, quota_objects: int | None, acl: str | None,
                 hold: bool, as_json: bool) -> int:
    """Create a bucket."""
    async with worker_ledger() as ledger:
        bucket = await ledger.buckets.create(
            name, max_object_bytes=_size(max_object, "--max-object"),
            content_types=content_types or (), hold=hold, acl=acl or "private",
            quota_bytes=_size(quota_bytes, "--quota-bytes"), quota_objects=quota_objects)
    if as_json:
        print_json(bucket.to_json())
    else:
        print(f"created bucket {bucket.name}")
    return 0


@command.command("change")
@click.argument("name")
@_settings_options
@click.option("--hold/--no-hold", default=None, help="hold creations (or not)")
@click.option("--no-max-object", is_flag=True, help="lift the largest object's limit")
@click.option("--no-quota-bytes", is_flag=True, help="lift the byte quota")
@click.option("--no-quota-objects", is_flag=True, help="lift the document quota")
@run_async
async def change(name: str, max_object: str | None, content_types: str | None,
                 quota_bytes: str | None, quota_objects: int | None, acl: str | None,
                 hold: bool | None, no_max_object: bool, no_quota_bytes: bool,
                 no_quota_objects: bool) -> int:
    """Change a bucket's settings (those given; writes already admitted keep theirs)."""
    changes: dict[str, object] = {}
    if max_object is not None or no_max_object:
        changes["max_object_bytes"] = _size(max_object, "--max-object")
    if content_types is not None:
        changes["content_types"] = content_types
    if quota_bytes is not None or no_quota_bytes:
        changes["quota_bytes"] = _size(quota_bytes, "--quota-bytes")
    if quota_objects is not None or no_quota_objects:
        changes["quota_objects"] = quota_objects
    if hold is not None:
        changes["hold"] = hold
    if acl is not None:
        changes["acl"] = acl
    async with worker_ledger() as ledger:
        bucket = await ledger.buckets.update(name, **changes)
    print(f"changed bucket {bucket.name}")
    return 0


@command.command("list")
@click.option("--json", "as_json", is_flag=True, help="one JSON object per bucket")
@run_async
async def list_buckets(as_json: bool) -> int:
    """List the buckets: name, largest object, media types, held, quotas."""
    async with worker_ledger() as ledger:
        found = await ledger.buckets.list()
    if as_json:
        for bucket in found:
            print_json(bucket.to_json())
    elif is_terminal(sys.stdout):
        table(None, HEADERS, [_row(b) for b in found])
    else:
        for bucket in found:
            print(fields(_row(bucket)))
    return 0


@command.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="the bucket and its usage as one line")
@run_async
async def show(name: str, as_json: bool) -> int:
    """Show a bucket's settings and what it holds (documents pending, held and ready)."""
    async with worker_ledger() as ledger:
        bucket = await ledger.buckets.get(name)
        usage = await ledger.buckets.usage(name)
    if as_json:
        print_json({**bucket.to_json(), "usage": {"objects": usage.objects,
                                                  "bytes": usage.bytes}})
    else:
        for header, value in zip([*HEADERS, "documents", "bytes"], _row(bucket, usage),
                                 strict=True):
            print(f"{header + ':':15} {display_name(value)}")
    return 0


@command.command("delete")
@click.argument("name")
@run_async
async def delete(name: str) -> int:
    """Delete an empty bucket (one that still holds a document, pending, held or ready, is
    refused: exit 2)."""
    async with worker_ledger() as ledger:
        await ledger.buckets.delete(name)
    print(f"deleted bucket {name}")
    return 0
