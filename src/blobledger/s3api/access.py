"""Who may do what through the S3 endpoint: a key's scopes on the buckets it reaches as
its own, and, beyond them, a bucket's or an object's canned ACL (docs/buckets.md).

Every key is of the service's one account unless ``BLOBLEDGER_S3API_ACCOUNTS`` makes it an
account of its own (S3's "another user"). A bucket belongs to the account of the key that
created it through S3; one created otherwise (the default bucket, ``blobledger buckets``,
the HTTP API) to the service's. A key reaches a bucket **as its own** when the bucket is
its account's or its scope names it (``write@photos``): there its scopes decide, as for a
bearer token. Any other caller, a key of another account or an unsigned request, gets only
what the canned ACL grants everyone (``public-read``: list the bucket and read its
objects; ``public-read-write``: also write and delete them) or every key of the service
(``authenticated-read``). An object's own ACL (``x-amz-acl`` on its write, PutObjectAcl)
decides who reads it; an object without one follows its bucket's. No ACL grants reading
or changing an ACL, nor anything on the bucket itself (its deletion, its settings).

Every object read passes the ledger's one decision first: only a ready document is an
object here, so a held or pending one is ``NoSuchKey`` (or ``AccessDenied``) to everyone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from defusedxml import ElementTree

from blobledger._base.scopes import BUCKET_PREFIX
from blobledger.errors import NotFound
from blobledger.protocol.buckets import CANNED_ACLS, Bucket
from blobledger.s3api.errors import S3Error
from blobledger.s3api.sigv4 import ANONYMOUS, Signed

ACL_HEADER = "x-amz-acl"
#: grants to named users, which a canned ACL cannot express
GRANT_HEADERS = ("x-amz-grant-",)
ALL_USERS = "http://acs.amazonaws.com/groups/global/AllUsers"
AUTHENTICATED_USERS = "http://acs.amazonaws.com/groups/global/AuthenticatedUsers"
#: the grants each canned ACL adds to its owner's FULL_CONTROL: (group, permission)
GROUP_GRANTS: dict[str, tuple[tuple[str, str], ...]] = {
    "private": (),
    "public-read": ((ALL_USERS, "READ"),),
    "public-read-write": ((ALL_USERS, "READ"), (ALL_USERS, "WRITE")),
    "authenticated-read": ((AUTHENTICATED_USERS, "READ"),),
}
_XSI = "http://www.w3.org/2001/XMLSchema-instance"


def acl_grants(acl: str, *, signed: bool) -> frozenset[str]:
    """What a canned ACL lets a caller that does not reach the bucket as its own do
    (``read``, ``write``): ``signed``, a caller with a valid key."""
    if acl == "public-read-write":
        return frozenset({"read", "write"})
    if acl == "public-read" or (acl == "authenticated-read" and signed):
        return frozenset({"read"})
    return frozenset()


@dataclass(frozen=True)
class Access:
    """A caller's access to one bucket: its own (its key's scopes decide), or the
    bucket's ACL's grants."""

    bucket: Bucket
    own: bool
    scopes: frozenset[str]
    signed: bool

    def reads(self, object_acl: str | None) -> bool:
        """Whether the caller reads an object whose own ACL is ``object_acl`` (None: it
        follows the bucket's)."""
        if self.own:
            return "read" in self.scopes
        return "read" in acl_grants(object_acl or self.bucket.acl, signed=self.signed)


def account_of(key_id: str | None, accounts: frozenset[str]) -> str:
    """The account a key is of: its own id if it is one of ``accounts`` (an account of its
    own), else the service's (``""``, also for no key: a bucket created otherwise than by
    S3, or by a key no longer configured as an account)."""
    return key_id if key_id is not None and key_id in accounts else ""


def access(signed: Signed, bucket: Bucket, accounts: frozenset[str]) -> Access:
    """The access of the request's signer (or of an unsigned request) to ``bucket``;
    ``accounts``: the keys that are each an account of their own."""
    key = signed.key_id
    if key != ANONYMOUS and (account_of(bucket.owner, accounts) == account_of(key, accounts)
                             or BUCKET_PREFIX + bucket.name in signed.scopes):
        return Access(bucket, True, signed.scopes, True)
    return Access(bucket, False, acl_grants(bucket.acl, signed=key != ANONYMOUS),
                  key != ANONYMOUS)


def owner_id(bucket: Bucket, signed: Signed) -> str:
    """Who S3 shows as the owner of the bucket and its objects: the key that created it;
    for a bucket no key owns, the key that asks (the service is then one account)."""
    return bucket.owner or signed.key_id


def canned_acl(headers: Mapping[str, str], default: str | None = None) -> str | None:
    """The canned ACL a request asks for (``x-amz-acl``; ``default`` without one).
    ``x-amz-grant-*`` (grants to named users) is ``NotImplemented``, another canned ACL
    than :data:`~blobledger.protocol.buckets.CANNED_ACLS` too."""
    for name in headers:
        if name.lower().startswith(GRANT_HEADERS):
            raise S3Error("NotImplemented", f"{name} (a grant to named users) is not "
                          "implemented: canned ACLs only (x-amz-acl)")
    value = headers.get(ACL_HEADER)
    if value is None:
        return default
    value = value.strip()
    if value not in CANNED_ACLS:
        if value in ("aws-exec-read", "bucket-owner-read", "bucket-owner-full-control",
                     "log-delivery-write"):
            raise S3Error("NotImplemented", f"the canned ACL {value!r} is not implemented "
                          f"(only {', '.join(CANNED_ACLS)})")
        raise S3Error("InvalidArgument", f"{value!r} is not a canned ACL")
    return value


def policy_xml(owner: str, acl: str) -> str:
    """The ``AccessControlPolicy`` answer of GetBucketAcl and GetObjectAcl: the owner, its
    FULL_CONTROL, and the group grants of the canned ACL."""
    grants = [f'<Grant><Grantee xmlns:xsi="{_XSI}" xsi:type="CanonicalUser"><ID>{owner}'
              f"</ID><DisplayName>{owner}</DisplayName></Grantee><Permission>FULL_CONTROL"
              "</Permission></Grant>"]
    for group, permission in GROUP_GRANTS[acl]:
        grants.append(f'<Grant><Grantee xmlns:xsi="{_XSI}" xsi:type="Group"><URI>{group}'
                      f"</URI></Grantee><Permission>{permission}</Permission></Grant>")
    return (f"<Owner><ID>{owner}</ID><DisplayName>{owner}</DisplayName></Owner>"
            f"<AccessControlList>{''.join(grants)}</AccessControlList>")


def acl_of_policy(body: bytes, owner: str) -> str:
    """The canned ACL an ``AccessControlPolicy`` body states: the owner's FULL_CONTROL
    and the grants of one canned ACL; a grant to another user (or any other set) is
    ``NotImplemented``."""
    try:
        root = ElementTree.fromstring(body)
    except Exception:  # defusedxml's refusals and expat's parse errors alike
        raise S3Error("MalformedXML", "the XML you provided was not well-formed") from None
    found: set[tuple[str, str]] = set()
    for grant in root.iter():
        if not grant.tag.endswith("}Grant") and grant.tag != "Grant":
            continue
        who, permission = "", ""
        for child in grant.iter():
            tag = child.tag.rsplit("}", 1)[-1]
            if tag in ("ID", "URI", "EmailAddress"):
                who = (child.text or "").strip()
            elif tag == "Permission":
                permission = (child.text or "").strip()
        found.add((who, permission))
    found.discard((owner, "FULL_CONTROL"))
    for acl, grants in GROUP_GRANTS.items():
        if found == set(grants):
            return acl
    raise S3Error("NotImplemented", "grants to named users or other than a canned ACL's are "
                  "not implemented: canned ACLs only (private, public-read, "
                  "public-read-write, authenticated-read)")


def missing(granted: Access, exc: NotFound) -> Exception:
    """A key that names no object: ``NoSuchKey`` to a caller who may list the bucket,
    ``AccessDenied`` to one who may not (it learns nothing of which keys exist)."""
    if "read" in granted.scopes:
        return exc
    return S3Error("AccessDenied", "Access Denied")
