"""A child of tests/stores/test_azure_lean.py: the Azure store on an Azurite that takes
bearer tokens over HTTPS (``--oauth basic``; its certificate trusted through
``SSL_CERT_FILE``, which this process reads before its first TLS connection), signed in with
a token credential. It makes a put and a retag, then a put with a token the service refuses
(expired), and prints, as JSON, which requests the store sent itself and which the
SDK sent, the tags read back, and the refused put's error."""

from __future__ import annotations

import asyncio
import base64
import json
import sys
import time
from typing import Any

from azure.core.credentials import AccessToken, AccessTokenInfo
from azure.storage.blob.aio import BlobClient

from blobledger.errors import BlobLedgerError
from blobledger.stores.azure import AzureStore, lean
from blobledger.testing.conformance import put

#: what Azurite's basic OAuth accepts (it checks the claims, not a signature)
TENANT = "ab1f708d-50f6-404c-a006-d71b2ac7a606"


def _part(claims: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()


class Credential:
    """A token credential whose tokens Azurite takes, or (``expired``) refuses."""

    def __init__(self, *, expired: bool = False) -> None:
        self.expired = expired

    async def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        now = int(time.time())
        exp = now - 600 if self.expired else now + 3600
        claims = {"aud": "https://storage.azure.com", "iat": now - 900, "nbf": now - 900,
                  "exp": exp, "iss": f"https://sts.windows.net/{TENANT}/", "tid": TENANT,
                  "oid": "blobledger-test"}
        token = f"{_part({'alg': 'none', 'typ': 'JWT'})}.{_part(claims)}.unsigned"
        return AccessToken(token, now + 3600)  # the client believes it valid either way

    async def get_token_info(self, *scopes: str, options: Any = None) -> AccessTokenInfo:
        token = await self.get_token(*scopes)
        return AccessTokenInfo(token.token, token.expires_on)

    async def close(self) -> None:
        return None


async def main(url: str) -> dict[str, Any]:
    sent: list[str] = []
    own_send = lean.LeanRequests._send
    sdk_put, sdk_tags = BlobClient.upload_blob, BlobClient.set_blob_tags

    async def counted_send(self: Any, url: str, body: bytes, headers: Any) -> Any:
        answer = await own_send(self, url, body, headers)
        sent.append(f"own {'tags' if 'comp=tags' in url else 'put'} {answer[0]}")
        return answer

    async def counted_put(self: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append("sdk put")
        return await sdk_put(self, *args, **kwargs)

    async def counted_tags(self: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append("sdk tags")
        return await sdk_tags(self, *args, **kwargs)

    lean.LeanRequests._send = counted_send  # type: ignore[method-assign]
    BlobClient.upload_blob = counted_put  # type: ignore[method-assign]
    BlobClient.set_blob_tags = counted_tags  # type: ignore[method-assign]
    result: dict[str, Any] = {}
    async with AzureStore("oauth", account_url=url, credential=Credential()) as store:
        await store.prepare()
        await put(store, "t/signed-in.bin", b"signed in with a token", state="pending")
        await store.set_tags("t/signed-in.bin", {"state": "committed"})
        result["tags"] = await store.get_tags("t/signed-in.bin")
        result["signed in"] = list(sent)
    sent.clear()
    async with AzureStore("oauth", account_url=url,
                          credential=Credential(expired=True)) as refused:
        try:
            await put(refused, "t/refused.bin", b"a token the service refuses",
                      state="pending")
        except BlobLedgerError as exc:
            result["refused"] = type(exc).__name__
        result["refused sent"] = list(sent)
    return result


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1]))))
