"""A browser, as far as an OAuth consent needs one: it keeps cookies,
follows redirects by hand, and submits the forms of oidc-provider's
development login and consent pages (tests/interop/oidc_server.mjs: any
login name is accepted and becomes the account). It stops at the first
redirect to `stop_at` (the OAuth client's redirect URI) without following
it, and returns that URL, so a test reads the code and state itself or
hands the URL to the client's callback.

Run as a program (`python oauth_browser.py LOGIN CALLBACK START_URL`), it
is the browser a host opens on a URL elicitation: it consents as LOGIN and
follows the redirect to CALLBACK, exiting 0 when that answers 200."""

from __future__ import annotations

import html
import re
import ssl
import urllib.error
import urllib.parse
import urllib.request
from http.cookiejar import CookieJar

FORM = re.compile(r'<form[^>]*action="([^"]+)"[^>]*method="post"[^>]*>(.*?)</form>', re.S | re.I)
HIDDEN = re.compile(r'<input[^>]*type="hidden"[^>]*name="([^"]+)"[^>]*value="([^"]*)"', re.I)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):  # noqa: ANN002, ANN003 - the handler's own signature
        return None


class Browser:
    def __init__(self, cafile: str | None = None) -> None:
        """`cafile`: the CA an https gateway's certificate is checked against."""
        self.cookies = CookieJar()
        handlers: list[urllib.request.BaseHandler] = [urllib.request.HTTPCookieProcessor(self.cookies), _NoRedirect()]
        if cafile:
            handlers.append(urllib.request.HTTPSHandler(context=ssl.create_default_context(cafile=cafile)))
        self.opener = urllib.request.build_opener(*handlers)
        self.pages: list[str] = []

    def request(self, url: str, form: dict[str, str] | None = None) -> tuple[int, str, str]:
        """(status, Location or "", body) of one request, no redirect followed."""
        data = urllib.parse.urlencode(form).encode() if form is not None else None
        req = urllib.request.Request(url, data=data, method="POST" if form is not None else "GET")
        try:
            with self.opener.open(req, timeout=10) as r:
                return r.status, r.headers.get("Location", ""), r.read().decode(errors="replace")
        except urllib.error.HTTPError as e:
            return e.code, e.headers.get("Location", ""), e.read().decode(errors="replace")

    def consent(self, start: str, login: str, stop_at: str, max_steps: int = 20) -> str:
        """Opens `start`, logs in as `login`, consents; returns the redirect to `stop_at`."""
        url, form = start, None
        for _ in range(max_steps):
            status, location, body = self.request(url, form)
            form = None
            if location:
                url = urllib.parse.urljoin(url, location)
                if url.startswith(stop_at):
                    return url
                continue
            if status != 200:
                raise AssertionError(f"{url} answered {status}: {body[:500]}")
            self.pages.append(body)
            found = FORM.search(body)
            if not found:
                raise AssertionError(f"{url}: no form to submit: {body[:500]}")
            action, inner = found.groups()
            url = urllib.parse.urljoin(url, html.unescape(action))
            form = dict(HIDDEN.findall(inner))
            if 'name="login"' in inner:
                form.update(login=login, password="any")
        raise AssertionError(f"no redirect to {stop_at} within {max_steps} steps")


if __name__ == "__main__":
    import sys

    login, callback, start = sys.argv[1:4]
    browser = Browser()
    status, _, _ = browser.request(browser.consent(start, login, callback))
    sys.exit(0 if status == 200 else 1)
