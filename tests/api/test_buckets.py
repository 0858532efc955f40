"""``/buckets`` and ``/buckets/{bucket}/documents``: a bucket is a namespace with its own
settings, enforced on every write path; a token limited to some buckets sees no other."""

from __future__ import annotations

import base64

import pytest

from blobledger import Ledger
from tests.api.conftest import assert_nothing_visible, client_for, problem
from tests.conftest import EACH_DATABASE, ONE_BACKEND

ADMIN = {"Authorization": "Bearer admin-token"}
PHOTOS = {"Authorization": "Bearer photos-token"}
WRITER = {"Authorization": "Bearer writer-token"}


def _tokens(ledger: Ledger) -> Ledger:
    settings = ledger.settings.with_(api_tokens="admin-token:admin+write,"
                                     "photos-token:write+admin@photos,writer-token:write")
    return Ledger(ledger.db, ledger.store, settings)  # shares (and leaves open) db and store


async def test_a_name_is_unique_per_bucket_and_settings_hold(ledger: Ledger) -> None:
    """Every write path of the HTTP API on each backend: the same name in two buckets, the
    bucket's media types (415), largest object (413) and quota (413), and nothing visible
    after a refused write."""
    async with client_for(ledger) as client:
        made = await client.post("/buckets", json={
            "name": "photos", "content_types": ["image/*"], "max_object_bytes": 8,
            "quota_objects": 2})
        assert made.status_code == 201, made.text
        assert made.json()["usage"] == {"objects": 0, "bytes": 0}
        problem(await client.post("/buckets", json={"name": "photos"}), 409, "bucket-exists")
        problem(await client.post("/buckets", json={"name": "No_Such"}), 400, "invalid-input")

        in_default = await client.post("/documents?name=a.png", content=b"default",
                                       headers={"Content-Type": "image/png"})
        in_photos = await client.post("/buckets/photos/documents?name=a.png",
                                      content=b"photo", headers={"Content-Type": "image/png"})
        assert in_default.status_code == in_photos.status_code == 201, in_photos.text
        assert (in_default.json()["bucket"], in_photos.json()["bucket"]) == ("default",
                                                                             "photos")
        problem(await client.post("/buckets/photos/documents?name=a.png", content=b"again",
                                  headers={"Content-Type": "image/png"}), 409, "name-taken")
        problem(await client.post("/buckets/photos/documents?name=b.txt", content=b"text",
                                  headers={"Content-Type": "text/plain"}),
                415, "content-type-refused")
        problem(await client.post("/buckets/photos/documents?name=big.png",
                                  content=b"123456789", headers={"Content-Type": "image/png"}),
                413, "upload-too-large")
        # the tus and direct paths: the bucket named in the upload's metadata and body
        meta = (f"name {base64.b64encode(b'big.png').decode()},"
                f"bucket {base64.b64encode(b'photos').decode()},"
                f"filetype {base64.b64encode(b'image/png').decode()}")
        problem(await client.post("/files/", headers={"Tus-Resumable": "1.0.0",
                                                     "Upload-Length": "9",
                                                     "Upload-Metadata": meta}),
                413, "upload-too-large")
        problem(await client.post("/uploads", json={
            "name": "c.txt", "size": 3, "content_type": "text/plain", "bucket": "photos"}),
            415, "content-type-refused")
        second = await client.post("/buckets/photos/documents?name=b.png", content=b"two",
                                   headers={"Content-Type": "image/png"})
        assert second.status_code == 201
        problem(await client.post("/buckets/photos/documents?name=c.png", content=b"three",
                                  headers={"Content-Type": "image/png"}),
                413, "bucket-quota-exceeded")

        listed = (await client.get("/buckets/photos/documents")).json()["items"]
        assert [d["name"] for d in listed] == ["a.png", "b.png"]
        assert [d["name"] for d in (await client.get("/documents")).json()["items"]] == [
            "a.png"]
        shown = (await client.get("/buckets/photos")).json()
        assert shown["usage"] == {"objects": 2, "bytes": 8}
        assert [b["name"] for b in (await client.get("/buckets")).json()["items"]] == [
            "default", "photos"]

        problem(await client.delete("/buckets/photos"), 409, "bucket-not-empty")
        problem(await client.delete("/buckets/default"), 400, "invalid-input")
        for doc in listed:
            assert (await client.delete(f"/documents/{doc['id']}")).status_code == 204
        assert (await client.delete("/buckets/photos")).status_code == 204
        problem(await client.get("/buckets/photos"), 404, "bucket-not-found")
        problem(await client.post("/buckets/photos/documents?name=x.png", content=b"x",
                                  headers={"Content-Type": "image/png"}),
                404, "bucket-not-found")
    assert (await ledger.get(in_default.json()["id"])).name == "a.png"


@pytest.mark.parametrize("backend", ONE_BACKEND, indirect=True)
async def test_a_token_limited_to_a_bucket_sees_no_other(ledger: Ledger) -> None:
    """Tokens and scopes are the HTTP layer's and the ledger's reads: one backend."""
    gated = _tokens(ledger)
    other = await ledger.create("secret.txt", b"default's")
    async with client_for(gated, gated.settings) as client:
        problem(await client.post("/buckets", json={"name": "photos"}, headers=WRITER),
                403, "forbidden")
        problem(await client.post("/buckets", json={"name": "music"}, headers=PHOTOS),
                403, "bucket-forbidden")
        assert (await client.post("/buckets", json={"name": "photos"},
                                  headers=PHOTOS)).status_code == 201
        mine = await client.post("/buckets/photos/documents?name=p.png", content=b"p",
                                 headers=PHOTOS)
        assert mine.status_code == 201
        problem(await client.get(f"/documents/{other.id}", headers=PHOTOS), 404)
        problem(await client.get(f"/documents/{other.id}/content", headers=PHOTOS), 404)
        problem(await client.delete(f"/documents/{other.id}", headers=PHOTOS), 404)
        problem(await client.get("/documents", headers=PHOTOS), 404, "bucket-not-found")
        problem(await client.post("/documents?name=x.txt", content=b"x", headers=PHOTOS),
                403, "bucket-forbidden")
        assert [b["name"] for b in (await client.get("/buckets", headers=PHOTOS)).json()[
            "items"]] == ["photos"]
        got = await client.get(f"/documents/{mine.json()['id']}/content", headers=PHOTOS)
        assert got.content == b"p"
        # a token of every bucket reads both
        assert (await client.get(f"/documents/{other.id}", headers=ADMIN)).status_code == 200
    assert (await ledger.get(other.id)).name == "secret.txt"


@pytest.mark.parametrize("backend", EACH_DATABASE, indirect=True)
async def test_a_refused_write_leaves_nothing(ledger: Ledger) -> None:
    """The bucket's refusal comes before C1: no row, no blob (each database)."""
    await ledger.buckets.create("docs", content_types="application/pdf", quota_bytes=4)
    async with client_for(ledger) as client:
        problem(await client.post("/buckets/docs/documents?name=a.txt", content=b"a",
                                  headers={"Content-Type": "text/plain"}),
                415, "content-type-refused")
        problem(await client.post("/buckets/docs/documents?name=a.pdf", content=b"12345",
                                  headers={"Content-Type": "application/pdf"}),
                413, "bucket-quota-exceeded")
    await assert_nothing_visible(ledger)


@pytest.mark.parametrize("backend", ONE_BACKEND, indirect=True)
async def test_a_buckets_acl_is_one_of_its_settings(ledger: Ledger) -> None:
    """The canned ACL in the bucket's JSON: set at creation, changed by PATCH (admin), one
    of S3's four; the HTTP routes themselves still take bearer tokens only."""
    gated = _tokens(ledger)
    async with client_for(gated, gated.settings) as client:
        made = await client.post("/buckets", json={"name": "avatars", "acl": "public-read"},
                                 headers=ADMIN)
        assert made.status_code == 201, made.text
        assert (made.json()["acl"], made.json()["owner"]) == ("public-read", None)
        problem(await client.post("/buckets", json={"name": "other", "acl": "public"},
                                  headers=ADMIN), 400, "invalid-input")
        problem(await client.patch("/buckets/avatars", json={"acl": "private"},
                                   headers=WRITER), 403, "forbidden")
        changed = await client.patch("/buckets/avatars", json={"acl": "public-read-write"},
                                     headers=ADMIN)
        assert changed.json()["acl"] == "public-read-write"
        problem(await client.patch("/buckets/avatars", json={"acl": None}, headers=ADMIN),
                400, "invalid-input")
        assert (await client.get("/buckets/avatars", headers=ADMIN)).json()["acl"] == \
            "public-read-write"
        # a public bucket is S3's matter: the HTTP API's listing still wants a token
        problem(await client.get("/buckets/avatars/documents"), 401)
    assert (await ledger.buckets.get("avatars")).acl == "public-read-write"
